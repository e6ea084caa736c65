"""The agent service's session RPCs beyond their happy path (test_agent_service.py has that):
ListSessions' page bounds, default page and last page, and what GetSession, Interrupt and
DeleteSession answer while a reply runs; over real gRPC on loopback with a real SQLite
store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookmesh.agent import AgentState, PendingReply
from hookmesh.client import AgentClient, AgentClientError
from hookmesh.schema import tool_results
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.services.agent._store import JournalStep
from hookmesh.v1 import agent_pb2, agent_pb2_grpc, message_pb2
from tests.agent_helpers import SHORT_TIMEOUT
from tests.servers import stopped_at_exit, target
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(60)

GATE_THEN_DONE = [{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"]
ASK_THEN_DONE = [
    {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
    "deleted it",
]

Start = Callable[..., Awaitable[AgentService]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """Start agent services on 127.0.0.1:0 with a store in tmp_path; stopped at the end."""
    GateState.reset()

    async def run(turns: list[Any] | None = None, **config: Any) -> AgentService:
        settings = load_config(
            None,
            store=f"sqlite:///{tmp_path}/agent.db",
            tools=["tests.service_tools:gate", "tests.service_tools:delete_file"],
            models={"default": {"type": "scripted", "turns": turns or ["hello there"]}},
            **config,
        )
        return await start_agent_service(settings, address="127.0.0.1:0")

    async with stopped_at_exit(run) as started:
        yield started
    GateState.release.set()


async def _seed(service: AgentService, count: int) -> None:
    """`count` idle sessions of the anonymous caller, written to the service's own store."""
    for i in range(count):
        await service.servicer.store.put("anonymous", f"s{i:03}", "assistant", AgentState())


async def _refused(call: Awaitable[Any]) -> AgentClientError:
    with pytest.raises(AgentClientError) as caught:
        await call
    return caught.value


@pytest.mark.parametrize("size", [-1, 1001])
async def test_a_page_size_out_of_bounds_is_refused(start: Start, size: int) -> None:
    service = await start()
    await _seed(service, 1)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        error = await _refused(client.list_sessions(page_size=size))
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")
    assert [v.field for v in error.violations] == ["page_size"]
    assert "between 0 (default 50) and 1000" in error.violations[0].description


async def test_the_largest_page_size_is_allowed(start: Start) -> None:
    service = await start()
    await _seed(service, 2)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        page, token = await client.list_sessions(page_size=1000)
    assert ([s.session_id for s in page], token) == (["s001", "s000"], "")


async def test_a_default_page_holds_fifty_sessions(start: Start) -> None:
    service = await start()
    await _seed(service, 51)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        first, token = await client.list_sessions()
        assert len(first) == 50 and token
        rest, last = await client.list_sessions(page_token=token)
    assert ([s.session_id for s in rest], last) == (["s000"], "")
    assert {s.session_id for s in first} == {f"s{i:03}" for i in range(1, 51)}


@pytest.mark.parametrize("count", [2, 3])
async def test_a_page_that_holds_the_rest_has_no_next_token(start: Start, count: int) -> None:
    """Fewer sessions than the page holds, or exactly as many: no token (a token would lead
    the caller to an empty page)."""
    service = await start()
    await _seed(service, count)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        page, token = await client.list_sessions(page_size=3)
    assert (len(page), token) == (count, "")


@pytest.mark.parametrize("size", [2, 3])
async def test_a_page_one_short_of_the_rest_has_a_token_to_the_last(
    start: Start, size: int
) -> None:
    service = await start()
    await _seed(service, size + 1)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        page, token = await client.list_sessions(page_size=size)
        assert [s.session_id for s in page] == [f"s{i:03}" for i in range(size, 0, -1)]
        assert token
        rest, last = await client.list_sessions(page_size=size, page_token=token)
    assert ([s.session_id for s in rest], last) == (["s000"], "")


async def test_a_listing_shows_a_running_session_as_running(start: Start) -> None:
    service = await start(GATE_THEN_DONE)
    await _seed(service, 1)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        running = asyncio.create_task(_events(client.reply("go", session_id="live")))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        page, _ = await client.list_sessions()
        assert {s.session_id: s.status for s in page} == {"live": "running", "s000": "idle"}
        GateState.release.set()
        await asyncio.wait_for(running, SHORT_TIMEOUT)
        page, _ = await client.list_sessions()
    assert {s.session_id: s.status for s in page} == {"live": "idle", "s000": "idle"}


