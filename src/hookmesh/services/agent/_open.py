"""Opening the session store a URL names: SQLite for one process, PostgreSQL for replicas."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from hookmesh.services.agent._sqlitestore import SqliteSessionStore
from hookmesh.services.agent._store import SessionStore


async def open_store(
    url: str, *, namespace: str = "agent", lease_seconds: float = 30.0
) -> SessionStore:
    """The store for `url`, opened.

    - ``sqlite:///relative/or/absolute/path.db``: `SqliteSessionStore`, one process.
    - ``postgresql://user:password@host:port/database``: `PostgresSessionStore`, shared by
      replicas, its tables in schema `namespace`, leases of `lease_seconds`.

    Raises:
        ValueError: An unsupported scheme (the message never shows a password).
        psycopg.OperationalError: PostgreSQL cannot be reached.
    """
    if url.startswith("sqlite:///"):
        return SqliteSessionStore(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        from hookmesh.services.agent._pgstore import PostgresSessionStore

        return await PostgresSessionStore.open(
            url, namespace=namespace, lease_seconds=lease_seconds
        )
    raise ValueError(
        f"unsupported store {redact_url(url)!r}: use sqlite:///path/to/sessions.db or "
        "postgresql://user@host:port/database"
    )


def redact_url(url: str) -> str:
    """`url` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))
