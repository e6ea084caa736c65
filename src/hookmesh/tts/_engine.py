"""TTSEngine: checked, limited, streamed synthesis over a backend (the service's core, and the
in-process engine of the TTS middleware and `hookmesh say`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable

import grpc

from hookmesh.errors import FieldViolation, RequestError, SchemaError
from hookmesh.tts._audio import (
    AUDIO_FORMATS,
    AudioChunk,
    AudioFormat,
    VoiceCatalog,
    speaks,
    wav_header,
)
from hookmesh.tts._backend import TTSBackend, Utterance
from hookmesh.tts._segment import Segmenter

DEFAULT_MAX_TEXT_CHARS = 20_000
"""Most characters one synthesis (a whole text, or all deltas of a stream) may speak."""


class _Chunker:
    """Numbers a stream's chunks and puts the WAV header in front of the first one."""

    def __init__(self, utterance: Utterance, fmt: AudioFormat) -> None:
        self.utterance = utterance
        self.format = fmt
        self.sequence = 0
        self.header_due = fmt == "wav"

    def chunk(self, data: bytes, *, last: bool = False) -> AudioChunk:
        pcm = self.utterance.format
        if self.header_due:
            data = wav_header(pcm) + data
            self.header_due = False
        chunk = AudioChunk(
            data, pcm.sample_rate, pcm.channels, self.sequence, last, self.format, pcm.sample_format
        )
        self.sequence += 1
        return chunk


class TTSEngine:
    """Speech synthesis with the service's checks and limits, streamed as it is produced.

    `synthesize` speaks a whole text; `synthesize_stream` speaks text deltas as they arrive,
    each sentence or clause as soon as its end is seen. Both yield `AudioChunk` values, the
    last one with ``last=True``; leaving the iteration early (or cancelling) stops the engine.

    Errors (raised before any audio): `SchemaError` for bad input, with reasons
    ``EMPTY_TEXT``, ``TEXT_TOO_LONG`` (field ``text``) and ``INVALID_OPTIONS`` (fields
    ``config.voice``, ``config.rate``, ``config.format``); `RequestError` RESOURCE_EXHAUSTED
    ``TOO_MANY_SYNTHESES`` over `max_concurrent`. `BackendError` when the engine fails.

    Args:
        backend: The speech engine; espeak-ng when None.
        max_text_chars: Most characters per synthesis (a stream counts all its deltas).
        max_concurrent: Most syntheses at once; None for no limit.
    """

    def __init__(
        self,
        backend: TTSBackend | None = None,
        *,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        max_concurrent: int | None = None,
    ) -> None:
        if backend is None:
            from hookmesh.tts._espeak import EspeakBackend

            backend = EspeakBackend()
        if max_text_chars < 1:
            raise ValueError("max_text_chars must be at least 1")
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1 (or None)")
        self.backend = backend
        self.max_text_chars = max_text_chars
        self.max_concurrent = max_concurrent
        self._active = 0
        self._idle: list[asyncio.Future[None]] = []

    @property
    def active(self) -> int:
        """Syntheses in flight."""
        return self._active

    async def wait_idle(self) -> None:
        """Return once no synthesis is in flight (bound it with a timeout)."""
        if self._active:
            waiter = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            await waiter

    async def check(self, voice: str, rate: int, fmt: str) -> tuple[str, int]:
        """The engine's voice name and the rate to use, or `SchemaError` INVALID_OPTIONS."""
        backend = self.backend
        violations: list[FieldViolation] = []
        resolved = await backend.resolve_voice(voice)
        if resolved is None:
            violations.append(
                FieldViolation("config.voice", f"unknown voice {voice!r}: see ListVoices")
            )
        if rate and not backend.min_rate <= rate <= backend.max_rate:
            violations.append(
                FieldViolation(
                    "config.rate",
                    f"{rate} words per minute is out of range: use 0 (default) or "
                    f"{backend.min_rate}-{backend.max_rate}",
                )
            )
        if fmt not in AUDIO_FORMATS:
            violations.append(FieldViolation("config.format", "use pcm or wav"))
        if violations:
            raise SchemaError(violations, reason="INVALID_OPTIONS")
        return resolved or "", rate or backend.default_rate

    def _too_long(self, chars: int) -> SchemaError:
        return SchemaError.single(
            "text",
            f"{chars} characters is over the limit of {self.max_text_chars}; split the text",
            reason="TEXT_TOO_LONG",
        )

    def _claim(self) -> None:
        if self.max_concurrent is not None and self._active >= self.max_concurrent:
            raise RequestError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "TOO_MANY_SYNTHESES",
                f"{self._active} syntheses are running, the most this server allows; retry later",
                metadata={"limit": str(self.max_concurrent)},
            )
        self._active += 1

    def _release(self) -> None:
        self._active -= 1
        if not self._active:
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def synthesize(
        self, text: str, *, voice: str = "", rate: int = 0, format: AudioFormat = "pcm"
    ) -> AsyncGenerator[AudioChunk, None]:
        """Speak a whole text, yielding audio as the engine produces it.

        Args:
            text: Plain text, not empty; at most `max_text_chars` characters.
            voice: A voice name (see `list_voices`), optionally ``+variant``; "" for the default.
            rate: Words per minute; 0 for the default.
            format: ``pcm`` (raw s16le) or ``wav`` (a streamed WAV: header, then PCM).
        """
        if not text.strip():
            raise SchemaError.single("text", "the text is empty", reason="EMPTY_TEXT")
        if len(text) > self.max_text_chars:
            raise self._too_long(len(text))
        engine_voice, engine_rate = await self.check(voice, rate, format)
        self._claim()
        try:
            utterance = await self.backend.open(engine_voice, engine_rate, incremental=False)
            try:
                await utterance.write(text)
                await utterance.end_input()
                chunker = _Chunker(utterance, format)
                while data := await utterance.read():
                    yield chunker.chunk(data)
                yield chunker.chunk(b"", last=True)
            finally:
                await utterance.aclose()
        finally:
            self._release()

    async def open_stream(
        self, *, voice: str = "", rate: int = 0, format: AudioFormat = "pcm"
    ) -> SpeechStream:
        """Check the options, take a slot and start the engine for a real-time stream.

        Raises before anything is spoken (`SchemaError` INVALID_OPTIONS, `RequestError`
        TOO_MANY_SYNTHESES), so a service can accept the stream and only then ask for text.
        Speak with `SpeechStream.chunks`; `SpeechStream.aclose` frees the slot and the engine.
        """
        engine_voice, engine_rate = await self.check(voice, rate, format)
        self._claim()
        try:
            utterance = await self.backend.open(engine_voice, engine_rate, incremental=True)
        except BaseException:
            self._release()
            raise
        return SpeechStream(self, utterance, format)

    async def synthesize_stream(
        self,
        text_deltas: AsyncIterable[str],
        *,
        voice: str = "",
        rate: int = 0,
        format: AudioFormat = "pcm",
    ) -> AsyncGenerator[AudioChunk, None]:
        """Speak text while it is still arriving: each completed sentence or clause is spoken
        at once; the rest when `text_deltas` ends.

        Options as for `synthesize`. An exception from `text_deltas` (or more text in total
        than `max_text_chars`: `SchemaError` TEXT_TOO_LONG) stops the engine and is raised
        here, with no `last` chunk.
        """
        stream = await self.open_stream(voice=voice, rate=rate, format=format)
        try:
            async for chunk in stream.chunks(text_deltas):
                yield chunk
        finally:
            await stream.aclose()

    async def list_voices(self, language: str = "") -> VoiceCatalog:
        """The voices (those speaking `language` when set, e.g. ``en``) and the variants."""
        catalog = await self.backend.catalog()
        if not language:
            return catalog
        return VoiceCatalog([v for v in catalog.voices if speaks(v, language)], catalog.variants)


