"""A nested run: one reply of a fresh `Agent` inside a tool call of its parent, its events
nested under the call, and the pause it may leave for the user (confirmations) or the caller
(external calls); shared by skill forks, handoffs, the supervisor and plan-execute."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hookmesh.agent import Agent, Output, new_id
from hookmesh.middleware import AgentView, PermissionArgs, PermissionNext
from hookmesh.middleware._base import Middleware, PermissionDecision
from hookmesh.models import ModelResponse
from hookmesh.schema import (
    AgentEvent,
    Confirmation,
    EventSource,
    Message,
    ReplyEndEvent,
    Resume,
    ToolCall,
    ask_path,
    is_hint,
    make_assistant,
    nest,
    text_of,
    tool_calls,
)

CONFIRM_PREFIX = "confirm_"
"""Prefix of the tool (hidden from the model, needing confirmation) through which a
sub-agent's wish to run calls the user must confirm pauses its parent's reply."""


@dataclass(slots=True)
class ForkOutcome:
    """How the run ended, filled in once its events are exhausted."""

    text: str = ""
    """The final answer, or what went wrong."""
    ok: bool = False
    """Whether it completed."""
    value: Any = None
    """The structured answer, when the run asked for one and completed."""
    paused: bool = False
    """Whether it paused for the user to confirm calls or for the caller to run external
    calls (`asks`, per `awaiting`), its state in `saved`."""
    awaiting: Literal["confirmation", "external"] = "confirmation"
    """What a paused run waits for."""
    asks: list[ToolCall] = field(default_factory=list)
    """The calls it waits to have confirmed, or to have the results of."""
    saved: dict[str, Any] = field(default_factory=dict)
    """Its state (JSON), to continue it with `run_nested(..., resume=...)`."""


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


async def run_nested(
    agent: AgentView,
    call: ToolCall,
    sub: Agent,
    inputs: list[Message],
    outcome: ForkOutcome,
    output: Output | None = None,
    resume: Resume | None = None,
    *,
    external: bool = False,
) -> AsyncIterator[AgentEvent]:
    """One reply of `sub` on `inputs` inside `call` (asking for `output`, if given; or the
    continuation of its paused reply by `resume`), its events nested under the call (the
    sub-agent's name on the path), then `outcome` filled in; shared by forks, handoffs,
    workers and planners. Unless `external` (the parent can pause for the sub-agent's
    external calls), a sub-agent that waits for them ends as an error."""
    step: EventSource | None = None
    end: ReplyEndEvent | None = None
    asks: list[ToolCall] = []
    runs: list[ToolCall] = []
    stream = sub.resume(resume) if resume is not None else sub.reply(inputs, output=output)
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
            elif event.type == "require_user_confirm" and not event.source_path:
                asks = list(event.tool_calls)
            elif event.type == "require_external_execution" and not event.source_path:
                runs = list(event.tool_calls)
            yield nest(event, step, agent.reply_id)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    if end is not None and end.finish_reason == "completed" and sub.final_message is not None:
        outcome.text, outcome.ok = text_of(sub.final_message), True
        outcome.value = end.output.value if end.output is not None else None
        return
    if end is not None and end.finish_reason == "awaiting_confirmation" and asks:
        outcome.paused, outcome.asks = True, asks
        outcome.saved = sub.state.model_dump(mode="json")
        outcome.text = f"the sub-agent {sub.name} waits for the user to confirm " + ", ".join(
            c.name for c in asks
        )
        return
    if end is not None and end.finish_reason == "awaiting_external_execution" and runs:
        names = ", ".join(c.name for c in runs)
        if not external:
            outcome.text = f"Error: the sub-agent {sub.name} waits for the results of external "
            outcome.text += f"calls ({names}), and this reply cannot pause for them (a sidecar)"
            return
        outcome.paused, outcome.awaiting, outcome.asks = True, "external", runs
        outcome.saved = sub.state.model_dump(mode="json")
        outcome.text = f"the sub-agent {sub.name} waits for the results of {names}"
        return
    reason = end.finish_reason if end is not None else "interrupted"
    detail = f": {end.error.message}" if end is not None and end.error is not None else ""
    outcome.text = f"Error: the sub-agent {sub.name} ended with {reason}{detail}"


def approved(asks: Sequence[dict[str, Any]]) -> Resume:
    """The resume of a paused nested run whose asked calls (``call_id`` each) the user
    confirmed."""
    return Resume(confirmations=[Confirmation(call_id=a["call_id"], confirmed=True) for a in asks])


def asks_of(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """A paused sub-agent's asked calls as its parent keeps them: ``call_id``, ``tool`` and
    ``arguments`` (JSON text) each."""
    return [{"call_id": c.id, "tool": c.name, "arguments": c.arguments} for c in calls]


def waits_text(who: str, asks: Sequence[dict[str, Any]], awaiting: str = "confirmation") -> str:
    """The result of the call whose sub-agent waits for the user (or, `awaiting` external
    execution, for the caller's results)."""
    named = ", ".join(f"{a['tool']}({a['arguments']})" for a in asks)
    if awaiting == "external":
        return f"{who} waits for the results of external calls: {named}"
    return f"{who} waits for the user to confirm: {named}"


def asker_path(name: str, asks: Sequence[dict[str, Any]]) -> list[str]:
    """The agents from the sub-agent `name` down to the one that asks: a sub-agent whose one
    ask is itself a nested confirmation names the rest in that call's ``path``."""
    if len(asks) != 1:
        return [name]
    return [name, *ask_path(str(asks[0].get("tool", "")), asks[0].get("arguments"))]


def can_pause(agent: AgentView, confirm_tool: str) -> bool:
    """Whether `agent`'s reply can pause on `confirm_tool` (its toolkit has it: in process;
    a sidecar has none, so a sub-agent's ask is denied there)."""
    toolkit = getattr(agent, "toolkit", None)
    return toolkit is not None and toolkit.get(confirm_tool) is not None


def confirm_call(tool_name: str, asker: str, name: str, asks: list[dict[str, Any]]) -> ToolCall:
    """The hidden call of `tool_name` the parent's reply pauses on for sub-agent `name`:
    ``{<asker>: name, "path": [...], "asks": asks}``."""
    arguments = {asker: name, "path": asker_path(name, asks), "asks": asks}
    return ToolCall(id=new_id(), name=tool_name, arguments=json.dumps(arguments))


def pause_step(agent: AgentView, calls: list[ToolCall]) -> ModelResponse:
    """The model's stand-in for a step that only makes the hidden confirmation `calls`."""
    return ModelResponse(message=make_assistant(agent.kind, "", calls))


def confirm_parameters(asker: str) -> dict[str, Any]:
    """The arguments of a hidden ``confirm_<name>`` call: who asks (under `asker`), the path
    of agents down to the one that asks, and its asked calls."""
    return {
        "type": "object",
        "properties": {
            asker: {"type": "string"},
            "path": {"type": "array", "items": {"type": "string"}},
            "asks": {"type": "array"},
        },
    }
