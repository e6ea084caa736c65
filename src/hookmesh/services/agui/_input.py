"""A RunAgentInput read and checked, and what it asks the agent for: a new reply, or the
resumption of a paused one."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import ResumeEntry, RunAgentInput
from pydantic import ValidationError

from hookmesh.agent import Confirmation, ExternalResult, Tool, external_tool, output_spec_of
from hookmesh.client import SessionInfo
from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema import Message, ToolResultBlock
from hookmesh.schema.agui import message_from_agui

THREAD_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_NEW_INPUT_ROLES = ("user", "system", "developer")
_OPTIONS = {"toolChoice": str, "maxIters": int, "model": str}


class RunRefused(Exception):
    """The input is well-formed but cannot run on this thread now: the run ends with
    RUN_ERROR carrying `code` (AG-UI asks this of interrupt and resume mistakes)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class RunRequest:
    """What one POST asks for, checked."""

    thread_id: str
    run_id: str
    messages: list[Any]
    """The AG-UI messages as sent (JSON objects, decoded only where used)."""
    tools: list[Tool]
    """The front-end tools, as external tools."""
    resume: list[ResumeEntry] | None
    state: dict[str, Any]
    options: dict[str, Any]
    """ReplyOptions from ``forwardedProps.hookmesh``: tool_choice, max_iters, model, and the
    output schema (``output``, from ``outputSchema``)."""


@dataclass
class ReplyPlan:
    """Start a reply with these new messages."""

    messages: list[Message]


@dataclass
class ResumePlan:
    """Continue the paused reply."""

    confirmations: list[Confirmation] = field(default_factory=list)
    external_results: list[ExternalResult] = field(default_factory=list)

    @property
    def answered(self) -> frozenset[str]:
        """Calls whose results came from the client."""
        return frozenset(r.call_id for r in self.external_results)


def _violations(exc: ValidationError, prefix: str = "") -> list[FieldViolation]:
    out = []
    for err in exc.errors():
        path = prefix + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]
        ).lstrip(".")
        out.append(FieldViolation(path or "input", err["msg"]))
    return out


def _tools(raw: Any) -> list[Tool]:
    out = []
    for tool in raw or []:
        parameters = tool.parameters if isinstance(tool.parameters, dict) else {}
        out.append(external_tool(tool.name, tool.description, parameters))
    return out


def _options(props: Any) -> dict[str, Any]:
    own = props.get("hookmesh") if isinstance(props, dict) else None
    if own is None:
        return {}
    if not isinstance(own, dict):
        raise SchemaError.single("forwardedProps.hookmesh", "must be a JSON object")
    out: dict[str, Any] = {}
    for key, kind in _OPTIONS.items():
        value = own.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SchemaError.single(f"forwardedProps.hookmesh.{key}", f"must be a {kind.__name__}")
        out[{"toolChoice": "tool_choice", "maxIters": "max_iters"}.get(key, key)] = value
    if own.get("outputSchema") is not None:
        out["output"] = output_spec_of(own["outputSchema"], "forwardedProps.hookmesh.outputSchema")
    return out


def parse_run_input(data: Any) -> RunRequest:
    """Read a RunAgentInput JSON object.

    Messages are checked later, when it is known which of them go to the agent (the codec
    names each bad field).

    Raises:
        SchemaError: Not a RunAgentInput, or a field hookmesh cannot use; every violation
            names its JSON path.
    """
    if not isinstance(data, dict):
        raise SchemaError.single("input", "the body must be a RunAgentInput JSON object")
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise SchemaError.single("messages", "`messages` must be a list")
    try:
        parsed = RunAgentInput.model_validate({**data, "messages": []})
    except ValidationError as exc:
        raise SchemaError(_violations(exc)) from None
    if not THREAD_ID.fullmatch(parsed.thread_id):
        raise SchemaError.single("threadId", "use 1-128 characters of A-Z a-z 0-9 . _ : -")
    state = parsed.state if parsed.state is not None else {}
    if not isinstance(state, dict):
        raise SchemaError.single("state", "hookmesh keeps state as a JSON object")
    return RunRequest(
        thread_id=parsed.thread_id,
        run_id=parsed.run_id,
        messages=messages,
        tools=_tools(parsed.tools),
        resume=parsed.resume,
        state=state,
        options=_options(parsed.forwarded_props),
    )


def _trailing(messages: list[Any], roles: tuple[str, ...]) -> list[int]:
    """Indexes of the messages after the last one whose role is not in `roles`."""
    start = len(messages)
    while start and isinstance(messages[start - 1], dict):
        if messages[start - 1].get("role") not in roles:
            break
        start -= 1
    return list(range(start, len(messages)))


