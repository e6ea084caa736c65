"""The plan-execute pattern on the one Agent loop: the reply's first step asks a planner for a
typed plan (structured output), runs its steps with named workers, plans again after a failed
step, and the agent's model answers from the steps' results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from hookmesh.agent import Agent, new_id
from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._nested import ForkOutcome, NoPause, run_nested
from hookmesh.middleware.builtin.propagated_limits import inherited
from hookmesh.middleware.builtin.supervisor import Worker, run_worker, worker_names
from hookmesh.models import ChatModel, ModelResponse, ModelResult
from hookmesh.schema import AgentEvent, ToolCall, is_user, make_assistant, make_user_text, text_of
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece, tool

EXECUTE_TOOL = "execute_plan"
"""The tool the reply's first step calls (hidden from the model): planning and the steps run
inside it, their events nested under it."""
PLANNER_NAME = "planner"
"""The planner's agent name on the events' path."""

PLANNER_PROMPT = (
    "Break the user's request into steps. Each step is done by one worker, who sees only "
    "its task and the results of the steps before it, so make each task complete. Use as "
    "few steps as the request needs. Workers:"
)
"""The planner's system prompt, followed by one ``- <name>: <description>`` line per worker."""


class PlanStep(BaseModel):
    """One step of a plan."""

    model_config = ConfigDict(extra="forbid")

    worker: str = Field(description="The name of the worker who does it.")
    task: str = Field(description="The whole task for that worker.")


class Plan(BaseModel):
    """The planner's answer: the steps, in order."""

    model_config = ConfigDict(extra="forbid")

    steps: list[PlanStep] = Field(min_length=1, max_length=20)


@dataclass(slots=True)
class _Done:
    worker: str
    task: str
    result: str


