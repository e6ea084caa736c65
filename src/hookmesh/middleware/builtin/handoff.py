"""Handoffs: a tool that transfers the conversation to another agent (local, or remote over
A2A), which answers the rest of the reply (or hands back), seeing only the history its input
filter lets through."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from a2a.types import a2a_pb2

from hookmesh.agent import Agent, AgentState, new_id
from hookmesh.errors import HookmeshError
from hookmesh.middleware import AgentView, ModelCallArgs, ModelCallNext, ReplyArgs, ReplyNext
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
    parent_context,
    pause_step,
    run_nested,
    waits_text,
)
from hookmesh.middleware.builtin._support._remote_handoff import (
    HISTORY_PREFIX,
    OPEN_FAILURES,
    RemoteHandoff,
    answer_parts,
    check_handoff,
    run_remote,
    transfer_parts,
)
from hookmesh.middleware.builtin._support._tool_io import Lifecycle
from hookmesh.middleware.builtin.propagated_limits import inherited
from hookmesh.models import ChatModel, ModelResult, answer_text
from hookmesh.schema import (
    AgentEvent,
    Message,
    Resume,
    ToolCall,
    is_assistant,
    make_text,
    make_user_text,
    text_of,
    tool_calls,
    tool_results,
)
from hookmesh.tools import Tool, ToolContext, ToolError, ToolPiece, external_tool, tool

InputFilter = Literal["all", "last", "summary", "none"]
"""What history the receiving agent sees: all of it, the last N messages, a model-written
summary, or none (only the handoff's message)."""

HANDOFF_METADATA_KEY = "hookmesh.handoff"
"""Metadata key on the final answer of a reply a handoff took over: ``{"agent": name,
"call_id": id}`` (the message's `name` is the receiving agent's too)."""

SUMMARY_PREFIX = "Summary of the conversation so far:\n"
"""What the one history message of the ``summary`` filter starts with."""

SUMMARY_INSTRUCTION = (
    "Summarise this conversation for a colleague who takes it over: what the user wants, "
    "what was found or decided, and what is still open. Plain prose, no preamble."
)
"""The system message of the summarising model call."""

log = logging.getLogger("hookmesh.middleware.handoff")


@dataclass(frozen=True, slots=True)
class Handoff:
    """A local agent that a reply can transfer to.

    Args:
        name: The agent's name (lower case, digits, ``_``); the tool is ``transfer_to_<name>``.
        model: Its chat model.
        description: What it is for, shown to the model in the tool's description.
        system_prompt: Its instructions.
        tools: Its tools (none of the parent's).
        middlewares: Its middlewares (the parent's do not apply inside it).
        input_filter: ``all`` (default), ``last``, ``summary`` or ``none``.
        last_n: Messages kept by ``last``.
        hand_back: Its answer returns to the parent as the tool result, and the parent goes
            on; without it (default) its answer is the reply's final answer.
        max_iters: Its reasoning steps.
        summary_model: The model that writes the ``summary``; None uses the parent's.
    """

    name: str
    model: ChatModel
    description: str
    system_prompt: str = ""
    tools: Sequence[Tool] = ()
    middlewares: Sequence[Middleware] = field(default=())
    input_filter: InputFilter = "all"
    last_n: int = 4
    hand_back: bool = False
    max_iters: int = 10
    summary_model: ChatModel | None = None

    def __post_init__(self) -> None:
        check_handoff(self.name, self.input_filter)
        check.whole("last_n", self.last_n)
        check.whole("max_iters", self.max_iters)

    @property
    def tool_name(self) -> str:
        """The transfer tool's name."""
        return f"transfer_to_{self.name}"


class RemoteHandoffUnavailableError(HookmeshError):
    """A fail_closed handoff middleware cannot read a remote receiver's card."""

    reason = "REMOTE_AGENT_UNAVAILABLE"


class HandoffMiddleware(Lifecycle, Middleware):
    """Transfer tools to other agents: one ``transfer_to_<name>`` per `Handoff` (a local
    agent) or `RemoteHandoff` (an A2A agent).

    When the model calls one, the receiving agent runs inside that call on the history its
    input filter lets through (the conversation up to the step that called, hints left out),
    followed by the call's ``message`` as a user message. Its events stream into the reply
    nested under the call: ``source_path`` is ``[{call_id, tool_name, agent_name: <name>,
    run_id}]``, so a client shows who is speaking. Without `hand_back` the tool returns
    directly: the receiver's answer is the reply's final answer, recorded in the session
    as an assistant message named after the receiver, with `HANDOFF_METADATA_KEY`. With
    `hand_back` its answer is the tool result and the parent model goes on.

    Filters: ``all`` (everything); ``last`` (the last `last_n` messages, leading tool
    results whose call was cut off dropped); ``summary`` (one user message, `SUMMARY_PREFIX`
    and what the summary model wrote); ``none`` (only the message).

    A receiver that fails or does not complete answers the call with an error result, and
    the parent model goes on.

    Nested approvals: a receiver's call that needs the user's confirmation pauses the
    receiver (its ``require_user_confirm`` streams nested) and its state is kept in this
    reply's middleware state; the transfer call answers that it waits (an error result
    without `hand_back`, so the reply does not end with it) and the next model call is
    replaced by a call of ``confirm_<name>`` (hidden from the model, ``{"agent", "path",
    "asks"}``) that needs confirmation, so the reply pauses. Confirming it resumes the
    receiver with its calls approved; its answer is that call's result, the reply's final
    answer without `hand_back`. Rejecting it drops the receiver's run.

    A receiver that calls external tools (its reply ends ``awaiting_external_execution``;
    a remote one's task stops ``input-required`` awaiting ``external_execution``) pauses
    the reply the same way, on calls of the external ``external_<name>`` (hidden from the
    model; one per call of the receiver's, ``{"agent", "path", "tool", "arguments"}``). The
    caller resumes with their results; the next model call is replaced by a transfer call
    that gives them to the receiver (a remote one's task gets ``{"external_results":
    [...]}``) as its calls' results, and its answer is that call's result, as after a
    transfer. In a sidecar (no toolkit to pause with) it is an error result.

    A remote receiver (`RemoteHandoff`) gets one A2A task per transfer, in a new remote
    context: a text part with the filtered history as ``[role] text`` lines
    (`HISTORY_PREFIX`; none when the filter leaves nothing), then the
    message. Its events stream nested as a local one's do (``run_id`` is the task's id); a
    hookmesh agent's ``input-required`` confirmation pauses the reply the same way;
    confirming it sends ``{"confirmed": true}`` to the task, rejecting it sends the
    rejection's text (a transfer call stands in for the next model call). Its client is
    opened by `start` (or at its first transfer); ``fail_closed`` makes `start` fail when a
    card cannot be read, ``fail_open`` logs it and tries again at the transfer.

    A receiver is bound by the parent's `PropagatedLimitMiddleware` limits: a local one
    reserves from the remainder, a remote one is sent its share in the limits extension
    and charged what it reports. Not supported: a sidecar (the local receivers are Python
    objects in this process).

    Example:
        >>> billing = Handoff("billing", model, "Invoices, refunds and payment methods.")
        >>> agent = Agent(model, middlewares=[HandoffMiddleware([billing])])

    Args:
        handoffs: The agents a reply can transfer to (distinct names).
        failure_mode: ``fail_closed`` (default) or ``fail_open``.
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": ("reply_end",)}

    def __init__(
        self,
        handoffs: Sequence[Handoff | RemoteHandoff],
        *,
        failure_mode: FailureMode = "fail_closed",
    ) -> None:
        if not handoffs:
            raise ValueError("handoffs must name at least one agent")
        names = [h.name for h in handoffs]
        if len(set(names)) != len(names):
            raise ValueError(f"handoff names must be distinct: {', '.join(names)}")
        self.handoffs = {h.tool_name: h for h in handoffs}
        self.failure_mode = check.failure(failure_mode)
        self._tools = [self._build_tool(h) for h in handoffs]
        self._tools += [self._build_confirm(h) for h in handoffs]
        self._tools += [
            external_tool(
                f"{EXTERNAL_PREFIX}{h.name}",
                f"The results of the external calls {h.name} makes.",
                external_parameters("agent"),
            )
            for h in handoffs
        ]
        self._hidden = frozenset(
            f"{prefix}{h.name}" for h in handoffs for prefix in (CONFIRM_PREFIX, EXTERNAL_PREFIX)
        )
        self._remotes = [h for h in handoffs if isinstance(h, RemoteHandoff)]
        self._opening: asyncio.Lock | None = None

    def middleware_key(self) -> str:
        return "handoff"

    async def start(self) -> None:
        """Open every remote receiver's client (its card read), concurrently.

        Raises:
            RemoteHandoffUnavailableError: fail_closed, and a card could not be read.
        """
        results = await asyncio.gather(
            *(self._open(h) for h in self._remotes), return_exceptions=True
        )
        for handoff, result in zip(self._remotes, results, strict=True):
            if not isinstance(result, BaseException):
                continue
            if self.failure_mode == "fail_closed":
                await self.aclose()
                raise RemoteHandoffUnavailableError(
                    f"cannot read the card of remote agent {handoff.name}: {result}",
                    metadata={"agent": handoff.name},
                )
            log.warning("remote receiver %s is not reachable yet: %s", handoff.name, result)

    async def aclose(self) -> None:
        """Close every remote receiver's client."""
        await asyncio.gather(*(h.remote.close() for h in self._remotes), return_exceptions=True)

    async def _open(self, handoff: RemoteHandoff) -> None:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if handoff.remote.card is None:
                await handoff.remote.open()

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def _build_tool(self, handoff: Handoff | RemoteHandoff) -> Tool:
        async def transfer(
            context: ToolContext[AgentView], message: str
        ) -> AsyncIterator[ToolPiece]:
            """Transfer the conversation.

            Args:
                message: The request in a sentence, and anything the conversation omits.
            """
            given = resuming(self.state(context.agent), context.call.id)
            if given is not None:  # stands in for a model call: the receiver's results came
                entry, resume = given
                pieces = self._transfer(
                    context, handoff, entry["message"], (entry["state"], resume)
                )
            else:
                pieces = self._transfer(context, handoff, message)
            async for piece in pieces:
                yield piece

        after = (
            "It works on it, then hands back to you with its answer."
            if handoff.hand_back
            else "It answers the user from here on; you do not speak again in this reply."
        )
        return tool(
            transfer,
            name=handoff.tool_name,
            description=f"Transfer the conversation to {handoff.name}: {handoff.description} "
            + after,
            return_directly=not handoff.hand_back,
        )

    def _build_confirm(self, handoff: Handoff | RemoteHandoff) -> Tool:
        async def confirm(
            context: ToolContext[AgentView], **unused: Any
        ) -> AsyncIterator[ToolPiece]:
            """Continue a receiver with the calls the user confirmed."""
            entry = self.state(context.agent).get("confirming", {}).pop(context.call.id, None)
            if entry is None:
                raise ToolError("Error: no receiver waits for this confirmation")
            resume = approved(entry["asks"])
            message = entry.get("message", "")
            async for piece in self._transfer(context, handoff, message, (entry["state"], resume)):
                yield piece

        return Tool(
            name=f"{CONFIRM_PREFIX}{handoff.name}",
            description=f"The user confirms the calls {handoff.name} asks to make.",
            parameters=confirm_parameters("agent"),
            func=confirm,
            needs_confirmation=True,
            return_directly=not handoff.hand_back,
        )

    async def on_model_call(
        self, agent: AgentView, kwargs: ModelCallArgs, next_handler: ModelCallNext
    ) -> ModelResult:
        """While receivers wait for the user (or the caller), replace the model call by
        ``confirm_<name>`` (``external_<name>``) calls, so this reply pauses; once the user
        rejected a remote receiver's ask, by a transfer call telling its task why; once the
        caller gave a receiver's results, by a transfer call giving them to it; otherwise
        call the model without the hidden tools."""
        state = self.state(agent)
        denied = _rejected(state.get("confirming", {}), kwargs["messages"])
        if denied:
            calls = []
            for entry, reason in denied:
                call = ToolCall(
                    id=new_id(),
                    name=f"transfer_to_{entry['agent']}",
                    arguments=json.dumps({"message": reason}),
                )
                state.setdefault("continue", {})[call.id] = entry["state"]
                calls.append(call)
            return pause_step(agent, calls)
        waiting = state.pop("waiting", [])
        if waiting:
            return pause_step(agent, pause_calls(state, waiting, "agent"))
        given = answered(state, kwargs["messages"])
        if given:
            calls = [
                resume_call(
                    state, f"transfer_to_{e['agent']}", {"message": e["message"]}, e, resume
                )
                for e, resume in given
            ]
            return pause_step(agent, calls)
        return await next_handler(
            tools=[t for t in kwargs["tools"] if t["name"] not in self._hidden]
        )

    async def _transfer(
        self,
        context: ToolContext[AgentView],
        handoff: Handoff | RemoteHandoff,
        message: str,
        resumed: tuple[dict[str, Any], Resume] | None = None,
    ) -> AsyncIterator[ToolPiece]:
        agent = context.agent
        outcome = ForkOutcome()
        if isinstance(handoff, RemoteHandoff):
            events = self._remote(context, handoff, message, outcome, resumed)
        else:
            events = self._local(context, handoff, message, outcome, resumed)
        async for event in events:
            yield event
        if outcome.paused:
            asks = asks_of(outcome.asks)
            self.state(agent).setdefault("waiting", []).append(
                {
                    "agent": handoff.name,
                    "message": message,
                    "awaiting": outcome.awaiting,
                    "state": outcome.saved,
                    "asks": asks,
                    "remote": isinstance(handoff, RemoteHandoff),
                }
            )
            waits = waits_text(handoff.name, asks, outcome.awaiting)
            if not handoff.hand_back:
                raise ToolError(waits)  # a success would end the reply with it
            yield waits
            return
        if not outcome.ok:
            raise ToolError(outcome.text)
        if not handoff.hand_back:
            self.state(agent)["speaker"] = {"agent": handoff.name, "call_id": context.call.id}
        yield outcome.text

    async def _local(
        self,
        context: ToolContext[AgentView],
        handoff: Handoff,
        message: str,
        outcome: ForkOutcome,
        resumed: tuple[dict[str, Any], Resume] | None,
    ) -> AsyncIterator[AgentEvent]:
        agent = context.agent
        inputs: list[Message] = []
        if resumed is None:
            inputs = await history(agent, context.call, handoff)
            inputs.append(make_user_text(agent.kind, message))
        guard = [] if can_pause(agent, f"{CONFIRM_PREFIX}{handoff.name}") else [NoPause()]
        sub = Agent(
            handoff.model,
            name=handoff.name,
            system_prompt=handoff.system_prompt,
            tools=handoff.tools,
            middlewares=[*guard, *inherited(agent, context.call.id), *handoff.middlewares],
            kind=agent.kind,
            max_iters=handoff.max_iters,
            state=AgentState.model_validate(resumed[0]) if resumed is not None else None,
        )
        resume = resumed[1] if resumed is not None else None
        external = can_pause(agent, f"{EXTERNAL_PREFIX}{handoff.name}")
        async for event in run_nested(
            agent, context.call, sub, inputs, outcome, resume=resume, external=external
        ):
            yield event

    async def _remote(
        self,
        context: ToolContext[AgentView],
        handoff: RemoteHandoff,
        message: str,
        outcome: ForkOutcome,
        resumed: tuple[dict[str, Any], Resume] | None,
    ) -> AsyncIterator[AgentEvent]:
        """The remote receiver's task step: the transfer, or the answer to its ask (its
        paused task and the answer in `resumed`: an approval, or its external calls'
        results); an ask the reply cannot pause on is an error result."""
        agent, call = context.agent, context.call
        try:
            await self._open(handoff)
        except OPEN_FAILURES as exc:
            outcome.text = f"Error: cannot reach the remote agent {handoff.name}: {exc}"
            return
        task = self.state(agent).get("continue", {}).pop(call.id, None)
        if resumed is not None:
            parts, task = answer_parts(resumed[1]), resumed[0]
        elif task is not None:  # the user rejected its ask: tell its task why
            parts = [a2a_pb2.Part(text=message)]
        else:
            parts = transfer_parts(transcript(await history(agent, call, handoff)), message)
        async for event in run_remote(
            agent, call, handoff, parts, outcome, task=task, message_id=context.idempotency_key
        ):
            yield event
        external = outcome.awaiting == "external"
        prefix = EXTERNAL_PREFIX if external else CONFIRM_PREFIX
        if outcome.paused and not can_pause(agent, f"{prefix}{handoff.name}"):
            outcome.paused, outcome.ok = False, False
            outcome.text = f"Error: the remote agent {handoff.name} " + (
                "waits for the results of external calls"
                if external
                else "asks the user to confirm calls"
            )
            outcome.text += ", and this reply cannot pause (a sidecar)"

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        """Name the final answer after the agent that gave it, before the reply ends."""
        async for event in next_handler():
            if event.type == "reply_end" and not event.source_path:
                speaker = self.state(agent).get("speaker")
                final = agent.state.context[-1] if agent.state.context else None
                if speaker and final is not None and is_assistant(final):
                    final.name = speaker["agent"]
                    final.metadata = {**(final.metadata or {}), HANDOFF_METADATA_KEY: speaker}
            yield event


def _rejected(
    confirming: dict[str, Any], messages: Sequence[Message]
) -> list[tuple[dict[str, Any], str]]:
    """The waiting receivers whose ``confirm_<name>`` call has a result in `messages`
    without having run (the user rejected it), taken out of `confirming`: the remote ones
    with the rejection's text (a local one's run is just dropped). Runs before every model
    call: with nothing waiting, the results are not read at all."""
    if not confirming:
        return []
    answered = {r.call_id: r.text for m in messages for r in tool_results(m)}
    out = []
    for call_id in [c for c in confirming if c in answered]:
        entry = confirming.pop(call_id)
        if entry.get("remote"):
            out.append((entry, answered[call_id]))
    return out


async def history(
    agent: AgentView, call: ToolCall, handoff: Handoff | RemoteHandoff
) -> list[Message]:
    """What the receiver of `call` sees before the handoff's message, per its filter."""
    if handoff.input_filter == "none":
        return []
    before = parent_context(agent.state.context, call)
    if handoff.input_filter == "all":
        return before
    if handoff.input_filter == "last":
        kept = before[-handoff.last_n :]
        while kept and tool_results(kept[0]):
            kept.pop(0)
        return kept
    if not before:
        return []
    model = handoff.summary_model or agent.model
    if model is None:
        raise ToolError("Error: the summary filter needs summary_model in a sidecar")
    prompt = [
        make_text(agent.kind, "system", SUMMARY_INSTRUCTION),
        make_user_text(agent.kind, transcript(before)),
    ]
    summary = (await answer_text(model, prompt, agent.kind)).strip()
    return [make_user_text(agent.kind, SUMMARY_PREFIX + summary)]


def transcript(messages: Sequence[Message]) -> str:
    """The conversation as ``[role] text`` lines, calls and results named, for the summary."""
    lines: list[str] = []
    for msg in messages:
        text = "" if tool_results(msg) else text_of(msg)
        if text:
            lines.append(f"[{msg.role}] {text}")
        lines.extend(f"[{msg.role} called {c.name}] {c.arguments}" for c in tool_calls(msg))
        lines.extend(f"[result of {r.name}] {r.text}" for r in tool_results(msg))
    return "\n".join(lines)


__all__ = [
    "HANDOFF_METADATA_KEY",
    "HISTORY_PREFIX",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_PREFIX",
    "Handoff",
    "HandoffMiddleware",
    "InputFilter",
    "RemoteHandoff",
    "RemoteHandoffUnavailableError",
    "history",
    "transcript",
]
