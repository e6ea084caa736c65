"""Exact codecs between the pydantic schema and the `hookmesh.v1` protobuf messages.

Decoding checks what protobuf cannot (an unset oneof, an unknown enum value, a role the
kind forbids) and raises `SchemaError` with the proto path of every problem. Semantic rules
that both encodings share live in `_validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, get_args

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema import _blocks as b
from hookmesh.schema import _events as e
from hookmesh.schema._messages import (
    AgenticMessage,
    AgenticRole,
    FlatMessage,
    FlatRole,
    Message,
    ToolCall,
    Usage,
)
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import event_pb2 as _event_pb2
from hookmesh.v1 import message_pb2 as _message_pb2

_T = TypeVar("_T")

_Media = b.ImageBlock | b.AudioBlock | b.VideoBlock | b.DocumentBlock
_Output = b.TextBlock | _Media
_MEDIA_TYPES = (b.ImageBlock, b.AudioBlock, b.VideoBlock, b.DocumentBlock)
_OUTPUT_TYPES = (b.TextBlock, *_MEDIA_TYPES)

_AGENTIC_ROLE_TO_PB: dict[AgenticRole, _message_pb2.Role] = {
    "system": _message_pb2.ROLE_SYSTEM,
    "user": _message_pb2.ROLE_USER,
    "assistant": _message_pb2.ROLE_ASSISTANT,
}
_ROLE_TO_PB: dict[FlatRole, _message_pb2.Role] = {
    "system": _message_pb2.ROLE_SYSTEM,
    "user": _message_pb2.ROLE_USER,
    "assistant": _message_pb2.ROLE_ASSISTANT,
    "tool": _message_pb2.ROLE_TOOL,
}
_AGENTIC_ROLE_FROM_PB: dict[int, AgenticRole] = {v: k for k, v in _AGENTIC_ROLE_TO_PB.items()}
_ROLE_FROM_PB: dict[int, FlatRole] = {v: k for k, v in _ROLE_TO_PB.items()}

_STATE_TO_PB: dict[b.ToolResultState, _content_pb2.ToolResultState] = {
    "success": _content_pb2.TOOL_RESULT_STATE_SUCCESS,
    "error": _content_pb2.TOOL_RESULT_STATE_ERROR,
    "interrupted": _content_pb2.TOOL_RESULT_STATE_INTERRUPTED,
    "denied": _content_pb2.TOOL_RESULT_STATE_DENIED,
}
_STATE_FROM_PB: dict[int, b.ToolResultState] = {v: k for k, v in _STATE_TO_PB.items()}
_STATE_FROM_PB[_content_pb2.TOOL_RESULT_STATE_UNSPECIFIED] = "success"

_FINISH_TO_PB: dict[e.FinishReason, _event_pb2.FinishReason] = {
    "completed": _event_pb2.FINISH_REASON_COMPLETED,
    "interrupted": _event_pb2.FINISH_REASON_INTERRUPTED,
    "exceed_max_iters": _event_pb2.FINISH_REASON_EXCEED_MAX_ITERS,
    "error": _event_pb2.FINISH_REASON_ERROR,
    "awaiting_confirmation": _event_pb2.FINISH_REASON_AWAITING_CONFIRMATION,
    "awaiting_external_execution": _event_pb2.FINISH_REASON_AWAITING_EXTERNAL_EXECUTION,
}
_FINISH_FROM_PB: dict[int, e.FinishReason] = {v: k for k, v in _FINISH_TO_PB.items()}

_MEDIA_CLASSES: dict[
    str, type[b.ImageBlock] | type[b.AudioBlock] | type[b.VideoBlock] | type[b.DocumentBlock]
] = {
    "image": b.ImageBlock,
    "audio": b.AudioBlock,
    "video": b.VideoBlock,
    "document": b.DocumentBlock,
}


def _enum(table: Mapping[int, _T], value: int, path: str, what: str) -> _T:
    try:
        return table[value]
    except KeyError:
        raise SchemaError.single(path, f"{what} {value} is not a valid value") from None


def tool_result_state_to_proto(state: b.ToolResultState) -> _content_pb2.ToolResultState:
    """The proto enum value of a tool result state."""
    return _STATE_TO_PB[state]


def tool_result_state_from_proto(value: int, path: str) -> b.ToolResultState:
    """A tool result state from its proto enum value (unspecified reads as success).

    Raises:
        SchemaError: An unknown value, reported at `path`.
    """
    return _enum(_STATE_FROM_PB, value, path, "tool result state")


# --- JSON values -------------------------------------------------------------------------


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def json_value(value: Any) -> Any:
    """A decoded Struct/Value with integral doubles turned back into ints.

    NOTE(hookmesh): protobuf carries every JSON number as a double; counters and ids are the
    common case, so ``3.0`` comes back as ``3`` (values beyond 2**53 stay floats).
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value


