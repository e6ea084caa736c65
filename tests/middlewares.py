"""Middlewares used by the hook-rule tests; importable by a sidecar (`tests.middlewares:X`).

They report only through events and agent state, never through Python attributes, so the
same assertions hold when a middleware runs behind a sidecar.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from hookmesh.agent import Agent, tool
from hookmesh.middleware import Middleware, PermissionDecision
from hookmesh.models import ModelResponse
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    Message,
    make_assistant,
    make_text,
    text_of,
    to_agentic,
    unanswered_tool_calls,
)


class Reporting(Middleware):
    """Emits its state slice as a custom event ``report:<key>`` just before reply_end."""

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {"on_reply": ("reply_end",)}

    async def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            if event.type == "reply_end":
                yield CustomEvent(
                    reply_id=event.reply_id,
                    name=f"report:{self.middleware_key()}",
                    value=dict(self.state(agent)),
                )
            yield event


class Tagger(Middleware):
    """Marks its layer: custom events around reasoning, a suffix on the model's text."""

    def __init__(self, name: str) -> None:
        self.name = name

    def middleware_key(self) -> str:
        return f"tagger-{self.name}"

    async def on_reasoning(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        yield CustomEvent(reply_id=agent.reply_id, name="pre", value=self.name)
        async for event in next_handler():
            yield event
        yield CustomEvent(reply_id=agent.reply_id, name="post", value=self.name)

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        result = await next_handler()
        if isinstance(result, ModelResponse):
            text = text_of(result.message) + f"|{self.name}"
            result.message = make_assistant(agent.kind, text)
        return result


class ForceNoTools(Middleware):
    """Rewrites the downstream kwargs: the model may not call tools."""

    def on_reasoning(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        return next_handler(tool_choice="none")


class CannedAnswer(Middleware):
    """Short-circuits the model: never calls next_handler."""

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return ModelResponse(
            message=make_assistant(agent.kind, "canned answer"), stop_reason="stop"
        )


class StreamWatcher(Reporting):
    """Counts streamed chunks and records how many it had seen when the stream ended."""

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        result = await next_handler()
        state = self.state(agent)
        if isinstance(result, ModelResponse):
            state["full_responses"] = state.get("full_responses", 0) + 1
            return result
        return self._watch(result, state)

    async def _watch(self, stream: Any, state: dict[str, Any]) -> AsyncIterator[Any]:
        seen = 0
        async for chunk in stream:
            seen += 1
            yield chunk
        state["chunks"] = seen
        state["ended_after"] = seen


class ActingProbe(Reporting):
    """Records what on_acting sees: the call, and whether its result is in the context yet."""

    needs_context = True

    def on_reasoning(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return next_handler()

    async def on_acting(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        call = kwargs["tool_call"]
        state = self.state(agent)
        pending = [c.id for c in unanswered_tool_calls(agent.state.context)]
        state.setdefault("calls", []).append(call.id)
        state.setdefault("unanswered_at_start", []).append(call.id in pending)
        async for event in next_handler():
            yield event
        pending = [c.id for c in unanswered_tool_calls(agent.state.context)]
        state.setdefault("unanswered_at_end", []).append(call.id in pending)


class Denier(Middleware):
    """Denies every call of one tool."""

    def __init__(self, tool_name: str = "echo") -> None:
        self.tool_name = tool_name

    async def on_check_permission(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> PermissionDecision:
        if kwargs["tool_call"].name == self.tool_name:
            return PermissionDecision("deny", "not on a Sunday")
        return await next_handler()  # type: ignore[no-any-return]


class AfterNote(Middleware):
    """after_agent appends a note to the context (or fails, when told to)."""

    needs_context = True

    def __init__(self, name: str, fail: bool = False) -> None:
        self.name = name
        self.fail = fail

    def middleware_key(self) -> str:
        return f"after-{self.name}"

    async def after_agent(self, agent: Agent, final: Message) -> None:
        if self.fail:
            raise RuntimeError(f"after_agent {self.name} broke")
        agent.state.context.append(make_text(agent.kind, "user", f"note:{self.name}"))


class FinalShape(Middleware):
    """after_agent notes the block types of the final message it was given."""

    needs_context = True

    async def after_agent(self, agent: Agent, final: Message) -> None:
        shape = ",".join(b.type for b in to_agentic([final])[0].blocks)
        agent.state.context.append(make_text(agent.kind, "user", f"final:{shape}"))


class CallCounter(Reporting):
    """Counts model calls of the current reply in middle_context."""

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        state = self.state(agent)
        state["calls"] = state.get("calls", 0) + 1
        state["agent"] = agent.name
        return await next_handler()


@tool(read_only=True, concurrency_safe=True)
def shout(text: str) -> str:
    """Upper-case the text.

    Args:
        text: What to shout.
    """
    return text.upper()


class ToolGiver(Middleware):
    """Contributes the `shout` tool."""

    def list_tools(self) -> list[Any]:
        return [shout]


class PromptSuffix(Middleware):
    """Appends its suffix to the system prompt."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def middleware_key(self) -> str:
        return f"prompt-{self.suffix}"

    async def on_system_prompt(self, agent: Agent, prompt: str) -> str:
        return prompt + self.suffix


class PromptStep(Middleware):
    """Appends the number of prompts it has built in this reply: the model sees which step's
    prompt it got."""

    async def on_system_prompt(self, agent: Agent, prompt: str) -> str:
        state = self.state(agent)
        state["built"] = state.get("built", 0) + 1
        return f"{prompt}|step {state['built']}"


class Exploder(Middleware):
    """Raises in one hook, before or after calling next_handler."""

    def __init__(self, hook: str, fail_open: bool = False, after_next: bool = False) -> None:
        self.hook = hook
        self.after_next = after_next
        self.failure_mode = "fail_open" if fail_open else "fail_closed"

    def middleware_key(self) -> str:
        return f"exploder-{self.hook}"

    def implements(self, hook: str) -> bool:
        return hook == self.hook

    def _boom(self) -> RuntimeError:
        return RuntimeError(f"boom in {self.hook}")

    async def on_reasoning(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        if not self.after_next:
            raise self._boom()
        async for event in next_handler():
            yield event
        raise self._boom()

    on_reply = on_reasoning
    on_acting = on_reasoning

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        if self.after_next:
            await next_handler()
        raise self._boom()

    async def on_check_permission(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: Any
    ) -> PermissionDecision:
        raise self._boom()

    async def on_system_prompt(self, agent: Agent, prompt: str) -> str:
        raise self._boom()

    async def after_agent(self, agent: Agent, final: Message) -> None:
        raise self._boom()


class PlainFailOpen(Middleware):
    """fail_open, written as plain functions: raises before calling next, or wraps the
    downstream in a generator of its own (whose errors are the downstream's)."""

    failure_mode = "fail_open"

    def __init__(self, raise_first: bool = True) -> None:
        self.raise_first = raise_first

    def on_reasoning(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        if self.raise_first:
            raise RuntimeError("plain boom")
        return self._relay(next_handler())

    async def _relay(self, stream: Any) -> AsyncIterator[AgentEvent]:
        async for event in stream:
            yield event

    async def on_model_call(self, agent: Agent, kwargs: dict[str, Any], next_handler: Any) -> Any:
        result = await next_handler()
        if isinstance(result, ModelResponse):
            return result
        return self._relay(result)
