"""Session persistence: SQLite (WAL) by default, PostgreSQL to scale out, behind one interface.

Sessions belong to a principal: the key is (owner, session id), so one principal's ids say
nothing about another's. Listing reads only the summary columns, never the state JSON.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from hookmesh._files import private_file
from hookmesh.agent import AgentState
from hookmesh.schema import ToolCall

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_sessions (
    owner        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    agent_name   TEXT NOT NULL,
    awaiting     TEXT NOT NULL DEFAULT '',
    pending_json TEXT NOT NULL DEFAULT '[]',
    state_json   TEXT NOT NULL,
    create_time  TEXT NOT NULL,
    update_time  TEXT NOT NULL,
    PRIMARY KEY (owner, session_id)
);
CREATE INDEX IF NOT EXISTS agent_sessions_by_update
    ON agent_sessions (owner, update_time DESC, session_id DESC);
CREATE INDEX IF NOT EXISTS agent_sessions_by_age ON agent_sessions (update_time);
"""
_LEGACY = """
INSERT OR IGNORE INTO agent_sessions
    (owner, session_id, agent_name, state_json, create_time, update_time)
    SELECT 'anonymous', session_id, agent_name, state_json, create_time, update_time
    FROM sessions;
DROP TABLE sessions;
"""


@dataclass
class SessionSummary:
    """A session without its state: what listings show."""

    owner: str
    session_id: str
    agent_name: str
    create_time: datetime
    update_time: datetime
    awaiting: str = ""
    """``confirmation``, ``external`` or empty: what a paused reply waits for."""
    pending_calls: list[ToolCall] = field(default_factory=list)
    """The calls the paused reply waits on."""


@dataclass
class StoredSession(SessionSummary):
    """A session as stored, with its state."""

    state: AgentState = field(default_factory=AgentState)


def summary_fields(state: AgentState) -> tuple[str, str]:
    """The ``awaiting`` and ``pending_json`` columns of a state (kept beside the JSON)."""
    pending = state.pending
    if pending is None:
        return "", "[]"
    calls = pending.confirm_calls if pending.awaiting == "confirmation" else pending.external_calls
    return pending.awaiting, json.dumps([c.model_dump() for c in calls])


def listing_sql(table: str, mark: str, time_mark: str, after: bool) -> str:
    """A page of an owner's session summaries, newest first: parameters owner, then the
    (update time, session id) cursor when `after`, then the limit; `mark` is the driver's
    placeholder, `time_mark` the one of the cursor's time."""
    cursor = f" AND (update_time, session_id) < ({time_mark}, {mark})" if after else ""
    return (
        "SELECT session_id, agent_name, awaiting, pending_json, create_time, update_time"
        f" FROM {table} WHERE owner = {mark}{cursor}"
        f" ORDER BY update_time DESC, session_id DESC LIMIT {mark}"
    )


def pending_from_json(text: str) -> list[ToolCall]:
    """The pending calls of a ``pending_json`` column."""
    return [ToolCall.model_validate(c) for c in json.loads(text)]


@dataclass(frozen=True)
class Lease:
    """The right to run a reply of one session, across every replica sharing the store.

    `token` is a fencing token: it grows with every grant, and a write that carries a token
    the store no longer holds is refused (`LeaseLostError`).
    """

    owner: str
    session_id: str
    token: int


class LeaseLostError(Exception):
    """The lease was taken over by another replica (it expired first): the write is refused."""


class SessionLeases(Protocol):
    """Per-reply leases of a store that several replicas share."""

    async def acquire(self, owner: str, session_id: str) -> Lease | None:
        """The session's lease, or None while another holder keeps it."""
        ...

    async def renew(self) -> list[Lease]:
        """Extend every lease this store holds; returns those it has lost."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the lease up (no effect when it was lost)."""
        ...

    async def signal_interrupt(self, owner: str, session_id: str) -> bool:
        """Ask the live replica that holds the session's lease to interrupt its reply; False
        when no other live replica holds one."""
        ...

    def interrupt_requests(self) -> AsyncIterator[tuple[str, str]]:
        """The ``(owner, session id)`` of each interrupt other replicas ask of this one, as
        they come; ends (or raises) when the store's connection for them breaks."""
        ...


