"""A deliberately broken conformance middleware: the runner must name the rules it breaks."""

from __future__ import annotations

from typing import Any

from hookmesh.conformance import ConformanceMiddleware
from hookmesh.conformance._middleware import marker


class IgnoresEmit(ConformanceMiddleware):
    """Treats the `emit` marker as no marker: on_reasoning emits nothing."""

    def on_reasoning(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        if marker(agent) == "emit":
            return self._events_without_marker(next_handler)
        return super().on_reasoning(agent, kwargs, next_handler)

    async def _events_without_marker(self, next_handler: Any) -> Any:
        async for event in next_handler():
            yield event


class DropsEvents(ConformanceMiddleware):
    """Drops every event of an on_reasoning invocation without a marker: it breaks the
    pass-through rule (a sidecar must keep what it was not asked to drop)."""

    def on_reasoning(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        if marker(agent) == "":
            return self._dropped(next_handler)
        return super().on_reasoning(agent, kwargs, next_handler)

    async def _dropped(self, next_handler: Any) -> Any:
        async for _ in next_handler():
            pass
        return
        yield  # an async generator that yields nothing
