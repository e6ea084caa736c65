"""The agent service over real gRPC on loopback: replies, sessions, bad input, concurrency,
restarts, shutdown, clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.a2a import Limits
from hookmesh.agent import Confirmation
from hookmesh.client import AgentClient, AgentClientError, SyncAgentClient, text_of_events
from hookmesh.schema import (
    EDITED_CALLS_METADATA_KEY,
    AgenticMessage,
    FlatMessage,
    TextBlock,
    text_of,
    tool_calls,
    tool_results,
)
from hookmesh.services.agent import SERVICE_NAME, AgentService, load_config, start_agent_service
from hookmesh.v1 import agent_pb2, agent_pb2_grpc, content_pb2, message_pb2
from tests.agent_helpers import SHORT_TIMEOUT
from tests.servers import stopped_at_exit, target
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(60)

TOOL_THEN_ANSWER = [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, "the answer"]

Start = Callable[..., Awaitable[AgentService]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """Start agent services on 127.0.0.1:0 with a store in tmp_path; stopped at the end."""
    GateState.reset()

    async def run(turns: list[Any] | None = None, **config: Any) -> AgentService:
        settings = load_config(
            None,
            store=f"sqlite:///{tmp_path}/agent.db",
            tools=[
                "tests.agent_helpers:echo",
                "tests.service_tools:gate",
                "tests.service_tools:delete_file",
            ],
            models={
                "default": {"type": "scripted", "turns": turns or ["hello there"], "stream": True}
            },
            grace_seconds=0.5,
            **config,
        )
        return await start_agent_service(settings, address="127.0.0.1:0")

    async with stopped_at_exit(run) as started:
        yield started


@pytest.mark.parametrize("kind", ["flat", "agentic"])
async def test_reply_creates_a_session_and_continues_it(start: Start, kind: str) -> None:
    service = await start(TOOL_THEN_ANSWER, agent={"kind": kind})
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        events = [e async for e in client.reply("hello")]
        assert events[0].type == "reply_start" and events[-1].type == "reply_end"
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
        session_id = events[0].session_id  # type: ignore[union-attr]
        assert session_id and events[-1].session_id == session_id  # type: ignore[union-attr]
        assert text_of_events(events) == "the answer"
        # The other kind of input is converted to the agent's kind.
        other = (
            AgenticMessage(role="user", blocks=[TextBlock(text="again")])
            if kind == "flat"
            else FlatMessage(role="user", content="again")
        )
        await client.text([other], session_id=session_id)
        session = await client.get_session(session_id)
        assert session.status == "idle"
        assert {m.kind for m in session.context} == {kind}
        assert [text_of(m) for m in session.context if m.role == "user" and text_of(m)][:2] == [
            "hello",
            "again",
        ]
        assert [r.text for m in session.context for r in tool_results(m)] == ["hi", "hi"]


def _flat_user(text: str) -> message_pb2.Message:
    return message_pb2.Message(
        flat=message_pb2.FlatMessage(role=message_pb2.ROLE_USER, content=text)
    )


BAD_REQUESTS: list[tuple[str, agent_pb2.ReplyRequest, str, str]] = [
    ("no messages", agent_pb2.ReplyRequest(), "INVALID_SCHEMA", "messages"),
    (
        "unset oneof",
        agent_pb2.ReplyRequest(messages=[message_pb2.Message(id="m")]),
        "INVALID_SCHEMA",
        "messages[0]",
    ),
    (
        "tool role in agentic",
        agent_pb2.ReplyRequest(
            messages=[
                message_pb2.Message(agentic=message_pb2.AgenticMessage(role=message_pb2.ROLE_TOOL))
            ]
        ),
        "INVALID_SCHEMA",
        "messages[0].agentic.role",
    ),
    (
        "media without source",
        agent_pb2.ReplyRequest(
            messages=[
                message_pb2.Message(
                    agentic=message_pb2.AgenticMessage(
                        role=message_pb2.ROLE_USER,
                        blocks=[
                            content_pb2.ContentBlock(image=content_pb2.MediaBlock(name="cat.png"))
                        ],
                    )
                )
            ]
        ),
        "INVALID_SCHEMA",
        "messages[0].agentic.blocks[0].image.source",
    ),
    (
        "tool result in an assistant message",
        agent_pb2.ReplyRequest(
            messages=[
                message_pb2.Message(
                    agentic=message_pb2.AgenticMessage(
                        role=message_pb2.ROLE_ASSISTANT,
                        blocks=[
                            content_pb2.ContentBlock(
                                tool_result=content_pb2.ToolResultBlock(call_id="c")
                            )
                        ],
                    )
                )
            ]
        ),
        "INVALID_SCHEMA",
        "messages[0].agentic.blocks[0].tool_result",
    ),
    (
        "oversized",
        agent_pb2.ReplyRequest(messages=[_flat_user("x" * 70_000)]),
        "REQUEST_TOO_LARGE",
        "messages",
    ),
    (
        "bad session id",
        agent_pb2.ReplyRequest(session_id="no spaces!", messages=[_flat_user("hi")]),
        "INVALID_SCHEMA",
        "session_id",
    ),
    (
        "unknown tool_choice",
        agent_pb2.ReplyRequest(
            messages=[_flat_user("hi")], options=agent_pb2.ReplyOptions(tool_choice="nope")
        ),
        "INVALID_OPTIONS",
        "options.tool_choice",
    ),
    (
        "model override not allowed",
        agent_pb2.ReplyRequest(
            messages=[_flat_user("hi")], options=agent_pb2.ReplyOptions(model="other")
        ),
        "INVALID_OPTIONS",
        "options.model",
    ),
]


async def test_bad_input_gets_invalid_argument_with_details_and_the_server_stays_up(
    start: Start,
) -> None:
    service = await start(max_request_bytes=65_536)
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        for name, request, reason, field in BAD_REQUESTS:
            call = stub.Reply(request, timeout=SHORT_TIMEOUT)
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                [r async for r in call]
            error = AgentClientError.from_rpc_error(exc.value)
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, name
            assert error.reason == reason, name
            assert [v.field for v in error.violations][:1] == [field], name
        # Still serving.
        responses = [
            r
            async for r in stub.Reply(
                agent_pb2.ReplyRequest(messages=[_flat_user("hi")]), timeout=SHORT_TIMEOUT
            )
        ]
        assert responses[-1].event.reply_end.finish_reason == 1
    # Beyond twice the limit gRPC itself refuses the message.
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        with pytest.raises(AgentClientError) as too_big:
            await client.text("x" * 200_000)
        assert too_big.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_unknown_sessions_are_not_found(start: Start) -> None:
    service = await start()
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        for call in (
            client.get_session("ghost"),
            client.interrupt("ghost"),
            client.delete_session("ghost"),
        ):
            with pytest.raises(AgentClientError) as exc:
                await call
            assert (exc.value.code, exc.value.reason) == (
                grpc.StatusCode.NOT_FOUND,
                "SESSION_NOT_FOUND",
            )
        with pytest.raises(AgentClientError) as exc:
            [
                e
                async for e in client.resume(
                    "ghost", confirmations=[Confirmation(call_id="c", confirmed=True)]
                )
            ]
        assert exc.value.reason == "SESSION_NOT_FOUND"


async def test_a_second_reply_on_a_busy_session_fails_precondition(start: Start) -> None:
    service = await start([{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        first = client.reply("go", session_id="s1")
        head = [await anext(first)]
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        with pytest.raises(AgentClientError) as exc:
            await client.text("me too", session_id="s1")
        assert (exc.value.code, exc.value.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "SESSION_BUSY",
        )
        session = await client.get_session("s1")
        assert session.status == "running"
        with pytest.raises(AgentClientError) as busy_delete:
            await client.delete_session("s1")
        assert busy_delete.value.reason == "SESSION_BUSY"
        GateState.release.set()
        rest = [e async for e in first]
        assert (head + rest)[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_interrupt_stops_a_running_reply(start: Start) -> None:
    service = await start([{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        consumer = asyncio.create_task(_collect(client.reply("go", session_id="s2")))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        assert await client.interrupt("s2") is True
        events = await asyncio.wait_for(consumer, SHORT_TIMEOUT)
        assert events[-1].finish_reason == "interrupted"
        assert await client.interrupt("s2") is False
        session = await client.get_session("s2")
        assert [r.state for m in session.context for r in tool_results(m)] == ["interrupted"]


async def _collect(stream: Any) -> list[Any]:
    return [e async for e in stream]


async def test_with_exit_durability_a_cancelled_call_interrupts_and_the_session_keeps_it(
    start: Start,
) -> None:
    service = await start([{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        reply = client.reply("go", session_id="s3", durability="exit")
        consumer = asyncio.create_task(_collect(reply))
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
        await service.servicer.drain(SHORT_TIMEOUT)
        session = await client.get_session("s3")
        assert session.status == "idle"
        assert text_of(session.context[0]) == "go"
        assert [r.state for m in session.context for r in tool_results(m)] == ["interrupted"]


@pytest.mark.parametrize("durability", ["step", "event"])
async def test_a_durable_reply_goes_on_after_its_caller_left_and_can_be_followed(
    start: Start, durability: str
) -> None:
    service = await start([{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"])
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        seen: list[Any] = []

        async def until_the_gate() -> None:
            async for event in client.reply("go", session_id="s5", durability=durability):  # type: ignore[arg-type]
                seen.append(event)

        consumer = asyncio.create_task(until_the_gate())
        async with asyncio.timeout(SHORT_TIMEOUT):
            await GateState.started.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
        running = await client.get_session("s5")
        assert running.status == "running"
        GateState.release.set()
        rest = [e async for e in client.watch("s5", after_seq=0)]
        assert rest[0].type == "reply_start"
        assert rest[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert text_of_events(rest) == "done"
        assert [e.type for e in seen] == [e.type for e in rest[: len(seen)]]
        session = await client.get_session("s5")
        assert session.status == "idle" and session.reply_id == rest[0].reply_id
        assert session.last_seq == len(rest)
        assert [r.state for m in session.context for r in tool_results(m)] == ["success"]
        tail = [e async for e in client.watch("s5", after_seq=len(rest) - 1)]
        assert [e.type for e in tail] == ["reply_end"]


async def test_watching_a_reply_that_never_was_is_not_found(start: Start) -> None:
    service = await start()
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        with pytest.raises(AgentClientError) as missing:
            [e async for e in client.watch("nobody")]
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
        assert missing.value.reason == "REPLY_NOT_FOUND"


async def test_a_paused_reply_resumes_after_a_restart(start: Start) -> None:
    turns = [
        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
        "deleted it",
    ]
    first = await start(turns)
    async with AgentClient(target(first), timeout=SHORT_TIMEOUT) as client:
        events = [e async for e in client.reply("clean up", session_id="s4")]
        assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
        session = await client.get_session("s4")
        assert session.status == "awaiting_confirmation"
        call_id = session.pending_calls[0].id
        with pytest.raises(AgentClientError) as paused:
            await client.text("something else", session_id="s4")
        assert paused.value.reason == "REPLY_PAUSED"
    await first.stop(1)
    second = await start(["deleted it"])  # a fresh process: its model continues the story
    async with AgentClient(target(second), timeout=SHORT_TIMEOUT) as client:
        with pytest.raises(AgentClientError) as wrong:
            [
                e
                async for e in client.resume(
                    "s4", confirmations=[Confirmation(call_id="nope", confirmed=True)]
                )
            ]
        assert (wrong.value.code, wrong.value.violations[0].field) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "confirmations[0].call_id",
        )
        resumed = [
            e
            async for e in client.resume(
                "s4", confirmations=[Confirmation(call_id=call_id, confirmed=True)]
            )
        ]
        assert resumed[0].reply_id == events[0].reply_id
        assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
        session = await client.get_session("s4")
        assert session.status == "idle"
        assert [r.text for m in session.context for r in tool_results(m)] == ["deleted /tmp/x"]
        with pytest.raises(AgentClientError) as nothing:
            [e async for e in client.resume("s4")]
        assert nothing.value.reason == "NO_PAUSED_REPLY"


async def test_resume_edits_the_arguments_of_a_confirmed_call(start: Start) -> None:
    turns = [
        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
        "deleted it",
    ]
    service = await start(turns, agent={"kind": "agentic"})
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        events = [e async for e in client.reply("clean up", session_id="s5")]
        call_id = events[-2].tool_calls[0].id  # type: ignore[union-attr]
        with pytest.raises(AgentClientError) as bad:
            [
                e
                async for e in client.resume(
                    "s5",
                    confirmations=[
                        Confirmation(call_id=call_id, confirmed=True, arguments='{"path": 1}')
                    ],
                )
            ]
        assert (bad.value.code, bad.value.reason, bad.value.violations[0].field) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_SCHEMA",
            "confirmations[0].arguments",
        )
        assert (await client.get_session("s5")).status == "awaiting_confirmation"
        edit = Confirmation(call_id=call_id, confirmed=True, arguments='{"path": "/tmp/y"}')
        resumed = [e async for e in client.resume("s5", confirmations=[edit])]
        assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
        session = await client.get_session("s5")
    assert [r.text for m in session.context for r in tool_results(m)] == ["deleted /tmp/y"]
    asked = next(m for m in session.context if tool_calls(m))
    assert tool_calls(asked)[0].arguments == '{"path": "/tmp/y"}'
    assert asked.metadata == {EDITED_CALLS_METADATA_KEY: {call_id: '{"path": "/tmp/x"}'}}


@pytest.mark.parametrize("durability", ["exit", "step"])
async def test_graceful_shutdown_stops_a_reply_after_the_grace_and_persists_it(
    start: Start, tmp_path: Path, durability: str
) -> None:
    """With exit durability the reply is interrupted; with step it is left at its last saved
    step, and the next start continues it: the gate had started and is not safe to run
    twice, so the user is asked, the reason saying its outcome is unknown."""
    service = await start([{"tool_calls": [{"name": "gate", "arguments": {}}]}, "done"])
    client = AgentClient(target(service), timeout=SHORT_TIMEOUT)
    reply = client.reply("go", session_id="s5", durability=durability)  # type: ignore[arg-type]
    consumer = asyncio.create_task(_collect(reply))
    async with asyncio.timeout(SHORT_TIMEOUT):
        await GateState.started.wait()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=SHORT_TIMEOUT
        )
        statuses = aiter(watch)
        assert (await anext(statuses)).status == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(service.stop(0.3))
        # Draining: health says NOT_SERVING while the in-flight reply still has its grace.
        assert (await anext(statuses)).status == health_pb2.HealthCheckResponse.NOT_SERVING
        await stopping
    if durability == "exit":
        # The reply overran the grace: it is interrupted, and its caller gets the end.
        ended = await consumer
        assert ended[-1].type == "reply_end" and ended[-1].finish_reason == "interrupted"
    else:
        # Handed over: the stream ends with REPLY_HANDED_OVER (nothing runs it to re-attach).
        with pytest.raises(AgentClientError) as left:
            await consumer
        assert left.value.reason == "REPLY_HANDED_OVER" or left.value.code.name == "UNAVAILABLE"
    await client.close()
    restarted = await start()
    async with AgentClient(target(restarted), timeout=SHORT_TIMEOUT) as again:
        if durability == "exit":
            session = await again.get_session("s5")
            assert [r.state for m in session.context for r in tool_results(m)] == ["interrupted"]
            return
        rest = [e async for e in again.watch("s5")]
        asked = [e for e in rest if e.type == "require_user_confirm"]
        assert [c.name for c in asked[0].tool_calls] == ["gate"]  # type: ignore[union-attr]
        assert "outcome of this call is unknown" in asked[0].reason  # type: ignore[union-attr]
        session = await again.get_session("s5")
        assert session.status == "awaiting_confirmation"
        assert [r.state for m in session.context for r in tool_results(m)] == []


async def test_list_and_delete_sessions(start: Start) -> None:
    service = await start()
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        for i in range(5):
            await client.text("hi", session_id=f"list-{i}")
        seen: list[str] = []
        token = ""
        while True:
            page, token = await client.list_sessions(page_size=2, page_token=token)
            assert len(page) <= 2
            seen.extend(s.session_id for s in page)
            if not token:
                break
        assert sorted(seen) == [f"list-{i}" for i in range(5)]
        await client.delete_session("list-0")
        with pytest.raises(AgentClientError):
            await client.get_session("list-0")
        with pytest.raises(AgentClientError) as bad:
            await client.list_sessions(page_token="garbage!")
        assert bad.value.violations[0].field == "page_token"


async def test_describe_agent_lists_its_tools_and_middlewares(start: Start) -> None:
    service = await start(
        agent={"name": "helper", "description": "Answers questions."},
        middlewares=[
            {"type": "local", "import": "hookmesh.middleware.builtin.tasks:TasksMiddleware"}
        ],
    )
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        info = await client.describe()
    assert (info.agent_name, info.description) == ("helper", "Answers questions.")
    assert info.middleware_keys == ["tasks"]
    by_name = {t.name: t for t in info.tools}
    assert [t.name for t in info.tools][:3] == ["echo", "gate", "delete_file"]
    assert by_name["echo"].read_only and by_name["echo"].middleware_key == ""
    assert by_name["delete_file"].needs_confirmation
    assert by_name["task_create"].middleware_key == "tasks"


async def test_the_sync_client(start: Start) -> None:
    service = await start(TOOL_THEN_ANSWER)

    def use() -> tuple[str, str]:
        with SyncAgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
            events = list(client.reply("hello", session_id="sync"))
            session = client.get_session("sync")
            try:
                client.get_session("nope")
            except AgentClientError as exc:
                reason = exc.reason
            return text_of_events(events) + "|" + session.status, reason

    text, reason = await asyncio.to_thread(use)
    assert text == "the answer|idle"
    assert reason == "SESSION_NOT_FOUND"


async def test_health_and_reflection_are_served(start: Start) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        status = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=SHORT_TIMEOUT
        )
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=SHORT_TIMEOUT
        )
        names = [s.name async for r in responses for s in r.list_services_response.service]
        assert SERVICE_NAME in names
    assert struct_pb2  # the well-known types are importable alongside


async def test_reflection_v1_is_served_too(start: Start) -> None:
    from grpc_reflection.v1alpha import reflection_pb2

    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        info = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        responses = info(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=SHORT_TIMEOUT
        )
        names = [s.name async for r in responses for s in r.list_services_response.service]
    assert SERVICE_NAME in names and "grpc.reflection.v1.ServerReflection" in names


async def test_a_session_the_service_accepted_can_be_read_back(start: Start) -> None:
    service = await start(turns=["ok"])
    big = "x" * (2_600_000)  # two requests under the 4 MiB limit; their session is ~5 MB
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        first = [e async for e in client.reply(big, session_id="large")]
        second = [e async for e in client.reply(big, session_id="large")]
        session = await client.get_session("large")
    assert first[-1].type == second[-1].type == "reply_end"
    assert [m.role for m in session.context] == ["user", "assistant", "user", "assistant"]


async def test_every_session_rpc_bounds_its_id_before_answering(start: Start) -> None:
    service = await start()
    long_id = "s" * 5000
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        for call in (
            client.get_session(long_id),
            client.interrupt(long_id),
            client.delete_session(long_id),
        ):
            with pytest.raises(AgentClientError) as exc:
                await call
            assert (exc.value.code, exc.value.reason) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_SCHEMA",
            )
        with pytest.raises(AgentClientError) as exc:
            [e async for e in client.resume(long_id, confirmations=[])]
        assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT


LIMITED_TURNS = [
    {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}] * 2},
    {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
    {"tool_calls": [{"name": "echo", "arguments": {"text": "b"}}] * 3},
    "done",
]


async def _resumed_states(start: Start, session_id: str, limits: Limits | None) -> list[str]:
    """The states of the tool results after resuming, with `limits` on the resume, a reply
    sent with 4 tool calls that made 3 (two echoes and the call it paused on)."""
    service = await start(LIMITED_TURNS)
    async with AgentClient(target(service), timeout=SHORT_TIMEOUT) as client:
        events = [
            e async for e in client.reply("go", session_id=session_id, limits=Limits(tool_calls=4))
        ]
        assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
        (call,) = (await client.get_session(session_id)).pending_calls
        yes = Confirmation(call_id=call.id, confirmed=True)
        resumed = [e async for e in client.resume(session_id, confirmations=[yes], limits=limits)]
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    return [e.state for e in resumed if e.type == "tool_result_end"]  # type: ignore[union-attr]


async def test_a_resume_without_limits_keeps_what_the_reply_had_left(start: Start) -> None:
    """The reply's caller limits hold across the pause: one call was left, so after the
    approved call runs only one of the three echoes may."""
    states = await _resumed_states(start, "left", None)
    assert states == ["success", "success", "denied", "denied"]


async def test_limits_sent_with_a_resume_replace_the_replys_in_full(start: Start) -> None:
    """Calls sent with the resume are the caller's own count of what is left (not the
    reply's 4 again, nor the one it had left); the approved call took its call before the
    pause, so they all go to the echoes."""
    states = await _resumed_states(start, "sent", Limits(tool_calls=2))
    assert states == ["success", "success", "success", "denied"]
    more = await _resumed_states(start, "more", Limits(tool_calls=3))
    assert more == ["success"] * 4
