"""Pre-built onion chains: one per hook, assembled once when the agent is built."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from hookmesh.errors import HookmeshError
from hookmesh.metrics import record_middleware_error
from hookmesh.middleware._base import Middleware
from hookmesh.middleware._blame import blame, culprit
from hookmesh.middleware._kwargs import checked_overrides
from hookmesh.middleware._trip import is_trip
from hookmesh.middleware._view import AgentView

log = logging.getLogger("hookmesh.middleware")

EventCall = Callable[[dict[str, Any]], AsyncIterator[Any]]
"""A built event chain: kwargs in, events out."""
AwaitCall = Callable[[dict[str, Any]], Awaitable[Any]]
"""A built awaitable chain: kwargs in, result out."""


def skip_failed(mw: Middleware, hook: str, exc: BaseException) -> None:
    """A fail_open middleware failed in `hook`: count it and log it, then go on without it."""
    record_middleware_error(mw.middleware_key(), "fail_open", hook)
    # A HookmeshError is an expected failure (a sidecar or service down) and says what it
    # is; anything else is a bug in the middleware and keeps its traceback.
    reported = isinstance(exc, HookmeshError) and exc.reported
    log.log(
        logging.DEBUG if reported else logging.WARNING,
        "middleware %s failed in %s and is skipped (fail_open): %s",
        mw.middleware_key(),
        hook,
        exc,
        exc_info=None if isinstance(exc, HookmeshError) else exc,
    )


class _Open:
    """One fail_open invocation: records the downstream's result and whether it failed, so
    the layer can tell the middleware's own errors (skip it) from the downstream's (raise)."""

    __slots__ = ("failed", "guarded", "raw", "returned")

    def __init__(self) -> None:
        self.failed = False
        self.returned = False
        self.raw: Any = None
        self.guarded: AsyncIterator[Any] | None = None

    def track(self, result: Any) -> Any:
        """Remember the downstream's result. A stream asked for while the hook's body runs
        (async-generator hooks) comes back watched for failures; one asked for by a plain
        function before it returns comes back raw, so a pass-through costs nothing."""
        self.raw = result
        if self.returned and hasattr(result, "__anext__"):
            self.guarded = result = self._watch(result)
        return result

    async def _watch(self, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            async for item in stream:
                yield item
        except BaseException:
            self.failed = True
            raise

    def downstream_failed(self, exc: BaseException, mw: Middleware) -> bool:
        """Whether `exc` came from below the middleware rather than from its own code."""
        if self.failed:
            return True
        return self.guarded is None and self.raw is not None and culprit(exc) is not mw


def _event_layer(agent: AgentView, mw: Middleware, hook: str, downstream: EventCall) -> EventCall:
    method = getattr(mw, hook)

    def layer(kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        def next_handler(**overrides: Any) -> AsyncIterator[Any]:
            return downstream(checked_overrides(hook, kwargs, overrides) if overrides else kwargs)

        try:
            return method(agent, kwargs, next_handler)  # type: ignore[no-any-return]
        except BaseException as exc:
            blame(exc, mw)
            raise

    return layer


def _open_event_layer(
    agent: AgentView, mw: Middleware, hook: str, downstream: EventCall
) -> EventCall:
    method = getattr(mw, hook)

    def layer(kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        run = _Open()

        def next_handler(**overrides: Any) -> AsyncIterator[Any]:
            changed = checked_overrides(hook, kwargs, overrides) if overrides else kwargs
            return run.track(downstream(changed))  # type: ignore[no-any-return]

        try:
            result = method(agent, kwargs, next_handler)
        except Exception as exc:
            if is_trip(exc):
                blame(exc, mw)
                raise
            skip_failed(mw, hook, exc)
            return run.raw if run.raw is not None else downstream(kwargs)  # type: ignore[no-any-return]
        run.returned = True
        if run.raw is not None and result is run.raw:
            return result  # type: ignore[no-any-return]
        return _open_events(mw, hook, result, run, lambda: downstream(kwargs))

    return layer


async def _open_events(
    mw: Middleware, hook: str, stream: AsyncIterator[Any], run: _Open, fresh: Callable[[], Any]
) -> AsyncIterator[Any]:
    try:
        async for event in stream:
            yield event
    except Exception as exc:
        if run.downstream_failed(exc, mw) or is_trip(exc):
            raise
        skip_failed(mw, hook, exc)
        rest = run.guarded or run.raw
        async for event in rest if rest is not None else fresh():
            yield event


def _await_layer(agent: AgentView, mw: Middleware, hook: str, downstream: AwaitCall) -> AwaitCall:
    method = getattr(mw, hook)

    def layer(kwargs: dict[str, Any]) -> Awaitable[Any]:
        def next_handler(**overrides: Any) -> Awaitable[Any]:
            return downstream(checked_overrides(hook, kwargs, overrides) if overrides else kwargs)

        try:
            return method(agent, kwargs, next_handler)  # type: ignore[no-any-return]
        except BaseException as exc:
            blame(exc, mw)
            raise

    return layer


def _open_await_layer(
    agent: AgentView, mw: Middleware, hook: str, downstream: AwaitCall
) -> AwaitCall:
    method = getattr(mw, hook)

    async def layer(kwargs: dict[str, Any]) -> Any:
        run = _Open()
        called = False

        async def next_handler(**overrides: Any) -> Any:
            nonlocal called
            called = True
            try:
                changed = checked_overrides(hook, kwargs, overrides) if overrides else kwargs
                result = await downstream(changed)
            except BaseException:
                run.failed = True
                raise
            run.raw = result
            return result

        try:
            result = await method(agent, kwargs, next_handler)
        except Exception as exc:
            if run.failed or is_trip(exc):
                raise
            skip_failed(mw, hook, exc)
            return run.raw if called else await downstream(kwargs)
        if result is run.raw or not hasattr(result, "__anext__"):
            return result
        return _open_stream(mw, hook, result, run)

    return layer


async def _open_stream(
    mw: Middleware, hook: str, stream: AsyncIterator[Any], run: _Open
) -> AsyncIterator[Any]:
    """A fail_open middleware's wrapped chunk stream: if the wrapper fails, the rest of the
    downstream stream continues unwrapped (chunks the wrapper held back are lost)."""
    try:
        async for item in stream:
            yield item
    except Exception as exc:
        if run.downstream_failed(exc, mw) or not hasattr(run.raw, "__anext__") or is_trip(exc):
            raise
        skip_failed(mw, hook, exc)
        async for item in run.raw:
            yield item


def build_event_chain(
    agent: AgentView, middlewares: Sequence[Middleware], hook: str, core: EventCall
) -> EventCall:
    """The onion for an event hook; the core itself when no middleware implements `hook`."""
    handler = core
    for mw in reversed(middlewares):
        make = _open_event_layer if mw.failure_mode == "fail_open" else _event_layer
        handler = make(agent, mw, hook, handler)
    return handler


def build_await_chain(
    agent: AgentView, middlewares: Sequence[Middleware], hook: str, core: AwaitCall
) -> AwaitCall:
    """The onion for an awaitable hook; the core itself when no middleware implements it."""
    handler = core
    for mw in reversed(middlewares):
        make = _open_await_layer if mw.failure_mode == "fail_open" else _await_layer
        handler = make(agent, mw, hook, handler)
    return handler
