"""The session store's contract beyond sessions (test_session_store.py has those): the reply
journal (a reply's row by id or latest, its events after a sequence number, orphans),
deletion and retention taking the journal along, a user's erasure, the timestamps a write
keeps and moves, and the bounds of one read; on SQLite and PostgreSQL.

One test per rule; each asserts what the store returns and what it left behind."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from hookmesh.agent import AgentState, PendingReply
from hookmesh.schema import ToolCall
from hookmesh.services.agent import SessionStore
from hookmesh.services.agent._store import Dialect, JournalStep, Lease, ReplyRecord
from tests.session_backends import SessionBackend

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def store(session_backend: SessionBackend) -> AsyncIterator[SessionStore]:
    opened = await session_backend.open()
    try:
        yield opened
    finally:
        await opened.close()


def _step(
    reply_id: str,
    status: str = "running",
    events: tuple[int, ...] = (),
    *,
    step_seq: int = 0,
    durability: str = "step",
) -> JournalStep:
    """A journal step adding `events` (their payload names reply and number)."""
    return JournalStep(
        reply_id=reply_id,
        status=status,
        last_seq=max(events, default=0),
        step_seq=step_seq,
        durability=durability,
        request=f"request of {reply_id}".encode(),
        events=[(seq, f"{reply_id}#{seq}".encode()) for seq in events],
    )


async def _journal(store: SessionStore, owner: str, sid: str, *steps: JournalStep) -> None:
    for step in steps:
        await store.put(owner, sid, "agent", AgentState(), step=step)


async def test_a_reply_is_read_by_its_id_or_as_the_latest(store: SessionStore) -> None:
    await _journal(
        store,
        "alice",
        "s",
        _step("r1", "ended", (1, 2), step_seq=1, durability="exit"),
        _step("r2", "paused", (1,), durability="event"),
    )
    first = await store.reply("alice", "s", "r1")
    assert first is not None
    assert (first.owner, first.session_id, first.reply_id, first.status) == (
        "alice",
        "s",
        "r1",
        "ended",
    )
    assert (first.last_seq, first.step_seq, first.durability, first.request) == (
        2,
        1,
        "exit",
        b"request of r1",
    )
    assert isinstance(first.update_time, datetime)
    latest = await store.reply("alice", "s")
    assert latest is not None and (latest.reply_id, latest.status) == ("r2", "paused")
    assert latest.update_time >= first.update_time
    assert await store.reply("alice", "s", "r3") is None
    assert await store.reply("bob", "s", "r1") is None  # another owner's id
    assert await store.reply("alice", "other") is None


async def test_a_later_step_replaces_the_reply_row_and_keeps_its_events(
    store: SessionStore,
) -> None:
    await _journal(store, "alice", "s", _step("r", "running", (1, 2)), _step("r", "ended", (3,)))
    record = await store.reply("alice", "s", "r")
    assert record is not None and (record.status, record.last_seq) == ("ended", 3)
    assert [seq for seq, _ in await store.events("alice", "s", "r", 0)] == [1, 2, 3]


async def test_events_come_after_the_given_number_in_order_for_that_reply_only(
    store: SessionStore,
) -> None:
    await _journal(store, "alice", "s", _step("r", "running", (1, 2, 3)), _step("q", "ended", (1,)))
    await _journal(store, "bob", "s", _step("r", "ended", (1, 2, 3, 4)))
    assert await store.events("alice", "s", "r", 1) == [(2, b"r#2"), (3, b"r#3")]
    assert await store.events("alice", "s", "r", 0, limit=2) == [(1, b"r#1"), (2, b"r#2")]
    assert await store.events("alice", "s", "r", 3) == []
    assert await store.events("alice", "s", "q", 0) == [(1, b"q#1")]


async def test_a_step_run_again_replaces_the_events_it_saved_under_the_same_number(
    store: SessionStore,
) -> None:
    await _journal(store, "alice", "s", _step("r", "running", (1, 2)))
    again = dataclasses.replace(_step("r", "running"), last_seq=2, events=[(2, b"again")])
    await store.put("alice", "s", "agent", AgentState(), step=again)
    assert await store.events("alice", "s", "r", 0) == [(1, b"r#1"), (2, b"again")]


async def test_one_read_of_events_returns_at_most_a_thousand(store: SessionStore) -> None:
    await _journal(store, "alice", "s", _step("r", "running", tuple(range(1, 1002))))
    first = await store.events("alice", "s", "r", 0)
    assert [seq for seq, _ in first] == list(range(1, 1001))
    assert [seq for seq, _ in await store.events("alice", "s", "r", 1000)] == [1001]


async def test_orphans_are_the_running_replies_oldest_first(store: SessionStore) -> None:
    """One process owns a SQLite file, and no replica holds these sessions on PostgreSQL:
    every reply still running is an orphan; ended and paused ones are not."""
    await _journal(store, "alice", "a", _step("r1", "running", (1,)))
    await _journal(store, "bob", "b", _step("r2", "running", (1, 2), step_seq=1))
    await _journal(store, "alice", "c", _step("r3", "ended"), _step("r4", "paused"))
    found = await store.orphans()
    assert [(o.owner, o.session_id, o.reply_id) for o in found] == [
        ("alice", "a", "r1"),
        ("bob", "b", "r2"),
    ]
    assert (found[1].last_seq, found[1].step_seq, found[1].request) == (2, 1, b"request of r2")
    assert [o.reply_id for o in await store.orphans(limit=1)] == ["r1"]


async def test_one_read_of_orphans_returns_at_most_a_hundred(store: SessionStore) -> None:
    await asyncio.gather(
        *(_journal(store, "alice", f"s{i:03}", _step(f"r{i:03}")) for i in range(101))
    )
    assert len(await store.orphans()) == 100
    assert len(await store.orphans(limit=101)) == 101


async def test_a_write_keeps_the_create_time_and_moves_the_update_time(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    await store.put("alice", "s", "agent", AgentState())
    await session_backend.age("s", 1)
    before = await store.get("alice", "s")
    await store.put("alice", "s", "renamed", AgentState())
    after = await store.get("alice", "s")
    assert before is not None and after is not None
    assert after.create_time == before.create_time
    assert after.update_time > before.update_time
    assert after.agent_name == "renamed"
    (listed,) = await store.list("alice", 10, None)
    assert (listed.create_time, listed.update_time) == (after.create_time, after.update_time)


async def test_a_session_awaiting_external_results_shows_those_calls(
    store: SessionStore,
) -> None:
    ask = ToolCall(id="c1", name="confirm_me", arguments="{}")
    run = ToolCall(id="c2", name="run_on_client", arguments='{"x": 1}')
    state = AgentState(
        pending=PendingReply(
            reply_id="r",
            iteration=0,
            awaiting="external",
            confirm_calls=[ask],
            external_calls=[run],
        )
    )
    await store.put("alice", "s", "agent", state)
    stored = await store.get("alice", "s")
    assert stored is not None and (stored.awaiting, stored.pending_calls) == ("external", [run])
    (summary,) = await store.list("alice", 10, None)
    assert (summary.awaiting, summary.pending_calls) == ("external", [run])


async def test_a_listing_cursor_excludes_its_own_session_and_honours_the_limit(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    for days, sid in ((4, "a"), (3, "b"), (2, "c"), (1, "d")):
        await store.put("alice", sid, "agent", AgentState())
        await session_backend.age(sid, days)
    await store.put("bob", "z", "agent", AgentState())
    assert [s.session_id for s in await store.list("alice", 1, None)] == ["d"]
    (c,) = [s for s in await store.list("alice", 10, None) if s.session_id == "c"]
    cursor = (c.update_time.isoformat(), "c")
    assert [s.session_id for s in await store.list("alice", 10, cursor)] == ["b", "a"]
    assert [s.session_id for s in await store.list("alice", 1, cursor)] == ["b"]


async def test_deleting_a_session_deletes_its_journal(store: SessionStore) -> None:
    await _journal(store, "alice", "s", _step("r", "ended", (1, 2)))
    await _journal(store, "bob", "s", _step("r", "ended", (1,)))
    assert await store.delete("alice", "s") is True
    assert await store.reply("alice", "s", "r") is None
    assert await store.events("alice", "s", "r", 0) == []
    assert await store.events("bob", "s", "r", 0) == [(1, b"r#1")]  # another owner's stays
    assert await store.delete("alice", "s") is False


async def test_retention_takes_a_swept_sessions_journal_along(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    await _journal(store, "alice", "old", _step("r", "ended", (1,)))
    await _journal(store, "alice", "new", _step("q", "ended", (1,)))
    await session_backend.age("old", 30)
    cutoff = datetime.now(UTC) - timedelta(days=7)
    assert await store.sweep(older_than=cutoff, keep=None, busy=set()) == 1
    assert await store.reply("alice", "old", "r") is None
    assert await store.events("alice", "old", "r", 0) == []
    assert await store.events("alice", "new", "q", 0) == [(1, b"q#1")]


async def test_retention_by_age_and_count_together(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    """Both bounds apply in one sweep: the stale session by age, then the oldest beyond the
    count; a session both name is counted once."""
    for days, sid in ((30, "stale"), (3, "a"), (2, "b"), (1, "c")):
        await store.put("alice", sid, "agent", AgentState())
        await session_backend.age(sid, days)
    cutoff = datetime.now(UTC) - timedelta(days=7)
    assert await store.sweep(older_than=cutoff, keep=2, busy=set()) == 2
    assert {s.session_id for s in await store.list("alice", 10, None)} == {"b", "c"}


async def test_a_busy_session_that_retention_would_keep_anyway_stays(
    store: SessionStore, session_backend: SessionBackend
) -> None:
    """The busy pairs only spare sessions: naming a fresh one busy never makes it a victim."""
    for sid in ("old", "fresh"):
        await store.put("alice", sid, "agent", AgentState())
    await session_backend.age("old", 30)
    cutoff = datetime.now(UTC) - timedelta(days=7)
    gone = await store.sweep(older_than=cutoff, keep=None, busy={("alice", "fresh")})
    assert gone == 1
    assert [s.session_id for s in await store.list("alice", 10, None)] == ["fresh"]


async def test_a_sweep_with_no_bounds_deletes_nothing(store: SessionStore) -> None:
    await _journal(store, "alice", "s", _step("r", "ended", (1,)))
    assert await store.sweep(older_than=None, keep=None, busy=set()) == 0
    assert await store.get("alice", "s") is not None
    assert await store.reply("alice", "s", "r") is not None


async def test_keeping_none_deletes_every_idle_session(store: SessionStore) -> None:
    for sid in ("a", "b"):
        await store.put("alice", sid, "agent", AgentState())
    assert await store.sweep(older_than=None, keep=0, busy={("alice", "b")}) == 1
    assert [s.session_id for s in await store.list("alice", 10, None)] == ["b"]


async def test_journal_retention_drops_ended_and_paused_replies_but_not_running_ones(
    store: SessionStore,
) -> None:
    await _journal(
        store, "alice", "s", _step("ended", "ended", (1,)), _step("paused", "paused", (1,))
    )
    await _journal(store, "alice", "s", _step("running", "running", (1,)))
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert await store.sweep(older_than=None, keep=None, busy=set(), journal_before=later) == 0
    assert await store.reply("alice", "s", "ended") is None
    assert await store.reply("alice", "s", "paused") is None
    assert await store.events("alice", "s", "ended", 0) == []
    assert await store.reply("alice", "s", "running") is not None
    assert await store.events("alice", "s", "running", 0) == [(1, b"running#1")]
    assert await store.get("alice", "s") is not None  # the session itself stays


async def test_journal_retention_spares_replies_that_ended_after_the_cutoff(
    store: SessionStore,
) -> None:
    await _journal(store, "alice", "s", _step("r", "ended", (1,)))
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    assert await store.sweep(older_than=None, keep=None, busy=set(), journal_before=earlier) == 0
    assert await store.reply("alice", "s", "r") is not None


async def test_a_users_sessions_and_whether_one_of_their_replies_runs(
    store: SessionStore,
) -> None:
    await store.put("alice", "a", "agent", AgentState())
    await _journal(store, "alice", "b", _step("r", "ended", (1,)))
    await _journal(store, "bob", "c", _step("q", "running", (1,)))
    assert sorted(await store.user_sessions("alice")) == ["a", "b"]
    assert await store.user_sessions("carol") == ()
    assert await store.user_busy("alice") is False
    assert await store.user_busy("bob") is True
    await _journal(store, "alice", "b", _step("r2", "running"))
    assert await store.user_busy("alice") is True


async def test_forgetting_a_user_deletes_their_sessions_and_journal_only(
    store: SessionStore,
) -> None:
    await _journal(store, "alice", "a", _step("r", "ended", (1, 2)))
    await _journal(store, "alice", "b", _step("q", "ended", (1,)))
    await _journal(store, "bob", "a", _step("r", "ended", (1,)))
    assert await store.forget("alice") == (
        ("agent.reply_events", 3),
        ("agent.replies", 2),
        ("agent.sessions", 2),
    )
    assert await store.user_sessions("alice") == ()
    assert await store.reply("alice", "a", "r") is None
    assert await store.events("bob", "a", "r", 0) == [(1, b"r#1")]
    assert await store.forget("alice") == (
        ("agent.reply_events", 0),
        ("agent.replies", 0),
        ("agent.sessions", 0),
    )


async def test_the_options_of_a_write_and_of_a_sweep_must_be_named(store: SessionStore) -> None:
    """What decides what a write fences or a sweep deletes is never read by position: a
    caller swapping two of them fails at once instead of deleting the wrong sessions."""
    lease = Lease("alice", "s", 1)
    with pytest.raises(TypeError):
        await store.put("alice", "s", "agent", AgentState(), lease)  # type: ignore[misc]
    with pytest.raises(TypeError):
        await store.sweep(None, 0, set())  # type: ignore[misc]
    assert await store.get("alice", "s") is None


def test_journal_records_and_leases_are_values() -> None:
    """A record, step, lease or dialect handed out cannot change under its holder, and
    leases serve as keys (equal ones hash alike)."""
    lease = Lease("alice", "s", 7)
    assert {lease: 1}[Lease("alice", "s", 7)] == 1
    record = ReplyRecord("alice", "s", "r", "ended", 1, 0, "step", b"", datetime.now(UTC))
    step = _step("r")
    dialect = Dialect(*"abcdefgh")
    values = ((lease, "token"), (record, "status"), (step, "status"), (dialect, "table"))
    for value, name in values:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, 0)


def test_a_backend_must_supply_every_connection_method() -> None:
    for missing in ("close", "_execute", "_execute_many", "_write"):
        methods = {
            name: (lambda self, *args: None)
            for name in ("close", "_execute", "_execute_many", "_write")
            if name != missing
        }
        incomplete = type("Incomplete", (SessionStore,), methods)
        with pytest.raises(TypeError, match=f"abstract method.* '?{missing}'?"):
            incomplete(Dialect(*"abcdefgh"))
