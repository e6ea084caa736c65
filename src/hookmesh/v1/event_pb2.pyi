from google.protobuf import struct_pb2 as _struct_pb2
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_COMPLETED: _ClassVar[FinishReason]
    FINISH_REASON_INTERRUPTED: _ClassVar[FinishReason]
    FINISH_REASON_EXCEED_MAX_ITERS: _ClassVar[FinishReason]
    FINISH_REASON_ERROR: _ClassVar[FinishReason]
    FINISH_REASON_AWAITING_CONFIRMATION: _ClassVar[FinishReason]
    FINISH_REASON_AWAITING_EXTERNAL_EXECUTION: _ClassVar[FinishReason]
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_COMPLETED: FinishReason
FINISH_REASON_INTERRUPTED: FinishReason
FINISH_REASON_EXCEED_MAX_ITERS: FinishReason
FINISH_REASON_ERROR: FinishReason
FINISH_REASON_AWAITING_CONFIRMATION: FinishReason
FINISH_REASON_AWAITING_EXTERNAL_EXECUTION: FinishReason

class AgentEvent(_message.Message):
    __slots__ = ("reply_id", "reply_start", "reply_end", "model_call_start", "model_call_end", "text_block_start", "text_block_delta", "text_block_end", "reasoning_block_start", "reasoning_block_delta", "reasoning_block_end", "tool_call_start", "tool_call_delta", "tool_call_end", "tool_result_start", "tool_result_delta", "tool_result_end", "data_block_start", "data_block_delta", "data_block_end", "hint_block", "require_user_confirm", "require_external_execution", "custom", "source_path")
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_START_FIELD_NUMBER: _ClassVar[int]
    REPLY_END_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_START_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_END_FIELD_NUMBER: _ClassVar[int]
    TEXT_BLOCK_START_FIELD_NUMBER: _ClassVar[int]
    TEXT_BLOCK_DELTA_FIELD_NUMBER: _ClassVar[int]
    TEXT_BLOCK_END_FIELD_NUMBER: _ClassVar[int]
    REASONING_BLOCK_START_FIELD_NUMBER: _ClassVar[int]
    REASONING_BLOCK_DELTA_FIELD_NUMBER: _ClassVar[int]
    REASONING_BLOCK_END_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_START_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_END_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_START_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_END_FIELD_NUMBER: _ClassVar[int]
    DATA_BLOCK_START_FIELD_NUMBER: _ClassVar[int]
    DATA_BLOCK_DELTA_FIELD_NUMBER: _ClassVar[int]
    DATA_BLOCK_END_FIELD_NUMBER: _ClassVar[int]
    HINT_BLOCK_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_USER_CONFIRM_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_EXTERNAL_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PATH_FIELD_NUMBER: _ClassVar[int]
    reply_id: str
    reply_start: ReplyStartEvent
    reply_end: ReplyEndEvent
    model_call_start: ModelCallStartEvent
    model_call_end: ModelCallEndEvent
    text_block_start: TextBlockStartEvent
    text_block_delta: TextBlockDeltaEvent
    text_block_end: TextBlockEndEvent
    reasoning_block_start: ReasoningBlockStartEvent
    reasoning_block_delta: ReasoningBlockDeltaEvent
    reasoning_block_end: ReasoningBlockEndEvent
    tool_call_start: ToolCallStartEvent
    tool_call_delta: ToolCallDeltaEvent
    tool_call_end: ToolCallEndEvent
    tool_result_start: ToolResultStartEvent
    tool_result_delta: ToolResultDeltaEvent
    tool_result_end: ToolResultEndEvent
    data_block_start: DataBlockStartEvent
    data_block_delta: DataBlockDeltaEvent
    data_block_end: DataBlockEndEvent
    hint_block: HintBlockEvent
    require_user_confirm: RequireUserConfirmEvent
    require_external_execution: RequireExternalExecutionEvent
    custom: CustomEvent
    source_path: _containers.RepeatedCompositeFieldContainer[EventSource]
    def __init__(self, reply_id: _Optional[str] = ..., reply_start: _Optional[_Union[ReplyStartEvent, _Mapping]] = ..., reply_end: _Optional[_Union[ReplyEndEvent, _Mapping]] = ..., model_call_start: _Optional[_Union[ModelCallStartEvent, _Mapping]] = ..., model_call_end: _Optional[_Union[ModelCallEndEvent, _Mapping]] = ..., text_block_start: _Optional[_Union[TextBlockStartEvent, _Mapping]] = ..., text_block_delta: _Optional[_Union[TextBlockDeltaEvent, _Mapping]] = ..., text_block_end: _Optional[_Union[TextBlockEndEvent, _Mapping]] = ..., reasoning_block_start: _Optional[_Union[ReasoningBlockStartEvent, _Mapping]] = ..., reasoning_block_delta: _Optional[_Union[ReasoningBlockDeltaEvent, _Mapping]] = ..., reasoning_block_end: _Optional[_Union[ReasoningBlockEndEvent, _Mapping]] = ..., tool_call_start: _Optional[_Union[ToolCallStartEvent, _Mapping]] = ..., tool_call_delta: _Optional[_Union[ToolCallDeltaEvent, _Mapping]] = ..., tool_call_end: _Optional[_Union[ToolCallEndEvent, _Mapping]] = ..., tool_result_start: _Optional[_Union[ToolResultStartEvent, _Mapping]] = ..., tool_result_delta: _Optional[_Union[ToolResultDeltaEvent, _Mapping]] = ..., tool_result_end: _Optional[_Union[ToolResultEndEvent, _Mapping]] = ..., data_block_start: _Optional[_Union[DataBlockStartEvent, _Mapping]] = ..., data_block_delta: _Optional[_Union[DataBlockDeltaEvent, _Mapping]] = ..., data_block_end: _Optional[_Union[DataBlockEndEvent, _Mapping]] = ..., hint_block: _Optional[_Union[HintBlockEvent, _Mapping]] = ..., require_user_confirm: _Optional[_Union[RequireUserConfirmEvent, _Mapping]] = ..., require_external_execution: _Optional[_Union[RequireExternalExecutionEvent, _Mapping]] = ..., custom: _Optional[_Union[CustomEvent, _Mapping]] = ..., source_path: _Optional[_Iterable[_Union[EventSource, _Mapping]]] = ...) -> None: ...

