"""The ReAct loop: event order, limits, errors, cancellation, human-in-the-loop, state."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hookmesh.agent import (
    Agent,
    AgentBusyError,
    AgentState,
    Confirmation,
    ExternalResult,
    Resume,
    external_tool,
    tool,
)
from hookmesh.errors import SchemaError
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    FlatMessage,
    MessageKind,
    TextBlock,
    ToolResultBlock,
    text_of,
    tool_results,
    unanswered_tool_calls,
)
from tests.agent_helpers import SHORT_TIMEOUT, collect, echo, types

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["flat", "agentic"])
def kind(request: pytest.FixtureRequest) -> MessageKind:
    return request.param  # type: ignore[no-any-return]


def agent_for(kind: MessageKind, turns: Any, *, stream: bool = False, **kw: Any) -> Agent:
    tools = kw.pop("tools", [echo])
    return Agent(ScriptedChatModel(turns, stream=stream), kind=kind, tools=tools, **kw)


async def test_plain_reply_event_order(kind: MessageKind) -> None:
    agent = agent_for(kind, [ScriptedTurn(text="hello there", reasoning="think")], stream=True)
    events = await collect(agent.reply("hi"))
    assert types(events) == [
        "reply_start",
        "model_call_start",
        "reasoning_block_start",
        "reasoning_block_delta",
        "reasoning_block_end",
        "text_block_start",
        "text_block_delta",
        "text_block_delta",
        "text_block_end",
        "model_call_end",
        "reply_end",
    ]
    assert len({e.reply_id for e in events}) == 1
    end = events[-1]
    assert end.finish_reason == "completed"  # type: ignore[union-attr]
    usage = events[-2].usage  # type: ignore[union-attr]
    assert usage is not None and usage.output_tokens > 0
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "hello there"
    assert agent.final_message.kind == kind
    assert [m.role for m in agent.state.context] == ["user", "assistant"]


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_round_trip_event_order_and_context(kind: MessageKind, stream: bool) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "ping"})]), "pong"]
    agent = agent_for(kind, turns, stream=stream)
    events = await collect(agent.reply("go"))
    sequence = [t for t in types(events) if t not in ("tool_call_delta", "text_block_delta")]
    assert sequence == [
        "reply_start",
        "model_call_start",
        "tool_call_start",
        "tool_call_end",
        "model_call_end",
        "tool_result_start",
        "tool_result_delta",
        "tool_result_end",
        "model_call_start",
        "text_block_start",
        "text_block_end",
        "model_call_end",
        "reply_end",
    ]
    args = "".join(e.delta for e in events if e.type == "tool_call_delta")  # type: ignore[union-attr]
    assert json.loads(args) == {"text": "ping"}
    results = [r for m in agent.state.context for r in tool_results(m)]
    assert [(r.call_id, r.text, r.state) for r in results] == [("call_1", "ping", "success")]
    assert unanswered_tool_calls(agent.state.context) == []


async def test_inputs_of_the_other_kind_are_converted(kind: MessageKind) -> None:
    other = (
        AgenticMessage(role="user", blocks=[TextBlock(text="hi")])
        if kind == "flat"
        else FlatMessage(role="user", content="hi")
    )
    agent = agent_for(kind, ["ok"])
    await collect(agent.reply([other]))
    assert agent.state.context[0].kind == kind
    assert text_of(agent.state.context[0]) == "hi"


async def test_malformed_inputs_raise_schema_errors(kind: MessageKind) -> None:
    agent = agent_for(kind, ["ok"])
    bad = AgenticMessage(role="assistant", blocks=[ToolResultBlock(call_id="c")])
    with pytest.raises(SchemaError) as exc:
        agent.reply([bad])
    assert exc.value.violations[0].field == "inputs[0].agentic.blocks[0].tool_result"


async def test_max_iters_ends_with_exceed_max_iters(kind: MessageKind) -> None:
    loop = ScriptedTurn(tool_calls=[("echo", {"text": "again"})])
    agent = agent_for(kind, [loop], max_iters=3)
    agent.model.repeat = True  # type: ignore[attr-defined]
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "exceed_max_iters"  # type: ignore[union-attr]
    assert types(events).count("model_call_start") == 3
    assert agent.model.calls == 3  # type: ignore[attr-defined]


async def test_model_error_ends_with_an_error_naming_the_model(kind: MessageKind) -> None:
    agent = agent_for(kind, [ScriptedTurn(error="upstream 503")])
    events = await collect(agent.reply("go"))
    end = events[-1]
    assert end.finish_reason == "error"  # type: ignore[union-attr]
    assert end.error is not None  # type: ignore[union-attr]
    assert (end.error.reason, end.error.source, end.error.message) == (  # type: ignore[union-attr]
        "MODEL_ERROR",
        "model",
        "upstream 503",
    )


class Gate:
    """A tool that blocks until released, announcing that it started."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

        @tool(name="wait")
        async def wait() -> str:
            """Wait for the gate."""
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return "released"

        self.tool = wait


