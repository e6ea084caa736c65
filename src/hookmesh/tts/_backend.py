"""The speech-engine interface the TTS engine runs on (espeak-ng, or any replacement)."""

from __future__ import annotations

from typing import Protocol

import grpc

from hookmesh.errors import HookmeshError
from hookmesh.tts._audio import PcmFormat, VoiceCatalog


class BackendError(HookmeshError):
    """The speech engine failed (crashed, is missing, produced unreadable audio)."""

    reason = "SYNTHESIS_FAILED"
    code = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class Utterance(Protocol):
    """One synthesis in progress: text goes in, PCM comes out as it is produced.

    Write text, then `end_input`; read until `read` returns ``b""``. `aclose` stops the
    engine at once (a cancelled call must leave no process behind) and may be called at any
    time, from any task, more than once.
    """

    format: PcmFormat
    """The PCM shape: the engine's nominal one until its audio says otherwise (read first)."""

    async def write(self, text: str) -> None:
        """Add text. Incremental utterances speak each write as one complete segment."""
        ...

    async def end_input(self) -> None:
        """No more text: speak what is left, then end the audio."""
        ...

    async def read(self) -> bytes:
        """The next PCM bytes available (whole frames), waiting for some; ``b""`` at the end.

        Raises:
            BackendError: The engine failed (not when `aclose` stopped it).
        """
        ...

    async def aclose(self) -> None:
        """Stop now and release the engine's resources; `read` then returns ``b""``."""
        ...


class TTSBackend(Protocol):
    """A speech engine: voices, and utterances that stream PCM as they are produced."""

    name: str
    """Engine name for logs and errors, e.g. ``espeak-ng``."""
    default_rate: int
    """Words per minute when the caller asks for the default (0)."""
    min_rate: int
    """Slowest rate accepted, words per minute."""
    max_rate: int
    """Fastest rate accepted, words per minute."""

    async def catalog(self) -> VoiceCatalog:
        """The voices and variants (read once, then cached)."""
        ...

    async def resolve_voice(self, voice: str) -> str | None:
        """The engine's name for `voice` (a voice name, language or alias, with an optional
        ``+variant``); ``""`` for the default voice; None when unknown."""
        ...

    async def open(self, voice: str, rate: int, *, incremental: bool) -> Utterance:
        """Start an utterance.

        Args:
            voice: A name `resolve_voice` returned.
            rate: Words per minute, within `min_rate`..`max_rate`.
            incremental: True: each `write` is a complete sentence or clause, spoken as soon
                as it arrives (real time). False: the caller writes the whole text and ends
                the input before reading; the engine may use the whole text for prosody.
        """
        ...

    async def aclose(self) -> None:
        """Stop every utterance still running."""
        ...
