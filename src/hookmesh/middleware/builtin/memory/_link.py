"""The memory middleware's link to its backend: the service client or an in-process
store, a deadline on every call, failures as `MemoryUnavailableError`, background writes."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from hookmesh.errors import HookmeshError
from hookmesh.middleware import AgentView
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.schema import CustomEvent

if TYPE_CHECKING:
    from hookmesh._security import ClientTLS
    from hookmesh.client import MemoryClient
    from hookmesh.memory import Memories, MemoryScope

log = logging.getLogger("hookmesh.middleware.memory")

T = TypeVar("T")

WARNING_EVENT = "memory.warning"
"""Name of the custom event reporting a memory failure under ``fail_open``."""


class MemoryUnavailableError(HookmeshError):
    """The memory backend failed and the middleware fails closed."""

    reason = "MEMORY_UNAVAILABLE"


class MemoryLink(Middleware):
    """What `MemoryMiddleware` talks to its memory through (not a public extension point)."""

    target: str
    store: Memories | None
    search_by_agent: bool
    timeout: float
    failure_mode: FailureMode
    token_env: str | None
    tls: ClientTLS | None
    max_background: int
    _client: MemoryClient | None
    _client_loop: asyncio.AbstractEventLoop | None
    _tasks: set[asyncio.Task[None]]

    def backend(self) -> Memories:
        """The in-process store, or the service client (one channel per event loop)."""
        if self.store is not None:
            return self.store
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from hookmesh.client import MemoryClient

            token = os.environ.get(self.token_env) if self.token_env else None
            self._client = MemoryClient(
                self.target, timeout=self.timeout, token=token, tls=self.tls
            )
            self._client_loop = loop
        return self._client

    @property
    def background_tasks(self) -> int:
        """Background writes still running."""
        return len(self._tasks)

    async def drain(self, timeout: float) -> None:
        """Wait (up to `timeout` s) for the background writes running now.

        Raises:
            TimeoutError: Some were still running at the deadline.
        """
        async with asyncio.timeout(timeout):
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self, timeout: float = 5.0) -> None:
        """Let background writes finish for up to `timeout` s, cancel the rest, close the
        service channel."""
        try:
            await self.drain(timeout)
        except TimeoutError:
            log.warning("cancelling %d unfinished background memory writes", len(self._tasks))
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _search_scope(self, scope: dict[str, Any]) -> MemoryScope:
        from hookmesh.memory import MemoryScope

        agent_id = scope["agent_id"] if self.search_by_agent else None
        return MemoryScope(scope["user_id"], agent_id)

    async def _call(self, what: str, call: Awaitable[T]) -> T:
        """`call` within the deadline; failures become `MemoryUnavailableError`."""
        try:
            async with asyncio.timeout(self.timeout):
                return await call
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            where = self.target or "in-process store"
            reason = getattr(exc, "reason", "") or type(exc).__name__
            code = getattr(getattr(exc, "code", None), "name", "")
            raise MemoryUnavailableError(
                f"memory {what} failed ({where}): {exc or type(exc).__name__}",
                metadata={"operation": what, "cause": str(reason), "code": str(code)},
            ) from exc

    def _warning(self, agent: AgentView, exc: MemoryUnavailableError) -> CustomEvent:
        if self.failure_mode == "fail_closed":
            raise exc
        log.warning("%s; the reply goes on without it", exc.message)
        return CustomEvent(
            reply_id=agent.reply_id,
            name=WARNING_EVENT,
            value={"message": exc.message, **exc.metadata},
        )

    def _write_later(self, write: Awaitable[Any]) -> bool:
        """Run `write` as a tracked background task, unless `max_background` are running."""
        if len(self._tasks) >= self.max_background:
            return False
        task = asyncio.create_task(self._background(write))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    @staticmethod
    async def _background(write: Awaitable[Any]) -> None:
        try:
            await write
        except MemoryUnavailableError as exc:
            log.warning("%s (background write; the turn is not remembered)", exc.message)
