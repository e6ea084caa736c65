import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
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

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATUS_UNSPECIFIED: _ClassVar[SessionStatus]
    SESSION_STATUS_IDLE: _ClassVar[SessionStatus]
    SESSION_STATUS_RUNNING: _ClassVar[SessionStatus]
    SESSION_STATUS_AWAITING_CONFIRMATION: _ClassVar[SessionStatus]
    SESSION_STATUS_AWAITING_EXTERNAL_EXECUTION: _ClassVar[SessionStatus]

class OutputStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_STRATEGY_UNSPECIFIED: _ClassVar[OutputStrategy]
    OUTPUT_STRATEGY_NATIVE: _ClassVar[OutputStrategy]
    OUTPUT_STRATEGY_TOOL: _ClassVar[OutputStrategy]

class Durability(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DURABILITY_UNSPECIFIED: _ClassVar[Durability]
    DURABILITY_STEP: _ClassVar[Durability]
    DURABILITY_EVENT: _ClassVar[Durability]
    DURABILITY_EXIT: _ClassVar[Durability]
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_IDLE: SessionStatus
SESSION_STATUS_RUNNING: SessionStatus
SESSION_STATUS_AWAITING_CONFIRMATION: SessionStatus
SESSION_STATUS_AWAITING_EXTERNAL_EXECUTION: SessionStatus
OUTPUT_STRATEGY_UNSPECIFIED: OutputStrategy
OUTPUT_STRATEGY_NATIVE: OutputStrategy
OUTPUT_STRATEGY_TOOL: OutputStrategy
DURABILITY_UNSPECIFIED: Durability
DURABILITY_STEP: Durability
DURABILITY_EVENT: Durability
DURABILITY_EXIT: Durability

class ReplyRequest(_message.Message):
    __slots__ = ("session_id", "messages", "options", "client_tools", "reply_id", "output_schema")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    options: ReplyOptions
    client_tools: _containers.RepeatedCompositeFieldContainer[ClientTool]
    reply_id: str
    output_schema: OutputSchema
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., options: _Optional[_Union[ReplyOptions, _Mapping]] = ..., client_tools: _Optional[_Iterable[_Union[ClientTool, _Mapping]]] = ..., reply_id: _Optional[str] = ..., output_schema: _Optional[_Union[OutputSchema, _Mapping]] = ...) -> None: ...

class OutputSchema(_message.Message):
    __slots__ = ("name", "schema", "description", "strategy", "max_retries")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema: _struct_pb2.Struct
    description: str
    strategy: OutputStrategy
    max_retries: int
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., description: _Optional[str] = ..., strategy: _Optional[_Union[OutputStrategy, str]] = ..., max_retries: _Optional[int] = ...) -> None: ...

class ClientTool(_message.Message):
    __slots__ = ("name", "description", "parameters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReplyOptions(_message.Message):
    __slots__ = ("max_iters", "tool_choice", "model", "durability", "limits")
    MAX_ITERS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DURABILITY_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    max_iters: int
    tool_choice: str
    model: str
    durability: Durability
    limits: ReplyLimits
    def __init__(self, max_iters: _Optional[int] = ..., tool_choice: _Optional[str] = ..., model: _Optional[str] = ..., durability: _Optional[_Union[Durability, str]] = ..., limits: _Optional[_Union[ReplyLimits, _Mapping]] = ...) -> None: ...

class ReplyLimits(_message.Message):
    __slots__ = ("tool_calls", "tokens", "cost_usd", "deadline")
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    tool_calls: int
    tokens: int
    cost_usd: float
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, tool_calls: _Optional[int] = ..., tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReplyResponse(_message.Message):
    __slots__ = ("event", "seq")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.AgentEvent
    seq: int
    def __init__(self, event: _Optional[_Union[_event_pb2.AgentEvent, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("session_id", "confirmations", "external_results", "client_tools", "limits")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATIONS_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    confirmations: _containers.RepeatedCompositeFieldContainer[ToolConfirmation]
    external_results: _containers.RepeatedCompositeFieldContainer[ExternalToolResult]
    client_tools: _containers.RepeatedCompositeFieldContainer[ClientTool]
    limits: ReplyLimits
    def __init__(self, session_id: _Optional[str] = ..., confirmations: _Optional[_Iterable[_Union[ToolConfirmation, _Mapping]]] = ..., external_results: _Optional[_Iterable[_Union[ExternalToolResult, _Mapping]]] = ..., client_tools: _Optional[_Iterable[_Union[ClientTool, _Mapping]]] = ..., limits: _Optional[_Union[ReplyLimits, _Mapping]] = ...) -> None: ...

class ToolConfirmation(_message.Message):
    __slots__ = ("call_id", "confirmed", "reason", "arguments")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    confirmed: bool
    reason: str
    arguments: str
    def __init__(self, call_id: _Optional[str] = ..., confirmed: _Optional[bool] = ..., reason: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class ExternalToolResult(_message.Message):
    __slots__ = ("call_id", "output", "state")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    output: _containers.RepeatedCompositeFieldContainer[_content_pb2.ContentBlock]
    state: _content_pb2.ToolResultState
    def __init__(self, call_id: _Optional[str] = ..., output: _Optional[_Iterable[_Union[_content_pb2.ContentBlock, _Mapping]]] = ..., state: _Optional[_Union[_content_pb2.ToolResultState, str]] = ...) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ("event", "seq")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.AgentEvent
    seq: int
    def __init__(self, event: _Optional[_Union[_event_pb2.AgentEvent, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class WatchReplyRequest(_message.Message):
    __slots__ = ("session_id", "reply_id", "after_seq")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reply_id: str
    after_seq: int
    def __init__(self, session_id: _Optional[str] = ..., reply_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchReplyResponse(_message.Message):
    __slots__ = ("event", "seq")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.AgentEvent
    seq: int
    def __init__(self, event: _Optional[_Union[_event_pb2.AgentEvent, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class InterruptRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class InterruptResponse(_message.Message):
    __slots__ = ("interrupted",)
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    interrupted: bool
    def __init__(self, interrupted: _Optional[bool] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "agent_name", "status", "context", "pending_calls", "create_time", "update_time", "reply_id", "last_seq")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PENDING_CALLS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    agent_name: str
    status: SessionStatus
    context: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    pending_calls: _containers.RepeatedCompositeFieldContainer[_message_pb2.ToolCall]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    reply_id: str
    last_seq: int
    def __init__(self, session_id: _Optional[str] = ..., agent_name: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., context: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., pending_calls: _Optional[_Iterable[_Union[_message_pb2.ToolCall, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reply_id: _Optional[str] = ..., last_seq: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeAgentRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeAgentResponse(_message.Message):
    __slots__ = ("agent_name", "description", "tools", "middleware_keys")
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MIDDLEWARE_KEYS_FIELD_NUMBER: _ClassVar[int]
    agent_name: str
    description: str
    tools: _containers.RepeatedCompositeFieldContainer[AgentTool]
    middleware_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_name: _Optional[str] = ..., description: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[AgentTool, _Mapping]]] = ..., middleware_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class AgentTool(_message.Message):
    __slots__ = ("name", "description", "middleware_key", "read_only", "needs_confirmation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MIDDLEWARE_KEY_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    NEEDS_CONFIRMATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    middleware_key: str
    read_only: bool
    needs_confirmation: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., middleware_key: _Optional[str] = ..., read_only: _Optional[bool] = ..., needs_confirmation: _Optional[bool] = ...) -> None: ...
