"""The remote protocol's contract on the agent's side, one rule per test, on both kinds;
misbehaving sidecars are scripted at the message level."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware import Middleware
from hookmesh.models import ChatModel, ModelChunk, ScriptedChatModel, ScriptedTurn
from hookmesh.remote import (
    SERVICE_NAME,
    MiddlewareServicer,
    RemoteMiddleware,
    SidecarError,
    serve_middleware,
)
from hookmesh.schema import (
    Message,
    MessageKind,
    make_hint,
    make_user_text,
    message_to_proto,
    text_of,
)
from hookmesh.server import RunningServer
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.v1 import event_pb2
from hookmesh.v1 import middleware_pb2 as pb
from tests import middlewares as mws
from tests import remote_middlewares as rmws
from tests.agent_helpers import SHORT_TIMEOUT, collect, customs, echo, report
from tests.scripted_sidecar import (
    BreakStream,
    ScriptedSidecar,
    describe,
    pass_through,
    response,
    serve_scripted,
)
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(60)

ANSWER = "a fairly long answer streamed in many small chunks"

Connect = Callable[..., Awaitable[RemoteMiddleware]]


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    """Serve a scripted sidecar (or a middleware) on loopback; connect a RemoteMiddleware."""
    servers: list[RunningServer] = []
    remotes: list[RemoteMiddleware] = []

    async def start(sidecar: ScriptedSidecar | Middleware, **options: Any) -> RemoteMiddleware:
        if isinstance(sidecar, ScriptedSidecar):
            running = await serve_scripted(sidecar)
        else:
            running = await serve_middleware(sidecar)
        servers.append(running)
        remote = await RemoteMiddleware.connect(
            f"127.0.0.1:{running.port}", **{"timeout": SHORT_TIMEOUT, **options}
        )
        remotes.append(remote)
        return remote

    try:
        yield start
    finally:
        for remote in remotes:
            await remote.aclose()
        for running in servers:
            await running.stop(None)


def streaming(kind: MessageKind, middlewares: Sequence[Middleware], **kw: Any) -> Agent:
    model = ScriptedChatModel([ANSWER], stream=True, chunk_size=4)
    return Agent(model, kind=kind, middlewares=middlewares, tools=[echo], **kw)


def text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "text_block_delta")


def error_of(events: list[Any]) -> Any:
    end = events[-1]
    assert end.type == "reply_end" and end.finish_reason == "error", end
    return end.error


# --- 1. done{model_response} answering stream_end -------------------------------------------


def _replace_answer(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
    if request.WhichOneof("message") == "outcome" and request.outcome.WhichOneof("result") in (
        "stream_end",
        "model_response",
    ):
        message = message_to_proto(make_user_text("flat", "x"))
        message.flat.role = 3  # ROLE_ASSISTANT
        done = pb.HookDone(model_response=pb.ModelResponse(message=message))
        return [response(request.invocation_id, done=done)]
    return pass_through(request)


@pytest.mark.parametrize("stream", [False, True], ids=["full", "stream"])
async def test_a_replacement_response_is_refused_after_a_streamed_answer(
    kind: MessageKind, connect: Connect, stream: bool
) -> None:
    remote = await connect(ScriptedSidecar(describe(pb.HOOK_ON_MODEL_CALL), _replace_answer))
    model = ScriptedChatModel([ANSWER], stream=stream, chunk_size=4)
    agent = Agent(model, kind=kind, middlewares=[remote])
    events = await collect(agent.reply("go"))
    if not stream:
        # A full response is replaced.
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert agent.final_message is not None and text_of(agent.final_message) == "x"
        return
    # The chunks already went upstream: the replacement is refused, never silently dropped.
    error = error_of(events)
    assert error.reason == "SIDECAR_PROTOCOL_ERROR"
    assert error.source == "middleware:scripted"
    assert text(events) == ANSWER


# --- 2. emits get the reply's id ----------------------------------------------------------------


def _emit_with(reply_id: str) -> Callable[[pb.InterceptRequest], list[pb.InterceptResponse] | None]:
    def answer(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "invocation":
            custom = event_pb2.AgentEvent(reply_id=reply_id, custom=event_pb2.CustomEvent(name="n"))
            return [response(request.invocation_id, emit=custom), *pass_through(request)]
        return pass_through(request)

    return answer


async def test_an_emit_without_reply_id_gets_the_replys_and_another_replys_is_refused(
    kind: MessageKind, connect: Connect
) -> None:
    remote = await connect(ScriptedSidecar(describe(pb.HOOK_ON_REASONING), _emit_with("")))
    events = await collect(streaming(kind, [remote]).reply("go"))
    assert [e.reply_id for e in customs(events)] == [events[0].reply_id]
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    other = await connect(ScriptedSidecar(describe(pb.HOOK_ON_REASONING), _emit_with("other")))
    events = await collect(streaming(kind, [other]).reply("go"))
    assert error_of(events).reason == "SIDECAR_PROTOCOL_ERROR"
    assert not customs(events)


# --- 3. the prompt travels with needs_context only, and only then may be replaced -------------


@pytest.mark.parametrize("probe", [rmws.PromptOverride, rmws.ContextPromptOverride])
async def test_only_a_sidecar_that_sees_the_prompt_may_replace_it(
    kind: MessageKind, connect: Connect, probe: type[rmws.PromptOverride]
) -> None:
    remote = await connect(probe())
    prompts: list[list[Message]] = []

    def script(messages: Sequence[Message], *unused: Any) -> ScriptedTurn:
        prompts.append(list(messages))
        return ScriptedTurn(text="answer")

    agent = Agent(ScriptedChatModel(script), kind=kind, system_prompt="base", middlewares=[remote])
    events = await collect(agent.reply("go"))
    if probe.needs_context:
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
        assert [text_of(m) for m in prompts[0]] == ["overridden"]
        return
    error = error_of(events)
    assert error.reason == "SIDECAR_PROTOCOL_ERROR"
    assert prompts == []


# --- 4. a sidecar dying during a model stream fails a fail_closed reply at once --------------


class _Stalls(ChatModel):
    """Streams one chunk, then waits for ever (the test's deadline bounds it)."""

    stream = True

    async def __call__(self, messages: Sequence[Message], **kwargs: Any) -> Any:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ModelChunk]:
        yield ModelChunk(text="first ")
        await asyncio.Event().wait()
        yield ModelChunk(text="never")


