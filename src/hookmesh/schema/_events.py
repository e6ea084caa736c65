"""Agent events: what a reply streams to its caller, as one tagged union."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, Field, model_validator

from hookmesh.schema._blocks import MediaBlock, ToolResultState, _Model
from hookmesh.schema._messages import ToolCall, Usage

FinishReason = Literal[
    "completed",
    "interrupted",
    "exceed_max_iters",
    "error",
    "awaiting_confirmation",
    "awaiting_external_execution",
]
"""Why a reply ended; the two `awaiting_*` reasons are pauses that `resume` continues."""


class EventSource(_Model):
    """One level of a nested event's path: the tool call running a nested agent, and its run."""

    call_id: str
    """The enclosing run's tool call that runs the nested agent."""
    tool_name: str = ""
    """That tool's name (e.g. ``skill``)."""
    agent_name: str = ""
    """The nested agent's name (e.g. the skill's)."""
    run_id: str = ""
    """The nested run's own id (a sub-agent's reply id, a remote agent's task id)."""


class _Event(_Model):
    reply_id: str
    """The reply this event belongs to (for a nested event: the reply forwarding it)."""
    source_path: list[EventSource] | None = None
    """None for the reply's own events; for a nested event, the path from the reply down
    to the run that produced it, outermost first. A nested event never changes the reply's
    state: see `is_nested` and docs/events.md."""


class ReplyStartEvent(_Event):
    """The reply began."""

    type: Literal["reply_start"] = "reply_start"
    session_id: str = ""
    """The session; empty for a session-less agent."""
    agent_name: str = ""
    """Name of the replying agent."""


class ReplyError(_Model):
    """Why a reply failed, in a form clients can branch on."""

    reason: str
    """Stable UPPER_SNAKE reason, e.g. ``MODEL_ERROR`` or ``MIDDLEWARE_FAILED``."""
    message: str = ""
    """Human-readable description, free of secrets."""
    source: str = ""
    """What failed: ``model``, ``tool:<name>``, ``middleware:<key>`` or ``agent``."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Variable parts of the message, lowerCamel keys."""


class StructuredOutput(_Model):
    """A reply's structured answer: its final answer, parsed and validated against the output
    schema the reply asked for (docs/structured-output.md)."""

    value: Any
    """The answer, a JSON value valid for the schema; in process, when the reply asked with
    a pydantic model, an instance of that model (over the wire it is the JSON value)."""
    schema_name: str = ""
    """The output schema's name."""

    def as_json(self) -> Any:
        """The value as plain JSON (a pydantic instance dumped in JSON mode)."""
        value = self.value
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


class ReplyEndEvent(_Event):
    """The reply ended; always the last event of a reply."""

    type: Literal["reply_end"] = "reply_end"
    finish_reason: FinishReason
    """Why it ended."""
    error: ReplyError | None = None
    """Set when `finish_reason` is ``error``."""
    session_id: str = ""
    """The session; empty for a session-less agent."""
    output: StructuredOutput | None = None
    """The structured answer, when the reply asked for one and completed."""


class ModelCallStartEvent(_Event):
    """A model call began."""

    type: Literal["model_call_start"] = "model_call_start"
    model_name: str = ""
    """The agent's model, asked first (a middleware may call another: see model_call_end)."""


class ModelCallEndEvent(_Event):
    """A model call ended."""

    type: Literal["model_call_end"] = "model_call_end"
    model_name: str = ""
    """The model that answered (another than model_call_start's when a middleware such as
    a fallback called another)."""
    usage: Usage | None = None
    """Tokens used, when the model reported them."""
    stop_reason: str = ""
    """The model's stop reason as reported (``stop``, ``tool_calls``, ``length``...)."""
    response_id: str = ""
    """The provider's response id, when sent."""


class TextBlockStartEvent(_Event):
    """A text block began."""

    type: Literal["text_block_start"] = "text_block_start"
    block_id: str
    """Shared by the block's start, deltas and end."""


class TextBlockDeltaEvent(_Event):
    """More text of the open text block."""

    type: Literal["text_block_delta"] = "text_block_delta"
    block_id: str
    """The block this extends."""
    delta: str
    """Text to append."""


