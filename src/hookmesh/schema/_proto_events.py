"""Exact codecs between the schema's agent events and `hookmesh.v1.AgentEvent` (the event
stream's hot path: one table lookup and one encoder per event, built at import)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from google.protobuf import json_format

from hookmesh.errors import SchemaError
from hookmesh.schema import _events as e
from hookmesh.schema._proto import (
    _MEDIA_TYPES,
    _enum,
    _tool_call_from_proto,
    _tool_call_to_proto,
    block_from_proto,
    block_to_proto,
    struct_from_proto,
    tool_result_state_from_proto,
    tool_result_state_to_proto,
    usage_from_proto,
    usage_to_proto,
)
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import event_pb2 as _event_pb2

_FINISH_TO_PB: dict[e.FinishReason, _event_pb2.FinishReason] = {
    "completed": _event_pb2.FINISH_REASON_COMPLETED,
    "interrupted": _event_pb2.FINISH_REASON_INTERRUPTED,
    "exceed_max_iters": _event_pb2.FINISH_REASON_EXCEED_MAX_ITERS,
    "error": _event_pb2.FINISH_REASON_ERROR,
    "awaiting_confirmation": _event_pb2.FINISH_REASON_AWAITING_CONFIRMATION,
    "awaiting_external_execution": _event_pb2.FINISH_REASON_AWAITING_EXTERNAL_EXECUTION,
}
_FINISH_FROM_PB: dict[int, e.FinishReason] = {v: k for k, v in _FINISH_TO_PB.items()}

_EVENT_CLASSES: dict[str, type[Any]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(e.AgentEvent)[0])
}
# Events whose fields are all scalars with the proto's names need no code of their own.
_SCALAR_FIELDS: dict[str, tuple[str, ...]] = {
    arm: tuple(f for f in cls.model_fields if f not in ("type", "reply_id", "source_path"))
    for arm, cls in _EVENT_CLASSES.items()
}


def output_to_proto(output: e.StructuredOutput) -> _event_pb2.StructuredOutput:
    """A structured answer as its proto (a pydantic value dumped to JSON)."""
    pb = _event_pb2.StructuredOutput(schema_name=output.schema_name)
    json_format.ParseDict(output.as_json(), pb.value)
    return pb


def output_from_proto(pb: _event_pb2.StructuredOutput, path: str) -> e.StructuredOutput:
    """A structured answer from its proto, the value as plain JSON.

    Raises:
        SchemaError: The value holds a NaN or infinite number.
    """
    value = struct_from_proto(pb.value, f"{path}.value") if pb.HasField("value") else None
    return e.StructuredOutput(value=value, schema_name=pb.schema_name)


def _reply_end_to_proto(ev: e.ReplyEndEvent) -> _event_pb2.ReplyEndEvent:
    pb = _event_pb2.ReplyEndEvent(
        finish_reason=_FINISH_TO_PB[ev.finish_reason], session_id=ev.session_id
    )
    if ev.output is not None:
        pb.output.CopyFrom(output_to_proto(ev.output))
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
        output=output_from_proto(pb.output, f"{path}.output") if pb.HasField("output") else None,
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
    return _event_pb2.ToolResultEndEvent(
        call_id=ev.call_id, state=tool_result_state_to_proto(ev.state)
    )


def _tool_result_end_from_proto(
    pb: _event_pb2.ToolResultEndEvent, reply_id: str, path: str
) -> e.ToolResultEndEvent:
    return e.ToolResultEndEvent(
        reply_id=reply_id,
        call_id=pb.call_id,
        state=tool_result_state_from_proto(pb.state, f"{path}.state"),
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
    "require_user_confirm": lambda ev: _event_pb2.RequireUserConfirmEvent(
        tool_calls=[_tool_call_to_proto(c) for c in ev.tool_calls], reason=ev.reason
    ),
    "require_external_execution": _calls_to_proto(_event_pb2.RequireExternalExecutionEvent),
    "custom": _custom_to_proto,
}
_EVENT_DECODERS: dict[str, Callable[[Any, str, str], Any]] = {
    "reply_end": _reply_end_from_proto,
    "model_call_end": _model_call_end_from_proto,
    "tool_result_delta": _tool_result_delta_from_proto,
    "tool_result_end": _tool_result_end_from_proto,
    "hint_block": _hint_from_proto,
    "require_user_confirm": lambda pb, reply_id, path: e.RequireUserConfirmEvent(
        reply_id=reply_id,
        tool_calls=[_tool_call_from_proto(c) for c in pb.tool_calls],
        reason=pb.reason,
    ),
    "require_external_execution": _calls_from_proto(e.RequireExternalExecutionEvent),
    "custom": _custom_from_proto,
}


def _scalar_into_proto(arm: str, fields: tuple[str, ...]) -> Callable[[Any, Any], None]:
    # NOTE(perf): the arm is filled in place: building it apart and handing it to the
    # AgentEvent constructor copies it, which was half of an event's encoding time.
    def encode(ev: Any, pb: Any) -> None:
        sub = getattr(pb, arm)
        sub.SetInParent()
        for f in fields:
            value = getattr(ev, f)
            if value is not None:
                setattr(sub, f, value)

    return encode


def _scalar_from_proto(cls: type[Any], fields: tuple[str, ...]) -> Callable[[Any, str, str], Any]:
    def decode(pb: Any, reply_id: str, unused_path: str) -> Any:
        return cls(reply_id=reply_id, **{f: getattr(pb, f) for f in fields})

    return decode


_SCALAR_ENCODERS: dict[str, Callable[[Any, Any], None]] = {}
for _arm, _fields in _SCALAR_FIELDS.items():
    if _arm not in _EVENT_ENCODERS:
        _SCALAR_ENCODERS[_arm] = _scalar_into_proto(_arm, _fields)
        _EVENT_DECODERS[_arm] = _scalar_from_proto(_EVENT_CLASSES[_arm], _fields)


def event_to_proto(ev: e.AgentEvent) -> _event_pb2.AgentEvent:
    """Encode any agent event."""
    into = _SCALAR_ENCODERS.get(ev.type)
    if into is None:
        pb = _event_pb2.AgentEvent(reply_id=ev.reply_id, **{ev.type: _EVENT_ENCODERS[ev.type](ev)})
    else:
        pb = _event_pb2.AgentEvent(reply_id=ev.reply_id)
        into(ev, pb)
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
