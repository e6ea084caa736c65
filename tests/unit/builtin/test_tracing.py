"""Tracing middleware: GenAI spans, nesting, streams, errors, pauses — flat, agentic, sidecar."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from hookmesh.agent import Agent, output_spec, tool
from hookmesh.middleware.builtin.tracing import TracingMiddleware
from hookmesh.models import ModelChunk, ScriptedChatModel, ScriptedTurn
from hookmesh.schema import Message, MessageKind, Usage
from tests.agent_helpers import collect, echo
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)


def spans_by_name(exporter: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


@pytest.mark.parametrize("stream", [False, True])
async def test_reply_model_and_tool_spans_nest(
    kind: MessageKind, attach: Attach, span_exporter: Any, stream: bool
) -> None:
    turns = [
        ScriptedTurn(
            tool_calls=[("echo", {"text": "x"})], usage=Usage(input_tokens=11, output_tokens=3)
        ),
        ScriptedTurn(text="done", usage=Usage(input_tokens=17, output_tokens=5)),
    ]
    model = ScriptedChatModel(turns, stream=stream, model_name="tiny-model")
    agent = Agent(
        model,
        name="helper",
        kind=kind,
        tools=[echo],
        middlewares=[await attach(TracingMiddleware())],
    )
    agent.session_id = "sess-1"
    span_exporter.clear()
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    spans = spans_by_name(span_exporter)
    (root,) = spans["invoke_agent helper"]
    chats = spans["chat tiny-model"]
    (tool_span,) = spans["execute_tool echo"]
    assert root.kind == SpanKind.INTERNAL
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "helper"
    assert root.attributes["gen_ai.conversation.id"] == "sess-1"
    assert root.attributes["hookmesh.finish_reason"] == "completed"
    assert [c.kind for c in chats] == [SpanKind.CLIENT, SpanKind.CLIENT]
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.attributes["gen_ai.provider.name"] == "scripted"
    assert first.attributes["gen_ai.request.model"] == "tiny-model"
    assert first.attributes["gen_ai.request.stream"] is stream
    assert (
        first.attributes["gen_ai.usage.input_tokens"],
        first.attributes["gen_ai.usage.output_tokens"],
    ) == (11, 3)
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert tuple(second.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert first.attributes["gen_ai.response.id"] == "resp_1"
    assert tool_span.attributes["gen_ai.tool.name"] == "echo"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1"
    for child in (*chats, tool_span):
        assert child.context.trace_id == root.context.trace_id
        assert child.parent is not None and child.parent.span_id == root.context.span_id


class TimedStream(ScriptedChatModel):
    """Records when its stream's last chunk was handed out."""

    last_chunk_ns = 0

    async def _chunks(self, *args: Any) -> AsyncIterator[ModelChunk]:  # type: ignore[override]
        async for chunk in super()._chunks(*args):
            TimedStream.last_chunk_ns = time.time_ns()
            yield chunk


async def test_a_streamed_chat_span_ends_after_the_last_chunk(
    kind: MessageKind, span_exporter: Any
) -> None:
    model = TimedStream(["a streamed answer in several chunks"], stream=True, chunk_size=4)
    agent = Agent(model, kind=kind, middlewares=[TracingMiddleware()])
    span_exporter.clear()
    await collect(agent.reply("go"))
    (chat,) = spans_by_name(span_exporter)["chat scripted"]
    assert chat.end_time >= TimedStream.last_chunk_ns
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0


async def test_failures_set_error_status(
    kind: MessageKind, attach: Attach, span_exporter: Any
) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("no")

    turns = [ScriptedTurn(tool_calls=[("broken", {})]), ScriptedTurn(error="model exploded")]
    agent = Agent(
        ScriptedChatModel(turns),
        kind=kind,
        tools=[broken],
        middlewares=[await attach(TracingMiddleware())],
    )
    span_exporter.clear()
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "error"  # type: ignore[union-attr]
    spans = spans_by_name(span_exporter)
    (root,) = spans["invoke_agent agent"]
    assert root.status.status_code == StatusCode.ERROR
    assert root.attributes["error.type"] == "MODEL_ERROR"
    (tool_span,) = spans["execute_tool broken"]
    assert tool_span.status.status_code == StatusCode.ERROR
    failed_chat = max(spans["chat scripted"], key=lambda s: s.start_time)
    assert failed_chat.status.status_code == StatusCode.ERROR


async def test_a_pause_records_the_pending_tools(
    kind: MessageKind, attach: Attach, span_exporter: Any
) -> None:
    @tool(needs_confirmation=True)
    def launch(target: str) -> str:
        """Launch something."""
        return target

    agent = Agent(
        ScriptedChatModel([ScriptedTurn(tool_calls=[("launch", {"target": "moon"})])]),
        kind=kind,
        tools=[launch],
        middlewares=[await attach(TracingMiddleware())],
    )
    span_exporter.clear()
    events = await collect(agent.reply("go"))
    assert events[-1].finish_reason == "awaiting_confirmation"  # type: ignore[union-attr]
    (root,) = spans_by_name(span_exporter)["invoke_agent agent"]
    assert tuple(root.attributes["hookmesh.pending_confirmation_tools"]) == ("launch",)
    assert root.attributes["hookmesh.finish_reason"] == "awaiting_confirmation"


async def test_without_an_sdk_provider_nothing_is_traced(kind: MessageKind) -> None:
    from hookmesh.middleware.builtin.tracing import _middleware as tracing

    real = tracing._recording
    tracing._recording = lambda tracer: False  # type: ignore[assignment]
    try:
        seen: list[Sequence[Message]] = []
        model = ScriptedChatModel(lambda m, t, c: seen.append(m) or ScriptedTurn(text="ok"))
        agent = Agent(model, kind=kind, middlewares=[TracingMiddleware()])
        events = await collect(agent.reply("go"))
        assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]
    finally:
        tracing._recording = real  # type: ignore[assignment]


@pytest.mark.parametrize("valid", [True, False])
async def test_the_reply_span_records_the_output_schema(
    kind: MessageKind, attach: Attach, span_exporter: Any, valid: bool
) -> None:
    answer = '{"n": 1}' if valid else "no json"
    model = ScriptedChatModel([answer], native_output=True, repeat=True)
    agent = Agent(model, kind=kind, middlewares=[await attach(TracingMiddleware())])
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    span_exporter.clear()
    await collect(agent.reply("go", output=output_spec(schema, name="Count", max_retries=0)))
    (root,) = spans_by_name(span_exporter)["invoke_agent agent"]
    assert root.attributes["hookmesh.output.schema_name"] == "Count"
    assert root.attributes["hookmesh.finish_reason"] == ("completed" if valid else "error")


@pytest.mark.parametrize(
    ("options", "recorded"),
    [
        ({}, False),
        ({"capture_content": True}, True),
        ({"capture_content": True, "record_user": False}, False),
        ({"record_user": True}, True),
    ],
)
async def test_the_reply_span_names_the_user_with_content_unless_turned_off(
    kind: MessageKind, attach: Attach, span_exporter: Any, options: dict[str, Any], recorded: bool
) -> None:
    middleware = await attach(TracingMiddleware(**options))
    agent = Agent(ScriptedChatModel(["hi"]), kind=kind, middlewares=[middleware], user_id="alice")
    span_exporter.clear()
    await collect(agent.reply("go"))
    spans = span_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert root.attributes.get("user.id") == ("alice" if recorded else None)
    assert all("user.id" not in s.attributes for s in spans if s is not root)
