"""Tracing across a pause (one trace; synthetic spans for external tools) and opt-in content
capture as GenAI message parts — flat, agentic, in process and via a sidecar."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hookmesh.agent import Agent, AgentState, ExternalResult, Resume, external_tool
from hookmesh.middleware.builtin.tracing import TracingMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgenticMessage,
    FlatMessage,
    ImageBlock,
    InlineSource,
    MessageKind,
    TextBlock,
    UrlSource,
)
from tests.agent_helpers import collect, echo
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

WEATHER = external_tool(
    "weather", "Weather for a city.", {"type": "object", "properties": {"city": {"type": "str"}}}
)
PIXELS = b"\x89PNG not really an image"


def _spans(exporter: Any, name: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_resumed_reply_stays_in_its_trace_with_external_tool_spans(
    kind: MessageKind, attach: Attach, span_exporter: Any
) -> None:
    turns = [
        ScriptedTurn(tool_calls=[("weather", {"city": "Oslo"}), ("weather", {"city": "Rome"})]),
        "Cold in Oslo, warm in Rome.",
    ]
    tracing = await attach(TracingMiddleware())
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[WEATHER], middlewares=[tracing])
    span_exporter.clear()
    events = await collect(agent.reply("weather?"))
    calls = events[-2].tool_calls  # type: ignore[union-attr]
    # The pause survives a restart: the trace context is in the state.
    agent = Agent(
        ScriptedChatModel(turns[1:]),
        kind=kind,
        tools=[WEATHER],
        middlewares=[tracing],
        state=AgentState.model_validate_json(agent.state.model_dump_json()),
    )
    resume = Resume(
        external_results=[
            ExternalResult(call_id=calls[0].id, output="-3 C"),
            ExternalResult(call_id=calls[1].id, output="timeout", state="error"),
        ]
    )
    resumed = await collect(agent.resume(resume))
    assert resumed[-1].finish_reason == "completed"  # type: ignore[union-attr]

    first, second = sorted(_spans(span_exporter, "invoke_agent agent"), key=lambda s: s.start_time)
    assert second.context.trace_id == first.context.trace_id
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert (first.attributes["hookmesh.resumed"], second.attributes["hookmesh.resumed"]) == (
        False,
        True,
    )
    external = sorted(_spans(span_exporter, "execute_tool weather"), key=lambda s: s.start_time)
    assert [s.attributes["gen_ai.tool.call.id"] for s in external] == [c.id for c in calls]
    for span in external:
        assert span.attributes["hookmesh.tool.external"] is True
        assert span.context.trace_id == first.context.trace_id
        assert span.parent.span_id == second.context.span_id
        # From the pause (in the first reply) to the result (in the resumed one).
        assert first.start_time <= span.start_time <= first.end_time
        assert second.start_time <= span.end_time <= second.end_time
    assert [s.status.is_ok for s in external] == [True, False]
    assert external[1].attributes["error.type"] == "error"
    # The chat span after the resume is in the same trace too.
    chats = _spans(span_exporter, "chat scripted")
    assert {c.context.trace_id for c in chats} == {first.context.trace_id}


@pytest.mark.parametrize("stream", [False, True])
async def test_content_capture_records_genai_message_parts(
    kind: MessageKind, attach: Attach, span_exporter: Any, stream: bool
) -> None:
    turns = [
        ScriptedTurn(tool_calls=[("echo", {"text": "hi"})], reasoning="use echo"),
        "All done.",
    ]
    tracing = await attach(TracingMiddleware(capture_content=True))
    agent = Agent(
        ScriptedChatModel(turns, stream=stream),
        kind=kind,
        system_prompt="Be brief.",
        tools=[echo],
        middlewares=[tracing],
    )
    picture = ImageBlock(source=InlineSource(data=PIXELS, mime_type="image/png"))
    linked = ImageBlock(source=UrlSource(url="https://example.org/cat.png", mime_type="image/png"))
    message = (
        FlatMessage(role="user", content="look", parts=[picture, linked])
        if kind == "flat"
        else AgenticMessage(role="user", blocks=[TextBlock(text="look"), picture, linked])
    )
    span_exporter.clear()
    await collect(agent.reply(message))
    first, second = sorted(_spans(span_exporter, "chat scripted"), key=lambda s: s.start_time)
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}
    ]
    [user] = json.loads(first.attributes["gen_ai.input.messages"])
    assert user["role"] == "user"
    assert user["parts"][0] == {"type": "text", "content": "look"}
    inline, url = user["parts"][1:]
    assert inline["type"] == "file" and inline["file_id"].startswith("sha256:")
    assert (inline["size"], inline["modality"], inline["mime_type"]) == (
        len(PIXELS),
        "image",
        "image/png",
    )
    assert url == {
        "type": "uri",
        "uri": "https://example.org/cat.png",
        "mime_type": "image/png",
        "modality": "image",
    }
    assert "PNG" not in first.attributes["gen_ai.input.messages"]  # no bytes, not even base64
    [out] = json.loads(first.attributes["gen_ai.output.messages"])
    assert out["finish_reason"] == "tool_calls"
    assert out["parts"][0] == {"type": "reasoning", "content": "use echo"}
    assert out["parts"][-1]["type"] == "tool_call"
    assert (out["parts"][-1]["name"], out["parts"][-1]["arguments"]) == ("echo", {"text": "hi"})
    # The second call's input has the tool's answer, as a tool message for both kinds.
    roles = [m["role"] for m in json.loads(second.attributes["gen_ai.input.messages"])]
    assert roles == ["user", "assistant", "tool"]
    [tool_span] = _spans(span_exporter, "execute_tool echo")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"text": "hi"}
    assert json.loads(tool_span.attributes["gen_ai.tool.call.result"]) == [
        {"type": "text", "content": "hi"}
    ]
    [final] = json.loads(second.attributes["gen_ai.output.messages"])
    assert final["parts"] == [{"type": "text", "content": "All done."}]


async def test_content_is_not_captured_by_default(
    kind: MessageKind, attach: Attach, span_exporter: Any
) -> None:
    turns = [ScriptedTurn(tool_calls=[("echo", {"text": "hi"})]), "done"]
    tracing = await attach(TracingMiddleware())
    agent = Agent(ScriptedChatModel(turns), kind=kind, tools=[echo], middlewares=[tracing])
    span_exporter.clear()
    await collect(agent.reply("secret"))
    for span in span_exporter.get_finished_spans():
        assert not any(k.startswith(("gen_ai.input", "gen_ai.output")) for k in span.attributes)
        assert "gen_ai.tool.call.arguments" not in span.attributes