def struct_from_proto(pb: struct_pb2.Struct | struct_pb2.Value, path: str) -> Any:
    """A Struct (or Value) as plain JSON, integral numbers as ints.

    Raises:
        SchemaError: A NaN or infinite number (not JSON), reported at `path`.
    """
    try:
        return json_value(json_format.MessageToDict(pb))
    except ValueError:
        raise SchemaError.single(
            path, "numbers must be finite: NaN and infinity are not JSON"
        ) from None


def timestamp_from_proto(pb: timestamp_pb2.Timestamp, path: str) -> datetime:
    """A Timestamp as an aware UTC datetime.

    Raises:
        SchemaError: Seconds outside 0001-01-01..9999-12-31 or nanos outside 0..999999999.
    """
    try:
        return pb.ToDatetime(tzinfo=UTC)  # type: ignore[no-any-return]
    except (ValueError, OverflowError):
        raise SchemaError.single(
            path,
            "must lie between 0001-01-01 and 9999-12-31, with nanos from 0 to 999999999",
        ) from None


def _dict(pb: struct_pb2.Struct, path: str) -> dict[str, Any]:
    return struct_from_proto(pb, path)  # type: ignore[no-any-return]


# --- blocks ------------------------------------------------------------------------------


def _source_to_proto(source: b.InlineSource | b.UrlSource) -> _content_pb2.MediaSource:
    if source.type == "inline":
        return _content_pb2.MediaSource(
            inline=_content_pb2.InlineData(data=source.data, mime_type=source.mime_type)
        )
    return _content_pb2.MediaSource(
        url=_content_pb2.UrlRef(url=source.url, mime_type=source.mime_type)
    )


def media_to_proto(block: b._MediaBlock) -> _content_pb2.MediaBlock:
    """A media block's proto body (the arm says which kind of media it is)."""
    pb = _content_pb2.MediaBlock(source=_source_to_proto(block.source), name=block.name)
    if block.metadata is not None:
        pb.metadata.CopyFrom(_struct(block.metadata))
    return pb


def media_from_proto(pb: _content_pb2.MediaBlock, arm: str, block_id: str, path: str) -> _Media:
    """Decode a media block held in the ContentBlock arm `arm`."""
    source: b.InlineSource | b.UrlSource
    which = pb.source.WhichOneof("source")
    if which == "inline":
        source = b.InlineSource(data=pb.source.inline.data, mime_type=pb.source.inline.mime_type)
    elif which == "url":
        source = b.UrlSource(url=pb.source.url.url, mime_type=pb.source.url.mime_type)
    else:
        raise SchemaError.single(
            f"{path}.source", "a media block needs a source: set `inline` or `url`"
        )
    return _MEDIA_CLASSES[arm](
        source=source,
        name=pb.name,
        metadata=_dict(pb.metadata, f"{path}.metadata") if pb.HasField("metadata") else None,
        id=block_id,
    )


def block_to_proto(block: b.ContentBlock) -> _content_pb2.ContentBlock:
    """Encode any content block."""
    if isinstance(block, b.TextBlock):
        return _content_pb2.ContentBlock(id=block.id, text=_content_pb2.TextBlock(text=block.text))
    if isinstance(block, b.ReasoningBlock):
        return _content_pb2.ContentBlock(
            id=block.id,
            reasoning=_content_pb2.ReasoningBlock(text=block.text, signature=block.signature),
        )
    if isinstance(block, b.ToolCallBlock):
        return _content_pb2.ContentBlock(
            id=block.id,
            tool_call=_content_pb2.ToolCallBlock(
                call_id=block.call_id, name=block.name, arguments=block.arguments
            ),
        )
    if isinstance(block, b.ToolResultBlock):
        return _content_pb2.ContentBlock(
            id=block.id,
            tool_result=_content_pb2.ToolResultBlock(
                call_id=block.call_id,
                name=block.name,
                output=[block_to_proto(o) for o in block.output],
                state=_STATE_TO_PB[block.state],
            ),
        )
    if isinstance(block, b.HintBlock):
        return _content_pb2.ContentBlock(
            id=block.id, hint=_content_pb2.HintBlock(text=block.text, source=block.source)
        )
    return _content_pb2.ContentBlock(id=block.id, **{block.type: media_to_proto(block)})


