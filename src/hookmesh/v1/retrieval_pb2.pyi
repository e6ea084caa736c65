import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
SEARCH_MODE_HYBRID: SearchMode

class CreateKnowledgeBaseRequest(_message.Message):
    __slots__ = ("name", "description", "chunking")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    chunking: ChunkingOptions
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., chunking: _Optional[_Union[ChunkingOptions, _Mapping]] = ...) -> None: ...

class ChunkingOptions(_message.Message):
    __slots__ = ("max_tokens", "overlap_tokens")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    overlap_tokens: int
    def __init__(self, max_tokens: _Optional[int] = ..., overlap_tokens: _Optional[int] = ...) -> None: ...

class CreateKnowledgeBaseResponse(_message.Message):
    __slots__ = ("knowledge_base",)
    KNOWLEDGE_BASE_FIELD_NUMBER: _ClassVar[int]
    knowledge_base: KnowledgeBase
    def __init__(self, knowledge_base: _Optional[_Union[KnowledgeBase, _Mapping]] = ...) -> None: ...

class KnowledgeBase(_message.Message):
    __slots__ = ("name", "description", "chunking", "embedder", "document_count", "chunk_count", "create_time", "dimension", "owner")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    chunking: ChunkingOptions
    embedder: str
    document_count: int
    chunk_count: int
    create_time: _timestamp_pb2.Timestamp
    dimension: int
    owner: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., chunking: _Optional[_Union[ChunkingOptions, _Mapping]] = ..., embedder: _Optional[str] = ..., document_count: _Optional[int] = ..., chunk_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dimension: _Optional[int] = ..., owner: _Optional[str] = ...) -> None: ...

class ListKnowledgeBasesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListKnowledgeBasesResponse(_message.Message):
    __slots__ = ("knowledge_bases",)
    KNOWLEDGE_BASES_FIELD_NUMBER: _ClassVar[int]
    knowledge_bases: _containers.RepeatedCompositeFieldContainer[KnowledgeBase]
    def __init__(self, knowledge_bases: _Optional[_Iterable[_Union[KnowledgeBase, _Mapping]]] = ...) -> None: ...

class DeleteKnowledgeBaseRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteKnowledgeBaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("knowledge_base", "document")
    KNOWLEDGE_BASE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    knowledge_base: str
    document: Document
    def __init__(self, knowledge_base: _Optional[str] = ..., document: _Optional[_Union[Document, _Mapping]] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("id", "title", "text", "metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    text: str
    metadata: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., text: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("received_count", "ingested_count", "chunk_count", "ingested_ids", "errors", "unchanged_count")
    RECEIVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    INGESTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    INGESTED_IDS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_COUNT_FIELD_NUMBER: _ClassVar[int]
    received_count: int
    ingested_count: int
    chunk_count: int
    ingested_ids: _containers.RepeatedScalarFieldContainer[str]
    errors: _containers.RepeatedCompositeFieldContainer[DocumentError]
    unchanged_count: int
    def __init__(self, received_count: _Optional[int] = ..., ingested_count: _Optional[int] = ..., chunk_count: _Optional[int] = ..., ingested_ids: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[_Union[DocumentError, _Mapping]]] = ..., unchanged_count: _Optional[int] = ...) -> None: ...

class DocumentError(_message.Message):
    __slots__ = ("document_id", "index", "reason", "message")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    index: int
    reason: str
    message: str
    def __init__(self, document_id: _Optional[str] = ..., index: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "knowledge_bases", "top_k", "score_threshold", "metadata_filter", "mode")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    KNOWLEDGE_BASES_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SCORE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FILTER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    query: str
    knowledge_bases: _containers.RepeatedScalarFieldContainer[str]
    top_k: int
    score_threshold: float
    metadata_filter: _struct_pb2.Struct
    mode: SearchMode
    def __init__(self, query: _Optional[str] = ..., knowledge_bases: _Optional[_Iterable[str]] = ..., top_k: _Optional[int] = ..., score_threshold: _Optional[float] = ..., metadata_filter: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., mode: _Optional[_Union[SearchMode, str]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits",)
    HITS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("knowledge_base", "document_id", "chunk_id", "text", "score", "rank", "metadata", "start", "end")
    KNOWLEDGE_BASE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    knowledge_base: str
    document_id: str
    chunk_id: str
    text: str
    score: float
    rank: int
    metadata: _struct_pb2.Struct
    start: int
    end: int
    def __init__(self, knowledge_base: _Optional[str] = ..., document_id: _Optional[str] = ..., chunk_id: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("knowledge_base", "document_id")
    KNOWLEDGE_BASE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    knowledge_base: str
    document_id: str
    def __init__(self, knowledge_base: _Optional[str] = ..., document_id: _Optional[str] = ...) -> None: ...

class GetDocumentResponse(_message.Message):
    __slots__ = ("document", "chunk_count", "create_time", "update_time")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    document: Document
    chunk_count: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ..., chunk_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("knowledge_base", "document_id")
    KNOWLEDGE_BASE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    knowledge_base: str
    document_id: str
    def __init__(self, knowledge_base: _Optional[str] = ..., document_id: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListUserDocumentsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListUserDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[UserDocument]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[UserDocument, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UserDocument(_message.Message):
    __slots__ = ("knowledge_base", "stored")
    KNOWLEDGE_BASE_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    knowledge_base: str
    stored: GetDocumentResponse
    def __init__(self, knowledge_base: _Optional[str] = ..., stored: _Optional[_Union[GetDocumentResponse, _Mapping]] = ...) -> None: ...

class DeleteUserDocumentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteUserDocumentsResponse(_message.Message):
    __slots__ = ("deleted_count",)
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_count: int
    def __init__(self, deleted_count: _Optional[int] = ...) -> None: ...
