"""A forked sub-agent: one run of a fresh `Agent` inside a tool call of the parent, its events
forwarded as nested events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from hookmesh.agent import Agent, Tool
from hookmesh.middleware import AgentView, PermissionArgs, PermissionNext
from hookmesh.middleware._base import Middleware, PermissionDecision
from hookmesh.middleware.builtin.budget import BudgetMiddleware
from hookmesh.models import ChatModel
from hookmesh.schema import (
    AgentEvent,
    EventSource,
    Message,
    ReplyEndEvent,
    ToolCall,
    is_hint,
    make_user_text,
    nest,
    text_of,
    tool_calls,
)


@dataclass(frozen=True, slots=True)
class Fork:
    """What a sub-agent runs with."""

    name: str
    """The sub-agent's name (the skill's)."""
    model: ChatModel
    """Its model."""
    tools: Sequence[Tool]
    """Its tools."""
    task: str
    """Its user message."""
    with_context: bool
    """Whether it starts from a copy of the parent's conversation."""
    max_iters: int
    """Its reasoning steps."""
    token_budget: int | None
    """Its token budget, or None."""


@dataclass(slots=True)
class ForkOutcome:
    """How the run ended, filled in once its events are exhausted."""

    text: str = ""
    """The final answer, or what went wrong."""
    ok: bool = False
    """Whether it completed."""


class NoPause(Middleware):
    """A sub-agent has no one to ask: a call that needs confirmation is denied instead."""

    async def on_check_permission(
        self, agent: AgentView, kwargs: PermissionArgs, next_handler: PermissionNext
    ) -> PermissionDecision:
        decision = await next_handler()
        if decision.behavior == "ask":
            return PermissionDecision("deny", "a sub-agent cannot ask the user to confirm")
        return decision


def parent_context(context: Sequence[Message], call: ToolCall) -> list[Message]:
    """The parent's conversation up to the step that made `call` (that step's calls are not
    answered yet), without hint messages."""
    end = len(context)
    for i in range(len(context) - 1, -1, -1):
        if any(c.id == call.id for c in tool_calls(context[i])):
            end = i
            break
    return [m.model_copy(deep=True) for m in context[:end] if not is_hint(m)]


async def run_fork(
    agent: AgentView, call: ToolCall, fork: Fork, instructions: str, outcome: ForkOutcome
) -> AsyncIterator[AgentEvent]:
    """Run the sub-agent for `call`, yielding its events nested under the call, then fill
    `outcome`."""
    middlewares: list[Middleware] = [NoPause()]
    if fork.token_budget is not None:
        middlewares.append(BudgetMiddleware(token_budget=fork.token_budget))
    sub = Agent(
        fork.model,
        name=fork.name,
        system_prompt=instructions,
        tools=fork.tools,
        middlewares=middlewares,
        kind=agent.kind,
        max_iters=fork.max_iters,
    )
    inputs = parent_context(agent.state.context, call) if fork.with_context else []
    inputs.append(make_user_text(agent.kind, fork.task))
    async for event in run_nested(agent, call, sub, inputs, outcome):
        yield event


async def run_nested(
    agent: AgentView, call: ToolCall, sub: Agent, inputs: list[Message], outcome: ForkOutcome
) -> AsyncIterator[AgentEvent]:
    """One reply of `sub` on `inputs` inside `call`, its events nested under the call (the
    sub-agent's name on the path), then `outcome` filled in; shared by forks and handoffs."""
    step: EventSource | None = None
    end: ReplyEndEvent | None = None
    stream = sub.reply(inputs)
    try:
        async for event in stream:
            if step is None:
                step = EventSource(
                    call_id=call.id,
                    tool_name=call.name,
                    agent_name=sub.name,
                    run_id=event.reply_id,
                )
            if event.type == "reply_end" and not event.source_path:
                end = event
            yield nest(event, step, agent.reply_id)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    if end is not None and end.finish_reason == "completed" and sub.final_message is not None:
        outcome.text, outcome.ok = text_of(sub.final_message), True
        return
    reason = end.finish_reason if end is not None else "interrupted"
    detail = f": {end.error.message}" if end is not None and end.error is not None else ""
    outcome.text = f"Error: the sub-agent {sub.name} ended with {reason}{detail}"
