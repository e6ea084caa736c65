"""Budget control: when a reply has spent its token budget, one last step with no tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from hookmesh.middleware import AgentView, ReasoningArgs, ReasoningNext, ReplyArgs, ReplyNext
from hookmesh.middleware._base import Middleware
from hookmesh.schema import AgentEvent, HintBlockEvent, make_hint

if TYPE_CHECKING:
    pass

DEFAULT_HINT = (
    "The token budget for this reply is spent. Do not call any more tools: give your final "
    "answer now, summarising what you found so far."
)


class BudgetMiddleware(Middleware):
    """Caps the tokens a reply may spend, ending it with a summarising answer, not a cut-off.

    Each model call's usage adds ``input_weight * input + output_weight * output`` to the
    reply's spend. Before each reasoning step, if the spend has reached `token_budget`, the
    middleware adds a hint asking for a final answer and forces ``tool_choice="none"`` through
    the kwargs override, so the step must answer. The call that crosses the budget completes.

    State: ``{"spent": float}`` in ``middle_context[key][reply_id]``, reset when a reply
    starts (not when it resumes after a pause), so an outer middleware that swallows
    reply_end cannot leave a stale counter. The hint message is removed after the step.

    Not supported: budgets across replies (use a session-level quota in front of the agent),
    models that report no usage (nothing is counted).

    Example:
        >>> agent = Agent(model, tools=tools, middlewares=[BudgetMiddleware(token_budget=8000)])

    Args:
        token_budget: Weighted tokens a reply may spend before it must answer (> 0).
        input_weight: Weight of prompt tokens (>= 0).
        output_weight: Weight of completion tokens (>= 0).
        hint: Text of the hint asking for a final answer.
    """

    needs_context = True
    subscriptions: Mapping[str, tuple[str, ...]] = {
        "on_reply": ("model_call_end",),
        "on_reasoning": (),
    }

    def __init__(
        self,
        token_budget: int = 100_000,
        input_weight: float = 1.0,
        output_weight: float = 1.0,
        hint: str = DEFAULT_HINT,
    ) -> None:
        if token_budget <= 0:
            raise ValueError("token_budget must be positive")
        if input_weight < 0 or output_weight < 0:
            raise ValueError("token weights must not be negative")
        if not hint.strip():
            raise ValueError("hint must not be empty")
        self.token_budget = token_budget
        self.input_weight = input_weight
        self.output_weight = output_weight
        self.hint = hint

    def middleware_key(self) -> str:
        return "budget"

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Reset the spend at reply start; add each model_call_end's weighted usage.

        Sees every event of the reply; counts only model_call_end. Errors fail closed.
        """
        state = self.state(agent)
        if kwargs.get("resume") is None:
            state["spent"] = 0.0
        async for event in next_handler():
            if event.type == "model_call_end" and event.usage is not None:
                usage = event.usage
                cost = (
                    self.input_weight * usage.input_tokens
                    + self.output_weight * usage.output_tokens
                )
                state["spent"] = state.get("spent", 0.0) + cost
            yield event

    async def on_reasoning(
        self, agent: AgentView, kwargs: ReasoningArgs, next_handler: ReasoningNext
    ) -> AsyncIterator[AgentEvent]:
        """Wraps one reasoning step: when the budget is spent, hint and forbid tools for it.

        Compression runs before this hook and tool execution after it; the hint is in the
        context only for this step.
        """
        state = self.state(agent)
        if state.get("spent", 0.0) < self.token_budget:
            async for event in next_handler():
                yield event
            return
        hint_id = f"{agent.reply_id}-budget"
        agent.state.context.append(
            make_hint(agent.kind, self.hint, self.middleware_key(), id=hint_id)
        )
        try:
            yield HintBlockEvent(
                reply_id=agent.reply_id,
                block_id=hint_id,
                text=self.hint,
                source=self.middleware_key(),
            )
            async for event in next_handler(tool_choice="none"):
                yield event
        finally:
            agent.state.context[:] = [m for m in agent.state.context if m.id != hint_id]
