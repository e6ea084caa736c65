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
    ExternalResult,
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
    tool_results,
)

CONFIRM_PREFIX = "confirm_"
"""Prefix of the tool (hidden from the model, needing confirmation) through which a
sub-agent's wish to run calls the user must confirm pauses its parent's reply."""
EXTERNAL_PREFIX = "external_"
"""Prefix of the external tool (hidden from the model) through which a sub-agent's calls of
external tools pause its parent's reply: one call of it per call of the sub-agent's, whose
result the caller gives and the sub-agent gets."""


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


def relayed(ask: dict[str, Any]) -> tuple[list[str], str, str]:
    """The agents below, the tool and the arguments (JSON text) of a sub-agent's asked
    external call: a call that itself passes up a deeper sub-agent's external call (an
    ``external_<name>`` call) names them in its arguments."""
    tool, arguments = str(ask.get("tool", "")), str(ask.get("arguments", ""))
    if tool.startswith(EXTERNAL_PREFIX):
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = None
        if (
            isinstance(parsed, dict)
            and isinstance(parsed.get("path"), list)
            and all(isinstance(p, str) for p in parsed["path"])
            and isinstance(parsed.get("tool"), str)
            and isinstance(parsed.get("arguments"), str)
        ):
            return list(parsed["path"]), parsed["tool"], parsed["arguments"]
    return [], tool, arguments


def external_calls(
    tool_name: str, asker: str, name: str, asks: list[dict[str, Any]]
) -> list[ToolCall]:
    """The hidden calls of the external `tool_name` the parent's reply pauses on for
    sub-agent `name`, one per call it waits on: ``{<asker>: name, "path": [...], "tool",
    "arguments"}``, naming the tool to run (the innermost one, however deep the sub-agent
    that called it) and its arguments (JSON text)."""
    out = []
    for ask in asks:
        below, tool, arguments = relayed(ask)
        spec = {asker: name, "path": [name, *below], "tool": tool, "arguments": arguments}
        out.append(ToolCall(id=new_id(), name=tool_name, arguments=json.dumps(spec)))
    return out


def pause_calls(
    state: dict[str, Any], entries: Sequence[dict[str, Any]], asker: str, suffix: str = ""
) -> list[ToolCall]:
    """The hidden calls the parent's reply pauses on for its waiting sub-agents `entries`
    (each names the sub-agent under `asker`, ``awaiting``, ``asks``, ``state``): one
    ``confirm_<suffix>`` call for an entry awaiting confirmation (kept in `state` under
    ``confirming``, by call id), one ``external_<suffix>`` call per asked call for an entry
    awaiting external execution (kept under ``answering``). `suffix` defaults to each
    entry's name."""
    calls: list[ToolCall] = []
    for entry in entries:
        name = entry[asker]
        if entry.get("awaiting") == "external":
            ext = external_calls(f"{EXTERNAL_PREFIX}{suffix or name}", asker, name, entry["asks"])
            state.setdefault("answering", []).append({**entry, "calls": [c.id for c in ext]})
            calls += ext
        else:
            call = confirm_call(f"{CONFIRM_PREFIX}{suffix or name}", asker, name, entry["asks"])
            state.setdefault("confirming", {})[call.id] = entry
            calls.append(call)
    return calls


def answered(
    state: dict[str, Any], messages: Sequence[Message]
) -> list[tuple[dict[str, Any], Resume]]:
    """The sub-agents waiting for external results (`state`'s ``answering``) whose every
    hidden call has its result in `messages`, taken out of `state`, each with the resume
    giving those results (output and state as the caller gave them) to its own calls. Runs
    before every model call: with nothing waiting, the messages are not read."""
    waiting = state.get("answering")
    if not waiting:
        return []
    got = {r.call_id: r for m in messages for r in tool_results(m)}
    out, left = [], []
    for entry in waiting:
        if not all(c in got for c in entry["calls"]):
            left.append(entry)
            continue
        results = [
            ExternalResult(call_id=a["call_id"], output=got[c].output, state=got[c].state)
            for a, c in zip(entry["asks"], entry["calls"], strict=True)
        ]
        out.append((entry, Resume(external_results=results)))
    if left:
        state["answering"] = left
    else:
        state.pop("answering", None)
    return out


def resume_call(
    state: dict[str, Any],
    tool_name: str,
    arguments: dict[str, Any],
    entry: dict[str, Any],
    resume: Resume,
) -> ToolCall:
    """A call of `tool_name` standing in for the parent's next model call, which continues
    the sub-agent of `entry` by `resume` (kept in `state` under ``resuming``, by call id,
    for `resuming` to take)."""
    call = ToolCall(id=new_id(), name=tool_name, arguments=json.dumps(arguments))
    saved = {"entry": entry, "resume": resume.model_dump(mode="json")}
    state.setdefault("resuming", {})[call.id] = saved
    return call


def resuming(state: dict[str, Any], call_id: str) -> tuple[dict[str, Any], Resume] | None:
    """The sub-agent entry and the resume a `resume_call` keeps for `call_id`, taken out of
    `state`; None for a call the model made."""
    saved = state.get("resuming", {}).pop(call_id, None)
    if saved is None:
        return None
    return saved["entry"], Resume.model_validate(saved["resume"])


def external_parameters(asker: str) -> dict[str, Any]:
    """The arguments of a hidden ``external_<name>`` call: who asks (under `asker`), the
    path of agents down to the one that asks, and the tool to run with its arguments."""
    return {
        "type": "object",
        "properties": {
            asker: {"type": "string"},
            "path": {"type": "array", "items": {"type": "string"}},
            "tool": {"type": "string"},
            "arguments": {"type": "string"},
        },
    }


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
