"""Middlewares the remote-hook benchmark's sidecars serve (importable by `hookmesh sidecar`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from hookmesh.middleware import HookMode, Middleware
from hookmesh.schema import AgentEvent


class InterceptPassThrough(Middleware):
    """Case (a): on_reasoning in full intercept mode, re-yielding every event; subscribes to
    nothing, so an invocation is two round trips (invocation/call_next, outcome/done)."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reasoning": ()}
    hook_modes: ClassVar[dict[str, HookMode]] = {"on_reasoning": "intercept"}

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            yield event


class PreOnlyPassThrough(InterceptPassThrough):
    """Case (b): the same hook in pre_only mode: one round trip (invocation/call_next)."""

    hook_modes: ClassVar[dict[str, HookMode]] = {"on_reasoning": "pre_only"}


class ObservePassThrough(InterceptPassThrough):
    """Case (c): the same hook in observe mode: the agent sends and never waits."""

    hook_modes: ClassVar[dict[str, HookMode]] = {"on_reasoning": "observe"}


class QuietReply(Middleware):
    """Case (d): on_reply in intercept mode subscribed to none of the reply's events."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reply": ()}

    async def on_reply(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            yield event


class QuietReplyPreOnly(QuietReply):
    """(d) in pre_only mode: the invocation is the only message."""

    hook_modes: ClassVar[dict[str, HookMode]] = {"on_reply": "pre_only"}


class QuietReplyObserve(QuietReply):
    """(d) in observe mode: invocation and outcome, never waited for."""

    hook_modes: ClassVar[dict[str, HookMode]] = {"on_reply": "observe"}


class EveryReplyEvent(QuietReply):
    """Contrast for (d): the default subscription ("*"), every reply event forwarded."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {}


class WatchEveryReplyEvent(QuietReply):
    """remote_load: an on_reply watcher of every event, read-only (no verdict round trips)."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {}
    read_only_subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reply": ("*",)}
