"""The sidecar host (MiddlewareServicer) driven over raw Intercept streams: what it does with
each message an agent may send, well-formed or not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from opentelemetry import trace

from hookmesh.middleware import GUARDRAIL_TRIPPED, GuardrailTripped, Middleware
from hookmesh.remote import SERVICE_NAME, MiddlewareServicer, RemoteHookError, serve_middleware
from hookmesh.schema import StructuredOutput, make_assistant, message_to_proto, output_to_proto
from hookmesh.server import RunningServer
from hookmesh.v1 import middleware_pb2 as pb
from hookmesh.v1 import middleware_pb2_grpc as pb_grpc
from tests import remote_middlewares as rmws

pytestmark = pytest.mark.timeout(60)

DEADLINE = 10.0


@pytest.fixture
async def stuck() -> AsyncIterator[tuple[rmws.Stuck, RunningServer]]:
    """A sidecar whose on_reasoning waits until cancelled."""
    mw = rmws.Stuck()
    running = await serve_middleware(mw)
    try:
        yield mw, running
    finally:
        await running.stop(None)


def reasoning(invocation_id: str, reply_id: str = "r1") -> pb.InterceptRequest:
    return pb.InterceptRequest(
        invocation_id=invocation_id,
        invocation=pb.HookInvocation(
            hook=pb.HOOK_ON_REASONING, reply_id=reply_id, reasoning=pb.ReasoningArgs()
        ),
    )


async def test_the_4097th_invocation_running_on_one_stream_is_refused(
    stuck: tuple[rmws.Stuck, RunningServer],
) -> None:
    _, running = stuck
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        # 4098 invocations take seconds on a loaded machine: a longer deadline.
        stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=3 * DEADLINE)
        for n in range(4098):
            await stream.write(reasoning(str(n), reply_id=f"r{n}"))
        refused = [await stream.read(), await stream.read()]
        stream.cancel()
    assert [r.invocation_id for r in refused] == ["4096", "4097"]
    assert {r.done.error.reason for r in refused} == {"TOO_MANY_INVOCATIONS"}
    assert "4096 invocations" in refused[0].done.error.message


async def _exchange(
    running: RunningServer, *requests: pb.InterceptRequest, answers: int = 1
) -> tuple[list[pb.InterceptResponse], grpc.StatusCode]:
    """Send `requests` on one Intercept stream, read `answers` responses, end the stream
    (done writing) and return what came back with the status the stream ended on."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=DEADLINE)
        for request in requests:
            await stream.write(request)
        got = [await stream.read() for _ in range(answers)]
        await stream.done_writing()
        assert await stream.read() == grpc.aio.EOF
        return got, await stream.code()


async def test_an_invocation_with_a_bad_context_message_ends_at_once_invalid(
    stuck: tuple[rmws.Stuck, RunningServer],
) -> None:
    mw, running = stuck
    bad = reasoning("1")
    bad.invocation.context.add()  # a message of no kind
    got, code = await _exchange(running, bad)
    assert code == grpc.StatusCode.OK
    [done] = got
    assert done.invocation_id == "1" and done.done.error.reason == "INVALID_SCHEMA"
    assert "invocation.context" in done.done.error.message
    assert not mw.entered.is_set()


async def test_a_cancel_ends_its_invocation_and_unknown_ids_are_ignored(
    stuck: tuple[rmws.Stuck, RunningServer],
) -> None:
    mw, running = stuck
    unknown = [
        pb.InterceptRequest(invocation_id="nobody", cancel=pb.CancelInvocation()),
        pb.InterceptRequest(invocation_id="nobody", outcome=pb.DownstreamOutcome()),
    ]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=DEADLINE)
        await stream.write(reasoning("1"))
        async with asyncio.timeout(DEADLINE):
            await mw.entered.wait()
        for request in unknown:
            await stream.write(request)
        await stream.write(pb.InterceptRequest(invocation_id="1", cancel=pb.CancelInvocation()))
        async with asyncio.timeout(DEADLINE):
            await mw.cancelled.wait()
        await stream.done_writing()
        assert await stream.read() == grpc.aio.EOF
        assert await stream.code() == grpc.StatusCode.OK
    assert running.servicers[SERVICE_NAME].received == {"invocation": 1, "cancel": 2, "outcome": 1}