class TextBlockEndEvent(_Event):
    """The text block is complete."""

    type: Literal["text_block_end"] = "text_block_end"
    block_id: str
    """The block that ended."""


class ReasoningBlockStartEvent(_Event):
    """A reasoning block began."""

    type: Literal["reasoning_block_start"] = "reasoning_block_start"
    block_id: str
    """Shared by the block's start, deltas and end."""


class ReasoningBlockDeltaEvent(_Event):
    """More reasoning text."""

    type: Literal["reasoning_block_delta"] = "reasoning_block_delta"
    block_id: str
    """The block this extends."""
    delta: str
    """Reasoning text to append."""


class ReasoningBlockEndEvent(_Event):
    """The reasoning block is complete."""

    type: Literal["reasoning_block_end"] = "reasoning_block_end"
    block_id: str
    """The block that ended."""


class ToolCallStartEvent(_Event):
    """The model began a tool call."""

    type: Literal["tool_call_start"] = "tool_call_start"
    call_id: str
    """The call's id."""
    name: str
    """Tool name."""


class ToolCallDeltaEvent(_Event):
    """A fragment of a tool call's JSON arguments."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    call_id: str
    """The call this fragment belongs to."""
    delta: str
    """JSON text to append."""


class ToolCallEndEvent(_Event):
    """A tool call's arguments are complete."""

    type: Literal["tool_call_end"] = "tool_call_end"
    call_id: str
    """The call that ended."""


class ToolResultStartEvent(_Event):
    """A tool began producing its result."""

    type: Literal["tool_result_start"] = "tool_result_start"
    call_id: str
    """The call being answered."""
    name: str = ""
    """Tool name."""


class ToolResultDeltaEvent(_Event):
    """Part of a tool's result: text, or one media item (never both)."""

    type: Literal["tool_result_delta"] = "tool_result_delta"
    call_id: str
    """The call being answered."""
    text: str = ""
    """Text to append to the result."""
    media: MediaBlock | None = None
    """A media item of the result; when set, `text` is empty."""

    @model_validator(mode="after")
    def _one_part(self) -> ToolResultDeltaEvent:
        if self.media is not None and self.text:
            raise ValueError("a tool_result_delta carries text or media, not both")
        return self


class ToolResultEndEvent(_Event):
    """The tool result is complete."""

    type: Literal["tool_result_end"] = "tool_result_end"
    call_id: str
    """The call that was answered."""
    state: ToolResultState = "success"
    """How the call ended."""


class DataBlockStartEvent(_Event):
    """A binary data block (e.g. synthesised audio) began."""

    type: Literal["data_block_start"] = "data_block_start"
    block_id: str
    """Shared by the block's start, deltas and end."""
    media_type: str
    """IANA media type with parameters, e.g. ``audio/pcm;rate=22050;channels=1``."""
    name: str = ""
    """Display name."""


class DataBlockDeltaEvent(_Event):
    """More bytes of the open data block."""

    type: Literal["data_block_delta"] = "data_block_delta"
    block_id: str
    """The block this extends."""
    data: bytes
    """Bytes to append."""


class DataBlockEndEvent(_Event):
    """The data block is complete."""

    type: Literal["data_block_end"] = "data_block_end"
    block_id: str
    """The block that ended."""


class HintBlockEvent(_Event):
    """A middleware injected a hint into the context."""

    type: Literal["hint_block"] = "hint_block"
    block_id: str
    """Id of the hint block in the context."""
    text: str
    """The hint."""
    source: str = ""
    """Who produced it."""


class RequireUserConfirmEvent(_Event):
    """The reply paused: these calls need the user's confirmation."""

    type: Literal["require_user_confirm"] = "require_user_confirm"
    tool_calls: list[ToolCall]
    """The calls awaiting confirmation."""
    reason: str = ""
    """Why the user is asked, when the agent itself asks (e.g. a call of a continued reply
    whose outcome is unknown); empty when the tool simply needs confirmation."""


