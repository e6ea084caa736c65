"""A paused reply as an A2A ``input-required`` status, and the A2A message that answers it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from a2a.types import a2a_pb2

from hookmesh.a2a._parts import blocks_from_parts, data_of_parts, data_part, text_of_parts
from hookmesh.schema import ContentBlock, TextBlock, ToolCall

Awaiting = Literal["confirmation", "external_execution"]
"""What a paused reply waits for."""
_YES = frozenset({"y", "yes", "ok", "okay", "approve", "approved", "confirm", "confirmed", "go"})


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return call.arguments


def pause_parts(awaiting: Awaiting, calls: Sequence[ToolCall]) -> list[a2a_pb2.Part]:
    """The parts of the ``input-required`` status message: a sentence for people, then a
    data part ``{"awaiting": ..., "tool_calls": [{"id", "name", "arguments"}]}``."""
    names = ", ".join(c.name for c in calls)
    if awaiting == "confirmation":
        text = f"Confirm these tool calls ({names}): answer yes or no, or send confirmations."
    else:
        text = f"Run these tool calls ({names}) and send their results."
    pending = [{"id": c.id, "name": c.name, "arguments": _arguments(c)} for c in calls]
    return [a2a_pb2.Part(text=text), data_part({"awaiting": awaiting, "tool_calls": pending})]


def pending_of_parts(parts: Sequence[a2a_pb2.Part]) -> tuple[Awaiting, list[ToolCall]] | None:
    """What an ``input-required`` status message from a hookmesh agent waits for, or None
    when it is not one."""
    for value in data_of_parts(parts):
        if isinstance(value, dict) and value.get("awaiting") in (
            "confirmation",
            "external_execution",
        ):
            calls = [
                ToolCall(
                    id=str(c.get("id", "")),
                    name=str(c.get("name", "")),
                    arguments=json.dumps(c.get("arguments", {})),
                )
                for c in value.get("tool_calls", ())
                if isinstance(c, dict)
            ]
            return value["awaiting"], calls
    return None


@dataclass
class Answer:
    """How an A2A message answers a paused reply."""

    confirmations: list[dict[str, Any]] = field(default_factory=list)
    """``{"call_id", "confirmed", "reason"}`` per call awaiting confirmation."""
    external_results: list[tuple[str, list[ContentBlock], str]] = field(default_factory=list)
    """(call id, output blocks, state) per call awaiting external execution."""


class AnswerError(ValueError):
    """The message does not answer the paused reply; the text says what would."""


def answer_of(
    awaiting: Awaiting, calls: Sequence[ToolCall], parts: Sequence[a2a_pb2.Part]
) -> Answer:
    """Read the user's answer to a pause from an A2A message.

    Confirmation: a data part ``{"confirmations": [{"call_id", "confirmed", "reason"}]}``, or
    ``{"confirmed": bool}`` for every call, or text: yes/ok/approve confirms every call, any
    other text denies them with the text as the reason. External execution: a data part
    ``{"external_results": [{"call_id", "output", "state"}]}`` (output: text), or, when one
    call waits, the whole message (text, files and data) as its result.

    Raises:
        AnswerError: Neither form, or a call left unanswered.
    """
    ids = [c.id for c in calls]
    data = [v for v in data_of_parts(parts) if isinstance(v, dict)]
    if awaiting == "confirmation":
        for value in data:
            if isinstance(value.get("confirmations"), list):
                given = [c for c in value["confirmations"] if isinstance(c, dict)]
                out: list[dict[str, Any]] = [
                    {
                        "call_id": str(c.get("call_id", "")),
                        "confirmed": bool(c.get("confirmed")),
                        "reason": str(c.get("reason", "")),
                    }
                    for c in given
                ]
                _check(ids, [c["call_id"] for c in out])
                return Answer(confirmations=out)
            if isinstance(value.get("confirmed"), bool):
                return Answer(
                    confirmations=[
                        {"call_id": i, "confirmed": value["confirmed"], "reason": ""} for i in ids
                    ]
                )
        text = text_of_parts(parts).strip()
        if not text:
            raise AnswerError("answer yes or no, or send a data part with confirmations")
        yes = text.lower().strip(".! ") in _YES
        return Answer(
            confirmations=[
                {"call_id": i, "confirmed": yes, "reason": "" if yes else text} for i in ids
            ]
        )
    for value in data:
        if isinstance(value.get("external_results"), list):
            results: list[tuple[str, list[ContentBlock], str]] = [
                (
                    str(r.get("call_id", "")),
                    [TextBlock(text=str(r.get("output", "")))],
                    str(r.get("state", "success")),
                )
                for r in value["external_results"]
                if isinstance(r, dict)
            ]
            _check(ids, [r[0] for r in results])
            return Answer(external_results=results)
    if len(ids) != 1:
        raise AnswerError(
            "several calls wait: send a data part with external_results for each call id"
        )
    return Answer(external_results=[(ids[0], blocks_from_parts(parts), "success")])


def _check(expected: Sequence[str], given: Sequence[str]) -> None:
    missing = sorted(set(expected) - set(given))
    unknown = sorted(set(given) - set(expected))
    if missing or unknown:
        raise AnswerError(
            f"answer exactly the waiting calls {', '.join(expected)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; not waiting: {', '.join(unknown)}" if unknown else "")
        )
