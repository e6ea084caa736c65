"""A sub-agent's calls of external tools passed up to its parent's reply, which pauses on one
hidden ``external_<name>`` call per call, and the caller's results passed back down to the
sub-agent's resume; with the confirmations of `_nested`, what a paused sub-agent's parent
pauses on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hookmesh.agent import new_id
from hookmesh.middleware.builtin._support._nested import CONFIRM_PREFIX, confirm_call
from hookmesh.schema import ExternalResult, Message, Resume, ToolCall, tool_results

EXTERNAL_PREFIX = "external_"
"""Prefix of the external tool (hidden from the model) through which a sub-agent's calls of
external tools pause its parent's reply: one call of it per call of the sub-agent's, whose
result the caller gives and the sub-agent gets."""


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
