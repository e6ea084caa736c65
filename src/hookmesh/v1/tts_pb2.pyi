from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AudioFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUDIO_FORMAT_UNSPECIFIED: _ClassVar[AudioFormat]
    AUDIO_FORMAT_PCM: _ClassVar[AudioFormat]
    AUDIO_FORMAT_WAV: _ClassVar[AudioFormat]

class SampleFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SAMPLE_FORMAT_UNSPECIFIED: _ClassVar[SampleFormat]
    SAMPLE_FORMAT_S16LE: _ClassVar[SampleFormat]

class VoiceGender(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VOICE_GENDER_UNSPECIFIED: _ClassVar[VoiceGender]
    VOICE_GENDER_MALE: _ClassVar[VoiceGender]
    VOICE_GENDER_FEMALE: _ClassVar[VoiceGender]
AUDIO_FORMAT_UNSPECIFIED: AudioFormat
AUDIO_FORMAT_PCM: AudioFormat
AUDIO_FORMAT_WAV: AudioFormat
SAMPLE_FORMAT_UNSPECIFIED: SampleFormat
SAMPLE_FORMAT_S16LE: SampleFormat
VOICE_GENDER_UNSPECIFIED: VoiceGender
VOICE_GENDER_MALE: VoiceGender
VOICE_GENDER_FEMALE: VoiceGender

class SynthesizeRequest(_message.Message):
    __slots__ = ("text", "config")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    text: str
    config: SpeechConfig
    def __init__(self, text: _Optional[str] = ..., config: _Optional[_Union[SpeechConfig, _Mapping]] = ...) -> None: ...

class SpeechConfig(_message.Message):
    __slots__ = ("voice", "rate", "format")
    VOICE_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    voice: str
    rate: int
    format: AudioFormat
    def __init__(self, voice: _Optional[str] = ..., rate: _Optional[int] = ..., format: _Optional[_Union[AudioFormat, str]] = ...) -> None: ...

class SynthesizeResponse(_message.Message):
    __slots__ = ("chunk",)
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: AudioChunk
    def __init__(self, chunk: _Optional[_Union[AudioChunk, _Mapping]] = ...) -> None: ...

class AudioChunk(_message.Message):
    __slots__ = ("data", "sample_rate", "channels", "sample_format", "sequence_number", "last", "format")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_RATE_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    sample_rate: int
    channels: int
    sample_format: SampleFormat
    sequence_number: int
    last: bool
    format: AudioFormat
    def __init__(self, data: _Optional[bytes] = ..., sample_rate: _Optional[int] = ..., channels: _Optional[int] = ..., sample_format: _Optional[_Union[SampleFormat, str]] = ..., sequence_number: _Optional[int] = ..., last: _Optional[bool] = ..., format: _Optional[_Union[AudioFormat, str]] = ...) -> None: ...

class SynthesizeStreamRequest(_message.Message):
    __slots__ = ("config", "text")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    config: SpeechConfig
    text: str
    def __init__(self, config: _Optional[_Union[SpeechConfig, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class SynthesizeStreamResponse(_message.Message):
    __slots__ = ("chunk",)
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: AudioChunk
    def __init__(self, chunk: _Optional[_Union[AudioChunk, _Mapping]] = ...) -> None: ...

class ListVoicesRequest(_message.Message):
    __slots__ = ("language", "page_size", "page_token")
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    language: str
    page_size: int
    page_token: str
    def __init__(self, language: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListVoicesResponse(_message.Message):
    __slots__ = ("voices", "variants", "next_page_token")
    VOICES_FIELD_NUMBER: _ClassVar[int]
    VARIANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    voices: _containers.RepeatedCompositeFieldContainer[Voice]
    variants: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, voices: _Optional[_Iterable[_Union[Voice, _Mapping]]] = ..., variants: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Voice(_message.Message):
    __slots__ = ("name", "display_name", "languages", "gender")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    GENDER_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    languages: _containers.RepeatedScalarFieldContainer[str]
    gender: VoiceGender
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., languages: _Optional[_Iterable[str]] = ..., gender: _Optional[_Union[VoiceGender, str]] = ...) -> None: ...
