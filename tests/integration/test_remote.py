"""Remote middleware beyond parity: subscriptions, modes, faults, security, privacy."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.agent import Agent
from hookmesh.client import AgentClientError
from hookmesh.middleware import Middleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.remote import SERVICE_NAME as MW_SERVICE
from hookmesh.remote import ClientTLS, RemoteMiddleware, ServerTLS, SidecarError, serve_middleware
from hookmesh.schema import MessageKind
from hookmesh.server import RunningServer
from hookmesh.v1 import middleware_pb2, middleware_pb2_grpc
from tests import middlewares as mws
from tests import remote_middlewares as rmws
from tests.agent_helpers import SHORT_TIMEOUT, collect, echo, report, types
from tests.served_middleware import Serve
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(60)

RECONNECT_DEADLINE = 3.0
"""A message deadline longer than the channel's longest reconnect back-off (1 s)."""


@pytest.fixture(params=["flat", "agentic"])
def kind(request: pytest.FixtureRequest) -> MessageKind:
    return request.param  # type: ignore[no-any-return]


def received(running: RunningServer) -> dict[str, int]:
    return dict(running.servicers[MW_SERVICE].received)


def streaming_agent(kind: MessageKind, middlewares: list[Middleware], **kw: Any) -> Agent:
    model = ScriptedChatModel(
        ["a fairly long answer streamed in many small chunks"], stream=True, chunk_size=4
    )
    return Agent(model, kind=kind, middlewares=middlewares, tools=[echo], **kw)


# --- subscriptions and modes -------------------------------------------------------------------


async def test_unsubscribed_events_pass_with_no_message_to_the_sidecar(
    kind: MessageKind, serve: Serve
) -> None:
    running, remote = await serve(rmws.Quiet())
    events = await collect(streaming_agent(kind, [remote]).reply("go"))
    assert types(events).count("text_block_delta") > 10
    assert received(running) == {"invocation": 1, "outcome": 1}


async def test_subscribed_events_are_the_only_ones_forwarded(
    kind: MessageKind, serve: Serve
) -> None:
    running, remote = await serve(rmws.EndOnly())
    events = await collect(streaming_agent(kind, [remote]).reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert received(running) == {"invocation": 1, "item": 1, "outcome": 1}


async def test_an_emit_after_a_verdict_waits_for_the_next_answer(
    kind: MessageKind, serve: Serve
) -> None:
    """A hook that re-yields an item, then yields its own event (the sidecar sends the
    verdict, then the emit) is not a hook ending early, even when the emit is already there
    when the agent pulls on: the downstream runs to its end."""
    from hookmesh.suite.demo import AuditTrail, get_weather

    running, remote = await serve(AuditTrail())
    turns = [ScriptedTurn(tool_calls=[("get_weather", {"city": "Oslo"})]), "Cold."]
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[get_weather], middlewares=[remote])
    events = []
    async with asyncio.timeout(SHORT_TIMEOUT):
        async for event in agent.reply("go"):
            events.append(event)
            if event.type == "tool_result_end":
                # The consumer is slow: the emit reaches the agent before it pulls again.
                # (Polled: nothing signals a message put in an invocation's inbox.)
                invocations = remote.link._stream.invocations.values()  # type: ignore[union-attr]
                while not any(len(inv.inbox) for inv in invocations):  # noqa: ASYNC110
                    await asyncio.sleep(0)
    assert events[-1].finish_reason == "completed"  # type: ignore[attr-defined]
    kinds = types(events)
    assert kinds.index("tool_result_end") < kinds.index("custom")
    assert received(running) == {"invocation": 1, "item": 1, "outcome": 1}


async def test_a_final_verdict_lets_the_rest_pass_with_no_message(
    kind: MessageKind, serve: Serve
) -> None:
    """pass_rest at the first text delta: that delta is kept with `verdict {final}`, the
    rest of the step reaches the client as with no middleware, nothing more goes to the
    sidecar (no item, no outcome) and nothing the hook yields afterwards is sent."""
    plain = await collect(streaming_agent(kind, []).reply("go"))
    running, remote = await serve(rmws.PassesRestAtFirstDelta())
    events = await collect(streaming_agent(kind, [remote]).reply("go"))
    assert types(events) == types(plain)
    assert [e.delta for e in events if e.type == "text_block_delta"] == [  # type: ignore[union-attr]
        e.delta
        for e in plain
        if e.type == "text_block_delta"  # type: ignore[union-attr]
    ]
    kinds = types(events)
    items_before_delta = kinds[kinds.index("reply_start") + 1 : kinds.index("text_block_delta")]
    assert received(running) == {"invocation": 1, "item": len(items_before_delta) + 1}


