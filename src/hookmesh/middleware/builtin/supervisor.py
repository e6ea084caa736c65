"""The supervisor pattern on the one Agent loop: the agent's model routes work to named local
workers through ``ask_<name>`` tools (several at once run in parallel) and merges what they
return into its answer."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hookmesh.agent import Agent, AgentState
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
    asker_path,
    asks_of,
    can_pause,
    confirm_parameters,
    pause_step,
    run_nested,
    waits_text,
)
from hookmesh.middleware.builtin.propagated_limits import inherited
from hookmesh.models import ChatModel, ModelResult
from hookmesh.schema import AgentEvent, Message, Resume, ToolCall, make_user_text
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece, external_tool, tool

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")

ROUTING_PROMPT = (
    "You supervise a team of workers. Give each part of the user's request to the worker "
    "whose skills fit it, with an ask_<worker> tool call (call several at once when the "
    "parts do not depend on each other). A worker sees only the task you send, so make it "
    "complete. Then merge what they answered into one answer for the user; say plainly what "
    "a worker could not do. Your workers:"
)
"""What the supervisor's system prompt gets, followed by one ``- <name>: <description>``
line per worker."""


@dataclass(frozen=True, slots=True)
class Worker:
    """A local agent a supervisor or a plan can give a task to.

    Args:
        name: Lower case, digits, ``_``; the supervisor's tool is ``ask_<name>``.
        model: Its chat model.
        description: What it is good at, shown to the supervisor (or the planner).
        system_prompt: Its instructions.
        tools: Its tools (none of the supervisor's).
        middlewares: Its middlewares.
        max_iters: Its reasoning steps.
    """

    name: str
    model: ChatModel
    description: str
    system_prompt: str = ""
    tools: Sequence[Tool] = ()
    middlewares: Sequence[Middleware] = field(default=())
    max_iters: int = 10

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"worker name {self.name!r} must match {_NAME.pattern}")
        if not self.description.strip():
            raise ValueError(f"worker {self.name} needs a description (it is how it is chosen)")
        check.whole("max_iters", self.max_iters)


def worker_names(workers: Sequence[Worker]) -> dict[str, Worker]:
    """The workers by name; distinct names, at least one.

    Raises:
        ValueError: No worker, or two with one name.
    """
    if not workers:
        raise ValueError("workers must name at least one agent")
    names = [w.name for w in workers]
    if len(set(names)) != len(names):
        raise ValueError(f"worker names must be distinct: {', '.join(names)}")
    return {w.name: w for w in workers}


async def run_worker(
    agent: AgentView,
    call: ToolCall,
    worker: Worker,
    inputs: list[Message],
    outcome: ForkOutcome,
    *,
    pausable: bool = False,
    external: bool = False,
    saved: dict[str, Any] | None = None,
    resume: Resume | None = None,
) -> AsyncIterator[AgentEvent]:
    """One reply of `worker` on `inputs` inside `call` of `agent`'s reply (or, from its
    `saved` state, the continuation of its paused reply by `resume`), its events nested
    under the call, bound by the reply's propagated limits; `outcome` says how it went.
    Unless `pausable`, a call of the worker's that needs confirmation is denied; unless
    `external`, a worker that waits for external calls' results ends as an error."""
    guard = [] if pausable else [NoPause()]
    sub = Agent(
        worker.model,
        name=worker.name,
        system_prompt=worker.system_prompt,
        tools=worker.tools,
        middlewares=[*guard, *inherited(agent, call.id), *worker.middlewares],
        kind=agent.kind,
        max_iters=worker.max_iters,
        state=AgentState.model_validate(saved) if saved is not None else None,
    )
    async for event in run_nested(
        agent, call, sub, inputs, outcome, resume=resume, external=external
    ):
        yield event


