"""Conversions between the agent's Python values and the middleware protocol's messages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format, struct_pb2

from hookmesh.middleware import HookMode, HookSpec, MiddlewareDescription, PermissionDecision
from hookmesh.models import ModelChunk, ModelResponse, ToolCallDelta
from hookmesh.remote._errors import protocol_error
from hookmesh.schema import (
    AgentEvent,
    MessageKind,
    ReplyError,
    ToolCall,
    event_from_proto,
    message_from_proto,
    message_to_proto,
    struct_from_proto,
    usage_from_proto,
    usage_to_proto,
)
from hookmesh.tools import Tool, ToolInfo
from hookmesh.v1 import event_pb2 as _event_pb2
from hookmesh.v1 import message_pb2 as _message_pb2
from hookmesh.v1 import middleware_pb2 as _mw_pb2

PROTOCOL_VERSION = 1

HOOK_TO_PB = {
    "on_reply": _mw_pb2.HOOK_ON_REPLY,
    "on_reasoning": _mw_pb2.HOOK_ON_REASONING,
    "on_model_call": _mw_pb2.HOOK_ON_MODEL_CALL,
    "on_acting": _mw_pb2.HOOK_ON_ACTING,
    "on_check_permission": _mw_pb2.HOOK_ON_CHECK_PERMISSION,
    "on_compress_context": _mw_pb2.HOOK_ON_COMPRESS_CONTEXT,
    "on_system_prompt": _mw_pb2.HOOK_ON_SYSTEM_PROMPT,
    "after_agent": _mw_pb2.HOOK_AFTER_AGENT,
}
HOOK_FROM_PB = {v: k for k, v in HOOK_TO_PB.items()}

MODE_TO_PB: dict[HookMode, _mw_pb2.HookMode] = {
    "intercept": _mw_pb2.HOOK_MODE_INTERCEPT,
    "pre_only": _mw_pb2.HOOK_MODE_PRE_ONLY,
    "observe": _mw_pb2.HOOK_MODE_OBSERVE,
}
MODE_FROM_PB: dict[int, HookMode] = {v: k for k, v in MODE_TO_PB.items()}
MODE_FROM_PB[_mw_pb2.HOOK_MODE_UNSPECIFIED] = "intercept"

KIND_TO_PB = {"flat": _mw_pb2.MESSAGE_KIND_FLAT, "agentic": _mw_pb2.MESSAGE_KIND_AGENTIC}
KIND_FROM_PB: dict[int, MessageKind] = {v: k for k, v in KIND_TO_PB.items()}  # type: ignore[misc]

_BEHAVIOR_TO_PB = {
    "allow": _mw_pb2.PERMISSION_BEHAVIOR_ALLOW,
    "deny": _mw_pb2.PERMISSION_BEHAVIOR_DENY,
    "ask": _mw_pb2.PERMISSION_BEHAVIOR_ASK,
}
_BEHAVIOR_FROM_PB = {v: k for k, v in _BEHAVIOR_TO_PB.items()}
_BEHAVIOR_FROM_PB[_mw_pb2.PERMISSION_BEHAVIOR_UNSPECIFIED] = "allow"


def struct(data: dict[str, Any]) -> struct_pb2.Struct:
    """A JSON object as a Struct."""
    out = struct_pb2.Struct()
    out.update(data)
    return out


def from_struct(pb: struct_pb2.Struct, path: str = "state") -> dict[str, Any]:
    """A Struct as a JSON object, ints restored where the double is integral.

    Raises:
        SchemaError: A NaN or infinite number, reported at `path`.
    """
    return struct_from_proto(pb, path)  # type: ignore[no-any-return]


def tool_call_to_pb(call: ToolCall) -> _message_pb2.ToolCall:
    return _message_pb2.ToolCall(id=call.id, name=call.name, arguments=call.arguments)


def tool_call_from_pb(pb: _message_pb2.ToolCall) -> ToolCall:
    return ToolCall(id=pb.id, name=pb.name, arguments=pb.arguments)


def tool_spec(tool: ToolInfo | dict[str, Any]) -> _mw_pb2.ToolSpec:
    """A tool (or a model-facing tool definition) as a ToolSpec."""
    if isinstance(tool, dict):
        return _mw_pb2.ToolSpec(
            name=tool["name"],
            description=tool.get("description", ""),
            parameters=struct(tool.get("parameters", {})),
        )
    return _mw_pb2.ToolSpec(
        name=tool.name,
        description=tool.description,
        parameters=struct(tool.parameters),
        read_only=tool.read_only,
        concurrency_safe=tool.concurrency_safe,
        return_directly=tool.return_directly,
        needs_confirmation=tool.needs_confirmation,
        idempotent=tool.idempotent,
    )


def tool_definition(spec: _mw_pb2.ToolSpec) -> dict[str, Any]:
    """A ToolSpec as the model-facing definition."""
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": json_format.MessageToDict(spec.parameters),
    }


def chunk_to_pb(chunk: ModelChunk) -> _mw_pb2.ModelChunk:
    pb = _mw_pb2.ModelChunk(
        text=chunk.text,
        reasoning=chunk.reasoning,
        stop_reason=chunk.stop_reason,
        response_id=chunk.response_id,
    )
    if chunk.tool_call is not None:
        tc = chunk.tool_call
        pb.tool_call.CopyFrom(
            _mw_pb2.ToolCallDelta(call_id=tc.call_id, name=tc.name, arguments=tc.arguments)
        )
    if chunk.usage is not None:
        pb.usage.CopyFrom(usage_to_proto(chunk.usage))
    return pb


def chunk_from_pb(pb: _mw_pb2.ModelChunk) -> ModelChunk:
    tc = pb.tool_call
    return ModelChunk(
        text=pb.text,
        reasoning=pb.reasoning,
        tool_call=ToolCallDelta(tc.call_id, tc.name, tc.arguments)
        if pb.HasField("tool_call")
        else None,
        usage=usage_from_proto(pb.usage) if pb.HasField("usage") else None,
        stop_reason=pb.stop_reason,
        response_id=pb.response_id,
    )


def response_to_pb(response: ModelResponse) -> _mw_pb2.ModelResponse:
    pb = _mw_pb2.ModelResponse(
        message=message_to_proto(response.message),
        stop_reason=response.stop_reason,
        response_id=response.response_id,
    )
    if response.usage is not None:
        pb.usage.CopyFrom(usage_to_proto(response.usage))
    return pb


def response_from_pb(pb: _mw_pb2.ModelResponse) -> ModelResponse:
    return ModelResponse(
        message=message_from_proto(pb.message, "model_response.message"),
        usage=usage_from_proto(pb.usage) if pb.HasField("usage") else None,
        stop_reason=pb.stop_reason,
        response_id=pb.response_id,
    )


def decision_to_pb(decision: PermissionDecision) -> _mw_pb2.PermissionDecision:
    return _mw_pb2.PermissionDecision(
        behavior=_BEHAVIOR_TO_PB[decision.behavior], reason=decision.reason
    )


def decision_from_pb(pb: _mw_pb2.PermissionDecision) -> PermissionDecision:
    return PermissionDecision(_BEHAVIOR_FROM_PB.get(pb.behavior, "allow"), pb.reason)  # type: ignore[arg-type]


def error_to_pb(exc: BaseException) -> _event_pb2.ReplyError:
    """An exception as a ReplyError (reason from a HookmeshError, else MIDDLEWARE_FAILED, as
    an in-process middleware's error would read)."""
    reason = getattr(exc, "reason", "MIDDLEWARE_FAILED")
    return _event_pb2.ReplyError(
        reason=reason,
        message=str(exc) or type(exc).__name__,
        metadata={"errorType": type(exc).__name__, **getattr(exc, "metadata", {})},
    )


def event_of_reply(
    pb: _event_pb2.AgentEvent, reply_id: str, where: str, **metadata: str
) -> AgentEvent:
    """An event a sidecar sent (an emit, a tool's event) as one of reply `reply_id`: an empty
    reply id is filled in.

    Raises:
        SidecarError: SIDECAR_PROTOCOL_ERROR for another reply's event; `where` (a hook, a
            tool) and `metadata` say where it came.
    """
    if not pb.reply_id:
        pb.reply_id = reply_id
    elif pb.reply_id != reply_id:
        raise protocol_error(f"sidecar emitted an event for another reply in {where}", **metadata)
    return event_from_proto(pb)


def reply_error_from_pb(pb: _event_pb2.ReplyError) -> ReplyError:
    return ReplyError(
        reason=pb.reason, message=pb.message, source=pb.source, metadata=dict(pb.metadata)
    )


def arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


_FAILURE_TO_PB = {
    "fail_closed": _mw_pb2.FAILURE_MODE_CLOSED,
    "fail_open": _mw_pb2.FAILURE_MODE_OPEN,
}


def description_to_pb(
    description: MiddlewareDescription, tools: Sequence[Tool], max_message_bytes: int
) -> _mw_pb2.DescribeResponse:
    """A middleware's description as its Describe answer, field for field."""
    return _mw_pb2.DescribeResponse(
        protocol_version=PROTOCOL_VERSION,
        middleware_key=description.key,
        hooks=[
            _mw_pb2.HookSpec(
                hook=HOOK_TO_PB[hook],
                mode=MODE_TO_PB[spec.mode],
                subscriptions=spec.subscriptions,
                read_only_subscriptions=spec.read_only_subscriptions,
            )
            for hook, spec in description.hooks.items()
        ],
        needs_context=description.needs_context,
        tools=[tool_spec(t) for t in tools],
        failure_mode=_FAILURE_TO_PB[description.failure_mode],
        max_message_bytes=max_message_bytes,
    )


def description_from_pb(pb: _mw_pb2.DescribeResponse) -> MiddlewareDescription:
    """A Describe answer as a description (an unset failure mode reads as fail_closed).

    Raises:
        ValueError: An unknown hook, or a subscription its hook has no item for.
    """
    hooks = {}
    for spec in pb.hooks:
        hook = HOOK_FROM_PB.get(spec.hook)
        if hook is None:
            raise ValueError("it describes an unknown hook")
        hooks[hook] = HookSpec(
            MODE_FROM_PB.get(spec.mode, "intercept"),
            tuple(spec.subscriptions),
            tuple(spec.read_only_subscriptions),
        )
    return MiddlewareDescription(
        pb.middleware_key,
        hooks,
        "fail_open" if pb.failure_mode == _mw_pb2.FAILURE_MODE_OPEN else "fail_closed",
        pb.needs_context,
        tools=tuple(t.name for t in pb.tools),
    )