class RequireExternalExecutionEvent(_Event):
    """The reply paused: the caller must run these calls and resume with their results."""

    type: Literal["require_external_execution"] = "require_external_execution"
    tool_calls: list[ToolCall]
    """The calls to execute."""


class CustomEvent(_Event):
    """An application- or middleware-defined event."""

    type: Literal["custom"] = "custom"
    name: str
    """Event name, namespaced by its producer (e.g. ``tts.warning``)."""
    value: Any = None
    """Any JSON value; numbers travel as doubles in protobuf."""


AgentEvent = Annotated[
    ReplyStartEvent
    | ReplyEndEvent
    | ModelCallStartEvent
    | ModelCallEndEvent
    | TextBlockStartEvent
    | TextBlockDeltaEvent
    | TextBlockEndEvent
    | ReasoningBlockStartEvent
    | ReasoningBlockDeltaEvent
    | ReasoningBlockEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | ToolResultStartEvent
    | ToolResultDeltaEvent
    | ToolResultEndEvent
    | DataBlockStartEvent
    | DataBlockDeltaEvent
    | DataBlockEndEvent
    | HintBlockEvent
    | RequireUserConfirmEvent
    | RequireExternalExecutionEvent
    | CustomEvent,
    Field(discriminator="type"),
]
"""Any agent event, tagged by `type` (the proto `AgentEvent.event` arm name)."""

EVENT_TYPES: tuple[str, ...] = tuple(
    cls.model_fields["type"].default for cls in get_args(get_args(AgentEvent)[0])
)
"""Every event tag, in proto field order."""


def is_nested(event: AgentEvent) -> bool:
    """Whether `event` comes from a nested run (a sub-agent inside a tool call) rather than
    the reply itself: it never ends, answers or pauses the reply."""
    return bool(event.source_path)


def nest(event: AgentEvent, step: EventSource, reply_id: str) -> AgentEvent:
    """`event` of a nested run as forwarded in reply `reply_id`, with `step` (the tool call
    running that run) first on its source path."""
    path = [step, *event.source_path] if event.source_path else [step]
    return event.model_copy(update={"reply_id": reply_id, "source_path": path})


def asked_by(call: ToolCall) -> list[str]:
    """The agents from the sub-agent down to the one that asks, when `call` stands for a
    nested ask (a supervisor's ``confirm_<worker>``, a remote agent's ``<name>__confirm``, a
    sub-agent's call of an external tool passed up as ``external_<name>``: their arguments
    carry this ``path``); empty for a call of the reply's own."""
    return ask_path(call.name, call.arguments)


def ask_path(tool_name: str, arguments: str | Mapping[str, Any] | None) -> list[str]:
    """`asked_by` for a call given by its tool's name and its arguments (JSON object text,
    or the object): the one place the ``path`` of a nested ask is read, by the clients and
    by every level that passes an ask up (which puts its own name in front). An
    ``external_<name>`` call is a nested ask only when its arguments also name the ``tool``
    to run and its ``arguments`` (JSON text): a client's own tool may be named so."""
    parsed = _ask_arguments(tool_name, arguments)
    path = parsed.get("path") if parsed is not None else None
    if not isinstance(path, list) or not all(isinstance(p, str) for p in path):
        return []
    return list(path)


_EXTERNAL_PREFIX = "external_"


def _ask_arguments(
    tool_name: str, arguments: str | Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The arguments (an object) of a call that may stand for a nested ask; None for any
    other call."""
    external = tool_name.startswith(_EXTERNAL_PREFIX)
    if not (external or tool_name.startswith("confirm_") or tool_name.endswith("__confirm")):
        return None
    if isinstance(arguments, Mapping):
        parsed: Any = arguments
    else:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            return None
    if not isinstance(parsed, Mapping):
        return None
    if external and not (
        isinstance(parsed.get("tool"), str) and isinstance(parsed.get("arguments"), str)
    ):
        return None
    return parsed


def path_names(event: AgentEvent) -> list[str]:
    """Who a nested event comes from: each step's agent (or, unnamed, tool) name."""
    return [s.agent_name or s.tool_name for s in event.source_path or ()]