class PlanExecuteMiddleware(Middleware):
    """Plan, execute, re-plan: the agent's first model call of each reply is replaced by a
    call of `EXECUTE_TOOL`, which

    1. asks the planner (a fresh agent of `planner_model`, or the agent's model, with
       `PLANNER_PROMPT` and the workers) for a `Plan` (structured output) for the user's
       last message;
    2. runs its steps in order, each by its `Worker` (a fresh local agent) on the step's
       task and the results of the steps done so far;
    3. after a step that fails (its worker ends without completing, or the plan names no
       such worker), asks the planner again, with what was done and what failed, up to
       `max_replans` times; the steps done stay done.

    The steps' results are the tool's result, and the agent's model (the one loop, with
    its other middlewares) answers from them; after the last failed re-plan, the result says
    what failed and the model answers with what it has. The planner's and the workers'
    events stream nested under the call: ``source_path[0].agent_name`` is ``planner`` or
    the worker's name, ``run_id`` that run's. Workers and the planner are bound by the
    reply's `PropagatedLimitMiddleware`; none can pause the reply.

    Example:
        >>> steps = PlanExecuteMiddleware([Worker("research", model, "Finds facts.")])
        >>> agent = Agent(model, middlewares=[steps])

    Args:
        workers: The workers a plan can name (distinct names).
        planner_model: The planner's model; None: the agent's.
        max_replans: Plans made again after a failed step (>= 0).
        planner_prompt: Replaces `PLANNER_PROMPT`.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        planner_model: ChatModel | None = None,
        max_replans: int = 2,
        planner_prompt: str = PLANNER_PROMPT,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.workers = worker_names(workers)
        self.planner_model = planner_model
        self.max_replans = check.whole("max_replans", max_replans, minimum=0)
        if not planner_prompt.strip():
            raise ValueError("planner_prompt must not be empty")
        self.planner_prompt = planner_prompt
        self.failure_mode = check.failure(failure_mode)
        self._tool = self._build_tool()

    def middleware_key(self) -> str:
        return "plan_execute"

    def list_tools(self) -> list[Tool]:
        return [self._tool]

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """The reply's first model call becomes the plan's execution; later ones go to the
        model without `EXECUTE_TOOL`."""
        state = self.state(agent)
        if not state.get("executed"):
            state["executed"] = True
            request = next((text_of(m) for m in reversed(kwargs["messages"]) if is_user(m)), "")
            call = ToolCall(
                id=new_id(), name=EXECUTE_TOOL, arguments=json.dumps({"request": request})
            )
            return ModelResponse(message=make_assistant(agent.kind, "", [call]))
        return await next_handler(tools=[t for t in kwargs["tools"] if t["name"] != EXECUTE_TOOL])

    def _build_tool(self) -> Tool:
        async def execute(
            context: ToolContext[AgentView], request: str
        ) -> AsyncIterator[ToolPiece]:
            """Plan the request and execute the plan with the workers.

            Args:
                request: What the user asked.
            """
            async for piece in self._execute(context, request):
                yield piece

        return tool(
            execute,
            name=EXECUTE_TOOL,
            description="Plan the user's request and execute the plan with the workers.",
        )

    async def _execute(
        self, context: ToolContext[AgentView], request: str
    ) -> AsyncIterator[ToolPiece]:
        agent, call = context.agent, context.call
        done: list[_Done] = []
        failure = ""
        for replans in range(self.max_replans + 1):
            planned = ForkOutcome()
            async for event in self._plan(agent, call, request, done, failure, planned):
                yield event
            if not planned.ok or not isinstance(planned.value, Plan):
                raise ToolError(f"Error: the planner could not plan: {planned.text}")
            failure = ""
            for step in planned.value.steps:
                worker = self.workers.get(step.worker)
                if worker is None:
                    failure = f"the plan named {step.worker!r}, who is not a worker"
                    break
                outcome = ForkOutcome()
                inputs = [make_user_text(agent.kind, _task_text(step.task, done))]
                async for event in run_worker(agent, call, worker, inputs, outcome):
                    yield event
                if not outcome.ok:
                    failure = f"step {step.worker!r} ({step.task}) failed: {outcome.text}"
                    break
                done.append(_Done(step.worker, step.task, outcome.text))
            if not failure:
                yield _report(done, replans, "")
                return
        yield _report(done, self.max_replans, failure)

    async def _plan(
        self,
        agent: AgentView,
        call: ToolCall,
        request: str,
        done: list[_Done],
        failure: str,
        outcome: ForkOutcome,
    ) -> AsyncIterator[AgentEvent]:
        model = self.planner_model or agent.model
        if model is None:
            raise ToolError("Error: plan-execute needs planner_model in a sidecar")
        lines = "\n".join(f"- {w.name}: {w.description}" for w in self.workers.values())
        text = request
        if failure:
            text += (
                "\n\nDone so far:\n"
                + (_results(done) or "nothing")
                + (
                    f"\n\nThen {failure}. Plan the rest of the work again (the steps done stay "
                    "done; use another worker or another task for what failed)."
                )
            )
        planner = Agent(
            model,
            name=PLANNER_NAME,
            system_prompt=f"{self.planner_prompt}\n{lines}",
            middlewares=[NoPause(), *inherited(agent, call.id)],
            kind=agent.kind,
            max_iters=3,
        )
        inputs = [make_user_text(agent.kind, text)]
        async for event in run_nested(agent, call, planner, inputs, outcome, output=Plan):
            yield event


def _results(done: Sequence[_Done]) -> str:
    return "\n\n".join(
        f"Step {i} — {d.worker}: {d.task}\n{d.result}" for i, d in enumerate(done, 1)
    )


def _task_text(task: str, done: Sequence[_Done]) -> str:
    return f"{task}\n\nResults of the steps before:\n{_results(done)}" if done else task


def _report(done: Sequence[_Done], replans: int, failure: str) -> str:
    """The tool's result: every step done with its result, and what failed, if anything."""
    head = (
        f"The plan could not be completed after {replans} re-plans: {failure}."
        if failure
        else f"The plan is done ({len(done)} steps, {replans} re-plans)."
    )
    body = _results(done)
    return f"{head}\n\n{body}" if body else head


def plan_execute(
    model: ChatModel,
    workers: Sequence[Worker],
    *,
    planner_model: ChatModel | None = None,
    name: str = "planner_executor",
    system_prompt: str = "",
    middlewares: Sequence[Middleware] = (),
    max_replans: int = 2,
) -> Agent:
    """A prebuilt plan-execute agent: an `Agent` of `model` with `PlanExecuteMiddleware`
    after `middlewares` (put a `PropagatedLimitMiddleware` there to bound the team)."""
    steps = PlanExecuteMiddleware(workers, planner_model=planner_model, max_replans=max_replans)
    return Agent(model, name=name, system_prompt=system_prompt, middlewares=[*middlewares, steps])


__all__ = [
    "EXECUTE_TOOL",
    "PLANNER_NAME",
    "PLANNER_PROMPT",
    "Plan",
    "PlanExecuteMiddleware",
    "PlanStep",
    "plan_execute",
]
