"""The agent side's queues on the Intercept stream: one invocation's inbox (what the stream's
reader hands it, waited for with the per-message deadline) and the stream's outgoing queue."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any


class Mailbox:
    """Messages in order, and at most one task waiting for the next: the cheapest queue that
    does (a deque and one future; no getter list, no maxsize, no task accounting).

    With a `timeout`, each wait fails once that many seconds passed since it began, at the
    cost of one timer per mailbox rather than one per wait: the first wait arms it and, when
    it fires, it is re-armed for the wait then pending (if any) instead of being set and
    cancelled around every wait. Most invocations end long before it fires once.
    """

    __slots__ = ("_items", "_loop", "_since", "_timeout", "_timer", "_waiter")

    def __init__(self, timeout: float | None = None) -> None:
        self._items: deque[Any] = deque()
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._since = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def get_nowait(self) -> Any:
        """The next message; the mailbox must not be empty."""
        return self._items.popleft()

    async def get(self) -> Any:
        """The next message, once there is one.

        Raises:
            TimeoutError: None came within the timeout.
        """
        if self._items:
            return self._items.popleft()
        loop = self._loop
        if self._timeout is not None:
            self._since = loop.time()
            if self._timer is None:
                self._timer = loop.call_at(self._since + self._timeout, self._expire)
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        return self._items.popleft()

    def _expire(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done() or self._timeout is None:
            return  # no wait pending: the next one arms the timer anew
        due = self._since + self._timeout
        if self._loop.time() >= due:
            waiter.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(due, self._expire)

    def close(self) -> None:
        """Its invocation ended: drop the timer (a pending one would keep it alive)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
