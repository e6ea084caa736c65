"""The event stream keeps its shape whatever a sidecar does: every tool_result_start has its
end before reply_end, nothing follows reply_end, and a model stream a sidecar cuts short
never runs a tool call with half its arguments."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.models import ModelChunk, ScriptedChatModel, ScriptedTurn, ToolCallDelta
from hookmesh.remote import RemoteMiddleware
from hookmesh.schema import AgentEvent
from hookmesh.tools import tool
from hookmesh.v1 import middleware_pb2 as pb
from tests.agent_helpers import SHORT_TIMEOUT, collect, echo
from tests.scripted_sidecar import (
    BreakStream,
    ScriptedSidecar,
    describe,
    pass_through,
    response,
    serve_scripted,
)

pytestmark = pytest.mark.timeout(60)


async def _reply(sidecar: ScriptedSidecar, agent_of: Any, mode: str = "fail_closed") -> list[Any]:
    running = await serve_scripted(sidecar)
    remote = await RemoteMiddleware.connect(
        f"127.0.0.1:{running.port}",
        timeout=SHORT_TIMEOUT,
        failure_mode=mode,  # type: ignore[arg-type]
    )
    try:
        async with asyncio.timeout(SHORT_TIMEOUT):
            events: list[AgentEvent] = await collect(agent_of(remote).reply("go"))
        return events
    finally:
        await remote.aclose()
        await running.stop(None)


async def test_a_tool_run_cut_by_a_fail_closed_sidecar_still_ends_its_result() -> None:
    def dies_mid_tool(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "item":
            raise BreakStream
        return pass_through(request)

    sidecar = ScriptedSidecar(
        describe(pb.HOOK_ON_ACTING, subscriptions=("tool_result_delta",)), dies_mid_tool
    )
    model = ScriptedChatModel([ScriptedTurn(tool_calls=[("echo", {"text": "hi"})]), "done"])
    events = await _reply(sidecar, lambda remote: Agent(model, middlewares=[remote], tools=[echo]))
    types = [e.type for e in events]
    assert types[-1] == "reply_end" and events[-1].error.reason == "SIDECAR_UNAVAILABLE"
    start = types.index("tool_result_start")
    assert "tool_result_end" in types[start:-1]
    end = events[types.index("tool_result_end")]
    assert end.call_id == events[start].call_id and end.state == "interrupted"


async def test_a_second_call_next_on_reply_is_refused_and_nothing_follows_reply_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def again(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "outcome":
            return [response(request.invocation_id, call_next=pb.CallNext())]
        return pass_through(request)

    sidecar = ScriptedSidecar(describe(pb.HOOK_ON_REPLY), again)
    events = await _reply(
        sidecar, lambda remote: Agent(ScriptedChatModel(["hi"]), middlewares=[remote])
    )
    types = [e.type for e in events]
    assert types.count("reply_start") == 1
    assert types.count("reply_end") == 1 and types[-1] == "reply_end"
    # The invocation ended as a protocol error, told to the operator, not the client.
    [failed] = [r for r in caplog.records if "after its reply_end" in r.getMessage()]
    assert "call_next where done was due in on_reply" in failed.getMessage()


async def test_a_plain_done_mid_stream_never_runs_a_half_streamed_tool_call() -> None:
    ran: list[str] = []
    never = asyncio.Event()

    @tool
    def record(text: str) -> str:
        """Record the text.

        Args:
            text: What to record.
        """
        ran.append(text)
        return text

    class HalfCall(ScriptedChatModel):
        async def __call__(self, messages: Any, **kw: Any) -> Any:
            return self._half()

        async def _half(self) -> AsyncIterator[ModelChunk]:
            yield ModelChunk(text="let me note that")
            yield ModelChunk(tool_call=ToolCallDelta("c1", "record", '{"text": "ha'))
            await never.wait()
            yield ModelChunk(tool_call=ToolCallDelta("c1", "", 'lf"}'))

    def cuts(request: pb.InterceptRequest) -> list[pb.InterceptResponse] | None:
        if request.WhichOneof("message") == "item" and request.item.chunk.HasField("tool_call"):
            return [response(request.invocation_id, done=pb.HookDone())]
        return pass_through(request)

    sidecar = ScriptedSidecar(describe(pb.HOOK_ON_MODEL_CALL, read_only=("chunk",)), cuts)
    events = await _reply(
        sidecar, lambda remote: Agent(HalfCall(["x"]), middlewares=[remote], tools=[record])
    )
    types = [e.type for e in events]
    assert ran == []
    assert "tool_result_start" not in types
    assert types.count("tool_call_start") == types.count("tool_call_end") == 1
    assert events[-1].finish_reason == "completed"
