"""Exact codecs between the pydantic schema's blocks and messages and the `hookmesh.v1`
protobuf messages (events: `_proto_events`).

Decoding checks what protobuf cannot (an unset oneof, an unknown enum value, a role the
kind forbids) and raises `SchemaError` with the proto path of every problem. Semantic rules
that both encodings share live in `_validate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema import _blocks as b
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
        metadata=struct_from_proto(pb.metadata, f"{path}.metadata")
        if pb.HasField("metadata")
        else None,
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
        "metadata": struct_from_proto(pb.metadata, f"{path}.metadata")
        if pb.HasField("metadata")
        else None,
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
