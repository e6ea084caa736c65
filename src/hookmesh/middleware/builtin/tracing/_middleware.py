"""Tracing: OpenTelemetry spans for replies, model calls and tool runs (GenAI conventions)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from hookmesh.middleware import ActingArgs, ActingNext, AgentView, ReplyArgs, ReplyNext
from hookmesh.middleware._base import EventHandler, Middleware, ModelHandler
from hookmesh.middleware.builtin.tracing._genai import (
    call_part,
    input_messages,
    media_part,
    message_parts,
    output_message,
)
from hookmesh.models import ModelResponse
from hookmesh.schema import (
    AgentEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolCall,
)

if TYPE_CHECKING:
    pass

_PAUSES = {
    "require_user_confirm": "hookmesh.pending_confirmation_tools",
    "require_external_execution": "hookmesh.pending_external_tools",
}


def _schema_name(end: ReplyEndEvent) -> str:
    """The output schema a reply asked for, as its end says: the answer's, or, for a reply
    whose answers never validated, the error's."""
    if end.output is not None:
        return end.output.schema_name
    return end.error.metadata.get("schemaName", "") if end.error is not None else ""


def _recording(tracer: trace.Tracer) -> bool:
    """Whether `tracer`'s spans go anywhere: a tracer provider other than the no-op one is
    installed (possibly after the tracer was made).

    NOTE(hookmesh): asked through the API's proxy tracer, which checks its module global:
    `trace.get_tracer_provider()` also looks the environment up on every call, which costs
    1.5 µs here, most of this middleware's per-reply budget when tracing is off.
    """
    if isinstance(tracer, trace.ProxyTracer):
        tracer = tracer._tracer
    return not isinstance(tracer, trace.NoOpTracer)


USER_ATTRIBUTE = "user.id"
"""The span attribute naming the reply's user (OpenTelemetry's general ``user.id``)."""