async def test_cancelling_the_consumer_interrupts_and_leaves_no_task(kind: MessageKind) -> None:
    gate = Gate()
    agent = agent_for(kind, [ScriptedTurn(tool_calls=[("wait", {})]), "done"], tools=[gate.tool])
    consumer = asyncio.create_task(collect(agent.reply("go")))
    async with asyncio.timeout(SHORT_TIMEOUT):
        await gate.started.wait()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert gate.cancelled
    assert agent.last_finish_reason == "interrupted"
    results = [r for m in agent.state.context for r in tool_results(m)]
    assert [r.state for r in results] == ["interrupted"]
    assert asyncio.all_tasks() == {asyncio.current_task()}
    # The agent is idle again and replies normally.
    events = await collect(agent.reply("again"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_interrupt_from_another_task_ends_with_reply_end_interrupted(
    kind: MessageKind,
) -> None:
    gate = Gate()
    agent = agent_for(kind, [ScriptedTurn(tool_calls=[("wait", {})]), "done"], tools=[gate.tool])
    consumer = asyncio.create_task(collect(agent.reply("go")))
    async with asyncio.timeout(SHORT_TIMEOUT):
        await gate.started.wait()
    assert agent.interrupt()
    events = await asyncio.wait_for(consumer, SHORT_TIMEOUT)
    assert events[-1].finish_reason == "interrupted"  # type: ignore[union-attr]
    assert gate.cancelled
    assert not agent.interrupt()
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_consumer_that_stops_early_interrupts(kind: MessageKind) -> None:
    agent = agent_for(kind, ["a b c d e f g h i j"], stream=True)
    stream = agent.reply("go")
    async for event in stream:
        if event.type == "text_block_delta":
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert agent.last_finish_reason == "interrupted"
    assert agent.state.middle_context == {}


async def test_a_second_reply_while_one_runs_is_refused(kind: MessageKind) -> None:
    gate = Gate()
    agent = agent_for(kind, [ScriptedTurn(tool_calls=[("wait", {})]), "done"], tools=[gate.tool])
    consumer = asyncio.create_task(collect(agent.reply("go")))
    async with asyncio.timeout(SHORT_TIMEOUT):
        await gate.started.wait()
    with pytest.raises(AgentBusyError):
        agent.reply("too soon")
    gate.release.set()
    events = await asyncio.wait_for(consumer, SHORT_TIMEOUT)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


@tool(needs_confirmation=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: Which file.
    """
    return f"deleted {path}"


@pytest.mark.parametrize("confirmed", [True, False])
async def test_confirmation_pauses_and_resumes_in_another_process(
    kind: MessageKind, confirmed: bool
) -> None:
    turns = [
        ScriptedTurn(tool_calls=[("delete_file", {"path": "/tmp/x"}), ("echo", {"text": "e"})])
    ]
    agent = agent_for(kind, turns, tools=[delete_file, echo])
    events = await collect(agent.reply("clean up"))
    assert types(events)[-2:] == ["require_user_confirm", "reply_end"]
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    ask = events[-2]
    assert [c.name for c in ask.tool_calls] == ["delete_file"]  # type: ignore[union-attr]
    # The allowed call already ran; the paused one is still unanswered.
    assert [c.name for c in unanswered_tool_calls(agent.state.context)] == ["delete_file"]
    with pytest.raises(AgentBusyError):
        agent.reply("another question")

    saved = agent.state.model_dump_json()
    restored = Agent(
        ScriptedChatModel(["all done"]),
        kind=kind,
        tools=[delete_file, echo],
        state=AgentState.model_validate_json(saved),
    )
    call_id = ask.tool_calls[0].id  # type: ignore[union-attr]
    with pytest.raises(SchemaError) as exc:
        restored.resume(Resume(confirmations=[Confirmation(call_id="nope", confirmed=True)]))
    assert exc.value.violations[0].field == "confirmations[0].call_id"
    resumed = await collect(
        restored.resume(
            Resume(confirmations=[Confirmation(call_id=call_id, confirmed=confirmed, reason="no")])
        )
    )
    assert {e.reply_id for e in resumed} == {events[0].reply_id}
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    result = next(
        r for m in restored.state.context for r in tool_results(m) if r.call_id == call_id
    )
    if confirmed:
        assert (result.state, result.text) == ("success", "deleted /tmp/x")
    else:
        assert result.state == "denied"
        assert "no" in result.text
    assert restored.state.pending is None


async def test_external_tools_pause_for_the_callers_results(kind: MessageKind) -> None:
    weather = external_tool(
        "weather",
        "Weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
    )
    turns = [ScriptedTurn(tool_calls=[("weather", {"city": "Oslo"})]), "It is cold in Oslo."]
    agent = agent_for(kind, turns, tools=[weather])
    events = await collect(agent.reply("weather?"))
    assert events[-1].finish_reason == "awaiting_external_execution"  # type: ignore[union-attr]
    call = events[-2].tool_calls[0]  # type: ignore[union-attr]
    assert (call.name, json.loads(call.arguments)) == ("weather", {"city": "Oslo"})
    resumed = await collect(
        agent.resume(Resume(external_results=[ExternalResult(call_id=call.id, output="-3 C")]))
    )
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]
    deltas = [e.text for e in resumed if e.type == "tool_result_delta"]  # type: ignore[union-attr]
    assert deltas == ["-3 C"]
    assert agent.final_message is not None
    assert text_of(agent.final_message) == "It is cold in Oslo."


async def test_resume_without_a_paused_reply_is_refused(kind: MessageKind) -> None:
    agent = agent_for(kind, ["ok"])
    with pytest.raises(AgentBusyError):
        agent.resume(Resume())
