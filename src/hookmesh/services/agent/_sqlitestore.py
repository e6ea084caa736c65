"""Sessions in one SQLite file, for an agent service that is the only process using it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hookmesh._files import private_file
from hookmesh.services.agent._store import (
    JOURNAL_EVENT,
    JOURNAL_REPLY,
    UPSERT_SET,
    Dialect,
    JournalStep,
    Lease,
    Params,
    Rows,
    SessionRow,
    SessionStore,
)

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
CREATE TABLE IF NOT EXISTS agent_replies (
    owner        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    reply_id     TEXT NOT NULL,
    status       TEXT NOT NULL,
    last_seq     INTEGER NOT NULL,
    step_seq     INTEGER NOT NULL,
    durability   TEXT NOT NULL,
    request      BLOB NOT NULL,
    update_time  TEXT NOT NULL,
    PRIMARY KEY (owner, session_id, reply_id)
);
CREATE INDEX IF NOT EXISTS agent_replies_by_status ON agent_replies (status, update_time);
CREATE TABLE IF NOT EXISTS agent_reply_events (
    owner        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    reply_id     TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    event        BLOB NOT NULL,
    PRIMARY KEY (owner, session_id, reply_id, seq)
);
"""
_LEGACY = """
INSERT OR IGNORE INTO agent_sessions
    (owner, session_id, agent_name, state_json, create_time, update_time)
    SELECT 'anonymous', session_id, agent_name, state_json, create_time, update_time
    FROM sessions;
DROP TABLE sessions;
"""
_UPSERT = (
    "INSERT INTO agent_sessions (owner, session_id, agent_name, awaiting, pending_json,"
    " state_json, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    f" ON CONFLICT (owner, session_id) DO UPDATE SET {UPSERT_SET},"
    " update_time = excluded.update_time"
)
# NOTE(sessions): times are ISO 8601 text in UTC from `datetime.isoformat`, one format, so
# SQLite's text comparison orders them; one process owns the file, so nobody holds leases.
_DIALECT = Dialect(
    table="agent_sessions",
    mark="?",
    time="?",
    rest="LIMIT -1 OFFSET ?",
    leased="false",
    replies="agent_replies",
    events="agent_reply_events",
    held="false",
)


class SqliteSessionStore(SessionStore):
    """Sessions in one SQLite file in WAL mode; calls run in a worker thread, one at a time.

    The file is 0600 in a 0700 folder when this creates them; ``synchronous=NORMAL`` (WAL):
    a committed session survives a crash of the process, and a power loss may drop the last
    commits but never corrupts the file. It has no leases: one process owns the file.

    Args:
        path: The database file (created with its folder), or ``:memory:``.
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(_DIALECT)
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
        self._queued: list[tuple[SessionRow, JournalStep | None, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def close(self) -> None:
        async with self._lock:
            self._db.close()

    async def _execute(self, sql: str, params: Params) -> Rows:
        async with self._lock:
            return await asyncio.to_thread(lambda: self._db.execute(sql, params).fetchall())

    async def _execute_many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        async with self._lock:
            await asyncio.to_thread(self._db.executemany, sql, params)

    async def _write(
        self, row: SessionRow, unused_lease: Lease | None, step: JournalStep | None
    ) -> None:
        """Queue the write for the writer, which commits what is queued together.

        NOTE(sessions): a group commit: while one transaction is being written, the writes
        of other replies queue up and go in the next one, so concurrent replies share their
        commits (one transaction, one fsync of the WAL) instead of waiting for each other's.
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.append((row, step, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        await done

    async def _write_queued(self) -> None:
        while self._queued:
            batch, self._queued = self._queued, []
            try:
                async with self._lock:
                    await asyncio.to_thread(self._commit, [(r, s) for r, s, _ in batch])
            except Exception as exc:
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for _, _, done in batch:
                if not done.done():
                    done.set_result(None)

    def _commit(self, writes: list[tuple[SessionRow, JournalStep | None]]) -> None:
        """Write sessions and their journal steps in one transaction (a worker thread's)."""
        now = datetime.now(UTC).isoformat()
        reply_sql, event_sql = self._sql(JOURNAL_REPLY, now="?"), self._sql(JOURNAL_EVENT)
        with self._db:
            self._db.execute("BEGIN")
            for row, step in writes:
                self._db.execute(_UPSERT, (*row, now, now))
                if step is not None:
                    reply, events = self.journal_params(row[0], row[1], step)
                    self._db.execute(reply_sql, (*reply, now))
                    if events:
                        self._db.executemany(event_sql, events)
