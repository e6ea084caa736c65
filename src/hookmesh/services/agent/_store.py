"""Session persistence: SQLite (WAL) by default, behind a small interface."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from hookmesh.agent import AgentState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id  TEXT PRIMARY KEY,
    agent_name  TEXT NOT NULL,
    state_json  TEXT NOT NULL,
    create_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (update_time DESC, session_id);
"""


@dataclass
class StoredSession:
    """A session as stored."""

    session_id: str
    agent_name: str
    state: AgentState
    create_time: datetime
    update_time: datetime


class SessionStore(Protocol):
    """Where sessions live. Implementations must be safe to call from one event loop."""

    async def get(self, session_id: str) -> StoredSession | None:
        """The session, or None."""
        ...

    async def put(self, session_id: str, agent_name: str, state: AgentState) -> None:
        """Create or replace the session's state."""
        ...

    async def list(self, limit: int, after: tuple[str, str] | None) -> list[StoredSession]:
        """Sessions by update time, newest first, after the (update_time, id) cursor."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Delete; False when it did not exist."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class SqliteSessionStore:
    """Sessions in one SQLite file in WAL mode; calls run in a worker thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = asyncio.Lock()

    async def _run(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        async with self._lock:
            return await asyncio.to_thread(lambda: self._db.execute(sql, args).fetchall())

    @staticmethod
    def _row(row: tuple[object, ...]) -> StoredSession:
        sid, name, state, created, updated = row
        return StoredSession(
            str(sid),
            str(name),
            AgentState.model_validate_json(str(state)),
            datetime.fromisoformat(str(created)),
            datetime.fromisoformat(str(updated)),
        )

    async def get(self, session_id: str) -> StoredSession | None:
        rows = await self._run(
            "SELECT session_id, agent_name, state_json, create_time, update_time"
            " FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        return self._row(rows[0]) if rows else None

    async def put(self, session_id: str, agent_name: str, state: AgentState) -> None:
        now = datetime.now(UTC).isoformat()
        await self._run(
            "INSERT INTO sessions (session_id, agent_name, state_json, create_time, update_time)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
            " agent_name = excluded.agent_name, state_json = excluded.state_json,"
            " update_time = excluded.update_time",
            (session_id, agent_name, state.model_dump_json(), now, now),
        )

    async def list(self, limit: int, after: tuple[str, str] | None) -> list[StoredSession]:
        sql = "SELECT session_id, agent_name, state_json, create_time, update_time FROM sessions"
        args: tuple[object, ...] = ()
        if after is not None:
            sql += " WHERE (update_time, session_id) < (?, ?)"
            args = after
        sql += " ORDER BY update_time DESC, session_id DESC LIMIT ?"
        rows = await self._run(sql, (*args, limit))
        return [self._row(r) for r in rows]

    async def delete(self, session_id: str) -> bool:
        async with self._lock:
            cursor = await asyncio.to_thread(
                self._db.execute, "DELETE FROM sessions WHERE session_id = ?", (session_id,)
            )
            return cursor.rowcount > 0

    async def close(self) -> None:
        async with self._lock:
            self._db.close()


def open_store(url: str) -> SessionStore:
    """The store for `url`: ``sqlite:///relative/or/absolute/path.db``.

    Raises:
        ValueError: An unsupported scheme (PostgreSQL is a documented extension point).
    """
    if url.startswith("sqlite:///"):
        return SqliteSessionStore(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            "the PostgreSQL session store is not built yet: implement SessionStore "
            "(hookmesh.services.agent) and select it here; use sqlite:///path for now"
        )
    raise ValueError(f"unsupported store {url!r}: use sqlite:///path/to/sessions.db")
