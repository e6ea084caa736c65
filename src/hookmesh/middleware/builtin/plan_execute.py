"""The plan-execute pattern on the one Agent loop: the reply's first step asks a planner for a
typed plan (structured output), runs its steps with named workers, plans again after a failed
step, and the agent's model answers from the steps' results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hookmesh.agent import Agent, AgentState, new_id
from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin._support import _checks as check
from hookmesh.middleware.builtin._support._external import (
    EXTERNAL_PREFIX,
    answered,
    external_parameters,
    pause_calls,
    resume_call,
    resuming,
)
from hookmesh.middleware.builtin._support._nested import (
    CONFIRM_PREFIX,
    ForkOutcome,
    NoPause,
    approved,
    asks_of,
    can_pause,
    confirm_parameters,
    pause_step,
    run_nested,
    waits_text,
)
from hookmesh.middleware.builtin.propagated_limits import inherited
from hookmesh.middleware.builtin.supervisor import Worker, run_worker, worker_names
from hookmesh.models import ChatModel, ModelResponse, ModelResult
from hookmesh.schema import (
    AgentEvent,
    Resume,
    ToolCall,
    is_user,
    make_assistant,
    make_user_text,
    text_of,
)
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece, external_tool, tool

EXECUTE_TOOL = "execute_plan"
"""The tool the reply's first step calls (hidden from the model): planning and the steps run
inside it, their events nested under it."""
CONFIRM_TOOL = f"{CONFIRM_PREFIX}step"
"""The call (hidden from the model, needing confirmation) the reply pauses on while a step's
worker waits for the user; confirming it continues the worker, then the plan."""
EXTERNAL_TOOL = f"{EXTERNAL_PREFIX}step"
"""The external tool (hidden from the model) the reply pauses on, one call per external call
a step's worker (or the planner) waits on; their results continue the worker, then the
plan."""
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
    reply's `PropagatedLimitMiddleware`.

    Nested approvals: a step's worker whose call needs the user's confirmation pauses (as a
    supervisor's worker does); the plan's progress and the worker's state are kept in this
    reply's middleware state, `EXECUTE_TOOL` answers that the step waits, and the next model
    call is replaced by a call of `CONFIRM_TOOL` (``{"worker", "path", "asks"}``) that needs
    confirmation, so the reply pauses. Confirming it continues the worker with its calls
    approved, then the rest of the plan (the result is the plan's report); rejecting it drops
    the plan. The planner pauses the same way when a call of one of its `planner_tools`
    needs confirmation (``worker`` and ``path`` then name ``planner``): confirming it
    continues the planner, and the plan it gives then runs.

    A step's worker (or the planner) that calls external tools (its reply ends
    ``awaiting_external_execution``) pauses the reply the same way, on calls of the external
    `EXTERNAL_TOOL` (one per call of the worker's, ``{"worker", "path", "tool",
    "arguments"}``): the caller resumes with their results, the next model call is replaced
    by an `EXECUTE_TOOL` call that gives them to the worker as its calls' results, and the
    plan goes on inside it. In a sidecar it is an error result.

    Example:
        >>> steps = PlanExecuteMiddleware([Worker("research", model, "Finds facts.")])
        >>> agent = Agent(model, middlewares=[steps])

    Args:
        workers: The workers a plan can name (distinct names).
        planner_model: The planner's model; None: the agent's.
        planner_tools: Tools the planner may call while it plans (to look things up); none
            by default.
        max_replans: Plans made again after a failed step (>= 0).
        planner_prompt: Replaces `PLANNER_PROMPT`.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        planner_model: ChatModel | None = None,
        planner_tools: Sequence[Tool] = (),
        max_replans: int = 2,
        planner_prompt: str = PLANNER_PROMPT,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.workers = worker_names(workers)
        self.planner_model = planner_model
        self.planner_tools = list(planner_tools)
        self.max_replans = check.whole("max_replans", max_replans, minimum=0)
        if not planner_prompt.strip():
            raise ValueError("planner_prompt must not be empty")
        self.planner_prompt = planner_prompt
        self.failure_mode = check.failure(failure_mode)
        self._tool = self._build_tool()
        self._confirm = self._build_confirm()
        self._external = external_tool(
            EXTERNAL_TOOL,
            "The results of the external calls a step's worker makes.",
            external_parameters("worker"),
        )

    def middleware_key(self) -> str:
        return "plan_execute"

    def list_tools(self) -> list[Tool]:
        return [self._tool, self._confirm, self._external]

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """The reply's first model call becomes the plan's execution; while a step waits
        for the user (or the caller), a call of `CONFIRM_TOOL` (`EXTERNAL_TOOL`), so the
        reply pauses; once the caller gave its results, an `EXECUTE_TOOL` call that goes on
        with them; later ones go to the model without the hidden tools."""
        state = self.state(agent)
        waiting = state.pop("waiting", None)
        if waiting is not None:
            return pause_step(agent, pause_calls(state, [waiting], "worker", "step"))
        given = answered(state, kwargs["messages"])
        if given:
            calls = [
                resume_call(state, EXECUTE_TOOL, {"request": e["request"]}, e, resume)
                for e, resume in given
            ]
            return pause_step(agent, calls)
        if not state.get("executed"):
            state["executed"] = True
            request = next((text_of(m) for m in reversed(kwargs["messages"]) if is_user(m)), "")
            call = ToolCall(
                id=new_id(), name=EXECUTE_TOOL, arguments=json.dumps({"request": request})
            )
            return ModelResponse(message=make_assistant(agent.kind, "", [call]))
        hidden = (EXECUTE_TOOL, CONFIRM_TOOL, EXTERNAL_TOOL)
        return await next_handler(tools=[t for t in kwargs["tools"] if t["name"] not in hidden])

    def _build_tool(self) -> Tool:
        async def execute(
            context: ToolContext[AgentView], request: str
        ) -> AsyncIterator[ToolPiece]:
            """Plan the request and execute the plan with the workers.

            Args:
                request: What the user asked.
            """
            given = resuming(self.state(context.agent), context.call.id)
            if given is not None:  # stands in for a model call: the step's results came
                pieces = self._go_on(context, *given)
            else:
                pieces = self._execute(context, request)
            async for piece in pieces:
                yield piece

        return tool(
            execute,
            name=EXECUTE_TOOL,
            description="Plan the user's request and execute the plan with the workers.",
        )

    def _build_confirm(self) -> Tool:
        async def confirm(
            context: ToolContext[AgentView], **unused: Any
        ) -> AsyncIterator[ToolPiece]:
            """Continue the waiting step's worker with the calls the user confirmed."""
            entry = self.state(context.agent).get("confirming", {}).pop(context.call.id, None)
            if entry is None:
                raise ToolError("Error: no step waits for this confirmation")
            async for piece in self._go_on(context, entry, approved(entry["asks"])):
                yield piece

        return Tool(
            name=CONFIRM_TOOL,
            description="The user confirms the calls a step's worker asks to make.",
            parameters=confirm_parameters("worker"),
            func=confirm,
            needs_confirmation=True,
        )

    def _go_on(
        self, context: ToolContext[AgentView], entry: dict[str, Any], resume: Resume
    ) -> AsyncIterator[ToolPiece]:
        """The plan of a paused step (`entry`, as `_wait` kept it), its waiting sub-agent
        continued by `resume`."""
        steps = entry["steps"]
        return self._execute(
            context,
            entry["request"],
            done=[_Done(**d) for d in entry["done"]],
            steps=None if steps is None else [PlanStep.model_validate(d) for d in steps],
            replans=entry["replans"],
            resumed=(entry["state"], resume),
        )

    async def _execute(
        self,
        context: ToolContext[AgentView],
        request: str,
        *,
        done: list[_Done] | None = None,
        steps: list[PlanStep] | None = None,
        replans: int = 0,
        resumed: tuple[dict[str, Any], Resume] | None = None,
    ) -> AsyncIterator[ToolPiece]:
        """Plan (unless `steps` are left of a plan), run the steps, plan again after a
        failure; `resumed` continues the paused planner (no `steps`) or the paused worker of
        the first of `steps`."""
        agent, call = context.agent, context.call
        done = done if done is not None else []
        failure = ""
        while True:
            if steps is None:
                if replans > self.max_replans:
                    yield _report(done, self.max_replans, failure)
                    return
                planned = ForkOutcome()
                async for event in self._plan(
                    agent, call, request, done, failure, planned, resumed
                ):
                    yield event
                resumed = None
                if planned.paused:
                    yield self._wait(agent, request, done, None, replans, PLANNER_NAME, planned)
                    return
                if not planned.ok or not isinstance(planned.value, Plan):
                    raise ToolError(f"Error: the planner could not plan: {planned.text}")
                steps, failure = list(planned.value.steps), ""
            for index, step in enumerate(steps):
                worker = self.workers.get(step.worker)
                if worker is None:
                    failure = f"the plan named {step.worker!r}, who is not a worker"
                    break
                outcome = ForkOutcome()
                saved, resume = resumed if resumed is not None and index == 0 else (None, None)
                inputs = (
                    []
                    if saved is not None
                    else [make_user_text(agent.kind, _task_text(step.task, done))]
                )
                async for event in run_worker(
                    agent,
                    call,
                    worker,
                    inputs,
                    outcome,
                    pausable=can_pause(agent, CONFIRM_TOOL),
                    external=can_pause(agent, EXTERNAL_TOOL),
                    saved=saved,
                    resume=resume,
                ):
                    yield event
                if outcome.paused:
                    left = steps[index:]
                    yield self._wait(agent, request, done, left, replans, worker.name, outcome)
                    return
                if not outcome.ok:
                    failure = f"step {step.worker!r} ({step.task}) failed: {outcome.text}"
                    break
                done.append(_Done(step.worker, step.task, outcome.text))
            resumed = None
            if not failure:
                yield _report(done, replans, "")
                return
            steps, replans = None, replans + 1

    def _wait(
        self,
        agent: AgentView,
        request: str,
        done: list[_Done],
        steps: list[PlanStep] | None,
        replans: int,
        who: str,
        outcome: ForkOutcome,
    ) -> str:
        """Keep the plan's progress and the paused sub-agent `who` (the planner, when
        `steps` is None, or the first step's worker) for `on_model_call` to pause on; the
        tool's result."""
        asks = asks_of(outcome.asks)
        self.state(agent)["waiting"] = {
            "request": request,
            "done": [asdict(d) for d in done],
            "steps": None if steps is None else [s.model_dump() for s in steps],
            "replans": replans,
            "worker": who,
            "awaiting": outcome.awaiting,
            "state": outcome.saved,
            "asks": asks,
        }
        waits = "The planner" if steps is None else f"The step's worker {who}"
        return waits_text(waits, asks, outcome.awaiting)

    async def _plan(
        self,
        agent: AgentView,
        call: ToolCall,
        request: str,
        done: list[_Done],
        failure: str,
        outcome: ForkOutcome,
        resumed: tuple[dict[str, Any], Resume] | None = None,
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
        guard = [] if can_pause(agent, CONFIRM_TOOL) else [NoPause()]
        planner = Agent(
            model,
            name=PLANNER_NAME,
            system_prompt=f"{self.planner_prompt}\n{lines}",
            tools=self.planner_tools,
            middlewares=[*guard, *inherited(agent, call.id)],
            kind=agent.kind,
            max_iters=3,
            state=AgentState.model_validate(resumed[0]) if resumed is not None else None,
        )
        inputs = [] if resumed is not None else [make_user_text(agent.kind, text)]
        resume = resumed[1] if resumed is not None else None
        external = can_pause(agent, EXTERNAL_TOOL)
        async for event in run_nested(
            agent, call, planner, inputs, outcome, output=Plan, resume=resume, external=external
        ):
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
    planner_tools: Sequence[Tool] = (),
    name: str = "planner_executor",
    system_prompt: str = "",
    middlewares: Sequence[Middleware] = (),
    max_replans: int = 2,
) -> Agent:
    """A prebuilt plan-execute agent: an `Agent` of `model` with `PlanExecuteMiddleware`
    after `middlewares` (put a `PropagatedLimitMiddleware` there to bound the team)."""
    steps = PlanExecuteMiddleware(
        workers, planner_model=planner_model, planner_tools=planner_tools, max_replans=max_replans
    )
    return Agent(model, name=name, system_prompt=system_prompt, middlewares=[*middlewares, steps])


__all__ = [
    "CONFIRM_TOOL",
    "EXECUTE_TOOL",
    "EXTERNAL_TOOL",
    "PLANNER_NAME",
    "PLANNER_PROMPT",
    "Plan",
    "PlanExecuteMiddleware",
    "PlanStep",
    "plan_execute",
]
