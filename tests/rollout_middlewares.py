"""Versions of one middleware (key ``versioned``) for the rollout tests, served by sidecars:
each marks the reasoning steps it wraps and its own state, so a reply tells which version
served it and a shadow's decisions would show if they were applied."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from hookmesh.middleware import Middleware
from hookmesh.schema import AgentEvent, CustomEvent


class Versioned(Middleware):
    """Emits ``version`` before each reasoning step and records itself in its state."""

    version: ClassVar[str] = ""

    def middleware_key(self) -> str:
        return "versioned"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        self.state(agent)["by"] = self.version
        yield CustomEvent(reply_id=agent.reply_id, name="version", value=self.version)
        async for event in next_handler():
            yield event


class V1(Versioned):
    version = "v1"


class V2(Versioned):
    version = "v2"


class Broken(Versioned):
    """A version that fails every reasoning step (fail_closed: the reply fails)."""

    version = "broken"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        raise RuntimeError("this version is broken")
        yield  # pragma: no cover - makes this an async generator