class SupervisorMiddleware(Middleware):
    """Routes to named workers and merges their results, on the agent's own loop.

    Each `Worker` becomes a tool ``ask_<name>(task)``; calling it runs that worker (a fresh
    local agent) on the task alone, its events nested under the call (``source_path[0]``
    names the call, the tool and ``agent_name: <name>``), and its answer is the tool's
    result. The tools are concurrency-safe, so the workers of one step run in parallel. The
    system prompt gets `ROUTING_PROMPT` and the workers' descriptions, and the agent's model
    merges the results in its final answer. A worker that fails answers its call with an
    error result (``Error: the sub-agent <name> ended with <reason>``) and the supervisor
    goes on. Workers are bound by the reply's `PropagatedLimitMiddleware`.

    Nested approvals: a worker's call that needs the user's confirmation pauses the worker
    (its ``require_user_confirm`` streams nested, with the path to the worker) and its state
    is kept in this reply's middleware state; the next model call is replaced by a call of
    ``confirm_<name>`` (hidden from the model; its arguments name the worker and the calls
    it asks for), which needs confirmation, so this reply pauses too, with the same events
    and finish reason a local call gives. Approving it resumes the worker with its calls
    approved (they run once), and the worker's answer is that call's result; rejecting it
    denies them and the worker's run is dropped. A worker that is itself a supervisor passes
    its workers' asks up the same way, so an ask three levels down reaches the top. The
    state is JSON in the session, so the resume may run in another process. Without a
    toolkit to pause with (in a sidecar), a worker's ask is denied instead.

    A worker that calls external tools (its reply ends ``awaiting_external_execution``)
    pauses this reply the same way, on calls of the external ``external_<name>`` (hidden
    from the model; one per call of the worker's, ``{"worker", "path", "tool",
    "arguments"}`` naming the tool to run): the caller resumes with their results, the next
    model call is replaced by an ``ask_<name>`` call that resumes the worker with them as
    its calls' results, and the worker's answer is that call's result. In a sidecar such a
    worker is an error result.

    Example:
        >>> team = SupervisorMiddleware([Worker("research", model, "Finds facts.")])
        >>> agent = Agent(model, middlewares=[team])

    Args:
        workers: The workers (distinct names).
        routing_prompt: Replaces `ROUTING_PROMPT`.
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        routing_prompt: str = ROUTING_PROMPT,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        self.workers = worker_names(workers)
        if not routing_prompt.strip():
            raise ValueError("routing_prompt must not be empty")
        self.routing_prompt = routing_prompt
        self.failure_mode = check.failure(failure_mode)
        self._tools = [self._build_tool(w) for w in workers]
        self._tools += [self._build_confirm(w) for w in workers]
        self._tools += [
            external_tool(
                f"{EXTERNAL_PREFIX}{w.name}",
                f"The results of the external calls the worker {w.name} makes.",
                external_parameters("worker"),
            )
            for w in workers
        ]
        self._hidden = frozenset(
            f"{prefix}{w.name}" for w in workers for prefix in (CONFIRM_PREFIX, EXTERNAL_PREFIX)
        )

    def middleware_key(self) -> str:
        return "supervisor"

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """While workers wait for the user (or the caller), replace the model call by
        ``confirm_<name>`` (``external_<name>``) calls, so this reply pauses; once the
        caller gave a waiting worker's results, by an ``ask_<name>`` call that resumes it
        with them; otherwise call the model without the hidden tools."""
        state = self.state(agent)
        waiting = state.pop("waiting", [])
        if waiting:
            return pause_step(agent, pause_calls(state, waiting, "worker"))
        given = answered(state, kwargs["messages"])
        if given:
            calls = [
                resume_call(state, f"ask_{e['worker']}", {"task": e["task"]}, e, resume)
                for e, resume in given
            ]
            return pause_step(agent, calls)
        return await next_handler(
            tools=[t for t in kwargs["tools"] if t["name"] not in self._hidden]
        )

    async def _run(
        self,
        context: ToolContext[AgentView],
        worker: Worker,
        task: str,
        saved: dict[str, Any] | None = None,
        resume: Resume | None = None,
    ) -> AsyncIterator[ToolPiece]:
        agent = context.agent
        outcome = ForkOutcome()
        inputs: list[Message] = [] if saved is not None else [make_user_text(agent.kind, task)]
        async for event in run_worker(
            agent,
            context.call,
            worker,
            inputs,
            outcome,
            pausable=can_pause(agent, f"{CONFIRM_PREFIX}{worker.name}"),
            external=can_pause(agent, f"{EXTERNAL_PREFIX}{worker.name}"),
            saved=saved,
            resume=resume,
        ):
            yield event
        if outcome.paused:
            asks = asks_of(outcome.asks)
            self.state(agent).setdefault("waiting", []).append(
                {
                    "worker": worker.name,
                    "task": task,
                    "awaiting": outcome.awaiting,
                    "state": outcome.saved,
                    "asks": asks,
                }
            )
            yield waits_text(f"The worker {worker.name}", asks, outcome.awaiting)
            return
        if not outcome.ok:
            raise ToolError(outcome.text)
        yield outcome.text

    def _build_confirm(self, worker: Worker) -> Tool:
        async def confirm(
            context: ToolContext[AgentView], **unused: Any
        ) -> AsyncIterator[ToolPiece]:
            """Continue a worker with the calls the user confirmed."""
            entry = self.state(context.agent).get("confirming", {}).pop(context.call.id, None)
            if entry is None:
                raise ToolError("Error: no worker waits for this confirmation")
            resume = approved(entry["asks"])
            task = entry.get("task", "")
            async for piece in self._run(context, worker, task, entry["state"], resume):
                yield piece

        return Tool(
            name=f"{CONFIRM_PREFIX}{worker.name}",
            description=f"The user confirms the calls the worker {worker.name} asks to make.",
            parameters=confirm_parameters("worker"),
            func=confirm,
            needs_confirmation=True,
        )

    async def on_system_prompt(self, agent: AgentView, prompt: str) -> str:
        lines = "\n".join(f"- {w.name}: {w.description}" for w in self.workers.values())
        return f"{prompt}\n\n{self.routing_prompt}\n{lines}".strip()

    def _build_tool(self, worker: Worker) -> Tool:
        async def ask(context: ToolContext[AgentView], task: str) -> AsyncIterator[ToolPiece]:
            """Give the worker a task.

            Args:
                task: The whole task: the worker sees nothing else.
            """
            given = resuming(self.state(context.agent), context.call.id)
            if given is not None:  # stands in for a model call: the worker's results came
                entry, resume = given
                pieces = self._run(context, worker, entry["task"], entry["state"], resume)
            else:
                pieces = self._run(context, worker, task)
            async for piece in pieces:
                yield piece

        return tool(
            ask,
            name=f"ask_{worker.name}",
            description=f"Ask the worker {worker.name}: {worker.description}",
            concurrency_safe=True,
        )


def supervisor(
    model: ChatModel,
    workers: Sequence[Worker],
    *,
    name: str = "supervisor",
    system_prompt: str = "",
    middlewares: Sequence[Middleware] = (),
    max_iters: int = 10,
) -> Agent:
    """A prebuilt supervisor: an `Agent` of `model` with `SupervisorMiddleware(workers)`
    after `middlewares` (put a `PropagatedLimitMiddleware` there to bound the team)."""
    return Agent(
        model,
        name=name,
        system_prompt=system_prompt,
        middlewares=[*middlewares, SupervisorMiddleware(workers)],
        max_iters=max_iters,
    )


__all__ = [
    "CONFIRM_PREFIX",
    "ROUTING_PROMPT",
    "SupervisorMiddleware",
    "Worker",
    "asker_path",
    "run_worker",
    "supervisor",
    "worker_names",
]
