"""Metrics: OpenTelemetry counters and histograms for replies, model calls and tool runs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from hookmesh.metrics import record_model_call, record_reply, record_tool_call
from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    ModelCallArgs,
    ModelCallNext,
    ReplyArgs,
    ReplyNext,
)
from hookmesh.middleware._base import Middleware
from hookmesh.models import ModelResponse, ModelResult
from hookmesh.schema import AgentEvent, Usage

if TYPE_CHECKING:
    pass


class MetricsMiddleware(Middleware):
    """Records OpenTelemetry metrics of the agent's work (GenAI conventions where they exist).

    - ``hookmesh.agent.replies`` (counter) and ``hookmesh.agent.reply.duration`` (s), by
      ``gen_ai.agent.name`` and ``hookmesh.finish_reason`` (a paused reply counts as
      ``awaiting_*``, its resumption again);
    - ``gen_ai.client.operation.duration`` (s; a stream until its last chunk) and
      ``gen_ai.client.token.usage`` (by ``gen_ai.token.type`` input/output), by
      ``gen_ai.operation.name`` (chat), ``gen_ai.provider.name``, ``gen_ai.request.model``
      and ``error.type`` on failure;
    - ``hookmesh.tool.calls`` (counter) and ``hookmesh.tool.duration`` (s), by
      ``gen_ai.tool.name`` and ``hookmesh.tool.state``.

    Middleware errors and remote hook latency are recorded by the agent and the remote proxy
    themselves (`hookmesh.metrics`). Where the points go is the process's meter provider:
    a service's Prometheus endpoint, OTLP when configured, or nothing (then recording costs
    next to nothing).

    State: none (timers live in the hooks' frames). Remote: works in a sidecar (it then
    measures there, round trips included).

    Example:
        >>> Agent(model, middlewares=[MetricsMiddleware()])
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_reply": ("reply_end",),
        "on_model_call": ("chunk",),
        "on_acting": ("tool_result_end",),
    }

    def middleware_key(self) -> str:
        return "metrics"

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Time the reply and count it by how it ended (errors included)."""
        start = time.perf_counter()
        async for event in next_handler():
            if event.type == "reply_end":
                record_reply(agent.name, event.finish_reason, time.perf_counter() - start)
            yield event

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Time the model call (a stream until its end) and record its token usage."""
        model = kwargs["model"]
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": getattr(model, "provider_name", "hookmesh"),
            "gen_ai.request.model": model.model_name,
        }
        start = time.perf_counter()
        try:
            result = await next_handler()
        except Exception as exc:
            _operation(attributes, start, None, exc)
            raise
        if isinstance(result, ModelResponse):
            _operation(attributes, start, result.usage)
            return result
        return _measured_stream(result, attributes, start)

    async def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Time the tool run and count it by its result's state."""
        name = kwargs["tool_call"].name
        start = time.perf_counter()
        async for event in next_handler():
            if event.type == "tool_result_end":
                record_tool_call(name, event.state, time.perf_counter() - start)
            yield event


def _operation(
    attributes: dict[str, Any],
    start: float,
    usage: Usage | None,
    error: BaseException | None = None,
) -> None:
    if error is not None:
        attributes = {**attributes, "error.type": getattr(error, "reason", type(error).__name__)}
    record_model_call(
        attributes,
        time.perf_counter() - start,
        usage.input_tokens if usage is not None else None,
        usage.output_tokens if usage is not None else None,
    )


async def _measured_stream(
    stream: AsyncIterator[Any], attributes: dict[str, Any], start: float
) -> AsyncIterator[Any]:
    usage = None
    try:
        async for chunk in stream:
            usage = chunk.usage or usage
            yield chunk
    except Exception as exc:
        _operation(attributes, start, usage, exc)
        raise
    _operation(attributes, start, usage)
