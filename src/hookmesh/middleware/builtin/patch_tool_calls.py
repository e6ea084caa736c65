"""Patch tool calls: every tool call gets a result before the model sees the history."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from hookmesh.middleware import AgentView, ReasoningArgs, ReasoningNext
from hookmesh.middleware._base import Middleware
from hookmesh.schema import (
    AgentEvent,
    Message,
    ToolCall,
    make_tool_result,
    tool_calls,
    tool_results,
    unanswered_tool_calls,
)

if TYPE_CHECKING:
    pass


def default_placeholder(call: ToolCall) -> str:
    """The default text of a patched result."""
    return (
        f"Tool call {call.name} (id {call.id}) was cancelled — another message arrived "
        "before it completed."
    )


class PatchToolCallsMiddleware(Middleware):
    """Answers dangling tool calls so the model never sees a call without a result.

    A history can hold unanswered calls (a client appended a message mid-call, a crash, an
    imported transcript); most model APIs reject it. Before each reasoning step this inserts
    a placeholder result for every unanswered call, in the context's own kind (flat: a tool
    message; agentic: a tool_result block in a user message), right after the calling
    assistant message: before any result or user text that follows it, so a turn mixing
    results and new text never separates a call from its placeholder. The results are
    interrupted-state and stay in the context.

    State: none. Not supported: calls the agent itself is still waiting on across a pause
    (resume answers those before any reasoning step runs).

    Example:
        >>> Agent(model, middlewares=[PatchToolCallsMiddleware()])

    Args:
        placeholder: Builds the result text for a call.
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reasoning": ()}

    def __init__(self, placeholder: Callable[[ToolCall], str] = default_placeholder) -> None:
        self.placeholder = placeholder

    def middleware_key(self) -> str:
        return "patch_tool_calls"

    def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Runs before the step's prompt is built; patches the context, then passes through."""
        context = agent.state.context
        if unanswered_tool_calls(context):
            context[:] = self.patched(context, agent.kind)
        return next_handler()

    def patched(self, context: list[Message], kind: Any) -> list[Message]:
        """`context` with placeholder results right after each message whose calls are
        unanswered, so nothing said later comes between a call and its result."""
        answered = {r.call_id for m in context for r in tool_results(m)}
        out: list[Message] = []
        for msg in context:
            out.append(msg)
            calls = [c for c in tool_calls(msg) if c.id not in answered]
            if calls:
                out.extend(self._results(calls, kind))
        return out

    def _results(self, calls: list[ToolCall], kind: Any) -> list[Message]:
        return [
            make_tool_result(
                kind, c.id, c.name, self.placeholder(c), "interrupted", id=f"patch-{c.id}"
            )
            for c in calls
        ]
