"""The session store contract (owners, listing without state, retention) and the agent
service's retention sweep."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hookmesh.agent import AgentState, PendingReply
from hookmesh.client import AgentClient
from hookmesh.schema import ToolCall, make_user_text
from hookmesh.services.agent import SessionStore, load_config, open_store, start_agent_service
from tests.agent_helpers import SHORT_TIMEOUT

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened = open_store(f"sqlite:///{tmp_path}/data/sessions.db")
    try:
        yield opened
    finally:
        await opened.close()


def _age(path: Path, session_id: str, days: int) -> None:
    """Backdate a session's last update (what retention reads)."""
    when = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE agent_sessions SET update_time = ? WHERE session_id = ?", (when, session_id)
        )


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


async def test_retention_by_age_and_count_spares_busy_sessions(
    store: SessionStore, tmp_path: Path
) -> None:
    path = tmp_path / "data" / "sessions.db"
    for sid in ("old", "old-busy", "a", "b", "c"):
        await store.put("alice", sid, "agent", AgentState())
    _age(path, "old", 30)
    _age(path, "old-busy", 30)
    cutoff = datetime.now(UTC) - timedelta(days=7)
    gone = await store.sweep(older_than=cutoff, keep=None, busy={("alice", "old-busy")})
    assert gone == 1
    assert await store.get("alice", "old") is None
    assert await store.sweep(older_than=None, keep=2, busy={("alice", "old-busy")}) == 1
    left = {s.session_id for s in await store.list("alice", 10, None)}
    assert left == {"old-busy", "b", "c"}  # the busy one survives; "a" was the oldest of the rest


async def test_the_database_is_private(tmp_path: Path, store: SessionStore) -> None:
    await store.put("alice", "s", "agent", AgentState())
    folder = tmp_path / "data"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "sessions.db").stat().st_mode) == 0o600


async def test_the_service_sweeps_at_start(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    seeded = open_store(f"sqlite:///{path}")
    await seeded.put("anonymous", "stale", "assistant", AgentState())
    await seeded.put("anonymous", "fresh", "assistant", AgentState())
    await seeded.close()
    _age(path, "stale", 3)
    config = load_config(None, store=f"sqlite:///{path}", sessions={"ttl_seconds": 86_400})
    service = await start_agent_service(config, address="127.0.0.1:0")
    try:
        async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
            sessions, _ = await client.list_sessions()
        assert [s.session_id for s in sessions] == ["fresh"]
    finally:
        await service.stop(None)


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
    migrated = open_store(f"sqlite:///{path}")
    try:
        assert await migrated.get("anonymous", "legacy") is not None
    finally:
        await migrated.close()
