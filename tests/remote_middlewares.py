"""Middlewares for the remote-protocol tests (importable by a sidecar process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from hookmesh.middleware import HookMode, Middleware, ReasoningArgs
from hookmesh.remote import pass_rest
from hookmesh.schema import AgentEvent, CustomEvent, make_user_text, text_of
from tests.middlewares import Reporting


class Quiet(Middleware):
    """A pass-through on_reasoning that subscribes to nothing."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reasoning": ()}

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            yield event


class EndOnly(Quiet):
    """Subscribes to text_block_end only."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reasoning": ("text_block_end",)}


class PreOnlyNoTools(Middleware):
    """Forces tool_choice none in one round trip (pre_only)."""

    hook_modes: ClassVar[dict[str, HookMode]] = {"on_reasoning": "pre_only"}

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler(tool_choice="none"):
            yield event


class Stuck(Middleware):
    """Never answers: its hook waits until cancelled, recording entry and cancellation."""

    def __init__(self, hook_mode: HookMode = "intercept") -> None:
        self.entered = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.hook_modes = {"on_reasoning": hook_mode}

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        self.entered.set()
        print("entered", flush=True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        async for event in next_handler():
            yield event


class SliceProbe(Reporting):
    """Reports which state slices and how much context the sidecar can see."""

    def on_reasoning(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        state = self.state(agent)
        state["keys"] = sorted(agent.state.middle_context)
        state["replies"] = sorted(agent.state.middle_context[self.middleware_key()])
        state["context"] = len(agent.state.context)
        return next_handler()


class ContextProbe(SliceProbe):
    """SliceProbe that asks for the context."""

    needs_context = True


class Staller(Reporting):
    """Stalls forever in on_reasoning when the user said "stall"; otherwise records service."""

    needs_context = True

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        if text_of(agent.state.context[0]) == "stall":
            print("entered", flush=True)
            await asyncio.Event().wait()
        self.state(agent)["served"] = True
        async for event in next_handler():
            yield event


class PromptOverride(Reporting):
    """Replaces the model's prompt with one user message; records how much prompt it saw."""

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        self.state(agent)["prompt_seen"] = len(kwargs["messages"])
        return await next_handler(messages=[make_user_text(agent.kind, "overridden")])


class ContextPromptOverride(PromptOverride):
    """PromptOverride that asks for the context (and so sees and may replace the prompt)."""

    needs_context = True


class Forgetter(Middleware):
    """Deletes the user's first message (not a hint of its own) before the first step."""

    needs_context = True

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        context = agent.state.context
        context[:] = [m for m in context if text_of(m) != "forget me"]
        async for event in next_handler():
            yield event


class ModelChooser(Middleware):
    """Calls the model the agent configured as "fast" (or `name`) instead of its own."""

    def __init__(self, name: str = "fast") -> None:
        self.name = name

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return await next_handler(model=agent.resolve_model(self.name))


class Watcher(Middleware):
    """Watches every reply event read-only, in its state; reports it at reply_end."""

    read_only_subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reply": ("*",)}

    async def on_reply(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        state = self.state(agent)
        async for event in next_handler():
            state.setdefault("seen", []).append(event.type)
            if event.type == "reply_end":
                yield CustomEvent(reply_id=agent.reply_id, name="report:Watcher", value=dict(state))
            yield event


class PassThroughFunction(Middleware):
    """A plain-function on_reasoning handing the downstream back untouched."""

    def on_reasoning(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return next_handler()


class PassesRestAtFirstDelta(Middleware):
    """Holds each reasoning event until the first text delta, then lets the rest pass
    (`pass_rest`: that delta's verdict is final)."""

    async def on_reasoning(
        self, agent: Any, kwargs: ReasoningArgs, next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        stream = next_handler()
        async for event in stream:
            if event.type == "text_block_delta":
                rest = pass_rest(stream)
                yield event
                async for later in rest:
                    yield later
                yield CustomEvent(reply_id=agent.reply_id, name="never.sent")
                return
            yield event


class PrefersFailOpen(Middleware):
    """Fails in on_reasoning; prefers fail_open (its Describe says so)."""

    failure_mode = "fail_open"

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        raise RuntimeError("always fails")
        yield  # pragma: no cover - makes this an async generator


class WatchesChecks(Middleware):
    """Watches permission checks and context compression in the given mode, changing
    nothing (pre_only and observe are each a single message for these hooks)."""

    def __init__(self, mode: HookMode) -> None:
        self.hook_modes = {"on_check_permission": mode, "on_compress_context": mode}
        self.finished: asyncio.Queue[str] = asyncio.Queue()
        """The hooks as each invocation ends (on the sidecar)."""

    async def on_check_permission(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> Any:
        decision = await next_handler()
        self.finished.put_nowait("on_check_permission")
        return decision

    async def on_compress_context(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> None:
        await next_handler()
        self.finished.put_nowait("on_compress_context")


class Passer(Middleware):
    """Hands every reasoning step on untouched: exactly one invocation per step."""

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            yield event
