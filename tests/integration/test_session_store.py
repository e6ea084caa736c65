"""The session store contract (owners, listing without state, retention) on SQLite and
PostgreSQL, the PostgreSQL leases (busy, expiry, a dead holder, fencing), and the agent
service's retention sweep."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import AgentState, PendingReply
from hookmesh.client import AgentClient
from hookmesh.errors import RequestError
from hookmesh.schema import ToolCall, make_user_text
from hookmesh.services.agent import (
    LeaseLostError,
    PostgresSessionStore,
    SessionStore,
    SqliteSessionStore,
    load_config,
    open_store,
    start_agent_service,
)
from hookmesh.services.agent._store import JournalStep
from tests.agent_helpers import SHORT_TIMEOUT
from tests.session_backends import SessionBackend

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def store(session_backend: SessionBackend) -> AsyncIterator[SessionStore]:
    opened = await session_backend.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_sessions_belong_to_their_owner(store: SessionStore) -> None:
    state = AgentState(context=[make_user_text("flat", "secret plan")])
    await store.put("alice", "s1", "agent", state)
    await store.put("bob", "s1", "agent", AgentState())
    alice = await store.get("alice", "s1")
    bob = await store.get("bob", "s1")
    assert alice is not None and alice.state.context[0].content == "secret plan"  # type: ignore[union-attr]
    assert bob is not None and bob.state.context == []
    assert await store.get("carol", "s1") is None
    assert [s.session_id for s in await store.list("bob", 10, None)] == ["s1"]
    assert await store.list("carol", 10, None) == []
    assert await store.delete("bob", "s1")
    assert not await store.delete("bob", "s1")
    assert await store.get("alice", "s1") is not None


async def test_a_listing_carries_the_pending_calls(store: SessionStore) -> None:
    call = ToolCall(id="c1", name="delete_everything", arguments="{}")
    state = AgentState(
        pending=PendingReply(
            reply_id="r", iteration=0, awaiting="confirmation", confirm_calls=[call]
        )
    )
    await store.put("alice", "paused", "agent", state)
    (summary,) = await store.list("alice", 10, None)
    assert (summary.awaiting, summary.pending_calls) == ("confirmation", [call])


async def test_listing_pages_newest_first(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    for sid in ("a", "b", "c"):
        await store.put("alice", sid, "agent", AgentState())
    for days, sid in ((3, "a"), (2, "b"), (1, "c")):
        await session_backend.age(sid, days)
    first = await store.list("alice", 2, None)
    assert [s.session_id for s in first] == ["c", "b"]
    cursor = (first[-1].update_time.isoformat(), first[-1].session_id)
    assert [s.session_id for s in await store.list("alice", 2, cursor)] == ["a"]


async def test_retention_by_age_and_count_spares_busy_sessions(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    for sid in ("old", "old-busy", "a", "b", "c"):
        await store.put("alice", sid, "agent", AgentState())
    await session_backend.age("old", 30)
    await session_backend.age("old-busy", 30)
    cutoff = datetime.now(UTC) - timedelta(days=7)
    gone = await store.sweep(older_than=cutoff, keep=None, busy={("alice", "old-busy")})
    assert gone == 1
    assert await store.get("alice", "old") is None
    assert await store.sweep(older_than=None, keep=2, busy={("alice", "old-busy")}) == 1
    left = {s.session_id for s in await store.list("alice", 10, None)}
    assert left == {"old-busy", "b", "c"}  # the busy one survives; "a" was the oldest of the rest


async def test_the_service_sweeps_at_start(session_backend: SessionBackend) -> None:
    seeded = await session_backend.open()
    await seeded.put("anonymous", "stale", "assistant", AgentState())
    await seeded.put("anonymous", "fresh", "assistant", AgentState())
    await seeded.close()
    await session_backend.age("stale", 3)
    config = load_config(None, **session_backend.config(sessions={"ttl_seconds": 86_400}))
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
            sessions, _ = await client.list_sessions()
        assert [s.session_id for s in sessions] == ["fresh"]
    finally:
        await service.stop(None)


# --- SQLite only: one private file ---------------------------------------------------------


@pytest.mark.parametrize("where", ["absolute", "relative"])
async def test_the_database_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """At an absolute path or one relative to the working folder (as a config names it)."""
    monkeypatch.chdir(tmp_path)
    prefix = f"{tmp_path}/" if where == "absolute" else ""
    store = await open_store(f"sqlite:///{prefix}data/sessions.db")
    try:
        await store.put("alice", "s", "agent", AgentState())
        assert store.leases is None  # one process owns the file: no leases
    finally:
        await store.close()
    folder = tmp_path / "data"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "sessions.db").stat().st_mode) == 0o600


async def test_an_in_memory_sqlite_store_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_store("sqlite:///:memory:")
    try:
        await store.put("alice", "s", "agent", AgentState())
        assert await store.get("alice", "s") is not None
    finally:
        await store.close()
    assert os.listdir(tmp_path) == []


async def test_a_sqlite_write_queued_behind_a_failed_commit_still_lands(tmp_path: Path) -> None:
    """Writes queue while a commit runs and go in the next one: when that commit fails (the
    file is locked by another process past SQLite's busy timeout), its write is refused as
    an outage, and the write queued behind it still commits once the file is free."""
    path = tmp_path / "agent.db"
    store = await open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteSessionStore)
    loop = asyncio.get_running_loop()
    began = asyncio.Event()
    # Observe (from the commit's worker thread) the first commit beginning; nothing else.
    store._db.set_trace_callback(
        lambda sql: loop.call_soon_threadsafe(began.set) if sql == "BEGIN" else None
    )
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writes: the file is locked
    try:
        first = asyncio.create_task(store.put("alice", "first", "agent", AgentState()))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await began.wait()
        second = asyncio.create_task(store.put("alice", "second", "agent", AgentState()))
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(first, SHORT_TIMEOUT)
        assert refused.value.reason == "STORE_UNAVAILABLE"
        other.execute("ROLLBACK")
        await asyncio.wait_for(second, SHORT_TIMEOUT)
        assert await store.get("alice", "second") is not None
        assert await store.get("alice", "first") is None
    finally:
        other.close()
        await store.close()


async def test_an_old_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, agent_name TEXT NOT NULL,"
            " state_json TEXT NOT NULL, create_time TEXT NOT NULL, update_time TEXT NOT NULL)"
        )
        now = datetime.now(UTC).isoformat()
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
            ("legacy", "assistant", AgentState().model_dump_json(), now, now),
        )
    migrated = await open_store(f"sqlite:///{path}")
    try:
        assert await migrated.get("anonymous", "legacy") is not None
    finally:
        await migrated.close()


async def test_an_unknown_store_is_refused_without_its_password() -> None:
    with pytest.raises(ValueError, match="unsupported store") as caught:
        await open_store("mysql://root:hunter2@db/agent")
    assert "hunter2" not in str(caught.value)


# --- PostgreSQL leases: two replicas on one database ---------------------------------------


@pytest.fixture
async def replicas(
    postgres_backend: SessionBackend,
) -> AsyncIterator[tuple[PostgresSessionStore, PostgresSessionStore]]:
    """Two stores on one schema, as two agent replicas have (2 s leases)."""
    first = await postgres_backend.open(lease_seconds=2.0)
    second = await postgres_backend.open(lease_seconds=2.0)
    assert isinstance(first, PostgresSessionStore) and isinstance(second, PostgresSessionStore)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_a_held_lease_keeps_other_replicas_out_until_released(
    replicas: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = replicas
    lease = await first.acquire("alice", "s")
    assert lease is not None
    assert await second.acquire("alice", "s") is None
    assert await second.acquire("bob", "s") is not None  # another owner's session is free
    assert await first.renew() == []  # still held
    await first.release(lease)
    taken = await second.acquire("alice", "s")
    assert taken is not None and taken.token > lease.token


async def _wait_until_gone(url: str, holder: int) -> None:
    """Wait until the server has ended the holder's session (its lock is free)."""
    import psycopg

    async with (
        asyncio.timeout(SHORT_TIMEOUT),
        await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
    ):
        await conn.execute("SELECT pg_advisory_lock(%s)", (holder,))
        await conn.execute("SELECT pg_advisory_unlock(%s)", (holder,))


async def test_a_dead_holders_leases_are_free_at_once(
    replicas: tuple[PostgresSessionStore, PostgresSessionStore], postgres_backend: SessionBackend
) -> None:
    first, second = replicas
    assert await first.acquire("alice", "s") is not None
    await first.close()  # the process ends: its holder connection closes, never released
    await _wait_until_gone(postgres_backend.url, first.holder)
    assert await second.acquire("alice", "s") is not None


async def test_an_expired_lease_is_taken_over_and_the_old_holder_is_fenced_out(
    replicas: tuple[PostgresSessionStore, PostgresSessionStore], postgres_backend: SessionBackend
) -> None:
    first, second = replicas
    stale = await first.acquire("alice", "s")
    assert stale is not None
    await first.put("alice", "s", "agent", AgentState(), lease=stale)  # allowed while held
    await postgres_backend.expire_leases()  # the holder hung past its expiry
    fresh = await second.acquire("alice", "s")
    assert fresh is not None and fresh.token > stale.token
    await second.put("alice", "s", "agent", AgentState(context=[make_user_text("flat", "new")]))
    with pytest.raises(LeaseLostError, match=r"^session s was taken over"):
        await first.put("alice", "s", "agent", AgentState(), lease=stale)
    saved = await second.get("alice", "s")
    assert saved is not None and len(saved.state.context) == 1  # the new holder's write stands
    assert await first.renew() == [stale]  # the old holder learns it lost the lease


async def test_retention_spares_sessions_leased_by_another_replica(
    replicas: tuple[PostgresSessionStore, PostgresSessionStore], postgres_backend: SessionBackend
) -> None:
    first, second = replicas
    await first.put("alice", "running", "agent", AgentState())
    await postgres_backend.age("running", 30)
    assert await first.acquire("alice", "running") is not None
    cutoff = datetime.now(UTC) - timedelta(days=7)
    assert await second.sweep(older_than=cutoff, keep=None, busy=set()) == 0
    assert await second.get("alice", "running") is not None


async def test_an_interrupt_goes_to_the_live_holder_only(
    replicas: tuple[PostgresSessionStore, PostgresSessionStore], postgres_backend: SessionBackend
) -> None:
    first, second = replicas
    requests = first.interrupt_requests()
    assert await second.signal_interrupt("alice", "s") is False  # nobody replies there
    assert await first.acquire("alice", "s") is not None
    assert await first.signal_interrupt("alice", "s") is False  # its own: handled in process
    assert await second.signal_interrupt("bob", "s") is False  # another owner's session
    assert await second.signal_interrupt("alice", "s") is True
    async with asyncio.timeout(SHORT_TIMEOUT):
        assert await anext(requests) == ("alice", "s")
    await requests.aclose()
    await first.close()  # the holder dies: its lease is there, but nobody to tell
    await _wait_until_gone(postgres_backend.url, first.holder)
    assert await second.signal_interrupt("alice", "s") is False


async def _pages(store: SessionStore, owner: str, table: str, page: int) -> list[list[Any]]:
    return [[tuple(r) for r in rows] async for rows in store.export(owner, table, page)]


@pytest.mark.parametrize("count", [5, 4])  # a short last page, and none: an exact fit
async def test_an_export_pages_every_row_once_in_key_order(store: SessionStore, count: int) -> None:
    """Keyset paging: each page goes on after the last row's key, a short page is the last,
    and a page count that divides the rows exactly ends without an empty page."""
    names = [f"s{i}" for i in range(count)]
    for sid in reversed(names):
        await store.put("alice", sid, "agent", AgentState())
        step = JournalStep(
            reply_id="r1",
            status="completed",
            last_seq=3,
            step_seq=3,
            durability="step",
            request=b"req",
            events=[(seq, f"{sid}#{seq}".encode()) for seq in (1, 2, 3)],
        )
        await store.put("alice", sid, "agent", AgentState(), step=step)
    await store.put("bob", "s9", "agent", AgentState())  # another user's rows stay out

    sessions = await _pages(store, "alice", "agent.sessions", 2)
    assert [len(p) for p in sessions] == [2] * (count // 2) + [1] * (count % 2)
    assert [r[0] for p in sessions for r in p] == names
    replies = await _pages(store, "alice", "agent.replies", 3)
    assert [(r[0], r[1]) for p in replies for r in p] == [(s, "r1") for s in names]
    events = await _pages(store, "alice", "agent.reply_events", 2)
    keys = [(r[0], r[1], r[2]) for p in events for r in p]
    assert keys == [(s, "r1", seq) for s in names for seq in (1, 2, 3)]
    assert all(len(p) == 2 for p in events[:-1])
