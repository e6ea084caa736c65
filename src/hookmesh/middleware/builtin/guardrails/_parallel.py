"""A parallel input check: it runs alongside the reply's first model call, which it cancels
when it trips; the first model response (and the reply's end) waits for its verdict."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from hookmesh.middleware import Middleware, blame, skip_failed
from hookmesh.schema import AgentEvent

_HELD = frozenset({"model_call_end", "reply_end"})
"""Events that wait for a running check: after them tools run, or the answer is final."""


class _Race:
    """Cancels the reply's wait on its downstream when the check ends with a trip (or a
    fail_closed failure) while the wait is on, once; `woken` says whether it did."""

    __slots__ = ("cancelled", "check", "pulling", "task")

    def __init__(self, check: asyncio.Task[str | None], guardrail: Middleware) -> None:
        self.task = asyncio.current_task()
        self.check = check
        self.pulling = False
        self.cancelled = False
        check.add_done_callback(lambda done: self._ended(done, guardrail))

    def _ended(self, done: asyncio.Task[str | None], guardrail: Middleware) -> None:
        if done.cancelled() or not self.pulling or self.task is None:
            return
        failed = done.exception() is not None
        if (done.exception() is None and done.result() is not None) or (
            failed and guardrail.failure_mode == "fail_closed"
        ):
            self.cancelled = True
            self.task.cancel("hookmesh: a parallel guardrail stopped the reply")

    def woken(self) -> bool:
        """After a CancelledError: whether it was this race's own (then undone)."""
        if not self.cancelled:
            return False
        self.cancelled = False
        return self.task is not None and self.task.uncancel() == 0


async def alongside(
    guardrail: Middleware,
    verdict: Awaitable[str | None],
    tripped: Callable[[str], Exception],
    state: dict[str, Any],
    downstream: AsyncIterator[AgentEvent],
) -> AsyncIterator[AgentEvent]:
    """The reply's events while the check (`verdict`) runs in a task of its own.

    Events pass as they come until the first model_call_end or reply_end, which waits for
    the verdict. A trip (`tripped(why)` is raised) while the reply waits on its downstream
    (its first model call) cancels that wait, so the model call is cancelled. Once the check
    passes, its subject is dropped from `state` (the guardrail's, for the reply).
    """
    check = asyncio.ensure_future(verdict)
    race = _Race(check, guardrail)
    iterator = aiter(downstream)
    try:
        while not check.done():
            race.pulling = True
            event: AgentEvent | None
            try:
                event = await anext(iterator)
            except StopAsyncIteration:
                event = None
            except asyncio.CancelledError:
                if not race.woken():
                    raise
                event = None  # the check tripped while the model call ran
            finally:
                race.pulling = False
            if event is None or (event.type in _HELD and not event.source_path):
                await asyncio.wait([check])
            if event is None:
                await _settle(guardrail, check, tripped, state, iterator)
                return
            if check.done():
                break
            yield event
        else:
            event = None
        await _settle(guardrail, check, tripped, state, iterator)
        if event is not None:
            yield event
        async for event in iterator:
            yield event
    finally:
        check.cancel()


async def _settle(
    guardrail: Middleware,
    check: asyncio.Task[str | None],
    tripped: Callable[[str], Exception],
    state: dict[str, Any],
    iterator: AsyncIterator[AgentEvent],
) -> None:
    """Act on a finished check: a trip (or a fail_closed failure) stops the downstream and
    is raised; a pass, or a fail_open failure (skipped), lets the reply go on."""
    error = check.exception()
    if error is None and check.result() is None:
        state.pop("input", None)
        return
    if error is not None and guardrail.failure_mode == "fail_open":
        skip_failed(guardrail, "on_reply", error)
        state.pop("input", None)
        return
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()
    if error is not None:
        raise blame(error, guardrail)
    raise blame(tripped(check.result() or ""), guardrail)