def block_from_proto(pb: _content_pb2.ContentBlock, path: str = "block") -> b.ContentBlock:
    """Decode any content block; `path` names it in errors."""
    arm = pb.WhichOneof("block")
    if arm is None:
        raise SchemaError.single(path, "a content block needs one of its `block` arms set")
    if arm == "text":
        return b.TextBlock(text=pb.text.text, id=pb.id)
    if arm == "reasoning":
        return b.ReasoningBlock(text=pb.reasoning.text, signature=pb.reasoning.signature, id=pb.id)
    if arm == "tool_call":
        c = pb.tool_call
        return b.ToolCallBlock(call_id=c.call_id, name=c.name, arguments=c.arguments, id=pb.id)
    if arm == "tool_result":
        r = pb.tool_result
        return b.ToolResultBlock(
            call_id=r.call_id,
            name=r.name,
            output=_output_from_proto(r.output, f"{path}.tool_result.output"),
            state=_enum(_STATE_FROM_PB, r.state, f"{path}.tool_result.state", "tool result state"),
            id=pb.id,
        )
    if arm == "hint":
        return b.HintBlock(text=pb.hint.text, source=pb.hint.source, id=pb.id)
    return media_from_proto(getattr(pb, arm), arm, pb.id, f"{path}.{arm}")


def _output_from_proto(pbs: Iterable[_content_pb2.ContentBlock], path: str) -> list[_Output]:
    out: list[_Output] = []
    for i, pb in enumerate(pbs):
        block = block_from_proto(pb, f"{path}[{i}]")
        if not isinstance(block, _OUTPUT_TYPES):
            raise SchemaError.single(
                f"{path}[{i}].{block.type}", "only text and media blocks are allowed here"
            )
        out.append(block)
    return out


# --- messages ----------------------------------------------------------------------------


def usage_to_proto(u: Usage) -> _message_pb2.Usage:
    """The proto of a usage record."""
    return _message_pb2.Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_tokens,
        cache_creation_tokens=u.cache_creation_tokens,
        reasoning_tokens=u.reasoning_tokens,
    )


def usage_from_proto(pb: _message_pb2.Usage) -> Usage:
    """A usage record from its proto."""
    return Usage(
        input_tokens=pb.input_tokens,
        output_tokens=pb.output_tokens,
        cache_read_tokens=pb.cache_read_tokens,
        cache_creation_tokens=pb.cache_creation_tokens,
        reasoning_tokens=pb.reasoning_tokens,
    )


def _tool_call_to_proto(c: ToolCall) -> _message_pb2.ToolCall:
    return _message_pb2.ToolCall(id=c.id, name=c.name, arguments=c.arguments)


def _tool_call_from_proto(pb: _message_pb2.ToolCall) -> ToolCall:
    return ToolCall(id=pb.id, name=pb.name, arguments=pb.arguments)


def _flat_to_proto(msg: FlatMessage) -> _message_pb2.FlatMessage:
    body = _message_pb2.FlatMessage(
        role=_ROLE_TO_PB[msg.role],
        content=msg.content,
        parts=[block_to_proto(p) for p in msg.parts],
        tool_calls=[_tool_call_to_proto(c) for c in msg.tool_calls],
        tool_call_id=msg.tool_call_id,
        tool_name=msg.tool_name,
        reasoning_content=msg.reasoning_content,
        name=msg.name,
        tool_result_state=(
            _STATE_TO_PB[msg.tool_result_state]
            if msg.role == "tool"
            else _content_pb2.TOOL_RESULT_STATE_UNSPECIFIED
        ),
    )
    if msg.usage is not None:
        body.usage.CopyFrom(usage_to_proto(msg.usage))
    return body