class TracingMiddleware(Middleware):
    """Emits OpenTelemetry spans following the GenAI semantic conventions.

    ``invoke_agent {agent}`` wraps each reply (or resumed part of one), with ``chat {model}``
    (kind CLIENT) for every model call and ``execute_tool {tool}`` for every tool run as its
    children. A streamed chat span ends after the last chunk, so its usage and finish reason
    are the stream's. Failures set error status; a reply that pauses records the tools it
    waits on.

    Cost when no SDK tracer provider is installed: decided once per reply, after which every
    hook passes straight through (no span objects, no per-event work).

    Failure mode: ``fail_closed`` by default, yet tracing cannot break a reply: its own work
    is OpenTelemetry API calls, which by the API's contract never raise, and every error it
    sees is the downstream's, which it records and re-raises. (``fail_open`` would add a
    guard layer per hook for nothing: about 2-3 µs per reply, bench/middleware_overhead.py.)

    A reply that pauses and resumes stays one trace: the resumed ``invoke_agent`` span is a
    child of the first one (``hookmesh.resumed``), and each tool the caller executed while
    the reply waited gets a synthetic ``execute_tool`` span (``hookmesh.tool.external``) from
    the pause to its result.

    Content capture (`capture_content`, off by default: prompts and answers may hold personal
    data): chat spans get ``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
    ``gen_ai.output.messages``, tool spans ``gen_ai.tool.call.arguments`` and
    ``gen_ai.tool.call.result``, as GenAI message parts (JSON), for both message kinds. Media
    are references (their URL, or a SHA-256 of inline bytes and their size), never bytes.

    The user (`record_user`; by default on exactly when `capture_content` is): the reply's
    ``invoke_agent`` span gets ``user.id``, the reply's user (`AgentView.user_id`, the agent
    service's caller; none when the reply has no user), so the traces holding a user's words
    can be found and erased in the backend (hookmesh cannot delete from a backend it does
    not own: docs/security.md, "Data lifecycle"). ``record_user=False`` leaves it out even
    with content; ``True`` records it without content.

    State: ``{"trace": [trace_id, span_id], "root": [...], "external": {call_id: name},
    "paused_ns": int}`` in ``middle_context[key][reply_id]``: the reply span's ids (so child
    spans, also in a sidecar, are parented without span objects on the instance), the first
    span of the reply (a resume joins it), and the calls the caller runs while it waits.

    Example:
        >>> Agent(model, middlewares=[TracingMiddleware(capture_content=True)])
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_reply": ("reply_end", "tool_result_end", *_PAUSES),
        "on_acting": ("tool_result_end",),
        "on_model_call": ("chunk",),
    }

    def __init__(
        self,
        tracer_name: str = "hookmesh",
        *,
        capture_content: bool = False,
        record_user: bool | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(tracer_name)
        self.capture_content = capture_content
        self.record_user = capture_content if record_user is None else record_user
        if capture_content:
            # A sidecar then needs the prompt and every piece of tool output: this instance
            # subscribes to more than the class does.
            self.needs_context = True
            self.subscriptions = {  # type: ignore[misc]
                "on_reply": ("reply_end", "tool_result_delta", "tool_result_end", *_PAUSES),
                "on_acting": ("tool_result_delta", "tool_result_end"),
                "on_model_call": ("chunk",),
            }

    def middleware_key(self) -> str:
        return "tracing"

    def _parent(self, agent: AgentView) -> Any:
        by_reply = agent.state.middle_context.get(self.middleware_key())
        ids = by_reply.get(agent.reply_id, {}).get("trace") if by_reply else None
        return _context(ids) if ids else None

    def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Wraps the whole reply in ``invoke_agent``; decides once whether tracing is on."""
        if not _recording(self._tracer):
            return next_handler()
        return self._reply(agent, kwargs.get("resume") is not None, next_handler)

    async def _reply(
        self, agent: AgentView, resumed: bool, next_handler: EventHandler
    ) -> AsyncIterator[AgentEvent]:
        name = agent.name or ""
        state = self.state(agent)
        root = state.get("root") if resumed else None
        span = self._tracer.start_span(
            f"invoke_agent {name}".strip(),
            context=_context(root) if root else None,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.conversation.id": agent.session_id,
                "hookmesh.reply_id": agent.reply_id,
                "hookmesh.resumed": resumed,
                **({USER_ATTRIBUTE: agent.user_id} if self.record_user and agent.user_id else {}),
            },
        )
        context = span.get_span_context()
        ids = [f"{context.trace_id:032x}", f"{context.span_id:016x}"]
        state["trace"] = ids
        if not root:
            state["root"] = ids
        external: dict[str, str] = state.pop("external", {}) if resumed else {}
        paused_ns: int = state.pop("paused_ns", 0) if resumed else 0
        outputs: dict[str, list[Any]] = {}
        try:
            async for event in next_handler():
                if event.source_path:
                    pass  # a nested run's events say nothing about this reply
                elif isinstance(event, RequireUserConfirmEvent | RequireExternalExecutionEvent):
                    span.set_attribute(_PAUSES[event.type], [c.name for c in event.tool_calls])
                    if event.type == "require_external_execution":
                        state = self.state(agent)
                        state["external"] = {c.id: c.name for c in event.tool_calls}
                        state["paused_ns"] = time.time_ns()
                elif event.type == "tool_result_delta" and event.call_id in external:
                    outputs.setdefault(event.call_id, []).append(event.media or event.text)
                elif event.type == "tool_result_end" and event.call_id in external:
                    self._external_tool(
                        span,
                        ToolCall(id=event.call_id, name=external.pop(event.call_id)),
                        event.state,
                        paused_ns,
                        outputs.pop(event.call_id, []),
                    )
                elif event.type == "reply_end":
                    span.set_attribute("hookmesh.finish_reason", event.finish_reason)
                    schema = _schema_name(event)
                    if schema:
                        span.set_attribute("hookmesh.output.schema_name", schema)
                    if event.error is not None:
                        _mark_error(span, event.error.message, event.error.reason)
                yield event
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()

    def _external_tool(
        self, reply_span: Span, call: ToolCall, state: str, paused_ns: int, output: list[Any]
    ) -> None:
        """A synthetic execute_tool span for a call the caller ran while the reply waited:
        from the pause to its result, a child of the resumed reply's span."""
        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=trace.set_span_in_context(reply_span),
            kind=SpanKind.INTERNAL,
            start_time=paused_ns or None,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "hookmesh.tool.external": True,
            },
        )
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", _result_json(output))
        if state != "success":
            _mark_error(span, f"tool result: {state}", state)
        span.end()

    def on_model_call(  # type: ignore[override]
        self, agent: AgentView, kwargs: dict[str, Any], next_handler: ModelHandler
    ) -> Awaitable[Any]:
        """Wraps one model call in ``chat {model}``; a stream's span ends after its last chunk."""
        parent = self._parent(agent)
        if parent is None:
            return next_handler()
        return self._chat(parent, kwargs, next_handler)

    async def _chat(self, parent: Any, kwargs: dict[str, Any], next_handler: ModelHandler) -> Any:
        model = kwargs["model"]
        span = self._tracer.start_span(
            f"chat {model.model_name}",
            context=parent,
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": getattr(model, "provider_name", "hookmesh"),
                "gen_ai.request.model": model.model_name,
            },
        )
        if self.capture_content:
            system, messages = input_messages(kwargs["messages"])
            span.set_attribute("gen_ai.system_instructions", system)
            span.set_attribute("gen_ai.input.messages", messages)
        try:
            result = await next_handler()
        except BaseException as exc:
            _fail(span, exc)
            span.end()
            raise
        if isinstance(result, ModelResponse):
            span.set_attribute("gen_ai.request.stream", False)
            _record(span, result.usage, result.stop_reason, result.response_id)
            if self.capture_content:
                parts = message_parts(result.message)
                span.set_attribute(
                    "gen_ai.output.messages", output_message(parts, result.stop_reason)
                )
            span.end()
            return result
        span.set_attribute("gen_ai.request.stream", True)
        return _traced_stream(span, result, self.capture_content)

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Wraps one tool run in ``execute_tool {tool}``; an error result sets error status."""
        parent = self._parent(agent)
        if parent is None:
            return next_handler()
        return self._acting(parent, kwargs["tool_call"], next_handler)

    async def _acting(
        self, parent: Any, call: ToolCall, next_handler: EventHandler
    ) -> AsyncIterator[AgentEvent]:
        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
            },
        )
        output: list[Any] | None = None
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", call.arguments)
            output = []
        try:
            async for event in next_handler():
                if output is not None and event.type == "tool_result_delta":
                    output.append(event.media or event.text)
                elif output is not None and event.type == "tool_result_end":
                    span.set_attribute("gen_ai.tool.call.result", _result_json(output))
                if event.type == "tool_result_end" and event.state != "success":
                    _mark_error(span, f"tool result: {event.state}", event.state)
                yield event
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()


def _mark_error(span: Span, description: str, error_type: str) -> None:
    """The OpenTelemetry semantic conventions' failed span: ERROR status plus `error.type`."""
    span.set_status(Status(StatusCode.ERROR, description))
    span.set_attribute("error.type", error_type)


