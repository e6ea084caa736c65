"""ConformanceMiddleware: the reference behaviour `hookmesh conformance` expects of a sidecar."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from hookmesh.agent import tool
from hookmesh.errors import HookmeshError
from hookmesh.middleware import (
    ActingArgs,
    ActingNext,
    AgentView,
    CompressArgs,
    CompressNext,
    HookMode,
    Middleware,
    ModelCallArgs,
    ModelCallNext,
    PermissionArgs,
    PermissionDecision,
    PermissionNext,
    ReasoningArgs,
    ReasoningNext,
    ReplyArgs,
    ReplyNext,
)
from hookmesh.models import ModelResponse
from hookmesh.remote import pass_rest
from hookmesh.schema import AgentEvent, CustomEvent, Message, make_assistant, text_of
from hookmesh.tools import Tool

MARKER_PREFIX = "conformance:"
"""The last context message's text starts with this, then the marker word."""
PROMPT_SUFFIX = " [conformance]"
OVERRIDDEN_ARGUMENTS = {"text": "overridden"}


class ConformanceError(HookmeshError):
    """The error the `error` and `error-after` markers make the hook fail with."""

    reason = "CONFORMANCE_ERROR"


def _failure(hook: str) -> ConformanceError:
    return ConformanceError("conformance error", metadata={"hook": hook})


@tool(read_only=True)
async def conformance_echo(text: str) -> AsyncIterator[str]:
    """Stream the text back; the text "fail" makes the tool fail.

    Args:
        text: What to echo.
    """
    if text == "fail":
        raise RuntimeError("asked to fail")
    yield text


def marker(agent: Any) -> str:
    """The marker word of the invocation: from the last context message, else ''."""
    context = agent.state.context
    found = text_of(context[-1]) if context else ""
    return found.removeprefix(MARKER_PREFIX) if found.startswith(MARKER_PREFIX) else ""


class ConformanceMiddleware(Middleware):
    """The sidecar behaviour docs/remote-protocol.md specifies, driven by a marker word.

    Serve it with ``hookmesh sidecar --middleware hookmesh.conformance:ConformanceMiddleware``
    and check the sidecar with ``hookmesh conformance --sidecar ADDR``; a sidecar in another
    language implements the same behaviour from the spec (``clients/node/conformance.js``).
    State lives in the reply's slice (``count``, ``after``); nothing is kept on the instance.
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_reasoning": ("*",),
        "on_model_call": ("chunk",),
        "on_acting": ("*",),
    }
    read_only_subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": ("*",)}
    hook_modes: Mapping[str, HookMode] = {"on_compress_context": "pre_only"}

    def middleware_key(self) -> str:
        return "conformance"

    def list_tools(self) -> list[Tool]:
        return [conformance_echo]

    async def _pre(self, agent: Any, hook: str, word: str) -> None:
        """What every marker does before the downstream (or instead of it)."""
        if word == "sleep":
            await asyncio.Event().wait()
        if word == "error":
            raise _failure(hook)
        if word == "state":
            state = self.state(agent)
            state["count"] = int(state.get("count", 0)) + 1
        if word == "forget":
            del agent.state.context[0]

    def _event(self, agent: Any, name: str) -> CustomEvent:
        return CustomEvent(reply_id=agent.reply_id, name=name)

    def on_reply(self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext) -> Any:
        return self._events(agent, "on_reply", {}, next_handler)

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> Any:
        if marker(agent) == "final":
            return next_handler()
        return self._events(agent, "on_reasoning", {"tool_choice": "none"}, next_handler)

    def on_acting(self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext) -> Any:
        if marker(agent) == "final":
            return next_handler()
        return self._events(agent, "on_acting", {"arguments": OVERRIDDEN_ARGUMENTS}, next_handler)

    async def _events(
        self, agent: Any, hook: str, override: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[AgentEvent]:
        word = marker(agent)
        await self._pre(agent, hook, word)
        if word == "emit":
            yield self._event(agent, "conformance.pre")
        if word == "short-circuit":
            yield self._event(agent, "conformance.short_circuit")
            return
        if word == "stop":
            async for _ in next_handler():
                break  # ends the invocation at its first item: the downstream stops
            yield self._event(agent, "conformance.stopped")
            return
        if word == "final-verdict":
            async for event in pass_rest(next_handler()):
                yield event  # served, the first verdict item is answered verdict {final}
            return
        if word == "retry":
            try:
                async for event in next_handler():
                    yield event
            except Exception:  # the downstream failed once: run it again
                async for event in next_handler():
                    yield event
            return
        async for event in next_handler(**(override if word == "override" else {})):
            if word != "drop":
                yield event
        if word == "error-after":
            raise _failure(hook)
        if word == "emit":
            yield self._event(agent, "conformance.post")

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> Any:
        word = marker(agent)
        await self._pre(agent, "on_model_call", word)
        if word == "emit":
            agent.emit(self._event(agent, "conformance.pre"))
        if word == "short-circuit":
            agent.emit(self._event(agent, "conformance.short_circuit"))
            return ModelResponse(message=make_assistant(agent.kind, "short-circuited"))
        overrides: dict[str, Any] = {}
        if word == "override":
            overrides["tool_choice"] = "none"
        if word == "model":
            overrides["model"] = agent.resolve_model("fast")
        result = await next_handler(**overrides)
        if not isinstance(result, ModelResponse):
            return (
                self._first_chunk(result) if word == "stop" else self._chunks(agent, word, result)
            )
        self._post(agent, word)
        return result

    async def _first_chunk(self, stream: Any) -> AsyncIterator[Any]:
        async for chunk in stream:
            yield chunk
            return  # the stream ends here: the model call is cancelled

    async def _chunks(self, agent: Any, word: str, stream: Any) -> AsyncIterator[Any]:
        async for chunk in stream:
            yield chunk
        self._post(agent, word)

    def _post(self, agent: Any, word: str) -> None:
        if word == "error-after":
            raise _failure("on_model_call")
        if word == "emit":
            agent.emit(self._event(agent, "conformance.post"))

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        word = marker(agent)
        await self._pre(agent, "on_check_permission", word)
        if word == "emit":
            agent.emit(self._event(agent, "conformance.pre"))
        if word == "short-circuit":
            agent.emit(self._event(agent, "conformance.short_circuit"))
            return PermissionDecision("deny", "short-circuited")
        decision: PermissionDecision = await next_handler()
        if word == "error-after":
            raise _failure("on_check_permission")
        if word == "emit":
            agent.emit(self._event(agent, "conformance.post"))
        return decision

    async def on_compress_context(
        self, agent: AgentView, kwargs: CompressArgs, next_handler: CompressNext
    ) -> None:
        word = marker(agent)
        await self._pre(agent, "on_compress_context", word)
        if word == "emit":
            agent.emit(self._event(agent, "conformance.pre"))
        if word != "short-circuit":
            await next_handler()

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        return prompt + PROMPT_SUFFIX

    async def after_agent(self, agent: AgentView, final: Message) -> None:
        self.state(agent)["after"] = True


class ObservingConformanceMiddleware(ConformanceMiddleware):
    """The conformance middleware with every onion hook observing: whatever its marker, the
    served host must send nothing back (``hookmesh conformance`` recognises it from its
    Describe and checks just that)."""

    hook_modes: Mapping[str, HookMode] = dict.fromkeys(
        (
            "on_reply",
            "on_reasoning",
            "on_model_call",
            "on_acting",
            "on_check_permission",
            "on_compress_context",
        ),
        "observe",
    )