def _agentic_to_proto(msg: AgenticMessage) -> _message_pb2.AgenticMessage:
    body = _message_pb2.AgenticMessage(
        role=_AGENTIC_ROLE_TO_PB[msg.role],
        blocks=[block_to_proto(x) for x in msg.blocks],
        name=msg.name,
    )
    if msg.usage is not None:
        body.usage.CopyFrom(usage_to_proto(msg.usage))
    return body


def message_to_proto(msg: Message) -> _message_pb2.Message:
    """Encode a message of either kind."""
    pb = _message_pb2.Message(id=msg.id)
    if isinstance(msg, FlatMessage):
        pb.flat.CopyFrom(_flat_to_proto(msg))
    else:
        pb.agentic.CopyFrom(_agentic_to_proto(msg))
    if msg.metadata is not None:
        pb.metadata.CopyFrom(_struct(msg.metadata))
    if msg.create_time is not None:
        pb.create_time.FromDatetime(msg.create_time)
    return pb


def message_from_proto(pb: _message_pb2.Message, path: str = "message") -> Message:
    """Decode a message; raises `SchemaError` naming the proto path of each problem."""
    arm = pb.WhichOneof("kind")
    common: dict[str, Any] = {
        "id": pb.id,
        "metadata": _dict(pb.metadata, f"{path}.metadata") if pb.HasField("metadata") else None,
        "create_time": timestamp_from_proto(pb.create_time, f"{path}.create_time")
        if pb.HasField("create_time")
        else None,
    }
    if arm == "flat":
        f = pb.flat
        return FlatMessage(
            role=_enum(_ROLE_FROM_PB, f.role, f"{path}.flat.role", "role"),
            content=f.content,
            parts=_output_from_proto(f.parts, f"{path}.flat.parts"),
            tool_calls=[_tool_call_from_proto(c) for c in f.tool_calls],
            tool_call_id=f.tool_call_id,
            tool_name=f.tool_name,
            tool_result_state=_enum(
                _STATE_FROM_PB, f.tool_result_state, f"{path}.flat.tool_result_state", "state"
            ),
            reasoning_content=f.reasoning_content,
            name=f.name,
            usage=usage_from_proto(f.usage) if f.HasField("usage") else None,
            **common,
        )
    if arm == "agentic":
        a = pb.agentic
        if a.role == _message_pb2.ROLE_TOOL:
            raise SchemaError.single(
                f"{path}.agentic.role",
                "agentic messages have no tool role: put tool_result blocks in a user message",
            )
        return AgenticMessage(
            role=_enum(_AGENTIC_ROLE_FROM_PB, a.role, f"{path}.agentic.role", "role"),
            blocks=[
                block_from_proto(x, f"{path}.agentic.blocks[{i}]") for i, x in enumerate(a.blocks)
            ],
            name=a.name,
            usage=usage_from_proto(a.usage) if a.HasField("usage") else None,
            **common,
        )
    raise SchemaError.single(path, "a message needs its `kind` set: `flat` or `agentic`")


def messages_from_proto(
    pbs: Iterable[_message_pb2.Message], path: str = "messages"
) -> list[Message]:
    """Decode a list of messages, collecting the violations of all of them."""
    out: list[Message] = []
    violations: list[FieldViolation] = []
    for i, pb in enumerate(pbs):
        try:
            out.append(message_from_proto(pb, f"{path}[{i}]"))
        except SchemaError as exc:
            violations.extend(exc.violations)
    if violations:
        raise SchemaError(violations)
    return out


# --- events ------------------------------------------------------------------------------

_EVENT_CLASSES: dict[str, type[Any]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(e.AgentEvent)[0])
}
_EVENT_PB_CLASSES: dict[str, type[Any]] = {
    arm: getattr(_event_pb2, _event_pb2.AgentEvent.DESCRIPTOR.fields_by_name[arm].message_type.name)
    for arm in _EVENT_CLASSES
}
# Events whose fields are all scalars with the proto's names need no code of their own.
_SCALAR_FIELDS: dict[str, tuple[str, ...]] = {
    arm: tuple(f for f in cls.model_fields if f not in ("type", "reply_id", "source_path"))
    for arm, cls in _EVENT_CLASSES.items()
}


