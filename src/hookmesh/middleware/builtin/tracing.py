"""Tracing: OpenTelemetry spans for replies, model calls and tool runs (GenAI conventions)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, ClassVar

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

from hookmesh.agent.models import ModelResponse
from hookmesh.middleware._base import EventHandler, Middleware, ModelHandler
from hookmesh.schema import AgentEvent, RequireExternalExecutionEvent, RequireUserConfirmEvent

if TYPE_CHECKING:
    from hookmesh.agent import Agent

_PAUSES = {
    "require_user_confirm": "hookmesh.pending_confirmation_tools",
    "require_external_execution": "hookmesh.pending_external_tools",
}


def _sdk_installed() -> bool:
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


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

    State: ``{"trace": [trace_id, span_id] | None}`` in ``middle_context[key][reply_id]``: the
    reply span's ids, so the child spans (also when this middleware runs in a sidecar) are
    parented without keeping span objects on the instance.

    Not supported: recording prompts and completions (opt-in content attributes).

    Example:
        >>> Agent(model, middlewares=[TracingMiddleware()])
    """

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {
        "on_reply": ("reply_end", *_PAUSES),
        "on_acting": ("tool_result_end",),
        "on_model_call": ("chunk",),
    }

    def __init__(self, tracer_name: str = "hookmesh") -> None:
        self._tracer = trace.get_tracer(tracer_name)

    def middleware_key(self) -> str:
        return "tracing"

    def _parent(self, agent: Agent) -> Any:
        by_reply = agent.state.middle_context.get(self.middleware_key())
        ids = by_reply.get(agent.reply_id, {}).get("trace") if by_reply else None
        if not ids:
            return None
        context = SpanContext(
            int(ids[0], 16), int(ids[1], 16), is_remote=True, trace_flags=TraceFlags(1)
        )
        return trace.set_span_in_context(NonRecordingSpan(context))

    def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: EventHandler
    ) -> AsyncIterator[AgentEvent]:
        """Wraps the whole reply in ``invoke_agent``; decides once whether tracing is on."""
        if not _sdk_installed():
            return next_handler()
        return self._reply(agent, next_handler)

    async def _reply(self, agent: Agent, next_handler: EventHandler) -> AsyncIterator[AgentEvent]:
        name = agent.name or ""
        span = self._tracer.start_span(
            f"invoke_agent {name}".strip(),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.conversation.id": agent.session_id,
                "hookmesh.reply_id": agent.reply_id,
            },
        )
        context = span.get_span_context()
        self.state(agent)["trace"] = [f"{context.trace_id:032x}", f"{context.span_id:016x}"]
        try:
            async for event in next_handler():
                if isinstance(event, RequireUserConfirmEvent | RequireExternalExecutionEvent):
                    span.set_attribute(_PAUSES[event.type], [c.name for c in event.tool_calls])
                elif event.type == "reply_end":
                    span.set_attribute("hookmesh.finish_reason", event.finish_reason)
                    if event.error is not None:
                        span.set_status(Status(StatusCode.ERROR, event.error.message))
                        span.set_attribute("error.type", event.error.reason)
                yield event
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()

    def on_model_call(  # type: ignore[override]
        self, agent: Agent, kwargs: dict[str, Any], next_handler: ModelHandler
    ) -> Awaitable[Any]:
        """Wraps one model call in ``chat {model}``; a stream's span ends after its last chunk."""
        parent = self._parent(agent)
        if parent is None:
            return next_handler()
        return self._chat(parent, kwargs["model"], next_handler)

    async def _chat(self, parent: Any, model: Any, next_handler: ModelHandler) -> Any:
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
        try:
            result = await next_handler()
        except BaseException as exc:
            _fail(span, exc)
            span.end()
            raise
        if isinstance(result, ModelResponse):
            span.set_attribute("gen_ai.request.stream", False)
            _record(span, result.usage, result.stop_reason, result.response_id)
            span.end()
            return result
        span.set_attribute("gen_ai.request.stream", True)
        return _traced_stream(span, result)

    def on_acting(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: EventHandler
    ) -> AsyncIterator[AgentEvent]:
        """Wraps one tool run in ``execute_tool {tool}``; an error result sets error status."""
        parent = self._parent(agent)
        if parent is None:
            return next_handler()
        return self._acting(parent, kwargs["tool_call"], next_handler)

    async def _acting(
        self, parent: Any, call: Any, next_handler: EventHandler
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
        try:
            async for event in next_handler():
                if event.type == "tool_result_end" and event.state != "success":
                    span.set_status(Status(StatusCode.ERROR, f"tool result: {event.state}"))
                    span.set_attribute("error.type", event.state)
                yield event
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()


def _fail(span: Span, exc: BaseException) -> None:
    span.set_status(Status(StatusCode.ERROR, str(exc) or type(exc).__name__))
    span.set_attribute("error.type", type(exc).__name__)
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


async def _traced_stream(span: Span, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    usage, stop_reason, response_id = None, "", ""
    try:
        async for chunk in stream:
            usage = chunk.usage or usage
            stop_reason = chunk.stop_reason or stop_reason
            response_id = chunk.response_id or response_id
            yield chunk
        _record(span, usage, stop_reason, response_id)
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        span.end()
