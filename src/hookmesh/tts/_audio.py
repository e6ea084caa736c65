"""Audio values shared by the TTS engine, service, client and middleware."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Literal

AudioFormat = Literal["pcm", "wav"]
"""The encoding of synthesised bytes: raw PCM, or a WAV stream (header, then PCM)."""
SampleFormat = Literal["s16le"]
"""How one PCM sample is encoded: signed 16-bit little-endian."""
VoiceGender = Literal["male", "female", ""]
"""A voice's gender; empty when the engine does not say."""

AUDIO_FORMATS: tuple[AudioFormat, ...] = ("pcm", "wav")
STREAMING_SIZE = 0xFFFFFFFF
"""The size fields of a streamed WAV header: the length is unknown while streaming."""


@dataclass(frozen=True, slots=True)
class PcmFormat:
    """The shape of a PCM stream."""

    sample_rate: int
    """Samples per second per channel (Hz)."""
    channels: int
    """Interleaved channels per frame."""
    sample_format: SampleFormat = "s16le"
    """How each sample is encoded."""

    @property
    def frame_bytes(self) -> int:
        """Bytes per frame (one sample of every channel)."""
        return 2 * self.channels


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """A piece of synthesised audio; a stream's chunks concatenated give the whole audio."""

    data: bytes
    """PCM frames, or for ``wav`` a stream whose first chunk starts with the WAV header."""
    sample_rate: int
    """Samples per second per channel (Hz)."""
    channels: int
    """Interleaved channels per frame."""
    sequence_number: int
    """Position in the stream, from 0."""
    last: bool = False
    """The final chunk of a stream that completed (it may carry no data)."""
    format: AudioFormat = "pcm"
    """The encoding of `data`."""
    sample_format: SampleFormat = "s16le"
    """How each PCM sample is encoded."""

    @property
    def media_type(self) -> str:
        """The IANA media type of `data`, e.g. ``audio/pcm;rate=22050;channels=1``."""
        if self.format == "wav":
            return "audio/wav"
        return f"audio/pcm;rate={self.sample_rate};channels={self.channels}"


@dataclass(frozen=True, slots=True)
class Voice:
    """A voice the engine offers."""

    name: str
    """What to pass as ``voice``, e.g. ``en-us``."""
    display_name: str = ""
    """A readable name, e.g. ``English (America)``."""
    languages: tuple[str, ...] = ()
    """Language codes it speaks, its own first, lower case."""
    gender: VoiceGender = ""
    """Its gender, when the engine says."""


@dataclass(frozen=True, slots=True)
class VoiceCatalog:
    """The voices an engine offers and the variants that may follow a voice after ``+``."""

    voices: list[Voice] = field(default_factory=list)
    """The voices, in the engine's order."""
    variants: list[str] = field(default_factory=list)
    """Variant names, e.g. ``f3`` (as in ``en-us+f3``)."""


def speaks(voice: Voice, language: str) -> bool:
    """Whether `voice` speaks `language`, matched on whole subtags (``en`` matches ``en-us``)."""
    wanted = language.lower()
    return any(code == wanted or code.startswith(wanted + "-") for code in voice.languages)


def wav_header(pcm: PcmFormat, data_bytes: int | None = None) -> bytes:
    """A 44-byte WAV header; `data_bytes` None writes the streaming sizes (0xFFFFFFFF)."""
    width = 2
    if data_bytes is None:
        riff_size = data_size = STREAMING_SIZE
    else:
        riff_size, data_size = 36 + data_bytes, data_bytes
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack(
            "<IHHIIHH",
            16,
            1,
            pcm.channels,
            pcm.sample_rate,
            pcm.sample_rate * pcm.channels * width,
            pcm.channels * width,
            8 * width,
        )
        + b"data"
        + struct.pack("<I", data_size)
    )


def pcm_format_of(media_type: str) -> PcmFormat | None:
    """The PCM shape an ``audio/pcm;rate=N;channels=M`` media type names; None for others."""
    kind, *params = (part.strip() for part in media_type.split(";"))
    if kind.lower() != "audio/pcm":
        return None
    values = dict(p.partition("=")[::2] for p in params)
    try:
        return PcmFormat(int(values.get("rate", "22050")), int(values.get("channels", "1")))
    except ValueError:
        return None
