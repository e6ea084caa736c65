"""The agent session store's backends for tests: a SQLite file, or a fresh PostgreSQL schema.

Import the fixtures into a test module: `session_backend` runs a test on both, while
`postgres_backend` is PostgreSQL only (leases, replicas). Both need the session-wide
`postgres_url` fixture of tests/pg.py imported as well.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookmesh.services.agent import SessionStore, open_store


@dataclass
class SessionBackend:
    """Where a test's sessions live; `open` opens another store on the same data."""

    name: str
    url: str
    namespace: str = "agent"

    async def open(self, **options: Any) -> SessionStore:
        """A store on this backend (the caller closes it)."""
        return await open_store(self.url, namespace=self.namespace, **options)

    def config(self, **overrides: Any) -> dict[str, Any]:
        """Agent service settings for this backend."""
        sessions = {"namespace": self.namespace, **overrides.pop("sessions", {})}
        return {"store": self.url, "sessions": sessions, **overrides}

    async def age(self, session_id: str, days: int) -> None:
        """Backdate a session's last update (what retention and listing read)."""
        when = datetime.now(UTC) - timedelta(days=days)
        if self.name == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as db:
                db.execute(
                    "UPDATE agent_sessions SET update_time = ? WHERE session_id = ?",
                    (when.isoformat(), session_id),
                )
            return
        await self._execute(
            f"UPDATE {self.namespace}.sessions SET update_time = %s WHERE session_id = %s",
            (when, session_id),
        )

    async def expire_leases(self) -> None:
        """Make every lease look expired (a holder that hung past its lease)."""
        await self._execute(
            f"UPDATE {self.namespace}.session_leases SET expire_time = now() - interval '1 s'"
        )

    async def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(sql, params)  # type: ignore[arg-type]


@asynccontextmanager
async def postgres_schema(url: str) -> AsyncIterator[SessionBackend]:
    """A PostgreSQL backend in a schema of its own, dropped afterwards."""
    import psycopg

    backend = SessionBackend("postgresql", url, f"s_{uuid.uuid4().hex[:16]}")
    try:
        yield backend
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {backend.namespace} CASCADE")  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgresql"])
async def session_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SessionBackend]:
    """An empty SQLite file, or a fresh schema in the session's PostgreSQL server."""
    if request.param == "sqlite":
        yield SessionBackend("sqlite", f"sqlite:///{tmp_path}/data/sessions.db")
        return
    async with postgres_schema(request.getfixturevalue("postgres_url")) as backend:
        yield backend


@pytest.fixture
async def postgres_backend(postgres_url: str) -> AsyncIterator[SessionBackend]:
    """A fresh schema in the session's PostgreSQL server."""
    async with postgres_schema(postgres_url) as backend:
        yield backend
