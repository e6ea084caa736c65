"""Acting and human-in-the-loop: checking, running and answering one step's tool calls,
pausing for a person or the caller, and continuing a paused reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from hookmesh.agent._checkpoint import OUTCOME_UNKNOWN, OutcomePolicy
from hookmesh.agent._run import ReplyRun, drain, new_id
from hookmesh.agent._state import AgentState, PendingReply
from hookmesh.agent._stream import OutputCollector
from hookmesh.errors import FieldViolation, HookmeshError, SchemaError
from hookmesh.middleware import Middleware, blame, core_step, skip_failed
from hookmesh.schema import (
    AgentEvent,
    AudioBlock,
    DocumentBlock,
    FinishReason,
    ImageBlock,
    Message,
    MessageKind,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    Resume,
    TextBlock,
    ToolCall,
    ToolOutputBlock,
    ToolResultDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    VideoBlock,
    edit_tool_call,
    is_assistant,
    make_assistant,
    make_tool_result,
    tool_results,
    unanswered_tool_calls,
)
from hookmesh.tools import (
    AbortReply,
    Tool,
    ToolArgumentError,
    ToolContext,
    ToolError,
    Toolkit,
    idempotency_key,
)

if TYPE_CHECKING:
    from hookmesh.middleware import AwaitCall, EventCall

log = logging.getLogger("hookmesh.agent")

_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)
"""The media pieces a tool yields (anything but text and these is an event)."""


class ToolOutcomeUnknownError(HookmeshError):
    """A continued reply found a call cut off mid-run whose tool is not safe to run twice,
    under the ``fail`` policy."""

    reason = "TOOL_OUTCOME_UNKNOWN"


class _ToRun(NamedTuple):
    """A call to execute, with its parsed arguments."""

    call: ToolCall
    tool: Tool
    arguments: dict[str, Any]


class _ToAnswer(NamedTuple):
    """A call answered without running (denied, invalid, unknown tool)."""

    call: ToolCall
    text: str
    state: ToolResultState


_Step = _ToRun | _ToAnswer
"""One call's action in a step."""


