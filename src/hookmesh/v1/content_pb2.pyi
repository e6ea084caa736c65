from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolResultState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_RESULT_STATE_UNSPECIFIED: _ClassVar[ToolResultState]
    TOOL_RESULT_STATE_SUCCESS: _ClassVar[ToolResultState]
    TOOL_RESULT_STATE_ERROR: _ClassVar[ToolResultState]
    TOOL_RESULT_STATE_INTERRUPTED: _ClassVar[ToolResultState]
    TOOL_RESULT_STATE_DENIED: _ClassVar[ToolResultState]
TOOL_RESULT_STATE_UNSPECIFIED: ToolResultState
TOOL_RESULT_STATE_SUCCESS: ToolResultState
TOOL_RESULT_STATE_ERROR: ToolResultState
TOOL_RESULT_STATE_INTERRUPTED: ToolResultState
TOOL_RESULT_STATE_DENIED: ToolResultState

class ContentBlock(_message.Message):
    __slots__ = ("id", "text", "reasoning", "image", "audio", "video", "document", "tool_call", "tool_result", "hint")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: TextBlock
    reasoning: ReasoningBlock
    image: MediaBlock
    audio: MediaBlock
    video: MediaBlock
    document: MediaBlock
    tool_call: ToolCallBlock
    tool_result: ToolResultBlock
    hint: HintBlock
    def __init__(self, id: _Optional[str] = ..., text: _Optional[_Union[TextBlock, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningBlock, _Mapping]] = ..., image: _Optional[_Union[MediaBlock, _Mapping]] = ..., audio: _Optional[_Union[MediaBlock, _Mapping]] = ..., video: _Optional[_Union[MediaBlock, _Mapping]] = ..., document: _Optional[_Union[MediaBlock, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallBlock, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultBlock, _Mapping]] = ..., hint: _Optional[_Union[HintBlock, _Mapping]] = ...) -> None: ...

class TextBlock(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ReasoningBlock(_message.Message):
    __slots__ = ("text", "signature")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    text: str
    signature: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class MediaBlock(_message.Message):
    __slots__ = ("source", "name", "metadata")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    source: MediaSource
    name: str
    metadata: _struct_pb2.Struct
    def __init__(self, source: _Optional[_Union[MediaSource, _Mapping]] = ..., name: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class MediaSource(_message.Message):
    __slots__ = ("inline", "url")
    INLINE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    inline: InlineData
    url: UrlRef
    def __init__(self, inline: _Optional[_Union[InlineData, _Mapping]] = ..., url: _Optional[_Union[UrlRef, _Mapping]] = ...) -> None: ...

class InlineData(_message.Message):
    __slots__ = ("data", "mime_type")
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    def __init__(self, data: _Optional[bytes] = ..., mime_type: _Optional[str] = ...) -> None: ...

class UrlRef(_message.Message):
    __slots__ = ("url", "mime_type")
    URL_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    url: str
    mime_type: str
    def __init__(self, url: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class ToolCallBlock(_message.Message):
    __slots__ = ("call_id", "name", "arguments")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    arguments: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class ToolResultBlock(_message.Message):
    __slots__ = ("call_id", "name", "output", "state")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    output: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    state: ToolResultState
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., output: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., state: _Optional[_Union[ToolResultState, str]] = ...) -> None: ...

class HintBlock(_message.Message):
    __slots__ = ("text", "source")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    text: str
    source: str
    def __init__(self, text: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...
