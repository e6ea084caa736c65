import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RolloutMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLLOUT_MODE_UNSPECIFIED: _ClassVar[RolloutMode]
    ROLLOUT_MODE_SHADOW: _ClassVar[RolloutMode]
    ROLLOUT_MODE_CANARY: _ClassVar[RolloutMode]

class RolloutState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLLOUT_STATE_UNSPECIFIED: _ClassVar[RolloutState]
    ROLLOUT_STATE_ACTIVE: _ClassVar[RolloutState]
    ROLLOUT_STATE_PROMOTED: _ClassVar[RolloutState]
    ROLLOUT_STATE_ROLLED_BACK: _ClassVar[RolloutState]

class SidecarRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SIDECAR_ROLE_UNSPECIFIED: _ClassVar[SidecarRole]
    SIDECAR_ROLE_LIVE: _ClassVar[SidecarRole]
    SIDECAR_ROLE_CANDIDATE: _ClassVar[SidecarRole]
ROLLOUT_MODE_UNSPECIFIED: RolloutMode
ROLLOUT_MODE_SHADOW: RolloutMode
ROLLOUT_MODE_CANARY: RolloutMode
ROLLOUT_STATE_UNSPECIFIED: RolloutState
ROLLOUT_STATE_ACTIVE: RolloutState
ROLLOUT_STATE_PROMOTED: RolloutState
ROLLOUT_STATE_ROLLED_BACK: RolloutState
SIDECAR_ROLE_UNSPECIFIED: SidecarRole
SIDECAR_ROLE_LIVE: SidecarRole
SIDECAR_ROLE_CANDIDATE: SidecarRole

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

class DescribeRolloutsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeRolloutsResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[RolloutStatus]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[RolloutStatus, _Mapping]]] = ...) -> None: ...

class RolloutStatus(_message.Message):
    __slots__ = ("middleware_key", "candidate_key", "generation", "mode", "state", "state_reason", "share", "canary", "shadow")
    MIDDLEWARE_KEY_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_KEY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    CANARY_FIELD_NUMBER: _ClassVar[int]
    SHADOW_FIELD_NUMBER: _ClassVar[int]
    middleware_key: str
    candidate_key: str
    generation: int
    mode: RolloutMode
    state: RolloutState
    state_reason: str
    share: float
    canary: CanaryStatus
    shadow: ShadowStatus
    def __init__(self, middleware_key: _Optional[str] = ..., candidate_key: _Optional[str] = ..., generation: _Optional[int] = ..., mode: _Optional[_Union[RolloutMode, str]] = ..., state: _Optional[_Union[RolloutState, str]] = ..., state_reason: _Optional[str] = ..., share: _Optional[float] = ..., canary: _Optional[_Union[CanaryStatus, _Mapping]] = ..., shadow: _Optional[_Union[ShadowStatus, _Mapping]] = ...) -> None: ...

class CanaryStatus(_message.Message):
    __slots__ = ("replies", "failed_replies", "max_failed_share", "min_replies")
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    FAILED_REPLIES_FIELD_NUMBER: _ClassVar[int]
    MAX_FAILED_SHARE_FIELD_NUMBER: _ClassVar[int]
    MIN_REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: int
    failed_replies: int
    max_failed_share: float
    min_replies: int
    def __init__(self, replies: _Optional[int] = ..., failed_replies: _Optional[int] = ..., max_failed_share: _Optional[float] = ..., min_replies: _Optional[int] = ...) -> None: ...

class ShadowStatus(_message.Message):
    __slots__ = ("compared_invocations", "agreed_invocations", "candidate_errors", "disagreements", "latency_p50", "latency_p99", "samples")
    COMPARED_INVOCATIONS_FIELD_NUMBER: _ClassVar[int]
    AGREED_INVOCATIONS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    DISAGREEMENTS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P50_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    compared_invocations: int
    agreed_invocations: int
    candidate_errors: int
    disagreements: _containers.RepeatedCompositeFieldContainer[DisagreementCount]
    latency_p50: _duration_pb2.Duration
    latency_p99: _duration_pb2.Duration
    samples: _containers.RepeatedCompositeFieldContainer[DisagreementSample]
    def __init__(self, compared_invocations: _Optional[int] = ..., agreed_invocations: _Optional[int] = ..., candidate_errors: _Optional[int] = ..., disagreements: _Optional[_Iterable[_Union[DisagreementCount, _Mapping]]] = ..., latency_p50: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., latency_p99: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., samples: _Optional[_Iterable[_Union[DisagreementSample, _Mapping]]] = ...) -> None: ...

class DisagreementCount(_message.Message):
    __slots__ = ("kind", "count")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    kind: str
    count: int
    def __init__(self, kind: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class DisagreementSample(_message.Message):
    __slots__ = ("hook", "kind", "reply_id", "live", "candidate")
    HOOK_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REPLY_ID_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    hook: str
    kind: str
    reply_id: str
    live: str
    candidate: str
    def __init__(self, hook: _Optional[str] = ..., kind: _Optional[str] = ..., reply_id: _Optional[str] = ..., live: _Optional[str] = ..., candidate: _Optional[str] = ...) -> None: ...

class PromoteRolloutRequest(_message.Message):
    __slots__ = ("middleware_key",)
    MIDDLEWARE_KEY_FIELD_NUMBER: _ClassVar[int]
    middleware_key: str
    def __init__(self, middleware_key: _Optional[str] = ...) -> None: ...

class PromoteRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: RolloutStatus
    def __init__(self, rollout: _Optional[_Union[RolloutStatus, _Mapping]] = ...) -> None: ...

class RollbackRolloutRequest(_message.Message):
    __slots__ = ("middleware_key",)
    MIDDLEWARE_KEY_FIELD_NUMBER: _ClassVar[int]
    middleware_key: str
    def __init__(self, middleware_key: _Optional[str] = ...) -> None: ...

class RollbackRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: RolloutStatus
    def __init__(self, rollout: _Optional[_Union[RolloutStatus, _Mapping]] = ...) -> None: ...

class DescribeSidecarsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeSidecarsResponse(_message.Message):
    __slots__ = ("sidecars",)
    SIDECARS_FIELD_NUMBER: _ClassVar[int]
    sidecars: _containers.RepeatedCompositeFieldContainer[SidecarStatus]
    def __init__(self, sidecars: _Optional[_Iterable[_Union[SidecarStatus, _Mapping]]] = ...) -> None: ...

class SidecarStatus(_message.Message):
    __slots__ = ("middleware_key", "target", "role", "described", "description_hash", "serving", "hooks", "invocations", "last_error", "last_error_time")
    MIDDLEWARE_KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIBED_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_HASH_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    INVOCATIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_TIME_FIELD_NUMBER: _ClassVar[int]
    middleware_key: str
    target: str
    role: SidecarRole
    described: bool
    description_hash: str
    serving: bool
    hooks: _containers.RepeatedScalarFieldContainer[str]
    invocations: int
    last_error: str
    last_error_time: _timestamp_pb2.Timestamp
    def __init__(self, middleware_key: _Optional[str] = ..., target: _Optional[str] = ..., role: _Optional[_Union[SidecarRole, str]] = ..., described: _Optional[bool] = ..., description_hash: _Optional[str] = ..., serving: _Optional[bool] = ..., hooks: _Optional[_Iterable[str]] = ..., invocations: _Optional[int] = ..., last_error: _Optional[str] = ..., last_error_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