class ActingSteps:
    """The agent's tool steps, kept apart from the loop that drives them (`Agent` mixes this
    in; it is not a public extension point)."""

    name: str
    kind: MessageKind
    state: AgentState
    toolkit: Toolkit
    reply_id: str
    session_id: str
    user_id: str
    _run: ReplyRun | None
    outcome_unknown: OutcomePolicy
    _tool_owners: dict[str, Middleware]
    """The middleware that contributed each of its tools, by tool name."""
    _permission_chain: AwaitCall
    _acting_chain: EventCall
    _end: Callable[[FinishReason], ReplyEndEvent]
    _commit: Callable[..., Awaitable[None]]

    @core_step
    async def _core_acting(self, kwargs: dict[str, Any]) -> AsyncIterator[AgentEvent]:
        call: ToolCall = kwargs["tool_call"]
        tool: Tool = kwargs["tool"]
        reply_id = self.reply_id
        context = (
            ToolContext(self, call, idempotency_key(reply_id, call.id))
            if tool.takes_context
            else None
        )
        yield ToolResultStartEvent(reply_id=reply_id, call_id=call.id, name=call.name)
        state: ToolResultState = "success"
        try:
            async for piece in tool.run(kwargs["arguments"], context):
                if isinstance(piece, str):
                    yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, text=piece)
                elif isinstance(piece, TextBlock):
                    yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, text=piece.text)
                elif isinstance(piece, _MEDIA):
                    yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, media=piece)
                elif piece.reply_id == reply_id:
                    yield piece  # an event the tool streams to the reply (nested, custom, ...)
                else:
                    yield _in_reply(piece, reply_id, call.name)
        except AbortReply as exc:
            owner = self._tool_owners.get(call.name)
            if owner is None or owner.failure_mode != "fail_open":
                raise (exc.error if owner is None else blame(exc.error, owner)) from None
            skip_failed(owner, "tool_run", exc.error)
            state = "error"
            yield ToolResultDeltaEvent(reply_id=reply_id, call_id=call.id, text=f"Error: {exc}")
        except ToolError as exc:
            state = "error"
            for event in _deltas(reply_id, call.id, exc.output) if exc.output else ():
                yield event
        except Exception as exc:
            state = "error"
            log.info("tool %s (call %s) raised %s: %s", call.name, call.id, type(exc).__name__, exc)
            yield ToolResultDeltaEvent(
                reply_id=reply_id, call_id=call.id, text=f"Error: {type(exc).__name__}: {exc}"
            )
        yield ToolResultEndEvent(reply_id=reply_id, call_id=call.id, state=state)

    def _write(self, msg: Message) -> None:
        """Append to the context, stamping id and time (the only place context grows)."""
        if not msg.id:
            msg.id = new_id()
        if msg.create_time is None:
            msg.create_time = datetime.now(UTC)
        self.state.context.append(msg)

    def _answer(
        self, call: ToolCall, output: str | list[ToolOutputBlock], state: ToolResultState
    ) -> Message:
        msg = make_tool_result(self.kind, call.id, call.name, output, state)
        self._write(msg)
        return msg

    async def _answer_events(
        self, call: ToolCall, output: str | list[ToolOutputBlock], state: ToolResultState
    ) -> AsyncIterator[AgentEvent]:
        """Answer a call that does not run (denied, invalid, unknown, external) with events."""
        rid = self.reply_id
        yield ToolResultStartEvent(reply_id=rid, call_id=call.id, name=call.name)
        self._answer(call, output, state)
        for event in _deltas(rid, call.id, output):
            yield event
        yield ToolResultEndEvent(reply_id=rid, call_id=call.id, state=state)

    async def _act(
        self, calls: list[ToolCall], iteration: int, unknown: Sequence[ToolCall] = ()
    ) -> AsyncIterator[AgentEvent]:
        """Check, run and answer one step's tool calls (results in call order); pause if any
        need a person or the caller. `unknown`: calls of a continued reply whose outcome is
        unknown, to confirm again."""
        confirm: list[ToolCall] = list(unknown)
        external: list[ToolCall] = []
        steps: list[_Step] = []
        for call in calls:
            tool = self.toolkit.get(call.name)
            if tool is None:
                names = ", ".join(t.name for t in self.toolkit) or "none"
                steps.append(
                    _ToAnswer(
                        call,
                        f"Error: there is no tool named {call.name!r} (tools: {names})",
                        "error",
                    )
                )
                continue
            try:
                arguments = tool.parse_arguments(call.arguments)
            except ToolArgumentError as exc:
                steps.append(_ToAnswer(call, f"Error: {exc}", "error"))
                continue
            decision = await self._permission_chain({"tool_call": call, "tool": tool})
            if decision.behavior == "deny":
                reason = f": {decision.reason}" if decision.reason else ""
                steps.append(_ToAnswer(call, f"Permission denied{reason}", "denied"))
            elif decision.behavior == "ask":
                confirm.append(call)
            elif tool.external:
                external.append(call)
            else:
                steps.append(_ToRun(call, tool, arguments))
        async for event in self._execute(steps):
            yield event
        if confirm or external:
            reason = OUTCOME_UNKNOWN if unknown else ""
            async for event in self._pause(iteration, confirm, external, reason):
                yield event

    async def _pause(
        self,
        iteration: int,
        confirm: list[ToolCall],
        external: list[ToolCall],
        reason: str = "",
    ) -> AsyncIterator[AgentEvent]:
        run = self._run
        assert run is not None
        self.state.pending = PendingReply(
            reply_id=run.reply_id,
            iteration=iteration,
            awaiting="confirmation" if confirm else "external",
            confirm_calls=confirm,
            external_calls=external,
            direct_call_id=run.direct_call_id,
            output=run.output.state() if run.output is not None else None,
            blocks=run.blocks,
        )
        run.paused = True
        for event in drain(run.outbox):  # e.g. why a permission middleware asks
            yield event
        if confirm:
            yield RequireUserConfirmEvent(reply_id=run.reply_id, tool_calls=confirm, reason=reason)
            run.end = self._end("awaiting_confirmation")
        else:
            yield RequireExternalExecutionEvent(reply_id=run.reply_id, tool_calls=external)
            run.end = self._end("awaiting_external_execution")

    async def _continue(self, pending: PendingReply, resume: Resume) -> AsyncIterator[AgentEvent]:
        run = self._run
        assert run is not None
        self.state.pending = None
        run.direct_call_id = pending.direct_call_id
        external = list(pending.external_calls)
        if pending.awaiting == "running":
            async for event in self._continue_running(pending):
                yield event
            return
        if pending.awaiting == "confirmation":
            answers = {c.call_id: c for c in resume.confirmations}
            steps: list[_Step] = []
            for call in pending.confirm_calls:
                answer = answers[call.id]
                tool = self.toolkit.get(call.name)
                if not answer.confirmed or tool is None:
                    reason = f": {answer.reason}" if answer.reason else ""
                    steps.append(_ToAnswer(call, f"The user denied this call{reason}", "denied"))
                    continue
                if answer.arguments is not None:
                    call = self._edit(call, answer.arguments)
                if tool.external:
                    external.append(call)
                else:
                    steps.append(_ToRun(call, tool, tool.parse_arguments(call.arguments)))
            async for event in self._execute(steps):
                yield event
            if external:
                async for event in self._pause(pending.iteration, [], external):
                    yield event
                return
        else:
            results = {r.call_id: r for r in resume.external_results}
            for call in external:
                result = results[call.id]
                async for event in self._answer_events(call, result.output, result.state):
                    yield event
                if self._returns_directly(call, result.state):
                    run.direct_call_id = call.id

    async def _continue_running(self, pending: PendingReply) -> AsyncIterator[AgentEvent]:
        """Answer the calls a reply cut off while running left without a result: run them
        again, unless one had started and its tool is not safe to run twice; then its
        outcome is unknown and `outcome_unknown` decides."""
        run = self._run
        assert run is not None
        context = self.state.context
        last = next((i for i in range(len(context) - 1, -1, -1) if is_assistant(context[i])), 0)
        run.start = min(run.start, last)
        open_calls = unanswered_tool_calls(context[last:])
        started = set(pending.started_calls)
        unknown = [c for c in open_calls if c.id in started and not self._safe_again(c)]
        again = [c for c in open_calls if c not in unknown]
        if unknown and self.outcome_unknown == "fail":
            names = ", ".join(sorted({c.name for c in unknown}))
            raise ToolOutcomeUnknownError(
                f"the outcome of {names} is unknown: it was cut off while running and is not "
                "safe to run again",
                metadata={"tools": names, "callIds": ",".join(c.id for c in unknown)},
            )
        if self.outcome_unknown == "tell_model":
            for call in unknown:
                async for event in self._answer_events(call, OUTCOME_UNKNOWN, "error"):
                    yield event
            unknown = []
        if again or unknown:
            async for event in self._act(again, pending.iteration, unknown):
                yield event

    def _safe_again(self, call: ToolCall) -> bool:
        tool = self.toolkit.get(call.name)
        return tool is None or tool.idempotent or tool.read_only

    def _edit(self, call: ToolCall, arguments: str) -> ToolCall:
        """The call with a person's edited arguments, recorded in the assistant message that
        made it, so the context says what actually ran."""
        for msg in reversed(self.state.context):
            if is_assistant(msg) and edit_tool_call(msg, call.id, arguments):
                break
        return call.model_copy(update={"arguments": arguments})

    def _returns_directly(self, call: ToolCall, state: ToolResultState) -> bool:
        tool = self.toolkit.get(call.name)
        return tool is not None and tool.return_directly and state == "success"

    def _finish_directly(self, run: ReplyRun) -> None:
        """End the reply with the return-directly tool's result as the final answer: every
        block of it (text and media, in order)."""
        output: list[ToolOutputBlock] = []
        for msg in reversed(self.state.context):
            found = [r for r in tool_results(msg) if r.call_id == run.direct_call_id]
            if found:
                output = [block.model_copy(deep=True) for block in found[0].output]
                break
        run.final = make_assistant(self.kind, blocks=output, name=self.name)
        self._write(run.final)

    async def _execute(self, steps: list[_Step]) -> AsyncIterator[AgentEvent]:
        """Answer or run calls in order; consecutive concurrency-safe runs go together."""
        run = self._run
        assert run is not None
        i = 0
        while i < len(steps):
            step = steps[i]
            if isinstance(step, _ToAnswer):
                async for event in self._answer_events(step.call, step.text, step.state):
                    yield event
                i += 1
                continue
            batch = [step]
            if step.tool.concurrency_safe:
                while i + len(batch) < len(steps):
                    nxt = steps[i + len(batch)]
                    if not isinstance(nxt, _ToRun) or not nxt.tool.concurrency_safe:
                        break
                    batch.append(nxt)
            collectors = {ran.call.id: OutputCollector() for ran in batch}
            run.started = {ran.call.id for ran in batch}
            await self._commit("tools", tuple(ran.call.id for ran in batch))
            stream = self._one(batch[0]) if len(batch) == 1 else self._together(batch)
            open_results: list[str] = []
            try:
                async for event in stream:
                    if not event.source_path:
                        if isinstance(event, ToolResultStartEvent):
                            open_results.append(event.call_id)
                        elif isinstance(event, ToolResultDeltaEvent | ToolResultEndEvent):
                            if event.type == "tool_result_end" and event.call_id in open_results:
                                open_results.remove(event.call_id)
                            collector = collectors.get(event.call_id)
                            if collector is not None:
                                collector.add(event)
                    yield event
            except Exception:
                # NOTE(hookmesh): a run cut by a failure (a fail_closed sidecar's death) still
                # closes the results it opened: every start has its end before reply_end.
                for call_id in open_results:
                    yield ToolResultEndEvent(
                        reply_id=self.reply_id, call_id=call_id, state="interrupted"
                    )
                raise
            if run.outbox:
                for event in drain(run.outbox):
                    yield event
            for ran in batch:
                collector = collectors[ran.call.id]
                self._answer(ran.call, collector.finish(), collector.state)
                if self._returns_directly(ran.call, collector.state):
                    run.direct_call_id = ran.call.id
            run.started.clear()
            await self._commit("results")
            i += len(batch)

    def _one(self, step: _ToRun) -> AsyncIterator[AgentEvent]:
        return self._acting_chain(
            {"tool_call": step.call, "tool": step.tool, "arguments": step.arguments}
        )

    async def _together(self, batch: list[_ToRun]) -> AsyncIterator[AgentEvent]:
        queue: asyncio.Queue[AgentEvent | BaseException | None] = asyncio.Queue()

        async def pump(step: _ToRun) -> None:
            try:
                async for event in self._one(step):
                    queue.put_nowait(event)
            except Exception as exc:
                queue.put_nowait(exc)
            finally:
                queue.put_nowait(None)

        tasks = [asyncio.create_task(pump(step)) for step in batch]
        try:
            running = len(tasks)
            while running:
                item = await queue.get()
                if item is None:
                    running -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _in_reply(event: AgentEvent, reply_id: str, tool: str) -> AgentEvent:
    """A tool's event without a reply id, given this reply's (as a sidecar's is).

    Raises:
        ValueError: The event names another reply.
    """
    if event.reply_id:
        raise ValueError(f"tool {tool} streamed an event of another reply")
    return event.model_copy(update={"reply_id": reply_id})


