"""A forked sub-agent: one run of a fresh `Agent` inside a tool call of the parent, its events
forwarded as nested events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from hookmesh.agent import Agent, AgentState, Tool
from hookmesh.middleware import AgentView
from hookmesh.middleware._base import Middleware
from hookmesh.middleware.builtin._support._nested import (
    ForkOutcome,
    NoPause,
    parent_context,
    run_nested,
)
from hookmesh.middleware.builtin.budget import BudgetMiddleware
from hookmesh.middleware.builtin.propagated_limits import inherited
from hookmesh.models import ChatModel
from hookmesh.schema import AgentEvent, Message, Resume, ToolCall, make_user_text


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


async def run_fork(
    agent: AgentView,
    call: ToolCall,
    fork: Fork,
    instructions: str,
    outcome: ForkOutcome,
    *,
    pausable: bool = False,
    external: bool = False,
    resumed: tuple[dict[str, Any], Resume] | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run the sub-agent for `call` (or continue, from its saved state, its paused run with
    the user's answer: `resumed`), yielding its events nested under the call, then fill
    `outcome`. It is bound by the parent reply's propagated limits. Unless `pausable`, a call
    of its that needs confirmation is denied; unless `external`, a sub-agent that waits for
    external calls' results ends as an error."""
    guard: list[Middleware] = [] if pausable else [NoPause()]
    middlewares: list[Middleware] = [*guard, *inherited(agent, call.id)]
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
        state=AgentState.model_validate(resumed[0]) if resumed is not None else None,
    )
    inputs: list[Message] = []
    if resumed is None:
        inputs = parent_context(agent.state.context, call) if fork.with_context else []
        inputs.append(make_user_text(agent.kind, fork.task))
    resume = resumed[1] if resumed is not None else None
    async for event in run_nested(
        agent, call, sub, inputs, outcome, resume=resume, external=external
    ):
        yield event