def _reply_end_to_proto(ev: e.ReplyEndEvent) -> _event_pb2.ReplyEndEvent:
    pb = _event_pb2.ReplyEndEvent(
        finish_reason=_FINISH_TO_PB[ev.finish_reason], session_id=ev.session_id
    )
    if ev.error is not None:
        pb.error.CopyFrom(
            _event_pb2.ReplyError(
                reason=ev.error.reason,
                message=ev.error.message,
                source=ev.error.source,
                metadata=ev.error.metadata,
            )
        )
    return pb


def _reply_end_from_proto(
    pb: _event_pb2.ReplyEndEvent, reply_id: str, path: str
) -> e.ReplyEndEvent:
    error = None
    if pb.HasField("error"):
        error = e.ReplyError(
            reason=pb.error.reason,
            message=pb.error.message,
            source=pb.error.source,
            metadata=dict(pb.error.metadata),
        )
    return e.ReplyEndEvent(
        reply_id=reply_id,
        finish_reason=_enum(
            _FINISH_FROM_PB, pb.finish_reason, f"{path}.finish_reason", "finish reason"
        ),
        error=error,
        session_id=pb.session_id,
    )


def _model_call_end_to_proto(ev: e.ModelCallEndEvent) -> _event_pb2.ModelCallEndEvent:
    pb = _event_pb2.ModelCallEndEvent(
        model_name=ev.model_name, stop_reason=ev.stop_reason, response_id=ev.response_id
    )
    if ev.usage is not None:
        pb.usage.CopyFrom(usage_to_proto(ev.usage))
    return pb


def _model_call_end_from_proto(
    pb: _event_pb2.ModelCallEndEvent, reply_id: str, path: str
) -> e.ModelCallEndEvent:
    return e.ModelCallEndEvent(
        reply_id=reply_id,
        model_name=pb.model_name,
        usage=usage_from_proto(pb.usage) if pb.HasField("usage") else None,
        stop_reason=pb.stop_reason,
        response_id=pb.response_id,
    )


def _tool_result_delta_to_proto(ev: e.ToolResultDeltaEvent) -> _event_pb2.ToolResultDeltaEvent:
    if ev.media is not None:
        return _event_pb2.ToolResultDeltaEvent(call_id=ev.call_id, media=block_to_proto(ev.media))
    return _event_pb2.ToolResultDeltaEvent(call_id=ev.call_id, text=ev.text)


def _tool_result_delta_from_proto(
    pb: _event_pb2.ToolResultDeltaEvent, reply_id: str, path: str
) -> e.ToolResultDeltaEvent:
    if pb.WhichOneof("delta") == "media":
        media = block_from_proto(pb.media, f"{path}.media")
        if not isinstance(media, _MEDIA_TYPES):
            raise SchemaError.single(
                f"{path}.media.{media.type}",
                "set `text` for text; `media` holds an image, audio, video or document block"
                if media.type == "text"
                else "only media blocks are allowed here",
            )
        return e.ToolResultDeltaEvent(reply_id=reply_id, call_id=pb.call_id, media=media)
    return e.ToolResultDeltaEvent(reply_id=reply_id, call_id=pb.call_id, text=pb.text)


def _tool_result_end_to_proto(ev: e.ToolResultEndEvent) -> _event_pb2.ToolResultEndEvent:
    return _event_pb2.ToolResultEndEvent(call_id=ev.call_id, state=_STATE_TO_PB[ev.state])


def _tool_result_end_from_proto(
    pb: _event_pb2.ToolResultEndEvent, reply_id: str, path: str
) -> e.ToolResultEndEvent:
    return e.ToolResultEndEvent(
        reply_id=reply_id,
        call_id=pb.call_id,
        state=_enum(_STATE_FROM_PB, pb.state, f"{path}.state", "tool result state"),
    )


def _hint_to_proto(ev: e.HintBlockEvent) -> _event_pb2.HintBlockEvent:
    return _event_pb2.HintBlockEvent(
        block_id=ev.block_id, hint=_content_pb2.HintBlock(text=ev.text, source=ev.source)
    )


def _hint_from_proto(pb: _event_pb2.HintBlockEvent, reply_id: str, path: str) -> e.HintBlockEvent:
    return e.HintBlockEvent(
        reply_id=reply_id, block_id=pb.block_id, text=pb.hint.text, source=pb.hint.source
    )


def _calls_to_proto(cls: type[Any]) -> Callable[[Any], Any]:
    def encode(ev: Any) -> Any:
        return cls(tool_calls=[_tool_call_to_proto(c) for c in ev.tool_calls])

    return encode


