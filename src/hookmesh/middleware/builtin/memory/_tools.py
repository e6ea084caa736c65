"""Agent control of the memory middleware: the ``search_memory`` and ``add_memory`` tools
(whose runs find the reply's user in the run context) and their system-prompt note."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from hookmesh.middleware import AgentView
from hookmesh.middleware.builtin.memory._link import MemoryLink, MemoryUnavailableError, log
from hookmesh.tools import AbortReply, Tool, ToolContext, ToolError, tool

DEFAULT_PROMPT_NOTE = (
    "You have a long-term memory about the user that lasts across conversations. Call "
    "search_memory to recall what you may already know before answering questions that "
    "depend on the user's preferences, circumstances or history. Call add_memory to save "
    "durable facts the user shares (preferences, personal details, plans), one short "
    "sentence each. Never save secrets such as passwords."
)
"""The system-prompt note added in agent control."""


class MemoryTools(MemoryLink):
    """The agent-control part of `MemoryMiddleware` (not a public extension point)."""

    prompt_note: str

    def memory_tools(self) -> list[Tool]:
        """The two tools, bound to this middleware (built once, with it)."""
        return [
            tool(self._search_memory, name="search_memory", read_only=True, concurrency_safe=True),
            tool(self._add_memory, name="add_memory"),
        ]

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        """Add the note on the memory tools (agent control)."""
        return f"{prompt}\n\n{self.prompt_note}" if prompt else self.prompt_note

    async def _search_memory(
        self,
        context: ToolContext[AgentView],
        query: str,
        top_k: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> str:
        """Search your long-term memory about the user (facts from earlier conversations).

        Args:
            query: What to recall, in a few words (e.g. "diet", "where the user lives").
            top_k: How many memories to return, 1-20.
        """
        scope = self._tool_scope(context.agent)
        try:
            hits = await self._call(
                "search", self.backend().search(query, self._search_scope(scope), top_k=top_k)
            )
        except MemoryUnavailableError as exc:
            raise self._tool_failure(exc) from None
        if not hits:
            return "No memories match."
        return "\n".join(
            f"{h.rank}. {h.memory.text} (remembered {h.memory.update_time:%Y-%m-%d})" for h in hits
        )

    async def _add_memory(self, context: ToolContext[AgentView], text: str) -> str:
        """Remember a durable fact about the user for future conversations.

        Args:
            text: One short, self-contained sentence, e.g. "The user is allergic to peanuts."
        """
        from hookmesh.memory import MemoryScope

        scope = self._tool_scope(context.agent)
        target = MemoryScope(scope["user_id"], scope["agent_id"], scope["session_id"])
        try:
            result = await self._call("write", self.backend().add(target, facts=[text]))
        except MemoryUnavailableError as exc:
            raise self._tool_failure(exc) from None
        added = result.memories[0]
        if added.outcome == "merged":
            return f"Already remembered (memory {added.memory.id}); updated it."
        return f"Remembered (memory {added.memory.id})."

    def _tool_scope(self, agent: AgentView) -> dict[str, Any]:
        """The reply's scope (resolved by `on_reply`); an error result without a user."""
        scope: dict[str, Any] | None = self.state(agent).get("scope")
        if scope is None:
            raise ToolError(
                "Error: long-term memory is off for this conversation: no user is known"
            )
        return scope

    def _tool_failure(self, exc: MemoryUnavailableError) -> Exception:
        """How a failed call ends: an error result (the model's input was refused, or
        fail_open), or the reply (fail_closed)."""
        if exc.metadata.get("code") == "INVALID_ARGUMENT":  # the model's input, not an outage
            return ToolError(f"Error: {exc.__cause__}")
        if self.failure_mode == "fail_closed":
            return AbortReply(exc)
        log.warning("%s; the tool answers with an error", exc.message)
        return ToolError(f"Error: long-term memory is unavailable: {exc.message}")