async def test_pre_only_costs_one_message_and_still_overrides(
    kind: MessageKind, serve: Serve
) -> None:
    running, remote = await serve(rmws.PreOnlyNoTools())
    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("echo", {"text": "x"})])])
    events = await collect(Agent(model, kind=kind, tools=[echo], middlewares=[remote]).reply("go"))
    assert model.last_tool_choice == "none"
    assert "tool_call_start" not in types(events)
    assert received(running) == {"invocation": 1}
    # The sidecar's side of the invocation ends too: nothing is left waiting for more.
    sidecar_tasks = [t for t in asyncio.all_tasks() if "_Session._run" in repr(t.get_coro())]
    await asyncio.wait_for(asyncio.gather(*sidecar_tasks), SHORT_TIMEOUT)


@pytest.mark.parametrize(("mode", "answers"), [("pre_only", 0), ("observe", 1)])
async def test_permission_and_compression_hooks_honour_their_mode(
    kind: MessageKind, serve: Serve, mode: str, answers: int
) -> None:
    """pre_only: the invocation alone; observe: the invocation and the outcome, never
    waited for (a 1 s deadline would fail the reply if the agent waited)."""
    watcher = rmws.WatchesChecks(mode)  # type: ignore[arg-type]
    running, remote = await serve(watcher, timeout=1)
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), "done"]
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[echo], middlewares=[remote])
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    assert [(e.state, e.type) for e in events if e.type == "tool_result_end"] == [
        ("success", "tool_result_end")
    ]
    async with asyncio.timeout(SHORT_TIMEOUT):
        hooks = sorted([await watcher.finished.get() for _ in range(3)])
    assert hooks == ["on_check_permission", "on_compress_context", "on_compress_context"]
    assert received(running) == {"invocation": 3, **({"outcome": 3} if answers else {})}


