from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReloadMiddlewaresRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReloadMiddlewaresResponse(_message.Message):
    __slots__ = ("generation", "middleware_keys", "draining_replies", "restart_keys")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MIDDLEWARE_KEYS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_REPLIES_FIELD_NUMBER: _ClassVar[int]
    RESTART_KEYS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    middleware_keys: _containers.RepeatedScalarFieldContainer[str]
    draining_replies: int
    restart_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, generation: _Optional[int] = ..., middleware_keys: _Optional[_Iterable[str]] = ..., draining_replies: _Optional[int] = ..., restart_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class ForgetUserRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class ForgetUserResponse(_message.Message):
    __slots__ = ("stores",)
    STORES_FIELD_NUMBER: _ClassVar[int]
    stores: _containers.RepeatedCompositeFieldContainer[ErasedStore]
    def __init__(self, stores: _Optional[_Iterable[_Union[ErasedStore, _Mapping]]] = ...) -> None: ...

class ErasedStore(_message.Message):
    __slots__ = ("store", "deleted_count")
    STORE_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    store: str
    deleted_count: int
    def __init__(self, store: _Optional[str] = ..., deleted_count: _Optional[int] = ...) -> None: ...

class ExportUserRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class ExportUserResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[ExportedRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[ExportedRecord, _Mapping]]] = ...) -> None: ...

class ExportedRecord(_message.Message):
    __slots__ = ("store", "json")
    STORE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    store: str
    json: str
    def __init__(self, store: _Optional[str] = ..., json: _Optional[str] = ...) -> None: ...
