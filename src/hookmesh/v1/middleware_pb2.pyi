import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from hookmesh.v1 import content_pb2 as _content_pb2
from hookmesh.v1 import event_pb2 as _event_pb2
from hookmesh.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Hook(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_UNSPECIFIED: _ClassVar[Hook]
    HOOK_ON_REPLY: _ClassVar[Hook]
    HOOK_ON_REASONING: _ClassVar[Hook]
    HOOK_ON_MODEL_CALL: _ClassVar[Hook]
    HOOK_ON_ACTING: _ClassVar[Hook]
    HOOK_ON_CHECK_PERMISSION: _ClassVar[Hook]
    HOOK_ON_COMPRESS_CONTEXT: _ClassVar[Hook]
    HOOK_ON_SYSTEM_PROMPT: _ClassVar[Hook]
    HOOK_AFTER_AGENT: _ClassVar[Hook]

class HookMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_MODE_UNSPECIFIED: _ClassVar[HookMode]
    HOOK_MODE_INTERCEPT: _ClassVar[HookMode]
    HOOK_MODE_PRE_ONLY: _ClassVar[HookMode]
    HOOK_MODE_OBSERVE: _ClassVar[HookMode]

class FailureMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_MODE_UNSPECIFIED: _ClassVar[FailureMode]
    FAILURE_MODE_CLOSED: _ClassVar[FailureMode]
    FAILURE_MODE_OPEN: _ClassVar[FailureMode]

class MessageKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_KIND_UNSPECIFIED: _ClassVar[MessageKind]
    MESSAGE_KIND_FLAT: _ClassVar[MessageKind]
    MESSAGE_KIND_AGENTIC: _ClassVar[MessageKind]

class PermissionBehavior(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERMISSION_BEHAVIOR_UNSPECIFIED: _ClassVar[PermissionBehavior]
    PERMISSION_BEHAVIOR_ALLOW: _ClassVar[PermissionBehavior]
    PERMISSION_BEHAVIOR_DENY: _ClassVar[PermissionBehavior]
    PERMISSION_BEHAVIOR_ASK: _ClassVar[PermissionBehavior]
HOOK_UNSPECIFIED: Hook
HOOK_ON_REPLY: Hook
HOOK_ON_REASONING: Hook
HOOK_ON_MODEL_CALL: Hook
HOOK_ON_ACTING: Hook
HOOK_ON_CHECK_PERMISSION: Hook
HOOK_ON_COMPRESS_CONTEXT: Hook
HOOK_ON_SYSTEM_PROMPT: Hook
HOOK_AFTER_AGENT: Hook
HOOK_MODE_UNSPECIFIED: HookMode
HOOK_MODE_INTERCEPT: HookMode
HOOK_MODE_PRE_ONLY: HookMode
HOOK_MODE_OBSERVE: HookMode
FAILURE_MODE_UNSPECIFIED: FailureMode
FAILURE_MODE_CLOSED: FailureMode
FAILURE_MODE_OPEN: FailureMode
MESSAGE_KIND_UNSPECIFIED: MessageKind
MESSAGE_KIND_FLAT: MessageKind
MESSAGE_KIND_AGENTIC: MessageKind
PERMISSION_BEHAVIOR_UNSPECIFIED: PermissionBehavior
PERMISSION_BEHAVIOR_ALLOW: PermissionBehavior
PERMISSION_BEHAVIOR_DENY: PermissionBehavior
PERMISSION_BEHAVIOR_ASK: PermissionBehavior

class DescribeRequest(_message.Message):
    __slots__ = ("protocol_version",)
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    def __init__(self, protocol_version: _Optional[int] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("protocol_version", "middleware_key", "hooks", "needs_context", "tools", "failure_mode", "max_message_bytes")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MIDDLEWARE_KEY_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    NEEDS_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    middleware_key: str
    hooks: _containers.RepeatedCompositeFieldContainer[HookSpec]
    needs_context: bool
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    failure_mode: FailureMode
    max_message_bytes: int
    def __init__(self, protocol_version: _Optional[int] = ..., middleware_key: _Optional[str] = ..., hooks: _Optional[_Iterable[_Union[HookSpec, _Mapping]]] = ..., needs_context: _Optional[bool] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., failure_mode: _Optional[_Union[FailureMode, str]] = ..., max_message_bytes: _Optional[int] = ...) -> None: ...

class HookSpec(_message.Message):
    __slots__ = ("hook", "mode", "subscriptions", "read_only_subscriptions")
    HOOK_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    hook: Hook
    mode: HookMode
    subscriptions: _containers.RepeatedScalarFieldContainer[str]
    read_only_subscriptions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hook: _Optional[_Union[Hook, str]] = ..., mode: _Optional[_Union[HookMode, str]] = ..., subscriptions: _Optional[_Iterable[str]] = ..., read_only_subscriptions: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ("name", "description", "parameters", "read_only", "concurrency_safe", "return_directly", "needs_confirmation", "idempotent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_SAFE_FIELD_NUMBER: _ClassVar[int]
    RETURN_DIRECTLY_FIELD_NUMBER: _ClassVar[int]
    NEEDS_CONFIRMATION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    read_only: bool
    concurrency_safe: bool
    return_directly: bool
    needs_confirmation: bool
    idempotent: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., read_only: _Optional[bool] = ..., concurrency_safe: _Optional[bool] = ..., return_directly: _Optional[bool] = ..., needs_confirmation: _Optional[bool] = ..., idempotent: _Optional[bool] = ...) -> None: ...

class InterceptRequest(_message.Message):
    __slots__ = ("invocation_id", "invocation", "item", "outcome", "cancel")
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    INVOCATION_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    invocation_id: str
    invocation: HookInvocation
    item: DownstreamItem
    outcome: DownstreamOutcome
    cancel: CancelInvocation
    def __init__(self, invocation_id: _Optional[str] = ..., invocation: _Optional[_Union[HookInvocation, _Mapping]] = ..., item: _Optional[_Union[DownstreamItem, _Mapping]] = ..., outcome: _Optional[_Union[DownstreamOutcome, _Mapping]] = ..., cancel: _Optional[_Union[CancelInvocation, _Mapping]] = ...) -> None: ...

class InterceptResponse(_message.Message):
    __slots__ = ("invocation_id", "call_next", "emit", "mutate", "verdict", "done")
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_NEXT_FIELD_NUMBER: _ClassVar[int]
    EMIT_FIELD_NUMBER: _ClassVar[int]
    MUTATE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    invocation_id: str
    call_next: CallNext
    emit: _event_pb2.AgentEvent
    mutate: StateMutation
    verdict: ItemVerdict
    done: HookDone
    def __init__(self, invocation_id: _Optional[str] = ..., call_next: _Optional[_Union[CallNext, _Mapping]] = ..., emit: _Optional[_Union[_event_pb2.AgentEvent, _Mapping]] = ..., mutate: _Optional[_Union[StateMutation, _Mapping]] = ..., verdict: _Optional[_Union[ItemVerdict, _Mapping]] = ..., done: _Optional[_Union[HookDone, _Mapping]] = ...) -> None: ...

class HookInvocation(_message.Message):
    __slots__ = ("hook", "reply_id", "agent_name", "session_id", "kind", "state", "context", "trace_context", "message_timeout", "user_id", "reply", "reasoning", "model_call", "acting", "check_permission", "compress_context")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HOOK_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_FIELD_NUMBER: _ClassVar[int]
    ACTING_FIELD_NUMBER: _ClassVar[int]
    CHECK_PERMISSION_FIELD_NUMBER: _ClassVar[int]
    COMPRESS_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    hook: Hook
    reply_id: str
    agent_name: str
    session_id: str
    kind: MessageKind
    state: _struct_pb2.Struct
    context: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    trace_context: _containers.ScalarMap[str, str]
    message_timeout: _duration_pb2.Duration
    user_id: str
    reply: ReplyArgs
    reasoning: ReasoningArgs
    model_call: ModelCallArgs
    acting: ActingArgs
    check_permission: CheckPermissionArgs
    compress_context: CompressContextArgs
    def __init__(self, hook: _Optional[_Union[Hook, str]] = ..., reply_id: _Optional[str] = ..., agent_name: _Optional[str] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[MessageKind, str]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., context: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., message_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., user_id: _Optional[str] = ..., reply: _Optional[_Union[ReplyArgs, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningArgs, _Mapping]] = ..., model_call: _Optional[_Union[ModelCallArgs, _Mapping]] = ..., acting: _Optional[_Union[ActingArgs, _Mapping]] = ..., check_permission: _Optional[_Union[CheckPermissionArgs, _Mapping]] = ..., compress_context: _Optional[_Union[CompressContextArgs, _Mapping]] = ...) -> None: ...

class ReplyArgs(_message.Message):
    __slots__ = ("inputs", "resume")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    resume: bool
    def __init__(self, inputs: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., resume: _Optional[bool] = ...) -> None: ...

class ReasoningArgs(_message.Message):
    __slots__ = ("tool_choice",)
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    tool_choice: str
    def __init__(self, tool_choice: _Optional[str] = ...) -> None: ...

class ModelCallArgs(_message.Message):
    __slots__ = ("model_name", "messages", "tools", "tool_choice", "provider_name")
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_NAME_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    tool_choice: str
    provider_name: str
    def __init__(self, model_name: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., provider_name: _Optional[str] = ...) -> None: ...

class ActingArgs(_message.Message):
    __slots__ = ("tool_call", "tool")
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool_call: _message_pb2.ToolCall
    tool: ToolSpec
    def __init__(self, tool_call: _Optional[_Union[_message_pb2.ToolCall, _Mapping]] = ..., tool: _Optional[_Union[ToolSpec, _Mapping]] = ...) -> None: ...

class CheckPermissionArgs(_message.Message):
    __slots__ = ("tool_call", "tool")
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool_call: _message_pb2.ToolCall
    tool: ToolSpec
    def __init__(self, tool_call: _Optional[_Union[_message_pb2.ToolCall, _Mapping]] = ..., tool: _Optional[_Union[ToolSpec, _Mapping]] = ...) -> None: ...

class CompressContextArgs(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CallNext(_message.Message):
    __slots__ = ("reasoning", "model_call", "acting", "final")
    REASONING_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_FIELD_NUMBER: _ClassVar[int]
    ACTING_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    reasoning: ReasoningOverrides
    model_call: ModelCallOverrides
    acting: ActingOverrides
    final: bool
    def __init__(self, reasoning: _Optional[_Union[ReasoningOverrides, _Mapping]] = ..., model_call: _Optional[_Union[ModelCallOverrides, _Mapping]] = ..., acting: _Optional[_Union[ActingOverrides, _Mapping]] = ..., final: _Optional[bool] = ...) -> None: ...

class ReasoningOverrides(_message.Message):
    __slots__ = ("tool_choice",)
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    tool_choice: str
    def __init__(self, tool_choice: _Optional[str] = ...) -> None: ...

class ModelCallOverrides(_message.Message):
    __slots__ = ("tool_choice", "messages", "tools", "model")
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    tool_choice: str
    messages: MessageList
    tools: ToolNameList
    model: str
    def __init__(self, tool_choice: _Optional[str] = ..., messages: _Optional[_Union[MessageList, _Mapping]] = ..., tools: _Optional[_Union[ToolNameList, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class ToolNameList(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class ActingOverrides(_message.Message):
    __slots__ = ("arguments",)
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    def __init__(self, arguments: _Optional[str] = ...) -> None: ...

class MessageList(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ...) -> None: ...

class DownstreamItem(_message.Message):
    __slots__ = ("state", "event", "chunk", "more_events")
    STATE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    MORE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    state: _struct_pb2.Struct
    event: _event_pb2.AgentEvent
    chunk: ModelChunk
    more_events: _containers.RepeatedCompositeFieldContainer[_event_pb2.AgentEvent]
    def __init__(self, state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., event: _Optional[_Union[_event_pb2.AgentEvent, _Mapping]] = ..., chunk: _Optional[_Union[ModelChunk, _Mapping]] = ..., more_events: _Optional[_Iterable[_Union[_event_pb2.AgentEvent, _Mapping]]] = ...) -> None: ...

class ModelChunk(_message.Message):
    __slots__ = ("text", "reasoning", "tool_call", "usage", "stop_reason", "response_id")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    text: str
    reasoning: str
    tool_call: ToolCallDelta
    usage: _message_pb2.Usage
    stop_reason: str
    response_id: str
    def __init__(self, text: _Optional[str] = ..., reasoning: _Optional[str] = ..., tool_call: _Optional[_Union[ToolCallDelta, _Mapping]] = ..., usage: _Optional[_Union[_message_pb2.Usage, _Mapping]] = ..., stop_reason: _Optional[str] = ..., response_id: _Optional[str] = ...) -> None: ...

class ToolCallDelta(_message.Message):
    __slots__ = ("call_id", "name", "arguments")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    arguments: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class ModelResponse(_message.Message):
    __slots__ = ("message", "usage", "stop_reason", "response_id")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    message: _message_pb2.Message
    usage: _message_pb2.Usage
    stop_reason: str
    response_id: str
    def __init__(self, message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., usage: _Optional[_Union[_message_pb2.Usage, _Mapping]] = ..., stop_reason: _Optional[str] = ..., response_id: _Optional[str] = ...) -> None: ...

class PermissionDecision(_message.Message):
    __slots__ = ("behavior", "reason")
    BEHAVIOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    behavior: PermissionBehavior
    reason: str
    def __init__(self, behavior: _Optional[_Union[PermissionBehavior, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class DownstreamOutcome(_message.Message):
    __slots__ = ("state", "stream_end", "model_response", "stream_start", "permission", "error", "context")
    STATE_FIELD_NUMBER: _ClassVar[int]
    STREAM_END_FIELD_NUMBER: _ClassVar[int]
    MODEL_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    STREAM_START_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    state: _struct_pb2.Struct
    stream_end: StreamEnd
    model_response: ModelResponse
    stream_start: StreamStart
    permission: PermissionDecision
    error: _event_pb2.ReplyError
    context: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    def __init__(self, state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., stream_end: _Optional[_Union[StreamEnd, _Mapping]] = ..., model_response: _Optional[_Union[ModelResponse, _Mapping]] = ..., stream_start: _Optional[_Union[StreamStart, _Mapping]] = ..., permission: _Optional[_Union[PermissionDecision, _Mapping]] = ..., error: _Optional[_Union[_event_pb2.ReplyError, _Mapping]] = ..., context: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ...) -> None: ...

class StreamEnd(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StreamStart(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CancelInvocation(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ItemVerdict(_message.Message):
    __slots__ = ("drop", "final")
    DROP_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    drop: bool
    final: bool
    def __init__(self, drop: _Optional[bool] = ..., final: _Optional[bool] = ...) -> None: ...

class HookDone(_message.Message):
    __slots__ = ("model_response", "permission", "error")
    MODEL_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    model_response: ModelResponse
    permission: PermissionDecision
    error: _event_pb2.ReplyError
    def __init__(self, model_response: _Optional[_Union[ModelResponse, _Mapping]] = ..., permission: _Optional[_Union[PermissionDecision, _Mapping]] = ..., error: _Optional[_Union[_event_pb2.ReplyError, _Mapping]] = ...) -> None: ...

class StateMutation(_message.Message):
    __slots__ = ("state", "append_messages", "remove_message_ids", "replace_context")
    STATE_FIELD_NUMBER: _ClassVar[int]
    APPEND_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    state: _struct_pb2.Struct
    append_messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    remove_message_ids: _containers.RepeatedScalarFieldContainer[str]
    replace_context: MessageList
    def __init__(self, state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., append_messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., remove_message_ids: _Optional[_Iterable[str]] = ..., replace_context: _Optional[_Union[MessageList, _Mapping]] = ...) -> None: ...

class TransformSystemPromptRequest(_message.Message):
    __slots__ = ("prompt", "reply_id", "agent_name", "state", "user_id")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    reply_id: str
    agent_name: str
    state: _struct_pb2.Struct
    user_id: str
    def __init__(self, prompt: _Optional[str] = ..., reply_id: _Optional[str] = ..., agent_name: _Optional[str] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., user_id: _Optional[str] = ...) -> None: ...

class TransformSystemPromptResponse(_message.Message):
    __slots__ = ("prompt", "mutation")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    mutation: StateMutation
    def __init__(self, prompt: _Optional[str] = ..., mutation: _Optional[_Union[StateMutation, _Mapping]] = ...) -> None: ...

class AfterAgentRequest(_message.Message):
    __slots__ = ("reply_id", "agent_name", "session_id", "kind", "final_message", "state", "context", "user_id", "output")
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FINAL_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    reply_id: str
    agent_name: str
    session_id: str
    kind: MessageKind
    final_message: _message_pb2.Message
    state: _struct_pb2.Struct
    context: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    user_id: str
    output: _event_pb2.StructuredOutput
    def __init__(self, reply_id: _Optional[str] = ..., agent_name: _Optional[str] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[MessageKind, str]] = ..., final_message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., context: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., user_id: _Optional[str] = ..., output: _Optional[_Union[_event_pb2.StructuredOutput, _Mapping]] = ...) -> None: ...

class AfterAgentResponse(_message.Message):
    __slots__ = ("mutation",)
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    mutation: StateMutation
    def __init__(self, mutation: _Optional[_Union[StateMutation, _Mapping]] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ("name", "arguments", "call_id", "reply_id", "agent_name", "session_id", "user_id", "kind", "state", "context", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments: str
    call_id: str
    reply_id: str
    agent_name: str
    session_id: str
    user_id: str
    kind: MessageKind
    state: _struct_pb2.Struct
    context: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[str] = ..., call_id: _Optional[str] = ..., reply_id: _Optional[str] = ..., agent_name: _Optional[str] = ..., session_id: _Optional[str] = ..., user_id: _Optional[str] = ..., kind: _Optional[_Union[MessageKind, str]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., context: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("text", "media", "end", "event", "mutate", "error")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    MUTATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    text: str
    media: _content_pb2.ContentBlock
    end: _content_pb2.ToolResultState
    event: _event_pb2.AgentEvent
    mutate: StateMutation
    error: _event_pb2.ReplyError
    def __init__(self, text: _Optional[str] = ..., media: _Optional[_Union[_content_pb2.ContentBlock, _Mapping]] = ..., end: _Optional[_Union[_content_pb2.ToolResultState, str]] = ..., event: _Optional[_Union[_event_pb2.AgentEvent, _Mapping]] = ..., mutate: _Optional[_Union[StateMutation, _Mapping]] = ..., error: _Optional[_Union[_event_pb2.ReplyError, _Mapping]] = ...) -> None: ...