class Raises(Middleware):
    """Its unary hooks raise what it was given."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def on_system_prompt(self, agent: Any, prompt: str) -> str:
        raise self.exc

    async def after_agent(self, agent: Any, final: Any) -> None:
        raise self.exc


def _after_agent() -> pb.AfterAgentRequest:
    return pb.AfterAgentRequest(
        reply_id="r1", final_message=message_to_proto(make_assistant("flat", "done"))
    )


async def test_a_unary_hooks_error_without_a_message_is_named_by_its_type() -> None:
    host = MiddlewareServicer(Raises(RuntimeError()))
    with pytest.raises(RemoteHookError) as caught:
        await host.TransformSystemPrompt(pb.TransformSystemPromptRequest(prompt="p"), None)  # type: ignore[arg-type]
    assert str(caught.value) == "RuntimeError"
    assert caught.value.reason == "MIDDLEWARE_FAILED"
    assert caught.value.metadata == {"hook": "on_system_prompt", "errorType": "RuntimeError"}
    with pytest.raises(RemoteHookError) as caught:
        await host.AfterAgent(_after_agent(), None)  # type: ignore[arg-type]
    assert caught.value.metadata == {"hook": "after_agent", "errorType": "RuntimeError"}


async def test_a_guardrail_trip_in_a_unary_hook_keeps_its_reason_and_details() -> None:
    trip = GuardrailTripped("words", "output", "a banned word", {"word": "x"})
    host = MiddlewareServicer(Raises(trip))
    for call in (
        host.TransformSystemPrompt(pb.TransformSystemPromptRequest(prompt="p"), None),  # type: ignore[arg-type]
        host.AfterAgent(_after_agent(), None),  # type: ignore[arg-type]
    ):
        with pytest.raises(RemoteHookError) as caught:
            await call
        assert caught.value.reason == GUARDRAIL_TRIPPED
        assert str(caught.value) == str(trip)
        assert caught.value.metadata == {"word": "x", "guardrail": "words", "stage": "output"}


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class TraceProbe(Middleware):
    """Records the trace its on_reasoning runs under, then waits until cancelled."""

    def __init__(self) -> None:
        self.trace_ids: asyncio.Queue[int] = asyncio.Queue()

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[Any]:
        self.trace_ids.put_nowait(trace.get_current_span().get_span_context().trace_id)
        await asyncio.Event().wait()
        yield  # an event hook; never reached


async def test_a_hook_runs_under_the_agents_trace_with_or_without_an_sdk() -> None:
    """Before any SDK provider is installed (the test below installs one), the hook's calls
    still carry the agent's trace on."""
    probe = TraceProbe()
    running = await serve_middleware(probe)
    invocation = reasoning("1")
    invocation.invocation.trace_context["traceparent"] = TRACEPARENT
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=DEADLINE)
            await stream.write(invocation)
            async with asyncio.timeout(DEADLINE):
                trace_id = await probe.trace_ids.get()
            stream.cancel()
    finally:
        await running.stop(None)
    assert f"{trace_id:032x}" == TRACEPARENT.split("-")[1]


@pytest.mark.parametrize("traced", [False, True])
async def test_each_invocation_runs_in_a_server_span_under_the_agents_trace(
    stuck: tuple[rmws.Stuck, RunningServer], span_exporter: Any, traced: bool
) -> None:
    mw, running = stuck
    span_exporter.clear()
    invocation = reasoning("1")
    if traced:
        invocation.invocation.trace_context["traceparent"] = TRACEPARENT
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=DEADLINE)
        await stream.write(invocation)
        async with asyncio.timeout(DEADLINE):
            await mw.entered.wait()
        await stream.write(pb.InterceptRequest(invocation_id="1", cancel=pb.CancelInvocation()))
        await stream.done_writing()
        assert await stream.read() == grpc.aio.EOF
    [span] = [s for s in span_exporter.get_finished_spans() if s.name.startswith("middleware ")]
    assert span.name == f"middleware {mw.middleware_key()} on_reasoning"
    assert span.kind == trace.SpanKind.SERVER
    if traced:
        assert f"{span.context.trace_id:032x}" == TRACEPARENT.split("-")[1]
        assert f"{span.parent.span_id:016x}" == TRACEPARENT.split("-")[2]
    else:
        assert span.parent is None


class ObservesReasoning(Middleware):
    """Observes on_reasoning under a mode named at run time (as read from a config file: a
    string equal to "observe" but not the same object) and intercepts on_model_call."""

    def __init__(self) -> None:
        self.hook_modes = {"on_reasoning": "".join(["obs", "erve"])}  # type: ignore[dict-item]

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[Any]:
        async for event in next_handler():
            yield event

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return await next_handler()


async def test_an_observe_invocation_sends_nothing_back_whatever_string_names_its_mode() -> None:
    running = await serve_middleware(ObservesReasoning())
    model_call = pb.InterceptRequest(
        invocation_id="2", invocation=pb.HookInvocation(hook=pb.HOOK_ON_MODEL_CALL, reply_id="r1")
    )
    model_call.invocation.model_call.SetInParent()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stream = pb_grpc.MiddlewareServiceStub(channel).Intercept(timeout=DEADLINE)
            await stream.write(reasoning("1"))  # observed: never answered
            await stream.write(model_call)
            first = await stream.read()
            stream.cancel()
    finally:
        await running.stop(None)
    assert first.invocation_id == "2" and first.HasField("call_next")


class SeesOutput(Middleware):
    """Records the structured output its after_agent saw."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def after_agent(self, agent: Any, final: Any) -> None:
        self.seen.append(agent.output)


async def test_after_agent_sees_the_output_only_when_one_was_sent() -> None:
    mw = SeesOutput()
    host = MiddlewareServicer(mw)
    await host.AfterAgent(_after_agent(), None)  # type: ignore[arg-type]
    with_output = _after_agent()
    answer = StructuredOutput(value={"city": "Oslo"}, schema_name="Weather")
    with_output.output.CopyFrom(output_to_proto(answer))
    await host.AfterAgent(with_output, None)  # type: ignore[arg-type]
    assert mw.seen[0] is None
    assert mw.seen[1] == answer