class SpeechStream:
    """A real-time synthesis that `TTSEngine.open_stream` accepted: text deltas in, audio out.

    Iterate `chunks` once; `aclose` (idempotent; `chunks` calls it when it ends) stops the
    engine and frees the slot.
    """

    def __init__(self, engine: TTSEngine, utterance: Utterance, fmt: AudioFormat) -> None:
        self._engine = engine
        self._utterance = utterance
        self._format = fmt
        self._closed = False

    async def chunks(self, text_deltas: AsyncIterable[str]) -> AsyncGenerator[AudioChunk, None]:
        """Audio for `text_deltas`, each completed sentence or clause as soon as it is seen;
        the last chunk has ``last=True``. Errors of `text_deltas` are raised here."""
        utterance = self._utterance
        feeder = asyncio.create_task(self._feed(text_deltas))
        try:
            chunker = _Chunker(utterance, self._format)
            while data := await utterance.read():
                yield chunker.chunk(data)
            await feeder
            yield chunker.chunk(b"", last=True)
        finally:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
            await self.aclose()

    async def _feed(self, text_deltas: AsyncIterable[str]) -> None:
        """Write each completed segment as it appears, then the rest; on any error stop the
        utterance so its reader ends."""
        utterance = self._utterance
        segmenter = Segmenter()
        total = 0
        limit = self._engine.max_text_chars
        try:
            async for delta in text_deltas:
                total += len(delta)
                if total > limit:
                    raise self._engine._too_long(total)
                for segment in segmenter.push(delta):
                    await utterance.write(segment)
            for segment in segmenter.flush():
                await utterance.write(segment)
            await utterance.end_input()
        except BaseException:
            await utterance.aclose()
            raise

    async def aclose(self) -> None:
        """Stop the engine and free the slot (once)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._utterance.aclose()
        finally:
            self._engine._release()