def _dies_at_stream_start(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
    if request.WhichOneof("message") == "outcome":
        raise BreakStream
    return pass_through(request)


async def test_a_sidecar_dying_mid_stream_ends_a_fail_closed_reply_without_waiting(
    kind: MessageKind, connect: Connect
) -> None:
    remote = await connect(ScriptedSidecar(describe(pb.HOOK_ON_MODEL_CALL), _dies_at_stream_start))
    agent = Agent(_Stalls(), kind=kind, middlewares=[remote])
    events = await collect(agent.reply("go"))
    error = error_of(events)
    assert error.reason == "SIDECAR_UNAVAILABLE"
    assert error.source == "middleware:scripted"
    assert text(events) == "first "


# --- 5. fail_open releases the event held for a verdict ---------------------------------------


def _dies_at_first_item(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
    if request.WhichOneof("message") == "item":
        raise BreakStream
    return pass_through(request)


async def test_fail_open_releases_the_event_held_for_a_verdict(
    kind: MessageKind, connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = ScriptedSidecar(
        describe(pb.HOOK_ON_REASONING, subscriptions=("text_block_delta",)), _dies_at_first_item
    )
    remote = await connect(sidecar, failure_mode="fail_open")
    events = await collect(streaming(kind, [remote]).reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert text(events) == ANSWER
    assert "skipped (fail_open)" in caplog.text


# --- 6. a sidecar with the context may delete any message; one without may not ------------------


async def test_deleting_a_message_works_remotely_as_in_process(
    kind: MessageKind, attach: Any
) -> None:
    agent = streaming(kind, [await attach(rmws.Forgetter())])
    events = await collect(
        agent.reply([make_user_text(kind, "forget me"), make_user_text(kind, "hi")])
    )
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert [text_of(m) for m in agent.state.context] == ["hi", ANSWER]


def _mutate(mutation: pb.StateMutation) -> Callable[[pb.InterceptRequest], Any]:
    def answer(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "invocation":
            return [response(request.invocation_id, mutate=mutation), *pass_through(request)]
        return pass_through(request)

    return answer


@pytest.mark.parametrize("change", ["remove", "replace"])
async def test_a_sidecar_without_the_context_may_not_change_others_messages(
    kind: MessageKind, connect: Connect, change: str
) -> None:
    user = make_user_text(kind, "keep me", id="u1")
    theirs = make_hint(kind, "someone else's", "rag", id="h-theirs")
    mutation = (
        pb.StateMutation(remove_message_ids=["u1", "h-theirs"])
        if change == "remove"
        else pb.StateMutation(replace_context=pb.MessageList())
    )
    remote = await connect(ScriptedSidecar(describe(pb.HOOK_ON_REASONING), _mutate(mutation)))
    agent = streaming(kind, [remote])
    agent.state.context.append(theirs)
    events = await collect(agent.reply(user))
    error = error_of(events)
    assert error.reason == "SIDECAR_PROTOCOL_ERROR"
    assert [m.id for m in agent.state.context][:2] == ["h-theirs", "u1"]


async def test_a_sidecar_without_the_context_removes_its_own_hints(
    kind: MessageKind, connect: Connect
) -> None:
    mine = make_hint(kind, "retrieved passages", "scripted", id="h-mine")
    mutation = pb.StateMutation(remove_message_ids=["h-mine"])
    remote = await connect(ScriptedSidecar(describe(pb.HOOK_ON_REASONING), _mutate(mutation)))
    agent = streaming(kind, [remote])
    agent.state.context.append(mine)
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert "h-mine" not in [m.id for m in agent.state.context]


# --- 7. the sidecar's preferred failure mode applies when none is configured --------------------


async def test_the_sidecars_failure_mode_applies_unless_configured(
    kind: MessageKind, connect: Connect
) -> None:
    preferred = await connect(rmws.PrefersFailOpen())
    assert preferred.failure_mode == "fail_open"
    events = await collect(streaming(kind, [preferred]).reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    configured = await connect(rmws.PrefersFailOpen(), failure_mode="fail_closed")
    events = await collect(streaming(kind, [configured]).reply("go"))
    assert error_of(events).reason == "MIDDLEWARE_FAILED"
    entry = load_config(None, middlewares=[{"type": "remote", "target": "x:1"}]).middlewares[0]
    assert entry.failure_mode is None  # type: ignore[union-attr]


# --- 8. a fail_open sidecar that is down does not stop the agent ---------------------------------


def _free_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_a_fail_open_sidecar_down_at_start_is_skipped_then_picked_up(
    kind: MessageKind, caplog: pytest.LogCaptureFixture
) -> None:
    address = _free_address()
    remote = await RemoteMiddleware.connect(address, failure_mode="fail_open", timeout=2.0)
    try:
        assert "skipped until it does" in caplog.text
        events = await collect(streaming(kind, [mws.CallCounter(), remote]).reply("go"))
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
        async with sidecar_process("tests.remote_middlewares:Staller", listen=address):
            await remote.wait_ready(SHORT_TIMEOUT)
            events = await collect(streaming(kind, [remote]).reply("back"))
            assert report(events, "Staller") == {"served": True}
    finally:
        await remote.aclose()
    with pytest.raises(SidecarError) as refused:
        await RemoteMiddleware.connect(_free_address(), timeout=0.5)
    assert refused.value.reason == "SIDECAR_UNAVAILABLE"


async def test_the_agent_service_starts_with_a_fail_open_sidecar_down() -> None:
    config = load_config(
        None,
        store="sqlite:///:memory:",
        middlewares=[
            {"type": "remote", "target": _free_address(), "failure_mode": "fail_open", "timeout": 1}
        ],
    )
    service = await start_agent_service(config, address="127.0.0.1:0")
    await service.stop(None)


# --- 9. subscriptions are validated ------------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "name"),
    [(pb.HOOK_ON_REASONING, "model_call_ended"), (pb.HOOK_ON_REASONING, "chunk")],
)
async def test_unknown_subscriptions_are_refused_at_describe(
    connect: Connect, hook: int, name: str
) -> None:
    with pytest.raises(SidecarError) as refused:
        await connect(ScriptedSidecar(describe(hook, subscriptions=(name,))))
    assert refused.value.reason == "SIDECAR_PROTOCOL_ERROR"
    assert "valid: custom, data_block_delta" in refused.value.message
    assert "model_call_end," in refused.value.message


async def test_a_middleware_with_a_bad_subscription_is_not_served() -> None:
    class Typo(rmws.Quiet):
        subscriptions = {"on_reasoning": ("model_call_ended",)}  # noqa: RUF012

    with pytest.raises(ValueError, match="on_reasoning has no item 'model_call_ended'"):
        MiddlewareServicer(Typo())


async def test_a_valid_subscription_sees_its_items(kind: MessageKind, connect: Connect) -> None:
    sidecar = ScriptedSidecar(describe(pb.HOOK_ON_MODEL_CALL, subscriptions=("chunk",)))
    remote = await connect(sidecar)
    await collect(streaming(kind, [remote]).reply("go"))
    chunks = [r.item.chunk.text for r in sidecar.requests if r.WhichOneof("message") == "item"]
    assert "".join(chunks) == ANSWER


# --- the message deadline ----------------------------------------------------------------------


async def test_the_invocation_carries_the_message_deadline(connect: Connect) -> None:
    sidecar = ScriptedSidecar(describe(pb.HOOK_ON_REASONING))
    remote = await connect(sidecar, timeout=2.5)
    await collect(streaming("flat", [remote]).reply("go"))
    assert sidecar.requests[0].invocation.message_timeout.ToMilliseconds() == 2500


# --- read-only subscriptions ---------------------------------------------------------------


async def test_read_only_items_are_sent_in_order_and_never_awaited(
    kind: MessageKind, connect: Connect
) -> None:
    def silent_on_items(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "item":
            return None  # a verdict would be a protocol error: none is awaited
        return pass_through(request)

    sidecar = ScriptedSidecar(describe(pb.HOOK_ON_REPLY, read_only=("*",)), silent_on_items)
    remote = await connect(sidecar)
    events = await collect(streaming(kind, [remote]).reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    messages = [r.item for r in sidecar.requests if r.HasField("item")]
    items = [e.WhichOneof("event") for m in messages for e in (m.event, *m.more_events)]
    assert items == [e.type for e in events]
    # What queued up while the stream was busy went out coalesced, in order.
    assert len(messages) < len(items)


async def test_a_read_only_watcher_keeps_state_as_in_process(
    kind: MessageKind, attach: Any
) -> None:
    events = await collect(streaming(kind, [await attach(rmws.Watcher())]).reply("go"))
    seen = report(events, "Watcher")["seen"]
    assert seen == [e.type for e in events if e.type != "custom"]


async def test_a_pass_through_function_costs_one_round_trip(kind: MessageKind) -> None:
    running = await serve_middleware(rmws.PassThroughFunction())
    remote = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}", timeout=SHORT_TIMEOUT)
    try:
        events = await collect(streaming(kind, [remote]).reply("go"))
        assert text(events) == ANSWER
        # call_next says "final": no items, no outcome, no done.
        assert dict(running.servicers[SERVICE_NAME].received) == {"invocation": 1}
    finally:
        await remote.aclose()
        await running.stop(None)


# --- the model override ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fast", "missing"])
async def test_a_middleware_may_call_a_configured_model_by_name(
    kind: MessageKind, attach: Any, name: str
) -> None:
    fast = ScriptedChatModel(["the fast model's answer"])
    agent = Agent(
        ScriptedChatModel(["the default answer"]),
        kind=kind,
        models={"fast": fast, "default": ScriptedChatModel([])},
        middlewares=[await attach(rmws.ModelChooser(name))],
    )
    events = await collect(agent.reply("go"))
    if name == "fast":
        assert agent.final_message is not None
        assert text_of(agent.final_message) == "the fast model's answer"
        return
    error = error_of(events)
    assert error.reason == "UNKNOWN_MODEL"
    assert error.metadata["model"] == "missing"
    assert "configured: default, fast" in error.message


# --- Unix-domain sockets -------------------------------------------------------------------------


async def test_a_sidecar_on_a_unix_socket(kind: MessageKind, tmp_path: Any) -> None:
    target = f"unix://{tmp_path}/in-process.sock"
    running = await serve_middleware(mws.CallCounter(), target)
    remote = await RemoteMiddleware.connect(target, timeout=SHORT_TIMEOUT)
    try:
        events = await collect(streaming(kind, [remote]).reply("go"))
        assert report(events, "CallCounter")["calls"] == 1
    finally:
        await remote.aclose()
        await running.stop(None)
    listen = f"unix://{tmp_path}/process.sock"
    async with sidecar_process("tests.middlewares:CallCounter", listen=listen) as process:
        assert process.address == listen
        remote = await RemoteMiddleware.connect(listen, timeout=SHORT_TIMEOUT)
        try:
            events = await collect(streaming(kind, [remote]).reply("go"))
            assert report(events, "CallCounter")["calls"] == 1
        finally:
            await remote.aclose()


async def test_a_final_verdict_ends_the_invocation_early(
    kind: MessageKind, connect: Connect
) -> None:
    def final_at_first_item(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "item":
            verdict = pb.ItemVerdict(drop=True, final=True)
            return [response(request.invocation_id, verdict=verdict)]
        return pass_through(request)

    sidecar = ScriptedSidecar(
        describe(pb.HOOK_ON_REASONING, subscriptions=("text_block_delta",)), final_at_first_item
    )
    remote = await connect(sidecar)
    events = await collect(streaming(kind, [remote]).reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # The first delta was dropped; the rest passed with no message and no outcome was sent.
    assert text(events) == ANSWER[4:]
    assert [r.WhichOneof("message") for r in sidecar.requests] == ["invocation", "item"]
