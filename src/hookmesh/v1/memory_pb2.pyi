import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from hookmesh.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExtractionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXTRACTION_OUTCOME_UNSPECIFIED: _ClassVar[ExtractionOutcome]
    EXTRACTION_OUTCOME_EXTRACTED: _ClassVar[ExtractionOutcome]
    EXTRACTION_OUTCOME_NO_MODEL: _ClassVar[ExtractionOutcome]
    EXTRACTION_OUTCOME_FALLBACK: _ClassVar[ExtractionOutcome]

class AddOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ADD_OUTCOME_UNSPECIFIED: _ClassVar[AddOutcome]
    ADD_OUTCOME_CREATED: _ClassVar[AddOutcome]
    ADD_OUTCOME_MERGED: _ClassVar[AddOutcome]

class MemoryOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_ORIGIN_UNSPECIFIED: _ClassVar[MemoryOrigin]
    MEMORY_ORIGIN_FACT: _ClassVar[MemoryOrigin]
    MEMORY_ORIGIN_EXTRACTED: _ClassVar[MemoryOrigin]
    MEMORY_ORIGIN_VERBATIM: _ClassVar[MemoryOrigin]
EXTRACTION_OUTCOME_UNSPECIFIED: ExtractionOutcome
EXTRACTION_OUTCOME_EXTRACTED: ExtractionOutcome
EXTRACTION_OUTCOME_NO_MODEL: ExtractionOutcome
EXTRACTION_OUTCOME_FALLBACK: ExtractionOutcome
ADD_OUTCOME_UNSPECIFIED: AddOutcome
ADD_OUTCOME_CREATED: AddOutcome
ADD_OUTCOME_MERGED: AddOutcome
MEMORY_ORIGIN_UNSPECIFIED: MemoryOrigin
MEMORY_ORIGIN_FACT: MemoryOrigin
MEMORY_ORIGIN_EXTRACTED: MemoryOrigin
MEMORY_ORIGIN_VERBATIM: MemoryOrigin

class AddMemoriesRequest(_message.Message):
    __slots__ = ("scope", "facts", "messages", "metadata")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    facts: _containers.RepeatedScalarFieldContainer[str]
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    metadata: _struct_pb2.Struct
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., facts: _Optional[_Iterable[str]] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class MemoryScope(_message.Message):
    __slots__ = ("user_id", "agent_id", "session_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    agent_id: str
    session_id: str
    def __init__(self, user_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class AddMemoriesResponse(_message.Message):
    __slots__ = ("memories", "extraction")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[AddedMemory]
    extraction: ExtractionOutcome
    def __init__(self, memories: _Optional[_Iterable[_Union[AddedMemory, _Mapping]]] = ..., extraction: _Optional[_Union[ExtractionOutcome, str]] = ...) -> None: ...

class AddedMemory(_message.Message):
    __slots__ = ("memory", "outcome")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    outcome: AddOutcome
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., outcome: _Optional[_Union[AddOutcome, str]] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "text", "scope", "metadata", "create_time", "update_time", "source_message_ids", "origin")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    scope: MemoryScope
    metadata: _struct_pb2.Struct
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    source_message_ids: _containers.RepeatedScalarFieldContainer[str]
    origin: MemoryOrigin
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source_message_ids: _Optional[_Iterable[str]] = ..., origin: _Optional[_Union[MemoryOrigin, str]] = ...) -> None: ...

class SearchMemoriesRequest(_message.Message):
    __slots__ = ("query", "scope", "top_k", "score_threshold")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SCORE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    query: str
    scope: MemoryScope
    top_k: int
    score_threshold: float
    def __init__(self, query: _Optional[str] = ..., scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., top_k: _Optional[int] = ..., score_threshold: _Optional[float] = ...) -> None: ...

class SearchMemoriesResponse(_message.Message):
    __slots__ = ("hits",)
    HITS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[MemoryHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[MemoryHit, _Mapping]]] = ...) -> None: ...

class MemoryHit(_message.Message):
    __slots__ = ("memory", "score", "similarity", "rank")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    score: float
    similarity: float
    rank: int
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., score: _Optional[float] = ..., similarity: _Optional[float] = ..., rank: _Optional[int] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("scope", "page_size", "page_token")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    page_size: int
    page_token: str
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("user_id", "memory_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    memory_id: str
    def __init__(self, user_id: _Optional[str] = ..., memory_id: _Optional[str] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ("user_id", "memory_id", "text", "metadata")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    memory_id: str
    text: str
    metadata: _struct_pb2.Struct
    def __init__(self, user_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., text: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UpdateMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("user_id", "memory_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    memory_id: str
    def __init__(self, user_id: _Optional[str] = ..., memory_id: _Optional[str] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteAllMemoriesRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ...) -> None: ...

class DeleteAllMemoriesResponse(_message.Message):
    __slots__ = ("deleted_count",)
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_count: int
    def __init__(self, deleted_count: _Optional[int] = ...) -> None: ...