class EventSource(_message.Message):
    __slots__ = ("call_id", "tool_name", "agent_name", "run_id")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    tool_name: str
    agent_name: str
    run_id: str
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., agent_name: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class ReplyStartEvent(_message.Message):
    __slots__ = ("session_id", "agent_name")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    agent_name: str
    def __init__(self, session_id: _Optional[str] = ..., agent_name: _Optional[str] = ...) -> None: ...

class ReplyEndEvent(_message.Message):
    __slots__ = ("finish_reason", "error", "session_id", "output")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    finish_reason: FinishReason
    error: ReplyError
    session_id: str
    output: StructuredOutput
    def __init__(self, finish_reason: _Optional[_Union[FinishReason, str]] = ..., error: _Optional[_Union[ReplyError, _Mapping]] = ..., session_id: _Optional[str] = ..., output: _Optional[_Union[StructuredOutput, _Mapping]] = ...) -> None: ...

class StructuredOutput(_message.Message):
    __slots__ = ("value", "schema_name")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_NAME_FIELD_NUMBER: _ClassVar[int]
    value: _struct_pb2.Value
    schema_name: str
    def __init__(self, value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., schema_name: _Optional[str] = ...) -> None: ...

class ReplyError(_message.Message):
    __slots__ = ("reason", "message", "source", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    source: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ..., source: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ModelCallStartEvent(_message.Message):
    __slots__ = ("model_name",)
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    def __init__(self, model_name: _Optional[str] = ...) -> None: ...

class ModelCallEndEvent(_message.Message):
    __slots__ = ("model_name", "usage", "stop_reason", "response_id")
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    usage: _message_pb2.Usage
    stop_reason: str
    response_id: str
    def __init__(self, model_name: _Optional[str] = ..., usage: _Optional[_Union[_message_pb2.Usage, _Mapping]] = ..., stop_reason: _Optional[str] = ..., response_id: _Optional[str] = ...) -> None: ...

class TextBlockStartEvent(_message.Message):
    __slots__ = ("block_id",)
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    def __init__(self, block_id: _Optional[str] = ...) -> None: ...

class TextBlockDeltaEvent(_message.Message):
    __slots__ = ("block_id", "delta")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    delta: str
    def __init__(self, block_id: _Optional[str] = ..., delta: _Optional[str] = ...) -> None: ...

class TextBlockEndEvent(_message.Message):
    __slots__ = ("block_id",)
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    def __init__(self, block_id: _Optional[str] = ...) -> None: ...

class ReasoningBlockStartEvent(_message.Message):
    __slots__ = ("block_id",)
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    def __init__(self, block_id: _Optional[str] = ...) -> None: ...

class ReasoningBlockDeltaEvent(_message.Message):
    __slots__ = ("block_id", "delta")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    delta: str
    def __init__(self, block_id: _Optional[str] = ..., delta: _Optional[str] = ...) -> None: ...

class ReasoningBlockEndEvent(_message.Message):
    __slots__ = ("block_id",)
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    def __init__(self, block_id: _Optional[str] = ...) -> None: ...

class ToolCallStartEvent(_message.Message):
    __slots__ = ("call_id", "name")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolCallDeltaEvent(_message.Message):
    __slots__ = ("call_id", "delta")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    delta: str
    def __init__(self, call_id: _Optional[str] = ..., delta: _Optional[str] = ...) -> None: ...

class ToolCallEndEvent(_message.Message):
    __slots__ = ("call_id",)
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    def __init__(self, call_id: _Optional[str] = ...) -> None: ...

class ToolResultStartEvent(_message.Message):
    __slots__ = ("call_id", "name")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolResultDeltaEvent(_message.Message):
    __slots__ = ("call_id", "text", "media")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    text: str
    media: _content_pb2.ContentBlock
    def __init__(self, call_id: _Optional[str] = ..., text: _Optional[str] = ..., media: _Optional[_Union[_content_pb2.ContentBlock, _Mapping]] = ...) -> None: ...

class ToolResultEndEvent(_message.Message):
    __slots__ = ("call_id", "state")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    state: _content_pb2.ToolResultState
    def __init__(self, call_id: _Optional[str] = ..., state: _Optional[_Union[_content_pb2.ToolResultState, str]] = ...) -> None: ...

class DataBlockStartEvent(_message.Message):
    __slots__ = ("block_id", "media_type", "name")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    media_type: str
    name: str
    def __init__(self, block_id: _Optional[str] = ..., media_type: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DataBlockDeltaEvent(_message.Message):
    __slots__ = ("block_id", "data")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    data: bytes
    def __init__(self, block_id: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class DataBlockEndEvent(_message.Message):
    __slots__ = ("block_id",)
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    def __init__(self, block_id: _Optional[str] = ...) -> None: ...

class HintBlockEvent(_message.Message):
    __slots__ = ("block_id", "hint")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    block_id: str
    hint: _content_pb2.HintBlock
    def __init__(self, block_id: _Optional[str] = ..., hint: _Optional[_Union[_content_pb2.HintBlock, _Mapping]] = ...) -> None: ...

class RequireUserConfirmEvent(_message.Message):
    __slots__ = ("tool_calls", "reason")
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    tool_calls: _containers.RepeatedCompositeFieldContainer[_message_pb2.ToolCall]
    reason: str
    def __init__(self, tool_calls: _Optional[_Iterable[_Union[_message_pb2.ToolCall, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class RequireExternalExecutionEvent(_message.Message):
    __slots__ = ("tool_calls",)
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    tool_calls: _containers.RepeatedCompositeFieldContainer[_message_pb2.ToolCall]
    def __init__(self, tool_calls: _Optional[_Iterable[_Union[_message_pb2.ToolCall, _Mapping]]] = ...) -> None: ...

class CustomEvent(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: _struct_pb2.Value
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
