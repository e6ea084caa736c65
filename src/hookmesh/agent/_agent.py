"""The Agent: one class running a fixed ReAct loop, customised only through middlewares."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from hookmesh.agent._acting import ActingSteps, check_resume
from hookmesh.agent._answer import AnswerSteps
from hookmesh.agent._checkpoint import Checkpoint, OutcomePolicy, StepKind, StepPoint
from hookmesh.agent._output import FINAL_TOOL, OutputSpec, output_spec, spec_from_key
from hookmesh.agent._run import DEFAULT_MAX_ITERS, ReplyOutput, ReplyRun, drain, new_id
from hookmesh.agent._state import AgentState, PendingReply
from hookmesh.agent._stream import StreamOutcome, response_events
from hookmesh.errors import HookmeshError
from hookmesh.metrics import record_middleware_error
from hookmesh.middleware import (
    ALLOW,
    ASK,
    HOOKS,
    Middleware,
    PermissionDecision,
    blame,
    build_await_chain,
    build_event_chain,
    check_middleware,
    core_step,
    culprit,
    is_trip,
    skip_failed,
)
from hookmesh.models import ChatModel, ModelResult
from hookmesh.schema import (
    AgentEvent,
    AgenticMessage,
    FinishReason,
    FlatMessage,
    Message,
    MessageKind,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyError,
    ReplyStartEvent,
    Resume,
    StructuredOutput,
    ToolCall,
    check_messages,
    make_assistant,
    make_text,
    make_user_text,
    to_kind,
    tool_calls,
    unanswered_tool_calls,
)
from hookmesh.tools import Tool, Toolkit

log = logging.getLogger("hookmesh.agent")


class AgentBusyError(HookmeshError):
    """The agent is already replying, or has a paused reply that must be resumed first."""

    reason = "AGENT_BUSY"


class UnknownModelError(HookmeshError):
    """A middleware asked for a model the agent has not configured."""

    reason = "UNKNOWN_MODEL"


Output = type[BaseModel] | Mapping[str, Any] | OutputSpec
"""What a structured answer must look like: a pydantic model, a JSON Schema, or an
`OutputSpec` (`output_spec`)."""


class Agent(ActingSteps, AnswerSteps):
    """A ReAct agent: reply → (compress context → reasoning → model call → acting)* → end.

    Everything beyond that loop is a middleware. Hooks are bucketed once, here: each hook
    gets its own pre-built chain, and a hook no middleware implements calls the core
    directly. One agent runs one reply at a time; share middlewares, not agents.

    Args:
        model: The chat model.
        name: The agent's name (in reply_start and traces).
        system_prompt: Base system prompt; `on_system_prompt` middlewares transform it before
            each reasoning step.
        tools: Tools the model may call (middlewares may add more via `list_tools`).
        middlewares: Index 0 is the outermost layer of every onion hook.
        kind: ``flat`` or ``agentic``: the kind of every message in the context.
        max_iters: Most reasoning steps per reply before it ends with exceed_max_iters.
        state: State to continue from (e.g. restored from JSON); a fresh one by default.
        session_id: Reported in reply_start / reply_end.
        user_id: The end user the agent answers (services set the authenticated caller).
        models: Models by configured name, which a middleware may call instead of `model`:
            ``next_handler(model=agent.resolve_model(name))`` in on_model_call.
        outcome_unknown: What a continued reply (`redrive`) does with a call cut off mid-run
            whose tool is not safe to run twice (`OutcomePolicy`).
        output: The structured answer every reply asks for unless `reply` names another
            (docs/structured-output.md); checked and compiled here, once.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        name: str = "agent",
        system_prompt: str = "",
        tools: Sequence[Tool] = (),
        middlewares: Sequence[Middleware] = (),
        kind: MessageKind = "flat",
        max_iters: int = DEFAULT_MAX_ITERS,
        state: AgentState | None = None,
        session_id: str = "",
        user_id: str = "",
        models: Mapping[str, ChatModel] | None = None,
        outcome_unknown: OutcomePolicy = "ask",
        output: Output | None = None,
    ) -> None:
        if kind not in ("flat", "agentic"):
            raise ValueError(f"kind must be 'flat' or 'agentic', not {kind!r}")
        if max_iters < 1:
            raise ValueError("max_iters must be at least 1")
        self.model = model
        self.name = name
        self._system_prompt = system_prompt
        self.kind: MessageKind = kind
        self.max_iters = max_iters
        self.state = state or AgentState()
        self.session_id = session_id
        self.user_id = user_id
        """The end user this agent answers, when a service knows it (its authenticated
        caller); middlewares keep per-user data under it."""
        self.models: Mapping[str, ChatModel] = models or {}
        if outcome_unknown not in ("ask", "tell_model", "fail"):
            raise ValueError(
                f"outcome_unknown must be 'ask', 'tell_model' or 'fail', not {outcome_unknown!r}"
            )
        self.outcome_unknown: OutcomePolicy = outcome_unknown
        self._output = output_spec(output) if output is not None else None
        self.middlewares = list(middlewares)
        for mw in self.middlewares:
            check_middleware(mw)
        self.toolkit = Toolkit(tools)
        self._tool_owners = {}
        for mw in self.middlewares:
            for t in mw.list_tools():
                self.toolkit.add(t)
                self._tool_owners[t.name] = mw
        by_hook = {h: [mw for mw in self.middlewares if mw.implements(h)] for h in HOOKS}
        self._reply_chain = build_event_chain(
            self, by_hook["on_reply"], "on_reply", self._core_reply
        )
        self._reasoning_chain = build_event_chain(
            self, by_hook["on_reasoning"], "on_reasoning", self._core_reasoning
        )
        self._model_chain = build_await_chain(
            self, by_hook["on_model_call"], "on_model_call", self._core_model_call
        )
        self._acting_chain = build_event_chain(
            self, by_hook["on_acting"], "on_acting", self._core_acting
        )
        self._permission_chain = build_await_chain(
            self, by_hook["on_check_permission"], "on_check_permission", self._core_permission
        )
        self._compress_chain = (
            build_await_chain(
                self, by_hook["on_compress_context"], "on_compress_context", _no_compress
            )
            if by_hook["on_compress_context"]
            else None
        )
        self._prompt_middlewares = by_hook["on_system_prompt"]
        # NOTE(hookmesh): with no transformer the system message never changes: built once
        # here, shared by every step of every reply.
        self._static_system = (
            make_text(kind, "system", system_prompt)
            if system_prompt and not self._prompt_middlewares
            else None
        )
        self._after_middlewares = by_hook["after_agent"]
        self._run: ReplyRun | None = None
        self.reply_id = ""
        """The current (or last) reply's id; middlewares key their state by it."""
        self.final_message: Message | None = None
        """The last completed reply's final message."""
        self.last_finish_reason: FinishReason | None = None
        """How the last reply ended (also set when its consumer went away)."""

    # --- public API ------------------------------------------------------------------------

    @property
    def system_prompt(self) -> str:
        """The base system prompt (fixed at construction; `on_system_prompt` middlewares
        transform it before each reasoning step)."""
        return self._system_prompt

    def reply(
        self,
        inputs: str | Message | Sequence[Message] = (),
        *,
        tool_choice: str = "auto",
        max_iters: int | None = None,
        checkpoint: Checkpoint | None = None,
        reply_id: str = "",
        output: Output | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Answer `inputs` (text, or messages of either kind), streaming events.

        The stream always ends with reply_end. Raises `SchemaError` for malformed inputs or
        a bad `output` schema, and `AgentBusyError` when a reply is running or paused.

        Args:
            inputs: A user text, or messages of either kind (converted to the agent's kind).
            tool_choice: For the first reasoning step (later steps use ``auto``, so a forced
                call cannot loop until max_iters).
            max_iters: This reply's limit instead of the agent's.
            checkpoint: Awaited at each step boundary (`StepPoint`): save
                `checkpoint_state()` there and another process can continue the reply.
            reply_id: The reply's id (a fresh one when empty), for a caller that names it
                before the first event.
            output: The structured answer this reply asks for instead of the agent's: the
                final reply_end then carries it validated (`ReplyEndEvent.output`; with a
                pydantic model, an instance of it), or the reply ends with reason
                ``OUTPUT_INVALID`` once the model's answers failed more often than the
                spec's retries allow.
        """
        self._check_idle()
        if self.state.pending is not None:
            raise AgentBusyError("a reply is paused: resume it before starting another")
        if isinstance(inputs, str):
            messages: list[Message] = [make_user_text(self.kind, inputs)]
        else:
            given = [inputs] if isinstance(inputs, FlatMessage | AgenticMessage) else list(inputs)
            check_messages(given, "inputs")
            messages = to_kind(given, self.kind)
        # Ids before any hook sees the inputs, so every middleware (local or remote) can
        # refer to the same messages.
        messages = [m if m.id else m.model_copy(update={"id": new_id()}) for m in messages]
        if max_iters is not None and max_iters < 1:
            raise ValueError("max_iters must be at least 1")
        spec = output_spec(output) if output is not None else self._output
        kwargs = {"inputs": messages, "resume": None}
        return self._drive(
            reply_id or new_id(),
            kwargs,
            tool_choice,
            max_iters or self.max_iters,
            checkpoint,
            max_iters,
            spec,
        )

    def resume(
        self, resume: Resume, *, checkpoint: Checkpoint | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Continue the paused reply with confirmations or external results; or, with an
        empty `Resume`, a reply saved by a checkpoint while it ran (`redrive`)."""
        self._check_idle()
        pending = self.state.pending
        if pending is None:
            raise AgentBusyError("there is no paused reply to resume")
        check_resume(pending, resume, self.toolkit)
        own = pending.max_iters or None
        return self._drive(
            pending.reply_id,
            {"inputs": [], "resume": resume},
            "auto",
            own or self.max_iters,
            checkpoint,
            own,
        )

    def redrive(self, *, checkpoint: Checkpoint | None = None) -> AsyncIterator[AgentEvent]:
        """Continue a reply that was cut off while running, from its last checkpoint (the
        state holds it as a `PendingReply` with ``awaiting="running"``): calls without a
        result run again, or, when they had started and their tool is not safe to run
        twice, follow `outcome_unknown`. The stream continues the cut-off one: it has no
        reply_start unless the checkpoint is the inputs' (saved before the first event).

        Raises:
            AgentBusyError: The state holds no reply cut off while running.
        """
        pending = self.state.pending
        if pending is None or pending.awaiting != "running":
            raise AgentBusyError("there is no reply cut off while running to continue")
        return self.resume(Resume(), checkpoint=checkpoint)

    def checkpoint_state(self) -> AgentState:
        """The state to save at a checkpoint: the context and middleware state as they are,
        with the running reply's position as a `PendingReply` (``awaiting="running"``) so
        that `redrive` continues it. The lists are this agent's own: serialise at once."""
        run = self._run
        if run is None or run.paused:
            return self.state
        position = PendingReply(
            reply_id=run.reply_id,
            iteration=run.iteration,
            awaiting="running",
            direct_call_id=run.direct_call_id,
            started_calls=sorted(run.started),
            max_iters=run.own_max_iters or 0,
            output=run.output.state() if run.output is not None else None,
            blocks=run.blocks,
        )
        # NOTE(durability): built without validation: the context is this agent's own, already
        # valid, and validating it at every step would cost a pass over the whole conversation.
        return AgentState.model_construct(
            context=self.state.context,
            middle_context=self.state.middle_context,
            pending=position,
        )

    def emit(self, event: AgentEvent) -> None:
        """Queue `event` on the running reply's stream, for hooks that return a result rather
        than events (on_model_call, on_check_permission, ...). It is yielded after the current
        model call or tool run, before the step's closing event."""
        if self._run is None:
            raise AgentBusyError("no reply is running: events can only be emitted during one")
        self._run.outbox.append(event)

    def resolve_model(self, name: str) -> ChatModel:
        """The model configured as `name`, for an on_model_call override.

        Raises:
            UnknownModelError: No model is configured under that name.
        """
        model = self.models.get(name)
        if model is None:
            names = ", ".join(sorted(self.models)) or "none"
            raise UnknownModelError(
                f"no model is configured as {name!r}; configured: {names}",
                metadata={"model": name},
            )
        return model

    def tool(self, name: str) -> Tool | None:
        """The tool called `name` (the agent's own or a middleware's), or None."""
        return self.toolkit.get(name)

    @property
    def output(self) -> StructuredOutput | None:
        """The running reply's structured answer once it validated (so `after_agent` sees
        it); None before, and for a reply that asks for none."""
        run = self._run
        return run.output.result if run is not None and run.output is not None else None

    def interrupt(self) -> bool:
        """Stop the running reply; it ends with reply_end interrupted. False if none runs.

        Safe from any task of the loop: the reply's task is cancelled only while it waits
        inside the reply (a model or tool call), never while it runs the consumer's code.
        """
        run = self._run
        if run is None or run.interrupted:
            return False
        run.interrupted = True
        if run.inside and run.task is not None and run.task is not asyncio.current_task():
            run.cancelled = True
            run.task.cancel("hookmesh interrupt")
        return True

    # --- driver ----------------------------------------------------------------------------

    def _check_idle(self) -> None:
        if self._run is not None:
            raise AgentBusyError("the agent is already replying")

    async def _drive(
        self,
        reply_id: str,
        kwargs: dict[str, Any],
        tool_choice: str,
        max_iters: int,
        checkpoint: Checkpoint | None,
        own_max_iters: int | None,
        output: OutputSpec | None = None,
    ) -> AsyncIterator[AgentEvent]:
        run = self._run = ReplyRun(reply_id)
        run.start = len(self.state.context)
        run.tool_choice = tool_choice
        run.max_iters = max_iters
        run.own_max_iters = own_max_iters
        run.checkpoint = checkpoint
        pending = self.state.pending
        if pending is not None:
            run.blocks = pending.blocks
            if pending.output is not None:
                saved = pending.output
                same = self._output is not None and self._output.key == saved.key
                spec = self._output if same else spec_from_key(saved.key)
                run.output = ReplyOutput(spec, saved.strategy, saved.failures)  # type: ignore[arg-type]
        elif output is not None:
            strategy = output.strategy
            if strategy == "auto":
                strategy = "native" if self.model.native_output else "tool"
            run.output = ReplyOutput(output, strategy)
        self.reply_id = reply_id
        self.last_finish_reason = None
        try:
            stream = self._reply_chain(kwargs)
        except Exception as exc:  # an on_reply written as a plain function raised at once
            stream = _raising(exc)
        try:
            # NOTE(hookmesh): `inside` tells interrupt() whether the task is suspended in the
            # reply's own code (safe to cancel) or in the consumer's (only flag it).
            run.inside = True
            async for event in stream:
                run.inside = False
                if (
                    self.last_finish_reason is not None
                    and event.type in ("reply_start", "reply_end")
                    and not event.source_path
                ):
                    # NOTE(hookmesh): the reply already ended (an on_reply post phase still
                    # runs and may emit, e.g. a report): it never starts or ends again.
                    log.warning("reply %s: %s after reply_end dropped", reply_id, event.type)
                    run.inside = True
                    continue
                if event.type == "reply_end" and not event.source_path:
                    self.last_finish_reason = event.finish_reason
                yield event
                if run.interrupted:
                    raise asyncio.CancelledError
                run.inside = True
            run.inside = False
            if self.last_finish_reason is None:
                end = run.end or self._end("completed")
                self.last_finish_reason = end.finish_reason
                yield end
        except asyncio.CancelledError:
            run.inside = False
            if not run.interrupted:
                raise
            if run.cancelled and run.task is not None:
                run.task.uncancel()
            await _close(stream)
            self._abandon(run)
            if self.last_finish_reason is not None:
                return
            self.last_finish_reason = "interrupted"
            yield self._end("interrupted")
        except Exception as exc:
            if self.last_finish_reason is not None:
                log.error("reply %s failed after its reply_end: %s", reply_id, exc)
                return
            self.last_finish_reason = "error"
            if is_trip(exc) and not run.begun:
                # A guardrail stopped the input before the core took it: the reply still
                # begins and ends, as every reply does.
                yield ReplyStartEvent(
                    reply_id=reply_id, session_id=self.session_id, agent_name=self.name
                )
            yield self._error_end(exc)
        finally:
            if self.last_finish_reason is None:
                self.last_finish_reason = "interrupted"
            if not run.paused:
                self._abandon(run)
            self._run = None

    def _abandon(self, run: ReplyRun) -> None:
        """Close a reply that will not resume: answer open tool calls, drop its state.

        Only this reply's messages can hold its open calls, so only they are scanned (the
        whole context when a compression shrank it below where the reply began).
        """
        context = self.state.context
        tail = context[run.start :] if run.start <= len(context) else context
        for call in unanswered_tool_calls(tail):
            self._answer(call, "interrupted before it completed", "interrupted")
        for by_reply in self.state.middle_context.values():
            by_reply.pop(run.reply_id, None)

    def _end(
        self,
        reason: FinishReason,
        error: ReplyError | None = None,
        output: StructuredOutput | None = None,
    ) -> ReplyEndEvent:
        return ReplyEndEvent(
            reply_id=self.reply_id,
            finish_reason=reason,
            error=error,
            session_id=self.session_id,
            output=output,
        )

    def _error_end(self, exc: BaseException) -> ReplyEndEvent:
        mw = culprit(exc)
        if is_trip(exc):
            return self._tripped(exc, mw)
        if mw is not None:
            # A middleware's own HookmeshError (a sidecar's `done` error among them) keeps
            # its reason and metadata; anything else is MIDDLEWARE_FAILED.
            key = mw.middleware_key()
            record_middleware_error(key, "fail_closed")
            reason, extra = "MIDDLEWARE_FAILED", {}
            if isinstance(exc, HookmeshError):
                reason, extra = exc.reason, exc.metadata
            error = ReplyError(
                reason=reason,
                message=f"middleware {key} failed: {exc}",
                source=f"middleware:{key}",
                metadata={"errorType": type(exc).__name__, **extra, "middleware": key},
            )
        elif isinstance(exc, HookmeshError):
            error = ReplyError(
                reason=exc.reason, message=exc.message, source=exc.source, metadata=exc.metadata
            )
        else:
            error = ReplyError(
                reason="AGENT_ERROR",
                message=f"{type(exc).__name__}: {exc}",
                source="agent",
                metadata={"errorType": type(exc).__name__},
            )
        # An expected failure (a HookmeshError: a model or sidecar down, bad input) says what it
        # is; anything else is a bug and keeps its traceback.
        trace = None if isinstance(exc, HookmeshError) else exc
        log.error("reply %s failed: %s", self.reply_id, error.message, exc_info=trace)
        return self._end("error", error)

    def _tripped(self, trip: HookmeshError, mw: Middleware | None) -> ReplyEndEvent:
        """End a reply a guardrail stopped, keeping out of the context what tripped (and,
        for the input, everything the reply added): docs/middleware/guardrails.md."""
        run = self._run
        stage = trip.metadata.get("stage", "")
        if run is not None:
            context = self.state.context
            if stage == "input":
                del context[_input_start(context, trip.metadata.get("inputId", ""), run.start) :]
            elif stage == "output" and run.final is not None:
                for i in range(len(context) - 1, -1, -1):
                    if context[i] is run.final:
                        del context[i]
                        break
            else:
                tail = context[run.start :] if run.start <= len(context) else context
                for call in unanswered_tool_calls(tail):
                    self._answer(call, f"Stopped: {trip.message}", "denied")
        key = mw.middleware_key() if mw is not None else ""
        log.info("reply %s: %s", self.reply_id, trip.message)
        return self._end(
            "error",
            ReplyError(
                reason=trip.reason,
                message=trip.message,
                source=f"middleware:{key}" if key else "agent",
                metadata={**trip.metadata, **({"middleware": key} if key else {})},
            ),
        )

    # --- core steps --------------------------------------------------------------------------

    @core_step
    async def _core_reply(self, kwargs: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        run = self._run
        assert run is not None
        resume: Resume | None = kwargs.get("resume")
        pending = self.state.pending if resume is not None else None
        if pending is None:
            # NOTE(durability): the inputs are saved before the first event, so a client that
            # saw the reply begin never loses its own message.
            for msg in kwargs["inputs"]:
                self._write(msg)
            await self._commit("input")
        run.begun = True
        if pending is None or pending.awaiting != "running" or pending.iteration < 0:
            # A continuation from the inputs' checkpoint begins as the reply did: its events
            # then carry the numbers the cut-off reply's had.
            yield ReplyStartEvent(
                reply_id=run.reply_id, session_id=self.session_id, agent_name=self.name
            )
        try:
            run.system = self._static_system
            first = 0
            if pending is not None:
                first = pending.iteration + 1
                run.iteration = pending.iteration
                async for event in self._continue(pending, resume):  # type: ignore[arg-type]
                    yield event
            reason: FinishReason = "exceed_max_iters"
            if not run.paused and not run.direct_call_id:
                for iteration in range(first, run.max_iters):
                    if self._compress_chain is not None:
                        await self._compress_chain({})
                    if self._prompt_middlewares:
                        run.system = await self._system_message()
                    run.message = None
                    choice = run.tool_choice if iteration == first else "auto"
                    async for event in self._reasoning_chain({"tool_choice": choice}):
                        yield event
                    calls: list[ToolCall] = [] if run.message is None else tool_calls(run.message)
                    answer = run.output
                    if answer is not None:
                        async for event in self._take_answer(run, answer, calls):
                            yield event
                        if answer.result is not None:
                            reason = "completed"
                            break
                        if answer.again:
                            run.iteration = iteration
                            await self._commit("results")
                            continue
                    if not calls:
                        run.final = run.message
                        reason = "completed"
                        break
                    run.iteration = iteration
                    await self._commit("model")
                    async for event in self._act(calls, iteration):
                        yield event
                    if run.paused or run.direct_call_id:
                        break
            if run.paused:
                yield run.end  # type: ignore[misc]
                return
            if run.direct_call_id:
                self._finish_directly(run)
                if run.output is not None:
                    self._take_direct_answer(run, run.output)
                reason = "completed"
            if reason == "completed":
                await self._after_agent(run)
            for event in drain(run.outbox):
                yield event
            result = run.output.result if run.output is not None else None
            run.end = self._end(reason, output=result if reason == "completed" else None)
            yield run.end
        except Exception as exc:
            run.end = self._error_end(exc)
            yield run.end

    async def _commit(self, kind: StepKind, calls: tuple[str, ...] = ()) -> None:
        """Await the reply's checkpoint callback at a step boundary, if it has one."""
        run = self._run
        if run is not None and run.checkpoint is not None:
            await run.checkpoint(StepPoint(kind, run.reply_id, calls))

    async def _system_message(self) -> Message | None:
        """The system message for the next reasoning step: the base prompt through every
        `on_system_prompt` transformer, in list order (none when it comes out empty)."""
        prompt = self._system_prompt
        for mw in self._prompt_middlewares:
            try:
                prompt = await mw.on_system_prompt(self, prompt)
            except Exception as exc:
                if mw.failure_mode != "fail_open" or is_trip(exc):
                    blame(exc, mw)
                    raise
                skip_failed(mw, "on_system_prompt", exc)
        return make_text(self.kind, "system", prompt) if prompt else None

    async def _after_agent(self, run: ReplyRun) -> None:
        final = run.final or make_assistant(self.kind, "")
        self.final_message = final
        for mw in self._after_middlewares:
            try:
                await mw.after_agent(self, final)
            except Exception as exc:
                if mw.failure_mode != "fail_open" or is_trip(exc):
                    blame(exc, mw)
                    raise
                skip_failed(mw, "after_agent", exc)

    @core_step
    async def _core_reasoning(self, kwargs: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        run = self._run
        assert run is not None
        context = self.state.context
        messages = [run.system, *context] if run.system is not None else list(context)
        model = self.model
        run.model_name = model.model_name
        yield ModelCallStartEvent(reply_id=run.reply_id, model_name=model.model_name)
        result = await self._model_chain(
            {
                "model": model,
                "messages": messages,
                "tools": self.toolkit.definitions(),
                "tool_choice": kwargs.get("tool_choice", "auto"),
            }
        )
        outcome = StreamOutcome()
        async for event in response_events(
            run.reply_id, result, self.kind, run.block_id, outcome, lambda: run.model_name
        ):
            yield event
        if run.outbox:
            for event in drain(run.outbox):
                yield event
        response = outcome.response
        assert response is not None
        run.message = response.message
        self._write(response.message)
        yield ModelCallEndEvent(
            reply_id=run.reply_id,
            model_name=run.model_name,
            usage=response.usage,
            stop_reason=response.stop_reason,
            response_id=response.response_id,
        )

    @core_step
    async def _core_model_call(self, kwargs: dict[str, Any]) -> ModelResult:
        model = kwargs["model"]
        if not isinstance(model, ChatModel):
            raise UnknownModelError(
                f"{model.model_name!r} is not a model: choose one with agent.resolve_model(name)",
                metadata={"model": model.model_name},
            )
        run = self._run
        if run is not None:
            run.model_name = model.model_name  # model_call_end names who answered
        answer = run.output if run is not None else None
        if answer is None:
            return await model(
                kwargs["messages"],
                tools=kwargs["tools"],
                tool_choice=kwargs["tool_choice"],
                kind=self.kind,
            )
        # NOTE(output): added here, below every middleware, so none can hide the final-answer
        # tool or the format from the model; a model without a JSON-schema mode (one a
        # fallback chose) is asked plainly, and its answer is still validated.
        if answer.strategy == "tool":
            return await model(
                kwargs["messages"],
                tools=[*kwargs["tools"], answer.spec.tool],
                tool_choice=_ANSWER_CHOICE.get(kwargs["tool_choice"], kwargs["tool_choice"]),
                kind=self.kind,
            )
        if not model.native_output:
            return await model(
                kwargs["messages"],
                tools=kwargs["tools"],
                tool_choice=kwargs["tool_choice"],
                kind=self.kind,
            )
        return await model(
            kwargs["messages"],
            tools=kwargs["tools"],
            tool_choice=kwargs["tool_choice"],
            kind=self.kind,
            output=answer.spec.format,
        )

    @core_step
    async def _core_permission(self, kwargs: dict[str, Any]) -> PermissionDecision:
        return ASK if kwargs["tool"].needs_confirmation else ALLOW


_ANSWER_CHOICE = {"auto": "required", "none": FINAL_TOOL}
"""Under the tool strategy, a step's tool choice as the model gets it: a reply ends only
through the final-answer tool, so some call is required (``none``: that one)."""


def _input_start(context: list[Message], input_id: str, start: int) -> int:
    """Where a reply's input begins in the context: the message `input_id` (a guardrail
    names it for a reply continued after its input), else where the reply began."""
    if input_id:
        for i in range(len(context) - 1, -1, -1):
            if context[i].id == input_id:
                return i
    return min(start, len(context))


async def _raising(exc: Exception) -> AsyncIterator[AgentEvent]:
    """A stream that fails with `exc` at its first step."""
    raise exc
    yield  # an async generator


async def _close(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


async def _no_compress(unused_kwargs: dict[str, Any]) -> None:
    """The core of context compression: nothing; middlewares do the work."""
