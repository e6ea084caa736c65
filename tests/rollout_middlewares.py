"""Versions of one middleware (key ``versioned``) for the rollout tests, served by sidecars:
each marks the reasoning steps it wraps and its own state, so a reply tells which version
served it and a shadow's decisions would show if they were applied."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from hookmesh.middleware import Middleware
from hookmesh.schema import AgentEvent, CustomEvent, make_hint, make_user_text, text_of
from tests.mesh_app import GATE_ENV, wait_at_gate


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


class HintsA(Versioned):
    """V1, which also adds a hint to the context before each reasoning step: versions that
    differ only in the hint's text differ only in their context edits."""

    version = "v1"
    hint: ClassVar[str] = "a"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        agent.state.context.append(make_hint(agent.kind, self.hint, "versioned", id="hint"))
        async for event in super().on_reasoning(agent, kwargs, next_handler):
            yield event


class HintsB(HintsA):
    hint = "b"


class KeepsAll(Versioned):
    """V1, which also compresses the context by keeping all of it."""

    version = "v1"
    needs_context = True

    async def on_compress_context(self, agent: Any, kwargs: Any, next_handler: Any) -> None:
        await next_handler()


class Summarizes(KeepsAll):
    """V1, which compresses the context to one message saying ``summary``."""

    async def on_compress_context(self, agent: Any, kwargs: Any, next_handler: Any) -> None:
        await next_handler()
        agent.state.context[:] = [make_user_text(agent.kind, "summary")]


class Broken(Versioned):
    """A version that fails every reasoning step (fail_closed: the reply fails)."""

    version = "broken"

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        raise RuntimeError("this version is broken")
        yield  # pragma: no cover - makes this an async generator


class GatedReasoning(Versioned):
    """Waits at the gate named by ``MESH_GATE`` before a reasoning step of a reply whose
    user said ``park``: an invocation held open on the Intercept stream."""

    version = "gated"
    needs_context = True

    async def on_reasoning(
        self, agent: Any, kwargs: Any, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        if text_of(agent.state.context[-1]) == "park":
            await wait_at_gate(os.environ[GATE_ENV])
        async for event in super().on_reasoning(agent, kwargs, next_handler):
            yield event