def _decode(messages: list[Any], indexes: list[int]) -> list[Message]:
    """The messages at `indexes` as agentic messages; violations name ``messages[i]``."""
    out: list[Message] = []
    violations: list[FieldViolation] = []
    for i in indexes:
        try:
            out.append(message_from_agui(messages[i], "agentic", f"messages[{i}]"))
        except SchemaError as exc:
            violations.extend(exc.violations)
    if violations:
        raise SchemaError(violations)
    return out


def plan_run(request: RunRequest, session: SessionInfo | None) -> ReplyPlan | ResumePlan:
    """Decide what the run asks of the agent.

    The agent's session keeps the conversation, so only new input goes to it: for a thread
    the agent does not know, every message (the client's history seeds the session); for an
    idle one, the user, system and developer messages after the last other message; for one
    paused on front-end tools, the tool messages answering its calls; for one paused on a
    confirmation, the resume entries answering its interrupts.

    Raises:
        SchemaError: A message to send is invalid (each violation names its path).
        RunRefused: The input does not fit the thread's state.
    """
    status = session.status if session is not None else "idle"
    if status == "running":
        raise RunRefused("SESSION_BUSY", f"thread {request.thread_id} is already running")
    if status == "awaiting_confirmation":
        assert session is not None
        return ResumePlan(confirmations=_confirmations(request, session))
    if request.resume:
        raise RunRefused("NO_OPEN_INTERRUPT", "the thread has no open interrupt to resume")
    if status == "awaiting_external_execution":
        assert session is not None
        return ResumePlan(external_results=_results(request, session))
    if session is None:
        indexes = [i for i, m in enumerate(request.messages) if not _is_activity(m)]
    else:
        indexes = _trailing(request.messages, _NEW_INPUT_ROLES)
    if not indexes:
        raise RunRefused("NO_NEW_MESSAGE", "the input has no new message after the last reply")
    return ReplyPlan(messages=_decode(request.messages, indexes))


def _is_activity(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "activity"


def _confirmations(request: RunRequest, session: SessionInfo) -> list[Confirmation]:
    """One confirmation per pending call, from the resume entries (interrupt id = call id)."""
    pending = {c.id for c in session.pending_calls}
    if not request.resume:
        raise RunRefused(
            "INTERRUPT_PENDING",
            f"answer the open interrupts ({', '.join(sorted(pending))}) with `resume` first",
        )
    if _trailing(request.messages, ("user", "tool")):
        raise RunRefused("INTERRUPT_PENDING", "answer the open interrupts before new messages")
    out = []
    for entry in request.resume:
        if entry.interrupt_id not in pending:
            raise RunRefused(
                "UNKNOWN_INTERRUPT", f"interrupt {entry.interrupt_id!r} is not open on this thread"
            )
        out.append(_confirmation(entry))
    _require_all(pending, {c.call_id for c in out}, "RESUME_INCOMPLETE", "every open interrupt")
    return out


def _require_all(pending: set[str], answered: set[str], code: str, what: str) -> None:
    missing = pending - answered
    if missing:
        raise RunRefused(code, f"answer {what}; missing: {', '.join(sorted(missing))}")


def _confirmation(entry: ResumeEntry) -> Confirmation:
    if entry.status == "cancelled":
        return Confirmation(call_id=entry.interrupt_id, confirmed=False, reason="cancelled")
    payload = entry.payload if isinstance(entry.payload, dict) else {}
    approved, reason = payload.get("approved"), payload.get("reason", "")
    edited = payload.get("arguments")
    if isinstance(edited, dict):
        edited = json.dumps(edited)
    if (
        not isinstance(approved, bool)
        or not isinstance(reason, str)
        or not isinstance(edited, str | None)
    ):
        raise RunRefused(
            "INVALID_RESUME_PAYLOAD",
            f"the answer to {entry.interrupt_id!r} must be {{approved: boolean, reason?: "
            "string, arguments?: object}}",
        )
    return Confirmation(
        call_id=entry.interrupt_id, confirmed=approved, reason=reason, arguments=edited
    )


def _results(request: RunRequest, session: SessionInfo) -> list[ExternalResult]:
    """The results of the front-end tool calls the reply waits on, from tool messages."""
    pending = {c.id for c in session.pending_calls}
    messages = request.messages
    trailing = _trailing(messages, ("user", "tool"))
    if any(messages[i].get("role") == "user" for i in trailing):
        raise RunRefused(
            "TOOL_RESULTS_PENDING", "send the front-end tool results before new messages"
        )
    # Other tool messages answer calls the agent ran itself: it has them already.
    answers = [i for i in trailing if messages[i].get("toolCallId") in pending]
    out = []
    for msg in _decode(messages, answers):
        for block in getattr(msg, "blocks", []):
            if isinstance(block, ToolResultBlock):
                out.append(
                    ExternalResult(call_id=block.call_id, output=block.output, state=block.state)
                )
    answered = {r.call_id for r in out}
    _require_all(pending, answered, "TOOL_RESULTS_PENDING", "each pending call with a tool message")
    return out