def _calls_from_proto(cls: type[Any]) -> Callable[[Any, str, str], Any]:
    def decode(pb: Any, reply_id: str, path: str) -> Any:
        return cls(reply_id=reply_id, tool_calls=[_tool_call_from_proto(c) for c in pb.tool_calls])

    return decode


def _custom_to_proto(ev: e.CustomEvent) -> _event_pb2.CustomEvent:
    pb = _event_pb2.CustomEvent(name=ev.name)
    if ev.value is not None:
        json_format.ParseDict(ev.value, pb.value)
    return pb


def _custom_from_proto(pb: _event_pb2.CustomEvent, reply_id: str, path: str) -> e.CustomEvent:
    value = struct_from_proto(pb.value, f"{path}.value") if pb.HasField("value") else None
    return e.CustomEvent(reply_id=reply_id, name=pb.name, value=value)


_EVENT_ENCODERS: dict[str, Callable[[Any], Any]] = {
    "reply_end": _reply_end_to_proto,
    "model_call_end": _model_call_end_to_proto,
    "tool_result_delta": _tool_result_delta_to_proto,
    "tool_result_end": _tool_result_end_to_proto,
    "hint_block": _hint_to_proto,
    "require_user_confirm": _calls_to_proto(_event_pb2.RequireUserConfirmEvent),
    "require_external_execution": _calls_to_proto(_event_pb2.RequireExternalExecutionEvent),
    "custom": _custom_to_proto,
}
_EVENT_DECODERS: dict[str, Callable[[Any, str, str], Any]] = {
    "reply_end": _reply_end_from_proto,
    "model_call_end": _model_call_end_from_proto,
    "tool_result_delta": _tool_result_delta_from_proto,
    "tool_result_end": _tool_result_end_from_proto,
    "hint_block": _hint_from_proto,
    "require_user_confirm": _calls_from_proto(e.RequireUserConfirmEvent),
    "require_external_execution": _calls_from_proto(e.RequireExternalExecutionEvent),
    "custom": _custom_from_proto,
}


def _scalar_to_proto(pb_cls: type[Any], fields: tuple[str, ...]) -> Callable[[Any], Any]:
    def encode(ev: Any) -> Any:
        return pb_cls(**{f: getattr(ev, f) for f in fields})

    return encode


def _scalar_from_proto(cls: type[Any], fields: tuple[str, ...]) -> Callable[[Any, str, str], Any]:
    def decode(pb: Any, reply_id: str, unused_path: str) -> Any:
        return cls(reply_id=reply_id, **{f: getattr(pb, f) for f in fields})

    return decode


for _arm, _fields in _SCALAR_FIELDS.items():
    if _arm not in _EVENT_ENCODERS:
        _EVENT_ENCODERS[_arm] = _scalar_to_proto(_EVENT_PB_CLASSES[_arm], _fields)
        _EVENT_DECODERS[_arm] = _scalar_from_proto(_EVENT_CLASSES[_arm], _fields)


def event_to_proto(ev: e.AgentEvent) -> _event_pb2.AgentEvent:
    """Encode any agent event."""
    pb = _event_pb2.AgentEvent(reply_id=ev.reply_id, **{ev.type: _EVENT_ENCODERS[ev.type](ev)})
    if ev.source_path:
        pb.source_path.extend(
            _event_pb2.EventSource(
                call_id=s.call_id, tool_name=s.tool_name, agent_name=s.agent_name, run_id=s.run_id
            )
            for s in ev.source_path
        )
    return pb


def event_from_proto(pb: _event_pb2.AgentEvent, path: str = "event") -> e.AgentEvent:
    """Decode any agent event; raises `SchemaError` when no arm is set."""
    arm = pb.WhichOneof("event")
    if arm is None:
        raise SchemaError.single(path, "an event needs one of its `event` arms set")
    event: e.AgentEvent = _EVENT_DECODERS[arm](getattr(pb, arm), pb.reply_id, f"{path}.{arm}")
    if pb.source_path:
        event.source_path = [
            e.EventSource(
                call_id=s.call_id, tool_name=s.tool_name, agent_name=s.agent_name, run_id=s.run_id
            )
            for s in pb.source_path
        ]
    return event