def _deltas(
    reply_id: str, call_id: str, output: str | list[ToolOutputBlock]
) -> list[ToolResultDeltaEvent]:
    """A finished output as its delta events: the text, or one per block (text or media)."""
    if isinstance(output, str):
        return [ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, text=output)]
    return [
        ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, text=b.text)
        if b.type == "text"
        else ToolResultDeltaEvent(reply_id=reply_id, call_id=call_id, media=b)
        for b in output
    ]


def check_resume(pending: PendingReply, resume: Resume, toolkit: Toolkit) -> None:
    """Every awaited call answered exactly once, and nothing else; edited arguments only for
    approved calls, and valid for the tool's schema."""
    violations: list[FieldViolation] = []
    if pending.awaiting == "running":
        if resume.confirmations or resume.external_results:
            raise SchemaError.single(
                "confirmations",
                "this reply is not paused: it continues from its checkpoint with no answers",
            )
        return
    if pending.awaiting == "confirmation":
        expected = {c.id for c in pending.confirm_calls}
        given = [c.call_id for c in resume.confirmations]
        field = "confirmations"
        names = {c.id: c.name for c in pending.confirm_calls}
        for i, answer in enumerate(resume.confirmations):
            if answer.arguments is not None:
                problem = _edit_problem(
                    answer.confirmed, toolkit.get(names.get(answer.call_id, "")), answer.arguments
                )
                if problem:
                    violations.append(FieldViolation(f"confirmations[{i}].arguments", problem))
    else:
        expected = {c.id for c in pending.external_calls}
        given = [r.call_id for r in resume.external_results]
        field = "external_results"
    violations[:0] = [
        FieldViolation(f"{field}[{i}].call_id", f"call {cid!r} is not awaiting an answer")
        for i, cid in enumerate(given)
        if cid not in expected
    ]
    missing = expected - set(given)
    if missing:
        violations.append(
            FieldViolation(
                field, f"answer every awaited call; missing: {', '.join(sorted(missing))}"
            )
        )
    if violations:
        raise SchemaError(violations)


def _edit_problem(confirmed: bool, tool: Tool | None, arguments: str) -> str:
    """Why edited arguments cannot run ('' when they can)."""
    if not confirmed:
        return "only an approved call can be edited: set confirmed, or drop the arguments"
    if tool is None:
        return ""  # the call is not awaiting an answer, or its tool is gone (then denied)
    try:
        tool.parse_arguments(arguments)
    except ToolArgumentError as exc:
        return str(exc)
    return ""
