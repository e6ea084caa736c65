"""One invocation's inbox on the agent side: what the stream's reader hands it, waited for
with the per-message deadline."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any


class Inbox:
    """The messages the sidecar sent one invocation, in order, and at most one wait for the next.

    The deadline is per message (a wait fails once `timeout` seconds passed since it began)
    but costs one timer per invocation, not one per wait: the timer is armed by the first
    wait and, when it fires, re-armed for the wait then pending (if any) instead of being
    set and cancelled around every wait. Most invocations end long before it fires once.
    """

    __slots__ = ("_items", "_loop", "_since", "_timeout", "_timer", "_waiter")

    def __init__(self, timeout: float) -> None:
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

    async def get(self) -> Any:
        """The next message.

        Raises:
            TimeoutError: None came within the timeout.
        """
        if self._items:
            return self._items.popleft()
        loop = self._loop
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
        if waiter is None or waiter.done():
            return  # no wait pending: the next one arms the timer anew
        due = self._since + self._timeout
        if self._loop.time() >= due:
            waiter.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(due, self._expire)

    def close(self) -> None:
        """The invocation ended: drop the timer (a pending one would keep it alive)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
