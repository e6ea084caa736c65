"""Timeouts: a model call or a tool run that takes too long ends with a clear error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import ActingArgs, ActingNext, AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import Middleware
from hookmesh.models import ModelError, ModelResponse, ModelResult
from hookmesh.schema import (
    AgentEvent,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
)

if TYPE_CHECKING:
    pass


class ModelTimeoutError(ModelError):
    """The model did not answer (or finish its stream) in time. A `ModelError` without an
    HTTP status, so the retry and fallback middlewares treat it as worth another try."""

    reason = "MODEL_TIMEOUT"


def _seconds(name: str, value: float | None) -> float | None:
    if value is not None and (isinstance(value, bool) or not value > 0):
        raise ValueError(f"{name} must be a number of seconds > 0 or None, not {value!r}")
    return value


class TimeoutMiddleware(Middleware):
    """Bounds how long one model call and one tool run may take.

    A model call must deliver its whole answer (a stream: its last chunk) within
    `model_timeout` seconds, else it raises `ModelTimeoutError` (reason ``MODEL_TIMEOUT``,
    metadata ``model`` and ``timeoutSeconds``): the reply ends with it, unless an outer retry
    or fallback middleware tries again. A tool run must end within its timeout (`tool_timeouts`
    by tool name, else `tool_timeout`), else it is cancelled and answered with an error
    result the model reads: ``Error: ToolTimeoutError: tool NAME did not finish within N s``
    (output it streamed before stays). A synchronous tool's thread cannot be stopped: it
    runs on, its result is dropped.

    State: none. Behind a sidecar the deadline is kept there: when it passes, the sidecar
    ends the hook while the downstream runs, and the agent cancels the model call or tool
    run (remote protocol, step 4). There a model timeout is the sidecar middleware's failure,
    not a `ModelError`: keep this middleware in process when a retry must follow it.

    Example:
        >>> mw = TimeoutMiddleware(model_timeout=60, tool_timeout=30, tool_timeouts={"build": 600})
        >>> mw.tool_timeouts["build"]
        600

    Args:
        model_timeout: Seconds one model call may take; None: unbounded.
        tool_timeout: Seconds one tool run may take; None: unbounded.
        tool_timeouts: Per tool name, seconds that replace `tool_timeout`.
    """

    read_only_subscriptions: Mapping[str, tuple[str, ...]] = {"on_acting": ("tool_result_start",)}
    """Behind a sidecar it needs only to learn that a tool result began, never to hold one."""

    def __init__(
        self,
        model_timeout: float | None = None,
        tool_timeout: float | None = None,
        tool_timeouts: Mapping[str, float] | None = None,
    ) -> None:
        self.model_timeout = _seconds("model_timeout", model_timeout)
        self.tool_timeout = _seconds("tool_timeout", tool_timeout)
        self.tool_timeouts = {
            name: _seconds(f"tool_timeouts[{name!r}]", value)
            for name, value in (tool_timeouts or {}).items()
        }

    def middleware_key(self) -> str:
        return "timeouts"

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """Bound the model call, a stream until its last chunk.

        Wraps the model call; the timeout raises `ModelTimeoutError` from this hook (an
        outer retry sees it as a model error).
        """
        seconds = self.model_timeout
        if seconds is None:
            return await next_handler()
        name = kwargs["model"].model_name
        deadline = asyncio.get_running_loop().time() + seconds
        try:
            async with asyncio.timeout_at(deadline):
                result = await next_handler()
        except TimeoutError:
            raise _model_timeout(name, seconds) from None
        if isinstance(result, ModelResponse):
            return result
        return _bounded_stream(result, deadline, name, seconds)

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Bound one tool run; on timeout cancel it and answer with an error result.

        Wraps the tool's execution only (the permission check and the context write are
        outside). A tool without a timeout passes straight through.
        """
        call = kwargs["tool_call"]
        seconds = self.tool_timeouts.get(call.name, self.tool_timeout)
        if seconds is None:
            return next_handler()
        return self._bounded_run(agent.reply_id, call, seconds, next_handler())

    async def _bounded_run(
        self, reply_id: str, call: Any, seconds: float, events: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        started = False
        deadline = asyncio.get_running_loop().time() + seconds
        try:
            async for event in _until(deadline, events):
                started = started or event.type == "tool_result_start"
                yield event
            return
        except TimeoutError:
            pass
        if not started:
            yield ToolResultStartEvent(reply_id=reply_id, call_id=call.id, name=call.name)
        text = f"Error: ToolTimeoutError: tool {call.name} did not finish within {seconds:g} s"
        yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, text=text)
        yield ToolResultEndEvent(reply_id=reply_id, call_id=call.id, state="error")


def _model_timeout(name: str, seconds: float) -> ModelTimeoutError:
    return ModelTimeoutError(
        f"the model {name} did not answer within {seconds:g} s",
        metadata={"model": name, "timeoutSeconds": f"{seconds:g}"},
    )


async def _bounded_stream(
    stream: AsyncIterator[Any], deadline: float, name: str, seconds: float
) -> AsyncIterator[Any]:
    try:
        async for chunk in _until(deadline, stream):
            yield chunk
    except TimeoutError:
        raise _model_timeout(name, seconds) from None


async def _until(deadline: float, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """`stream`'s items while the loop clock is before `deadline`; then TimeoutError. The
    stream is closed either way (a cancelled tool or model stream stops there)."""
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    item = await anext(stream)
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