def _fail(span: Span, exc: BaseException) -> None:
    _mark_error(span, str(exc) or type(exc).__name__, type(exc).__name__)
    if isinstance(exc, Exception):
        span.record_exception(exc)


def _record(span: Span, usage: Any, stop_reason: str, response_id: str) -> None:
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if usage.cache_read_tokens:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
        if usage.reasoning_tokens:
            span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens)
    if stop_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [stop_reason])
    if response_id:
        span.set_attribute("gen_ai.response.id", response_id)


def _context(ids: list[str]) -> Any:
    """A context whose current span is the one with these ids (a remote parent)."""
    context = SpanContext(
        int(ids[0], 16), int(ids[1], 16), is_remote=True, trace_flags=TraceFlags(1)
    )
    return trace.set_span_in_context(NonRecordingSpan(context))


def _result_json(output: list[Any]) -> str:
    """A tool's output pieces (text, media blocks) as one JSON list of parts."""
    text = "".join(p for p in output if isinstance(p, str))
    parts = [{"type": "text", "content": text}] if text else []
    parts.extend(media_part(p) for p in output if not isinstance(p, str))
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


async def _traced_stream(
    span: Span, stream: AsyncIterator[Any], capture: bool
) -> AsyncIterator[Any]:
    usage, stop_reason, response_id = None, "", ""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: dict[str, list[str]] = {}
    try:
        async for chunk in stream:
            usage = chunk.usage or usage
            stop_reason = chunk.stop_reason or stop_reason
            response_id = chunk.response_id or response_id
            if capture:
                texts.append(chunk.text)
                reasoning.append(chunk.reasoning)
                if chunk.tool_call is not None:
                    piece = chunk.tool_call
                    calls.setdefault(piece.call_id, [piece.name]).append(piece.arguments)
            yield chunk
        _record(span, usage, stop_reason, response_id)
        if capture:
            parts: list[dict[str, Any]] = []
            if text := "".join(reasoning):
                parts.append({"type": "reasoning", "content": text})
            if text := "".join(texts):
                parts.append({"type": "text", "content": text})
            parts.extend(
                call_part(ToolCall(id=i, name=p[0], arguments="".join(p[1:])))
                for i, p in calls.items()
            )
            span.set_attribute("gen_ai.output.messages", output_message(parts, stop_reason))
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        span.end()