async def test_a_running_session_keeps_its_create_time_and_shows_its_reply(
    start: Start,
) -> None:
    """GetSession of a session whose second reply runs: the time it was made (not now), the
    running reply's id and how far it got."""
    service = await start(["first", *GATE_THEN_DONE])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        assert await client.text("hello", session_id="s") == "first"
        before = await client.get_session("s")
        assert before.status == "idle" and before.reply_id and before.last_seq > 0
        reply = client.reply("go", session_id="s")
        head = await anext(reply)
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        running = await client.get_session("s")
        assert running.status == "running"
        assert running.create_time == before.create_time
        assert running.update_time >= before.update_time
        assert running.reply_id == head.reply_id != before.reply_id
        assert running.last_seq >= 1
        assert [m.role for m in running.context][:2] == ["user", "assistant"]
        GateState.release.set()
        rest = [e async for e in reply]
        after = await client.get_session("s")
    assert rest[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert (after.status, after.reply_id, after.create_time) == (
        "idle",
        head.reply_id,
        before.create_time,
    )
    assert after.last_seq == 1 + len(rest)


async def test_interrupting_an_idle_session_answers_false_and_keeps_it(start: Start) -> None:
    service = await start()
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        await client.text("hello", session_id="idle")
        assert await client.interrupt("idle") is False
        session = await client.get_session("idle")
    assert session.status == "idle" and len(session.context) == 2


async def test_a_deleted_session_is_gone_and_its_id_free_again(start: Start) -> None:
    service = await start(["one", "two"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        await client.text("hello", session_id="s")
        await client.delete_session("s")
        error = await _refused(client.get_session("s"))
        assert error.reason == "SESSION_NOT_FOUND"
        again = await _refused(client.delete_session("s"))
        assert (again.code, again.reason) == (grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND")
        assert await client.text("anew", session_id="s") == "two"
        session = await client.get_session("s")
    assert [m.role for m in session.context] == ["user", "assistant"]


async def test_a_session_can_be_deleted_after_its_reply_ends(start: Start) -> None:
    """The claim DeleteSession takes is given back: the id can be replied on at once."""
    service = await start([*GATE_THEN_DONE, "later"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        running = asyncio.create_task(_events(client.reply("go", session_id="s")))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        busy = await _refused(client.delete_session("s"))
        assert busy.reason == "SESSION_BUSY"
        GateState.release.set()
        await asyncio.wait_for(running, SHORT_TIMEOUT)
        await client.delete_session("s")
        assert await client.text("again", session_id="s") == "later"


async def _paused(client: AgentClient, session_id: str) -> tuple[str, str]:
    """Start a reply that stops for a confirmation; its reply id and the call's id."""
    events = [e async for e in client.reply("clean up", session_id=session_id)]
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    session = await client.get_session(session_id)
    return events[0].reply_id, session.pending_calls[0].id


@pytest.mark.parametrize("journal", ["kept", "swept"])
async def test_a_resumed_reply_streams_every_event_numbered_from_one(
    start: Start, journal: str
) -> None:
    """A paused reply whose journal retention already dropped (paused replies' journals go
    with the ended ones): its resumption numbers its events from 1 as a new one does, and the
    caller gets every one of them."""
    service = await start(ASK_THEN_DONE)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        reply_id, call_id = await _paused(client, "s")
        if journal == "swept":
            later = datetime.now(UTC) + timedelta(minutes=1)
            store = service.servicer.store
            await store.sweep(older_than=None, keep=None, busy=set(), journal_before=later)
            assert await store.reply("anonymous", "s") is None
        before = await service.servicer.store.reply("anonymous", "s")
        confirm = agent_pb2.ResumeRequest(
            session_id="s",
            confirmations=[agent_pb2.ToolConfirmation(call_id=call_id, confirmed=True)],
        )
        async with grpc.aio.insecure_channel(target(service)) as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            responses = [r async for r in stub.Resume(confirm, timeout=SHORT_TIMEOUT)]
        session = await client.get_session("s")
    first = 1 + (before.last_seq if before is not None else 0)
    assert [r.seq for r in responses] == list(range(first, first + len(responses)))
    kinds = [r.event.WhichOneof("event") for r in responses]
    assert kinds[:2] == ["reply_start", "tool_result_start"] and kinds[-1] == "reply_end"
    assert (session.status, session.reply_id) == ("idle", reply_id)
    assert [r.text for m in session.context for r in tool_results(m)] == ["deleted /tmp/x"]


async def test_a_resumed_reply_keeps_the_options_and_durability_it_started_with(
    start: Start,
) -> None:
    """The journal of a resumed reply still holds its caller's options and durability (what
    another replica continuing it would use), with the resuming call's client tools."""
    service = await start(ASK_THEN_DONE)
    options = agent_pb2.ReplyOptions(max_iters=7, durability=agent_pb2.DURABILITY_EVENT)
    ask = agent_pb2.ReplyRequest(
        session_id="s",
        messages=[
            message_pb2.Message(
                flat=message_pb2.FlatMessage(role=message_pb2.ROLE_USER, content="clean up")
            )
        ],
        options=options,
    )
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        asked = [r async for r in stub.Reply(ask, timeout=SHORT_TIMEOUT)]
        paused = await service.servicer.store.reply("anonymous", "s")
        assert paused is not None and (paused.status, paused.durability) == ("paused", "event")
        call_id = asked[-2].event.require_user_confirm.tool_calls[0].id
        confirm = agent_pb2.ResumeRequest(
            session_id="s",
            confirmations=[agent_pb2.ToolConfirmation(call_id=call_id, confirmed=True)],
        )
        resumed = [r async for r in stub.Resume(confirm, timeout=SHORT_TIMEOUT)]
    assert resumed[-1].event.WhichOneof("event") == "reply_end"
    record = await service.servicer.store.reply("anonymous", "s")
    assert record is not None and (record.status, record.durability) == ("ended", "event")
    assert agent_pb2.ReplyRequest.FromString(record.request).options == options


async def test_a_cut_off_reply_is_not_a_paused_one(start: Start) -> None:
    """A session whose saved state says its reply was running (cut off, not yet continued
    here) has nothing to resume: FAILED_PRECONDITION, and the state is left as it was."""
    service = await start(durability={"takeover_seconds": 3600})
    store = service.servicer.store
    cut = AgentState(pending=PendingReply(reply_id="r", iteration=-1, awaiting="running"))
    step = JournalStep("r", "running", 0, 0, "step", b"")
    await store.put("anonymous", "s", "assistant", cut, step=step)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        error = await _refused(_events(client.resume("s")))
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "NO_PAUSED_REPLY")
    stored = await store.get("anonymous", "s")
    assert stored is not None and stored.state.pending == cut.pending


async def _events(stream: Any) -> list[Any]:
    return [e async for e in stream]