class SessionStore(Protocol):
    """Where sessions live. Implementations must be safe to call from one event loop."""

    @property
    def leases(self) -> SessionLeases | None:
        """Leases when several processes share the store (PostgreSQL); None when one process
        owns it (SQLite), so its in-process claim is the whole story."""
        ...

    async def get(self, owner: str, session_id: str) -> StoredSession | None:
        """The session, or None (also when another principal owns that id)."""
        ...

    async def put(
        self,
        owner: str,
        session_id: str,
        agent_name: str,
        state: AgentState,
        *,
        lease: Lease | None = None,
    ) -> None:
        """Create or replace the session's state; with a `lease`, only while it holds.

        Raises:
            LeaseLostError: `lease` was taken over by another holder.
        """
        ...

    async def list(
        self, owner: str, limit: int, after: tuple[str, str] | None
    ) -> list[SessionSummary]:
        """The owner's sessions by update time, newest first, after the (update_time, id)
        cursor."""
        ...

    async def delete(self, owner: str, session_id: str) -> bool:
        """Delete; False when it did not exist."""
        ...

    async def sweep(
        self, *, older_than: datetime | None, keep: int | None, busy: set[tuple[str, str]]
    ) -> int:
        """Delete sessions last updated before `older_than`, then the oldest beyond `keep`
        (over all owners), except the `busy` (owner, id) pairs; returns how many went."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class SqliteSessionStore:
    """Sessions in one SQLite file in WAL mode; calls run in a worker thread, one at a time.

    The file is 0600 in a 0700 folder when this creates them; ``synchronous=NORMAL`` (WAL):
    a committed session survives a crash of the process, and a power loss may drop the last
    commits but never corrupts the file.
    """

    leases = None

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":  # SQLite's in-memory database (tests)
            private_file(self.path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        legacy = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'"
        ).fetchone()
        if legacy:
            self._db.executescript(f"BEGIN; {_LEGACY} COMMIT;")
        self._lock = asyncio.Lock()

    async def _run(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        async with self._lock:
            return await asyncio.to_thread(lambda: self._db.execute(sql, args).fetchall())

    async def get(self, owner: str, session_id: str) -> StoredSession | None:
        rows = await self._run(
            "SELECT agent_name, awaiting, pending_json, state_json, create_time, update_time"
            " FROM agent_sessions WHERE owner = ? AND session_id = ?",
            (owner, session_id),
        )
        if not rows:
            return None
        name, awaiting, pending, state, created, updated = rows[0]
        return StoredSession(
            owner,
            session_id,
            str(name),
            datetime.fromisoformat(str(created)),
            datetime.fromisoformat(str(updated)),
            str(awaiting),
            pending_from_json(str(pending)),
            AgentState.model_validate_json(str(state)),
        )

    async def put(
        self,
        owner: str,
        session_id: str,
        agent_name: str,
        state: AgentState,
        *,
        lease: Lease | None = None,  # never given: this store has no leases
    ) -> None:
        now = datetime.now(UTC).isoformat()
        awaiting, pending = summary_fields(state)
        await self._run(
            "INSERT INTO agent_sessions (owner, session_id, agent_name, awaiting, pending_json,"
            " state_json, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (owner, session_id) DO UPDATE SET agent_name = excluded.agent_name,"
            " awaiting = excluded.awaiting, pending_json = excluded.pending_json,"
            " state_json = excluded.state_json, update_time = excluded.update_time",
            (owner, session_id, agent_name, awaiting, pending, state.model_dump_json(), now, now),
        )

    async def list(
        self, owner: str, limit: int, after: tuple[str, str] | None
    ) -> list[SessionSummary]:
        sql = listing_sql("agent_sessions", "?", "?", after is not None)
        rows = await self._run(sql, (owner, *(after or ()), limit))
        return [
            SessionSummary(
                owner,
                str(sid),
                str(name),
                datetime.fromisoformat(str(created)),
                datetime.fromisoformat(str(updated)),
                str(awaiting),
                pending_from_json(str(pending)),
            )
            for sid, name, awaiting, pending, created, updated in rows
        ]

    async def delete(self, owner: str, session_id: str) -> bool:
        async with self._lock:
            cursor = await asyncio.to_thread(
                self._db.execute,
                "DELETE FROM agent_sessions WHERE owner = ? AND session_id = ?",
                (owner, session_id),
            )
            return cursor.rowcount > 0

    async def sweep(
        self, *, older_than: datetime | None, keep: int | None, busy: set[tuple[str, str]]
    ) -> int:
        victims: list[tuple[object, ...]] = []
        if older_than is not None:
            victims += await self._run(
                "SELECT owner, session_id FROM agent_sessions WHERE update_time < ?",
                (older_than.isoformat(),),
            )
        if keep is not None:
            victims += await self._run(
                "SELECT owner, session_id FROM agent_sessions"
                " ORDER BY update_time DESC, session_id DESC LIMIT -1 OFFSET ?",
                (keep,),
            )
        doomed = {(str(o), str(s)) for o, s in victims} - busy
        async with self._lock:
            await asyncio.to_thread(
                self._db.executemany,
                "DELETE FROM agent_sessions WHERE owner = ? AND session_id = ?",
                sorted(doomed),
            )
        return len(doomed)

    async def close(self) -> None:
        async with self._lock:
            self._db.close()


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