async def test_observe_hooks_never_delay_the_reply(kind: MessageKind, serve: Serve) -> None:
    stuck = rmws.Stuck("observe")
    running, remote = await serve(stuck)
    events = await collect(streaming_agent(kind, [remote]).reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    # The sidecar got the invocation (and is still stuck in it) although the reply is over.
    async with asyncio.timeout(SHORT_TIMEOUT):
        await stuck.entered.wait()
    assert received(running)["invocation"] == 1


# --- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed"])
async def test_a_silent_sidecar_hits_the_message_deadline(
    kind: MessageKind, serve: Serve, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = rmws.Stuck()
    _, remote = await serve(stuck, timeout=0.2, failure_mode=mode)
    events = await collect(streaming_agent(kind, [remote]).reply("go"))
    end = events[-1]
    if mode == "fail_open":
        assert end.finish_reason == "completed"  # type: ignore[union-attr]
        assert "skipped (fail_open)" in caplog.text
    else:
        assert end.finish_reason == "error"  # type: ignore[union-attr]
        assert end.error.source == "middleware:Stuck"  # type: ignore[union-attr]
        assert end.error.reason == "SIDECAR_DEADLINE_EXCEEDED"  # type: ignore[union-attr]
        assert end.error.metadata["hook"] == "on_reasoning"  # type: ignore[union-attr]
        assert end.error.metadata["timeoutSeconds"] == "0.2"  # type: ignore[union-attr]
    # The abandoned invocation was cancelled in the sidecar.
    async with asyncio.timeout(SHORT_TIMEOUT):
        await stuck.cancelled.wait()


async def test_a_cancelled_reply_cancels_its_open_invocations(
    kind: MessageKind, serve: Serve
) -> None:
    stuck = rmws.Stuck()
    _, remote = await serve(stuck)
    consumer = asyncio.create_task(collect(streaming_agent(kind, [remote]).reply("go")))
    async with asyncio.timeout(SHORT_TIMEOUT):
        await stuck.entered.wait()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    async with asyncio.timeout(SHORT_TIMEOUT):
        await stuck.cancelled.wait()


async def test_connecting_to_nothing_fails_clearly() -> None:
    with pytest.raises(SidecarError) as refused:
        await RemoteMiddleware.connect("127.0.0.1:1", timeout=0.5)
    assert refused.value.reason == "SIDECAR_UNAVAILABLE"
    assert refused.value.metadata["grpcCode"] == "DEADLINE_EXCEEDED"


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed"])
async def test_killing_the_sidecar_mid_reply_never_hangs_and_it_reconnects(
    kind: MessageKind, mode: str
) -> None:
    async with sidecar_process("tests.remote_middlewares:Staller") as first:
        remote = await RemoteMiddleware.connect(
            first.address, timeout=RECONNECT_DEADLINE, failure_mode=mode
        )  # type: ignore[arg-type]
        try:
            consumer = asyncio.create_task(collect(streaming_agent(kind, [remote]).reply("stall")))
            assert await first.line() == "entered"
            await first.kill()
            events = await asyncio.wait_for(consumer, SHORT_TIMEOUT)
            expected = "completed" if mode == "fail_open" else "error"
            assert events[-1].finish_reason == expected  # type: ignore[union-attr]
            if mode == "fail_closed":
                error = events[-1].error  # type: ignore[union-attr]
                assert error.source == "middleware:Staller"
                assert error.reason == "SIDECAR_UNAVAILABLE"
                assert error.metadata["grpcCode"] == "UNAVAILABLE"
            # While it is down, a reply waits for it within the message deadline, then its
            # failure mode decides.
            down = await collect(streaming_agent(kind, [remote]).reply("again"))
            assert down[-1].finish_reason == expected  # type: ignore[union-attr]
            # It comes back on the same address: the very next reply goes through it again
            # (re-described; it waits out the channel's reconnect instead of failing).
            async with sidecar_process("tests.remote_middlewares:Staller", listen=first.address):
                back = await collect(streaming_agent(kind, [remote]).reply("back"))
                assert back[-1].finish_reason == "completed"  # type: ignore[union-attr]
                assert report(back, "Staller") == {"served": True}
                await remote.aclose()
        finally:
            await remote.aclose()


# --- security ----------------------------------------------------------------------------------


async def test_the_bearer_token_is_required(kind: MessageKind) -> None:
    running = await serve_middleware(mws.CallCounter(), token="s3cret")
    target = f"127.0.0.1:{running.port}"
    try:
        for token in (None, "wrong"):
            with pytest.raises(SidecarError) as refused:
                await RemoteMiddleware.connect(target, timeout=SHORT_TIMEOUT, token=token)
            assert refused.value.metadata["grpcCode"] == "UNAUTHENTICATED"
        async with grpc.aio.insecure_channel(target) as channel:
            stub = middleware_pb2_grpc.MiddlewareServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await stub.Describe(middleware_pb2.DescribeRequest(), timeout=SHORT_TIMEOUT)
            assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=MW_SERVICE), timeout=SHORT_TIMEOUT
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        remote = await RemoteMiddleware.connect(target, timeout=SHORT_TIMEOUT, token="s3cret")
        try:
            events = await collect(streaming_agent(kind, [remote]).reply("go"))
            assert report(events, "CallCounter")["calls"] == 1
        finally:
            await remote.aclose()
    finally:
        await running.stop(None)


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mtls"])
async def test_tls_and_mutual_tls(kind: MessageKind, pki: dict[str, bytes], mutual: bool) -> None:
    server_tls = ServerTLS(pki["server_cert"], pki["server_key"], pki["ca"] if mutual else None)
    running = await serve_middleware(mws.CallCounter(), tls=server_tls)
    target = f"127.0.0.1:{running.port}"
    client = ClientTLS(
        ca_cert=pki["ca"],
        client_cert=pki["client_cert"] if mutual else None,
        client_key=pki["client_key"] if mutual else None,
    )
    try:
        with pytest.raises(SidecarError):
            await RemoteMiddleware.connect(
                target, timeout=0.3, tls=ClientTLS(ca_cert=pki["other_ca"])
            )
        if mutual:
            with pytest.raises(SidecarError):
                await RemoteMiddleware.connect(
                    target, timeout=0.3, tls=ClientTLS(ca_cert=pki["ca"])
                )
        remote = await RemoteMiddleware.connect(target, timeout=SHORT_TIMEOUT, tls=client)
        try:
            events = await collect(streaming_agent(kind, [remote]).reply("go"))
            assert report(events, "CallCounter")["calls"] == 1
        finally:
            await remote.aclose()
    finally:
        await running.stop(None)


@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("rpc", ["TransformSystemPrompt", "AfterAgent", "Intercept"])
async def test_a_non_finite_number_in_a_hooks_state_is_invalid(rpc: str, number: float) -> None:
    """A state slice is JSON: a NaN or infinity nested anywhere in it is the caller's error
    (INVALID_ARGUMENT for a unary hook; on the shared stream the invocation alone ends, at
    once, and the stream serves on)."""
    running = await serve_middleware(mws.PromptSuffix(" more"))
    state = struct_pb2.Struct()
    state.fields["deep"].list_value.values.add().struct_value.fields["n"].number_value = number
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = middleware_pb2_grpc.MiddlewareServiceStub(channel)
            if rpc == "Intercept":
                invocation = middleware_pb2.HookInvocation(
                    hook=middleware_pb2.HOOK_ON_REASONING, reply_id="r", state=state
                )
                first = middleware_pb2.InterceptRequest(invocation_id="1", invocation=invocation)
                call = stub.Intercept(timeout=SHORT_TIMEOUT)
                await call.write(first)
                async with asyncio.timeout(SHORT_TIMEOUT):
                    answer = await call.read()
                assert answer.invocation_id == "1"
                assert answer.done.error.reason == "INVALID_SCHEMA"
                assert "invocation.state" in answer.done.error.message
                call.cancel()
            else:
                request: Any = (
                    middleware_pb2.TransformSystemPromptRequest(prompt="p", state=state)
                    if rpc == "TransformSystemPrompt"
                    else middleware_pb2.AfterAgentRequest(reply_id="r", state=state)
                )
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await getattr(stub, rpc)(request, timeout=SHORT_TIMEOUT)
                error = AgentClientError.from_rpc_error(refused.value)
                assert error.code == grpc.StatusCode.INVALID_ARGUMENT
                assert error.reason == "INVALID_SCHEMA"
                assert [v.field for v in error.violations] == ["state"]
            good = middleware_pb2.TransformSystemPromptRequest(prompt="p", reply_id="r")
            answer = await stub.TransformSystemPrompt(good, timeout=SHORT_TIMEOUT)
            assert answer.prompt == "p more"
    finally:
        await running.stop(None)


# --- privacy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("probe", [rmws.SliceProbe, rmws.ContextProbe])
async def test_the_sidecar_sees_only_its_slice_and_context_only_if_asked(
    kind: MessageKind, serve: Serve, probe: type[rmws.SliceProbe]
) -> None:
    _, remote = await serve(probe())
    agent = streaming_agent(kind, [mws.CallCounter(), remote])
    agent.state.middle_context["Unrelated"] = {"old-reply": {"secret": "s"}}
    events = await collect(agent.reply("go"))
    seen = report(events, probe.__name__)
    assert seen["keys"] == [probe.__name__]
    assert seen["replies"] == [events[0].reply_id]
    assert seen["context"] == (1 if probe.needs_context else 0)
    assert report(events, "CallCounter")["calls"] == 1


async def test_a_sidecar_tool_keeps_every_flag(serve: Serve) -> None:
    """What retry, permission and concurrency decide by must survive the trip."""
    from hookmesh.agent import tool

    @tool(read_only=True, concurrency_safe=True, idempotent=True, needs_confirmation=True)
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return key

    class Gives(Middleware):
        def list_tools(self) -> list[Any]:
            return [lookup]

    _, remote = await serve(Gives())
    [proxy] = remote.list_tools()
    flags = ("read_only", "concurrency_safe", "idempotent", "needs_confirmation", "return_directly")
    assert {f: getattr(proxy, f) for f in flags} == {f: getattr(lookup, f) for f in flags}


async def test_a_model_response_cannot_replace_a_stream_under_way(
    kind: MessageKind, serve: Serve
) -> None:
    """The sidecar answers with a full response while the agent relays the model's stream:
    refused as a protocol error (the stream's start already went upstream), never dropped."""
    from hookmesh.models import ModelResponse
    from hookmesh.schema import make_assistant

    never = asyncio.Event()

    class Hanging(ScriptedChatModel):
        async def __call__(self, messages: Any, **kw: Any) -> Any:
            return self._hang()

        async def _hang(self) -> AsyncIterator[Any]:
            await never.wait()
            yield None

    class Replaces(Middleware):
        async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
            await next_handler()  # the stream has started
            return ModelResponse(message=make_assistant(agent.kind, "instead"))

    _, remote = await serve(Replaces())
    agent = Agent(Hanging(["x"]), kind=kind, middlewares=[remote])
    async with asyncio.timeout(SHORT_TIMEOUT):
        events = await collect(agent.reply("go"))
    assert events[-1].error.reason == "SIDECAR_PROTOCOL_ERROR"  # type: ignore[union-attr]
