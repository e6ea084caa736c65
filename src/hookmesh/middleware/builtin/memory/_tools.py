"""Agent control of the memory middleware: the ``search_memory`` and ``add_memory`` tools
(run in `on_acting`, where the reply's user is known) and their system-prompt note."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from hookmesh.agent import Tool, ToolArgumentError, tool
from hookmesh.middleware import ActingArgs, ActingNext, AgentView
from hookmesh.middleware.builtin.memory._link import MemoryLink, MemoryUnavailableError, log
from hookmesh.schema import (
    AgentEvent,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
)

if TYPE_CHECKING:
    pass

DEFAULT_PROMPT_NOTE = (
    "You have a long-term memory about the user that lasts across conversations. Call "
    "search_memory to recall what you may already know before answering questions that "
    "depend on the user's preferences, circumstances or history. Call add_memory to save "
    "durable facts the user shares (preferences, personal details, plans), one short "
    "sentence each. Never save secrets such as passwords."
)
"""The system-prompt note added in agent control."""


def _unbound(name: str) -> RuntimeError:
    return RuntimeError(f"{name} runs through MemoryMiddleware.on_acting, which knows the user")


@tool(read_only=True, concurrency_safe=True)
async def search_memory(query: str, top_k: Annotated[int, Field(ge=1, le=20)] = 5) -> str:
    """Search your long-term memory about the user (facts from earlier conversations).

    Args:
        query: What to recall, in a few words (e.g. "diet", "where the user lives").
        top_k: How many memories to return, 1-20.
    """
    raise _unbound("search_memory")


@tool
async def add_memory(text: str) -> str:
    """Remember a durable fact about the user for future conversations.

    Args:
        text: One short, self-contained sentence, e.g. "The user is allergic to peanuts."
    """
    raise _unbound("add_memory")


_TOOLS: dict[str, Tool] = {t.name: t for t in (search_memory, add_memory)}


class MemoryTools(MemoryLink):
    """The agent-control hooks of `MemoryMiddleware` (not a public extension point)."""

    prompt_note: str

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        """Add the note on the memory tools (agent control)."""
        return f"{prompt}\n\n{self.prompt_note}" if prompt else self.prompt_note

    def on_acting(
        self, agent: AgentView, kwargs: ActingArgs, next_handler: ActingNext
    ) -> AsyncIterator[AgentEvent]:
        """Run ``search_memory`` / ``add_memory`` calls here (with the reply's user); pass
        every other tool call through untouched.

        Failures answer the call with an error result (``fail_open``) or end the reply
        (``fail_closed``).
        """
        call = kwargs["tool_call"]
        if call.name not in _TOOLS:
            return next_handler()  # costs nothing per event of other tools
        return self._run_call(agent, kwargs, call)

    async def _run_call(
        self, agent: AgentView, kwargs: ActingArgs, call: Any
    ) -> AsyncIterator[AgentEvent]:
        yield ToolResultStartEvent(reply_id=agent.reply_id, call_id=call.id, name=call.name)
        try:
            arguments = kwargs.get("arguments")
            if arguments is None:  # in a sidecar only the call travels
                arguments = _TOOLS[call.name].parse_arguments(call.arguments)
            text = await self._tool(agent, call.name, arguments)
            result_state: Literal["success", "error"] = "success"
        except ToolArgumentError as exc:
            text, result_state = f"Error: {exc}", "error"
        except MemoryUnavailableError as exc:
            text, result_state = self._tool_failure(exc), "error"
        yield ToolResultDeltaEvent(reply_id=agent.reply_id, call_id=call.id, text=text)
        yield ToolResultEndEvent(reply_id=agent.reply_id, call_id=call.id, state=result_state)

    def _tool_failure(self, exc: MemoryUnavailableError) -> str:
        """The error result of a failed tool call (or raise, when failing closed)."""
        if exc.metadata.get("code") == "INVALID_ARGUMENT":  # the model's input, not an outage
            return f"Error: {exc.__cause__}"
        if self.failure_mode == "fail_closed":
            raise exc
        log.warning("%s; the tool answers with an error", exc.message)
        return f"Error: long-term memory is unavailable: {exc.message}"

    async def _tool(self, agent: AgentView, name: str, arguments: dict[str, Any]) -> str:
        from hookmesh.memory import MemoryScope

        scope = self.state(agent).get("scope")
        if scope is None:
            raise ToolArgumentError(
                "long-term memory is off for this conversation: no user is known"
            )
        if name == "search_memory":
            hits = await self._call(
                "search",
                self.backend().search(
                    arguments["query"], self._search_scope(scope), top_k=arguments["top_k"]
                ),
            )
            if not hits:
                return "No memories match."
            return "\n".join(
                f"{h.rank}. {h.memory.text} (remembered {h.memory.update_time:%Y-%m-%d})"
                for h in hits
            )
        target = MemoryScope(scope["user_id"], scope["agent_id"], scope["session_id"])
        result = await self._call("write", self.backend().add(target, facts=[arguments["text"]]))
        added = result.memories[0]
        if added.outcome == "merged":
            return f"Already remembered (memory {added.memory.id}); updated it."
        return f"Remembered (memory {added.memory.id})."
