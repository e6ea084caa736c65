"""Python client of the TTSService: `TTSClient` (asyncio)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from typing import Any

import grpc

from hookmesh._security import ClientTLS
from hookmesh.client._base import ServiceClient
from hookmesh.client._errors import AgentClientError
from hookmesh.tts import AudioChunk, AudioFormat, Voice, VoiceCatalog
from hookmesh.v1 import tts_pb2 as _tts_pb2
from hookmesh.v1 import tts_pb2_grpc as _tts_grpc

DEFAULT_TTS_TIMEOUT = 120.0
"""Seconds a synthesis (the whole stream) or any other call may take."""

_FORMAT_TO_PB = {"pcm": _tts_pb2.AUDIO_FORMAT_PCM, "wav": _tts_pb2.AUDIO_FORMAT_WAV}
_FORMAT_FROM_PB: dict[int, AudioFormat] = {
    _tts_pb2.AUDIO_FORMAT_UNSPECIFIED: "pcm",
    _tts_pb2.AUDIO_FORMAT_PCM: "pcm",
    _tts_pb2.AUDIO_FORMAT_WAV: "wav",
}
_GENDER_FROM_PB: dict[int, Any] = {
    _tts_pb2.VOICE_GENDER_MALE: "male",
    _tts_pb2.VOICE_GENDER_FEMALE: "female",
}


def _config(voice: str, rate: int, format: AudioFormat) -> _tts_pb2.SpeechConfig:
    if format not in _FORMAT_TO_PB:
        raise ValueError(f"format must be 'pcm' or 'wav', not {format!r}")
    return _tts_pb2.SpeechConfig(voice=voice, rate=rate, format=_FORMAT_TO_PB[format])


def chunk_from_pb(pb: _tts_pb2.AudioChunk) -> AudioChunk:
    """An audio chunk from its proto."""
    return AudioChunk(
        data=pb.data,
        sample_rate=pb.sample_rate,
        channels=pb.channels,
        sequence_number=pb.sequence_number,
        last=pb.last,
        format=_FORMAT_FROM_PB.get(pb.format, "pcm"),
    )


class TTSClient(ServiceClient):
    """Asyncio client of a TTSService.

    Use as ``async with TTSClient("127.0.0.1:7003") as tts:``. Every call has a deadline
    (`timeout`, overridable per call; for the streams it covers the whole stream). Leaving an
    iteration early cancels the call, which stops the engine on the server. Failed calls raise
    `AgentClientError` (code, stable reason, field violations).

    Args:
        target: ``host:port`` of the service.
        timeout: Default deadline in seconds for each call.
        tls: TLS settings; plaintext when None.
        token: Bearer token to send (a secret).
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float = DEFAULT_TTS_TIMEOUT,
        tls: ClientTLS | None = None,
        token: str | None = None,
    ) -> None:
        super().__init__(target, timeout=timeout, tls=tls, token=token, options=())
        self._stub = _tts_grpc.TTSServiceStub(self._channel)

    async def _chunks(
        self, call: Any, failure: list[BaseException]
    ) -> AsyncGenerator[AudioChunk, None]:
        try:
            async for response in call:
                yield chunk_from_pb(response.chunk)
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            if failure:  # the caller's text iterator failed and the call was cancelled for it
                raise failure[0] from None
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise AgentClientError.from_rpc_error(exc) from None
        finally:
            call.cancel()

    def synthesize(
        self,
        text: str,
        *,
        voice: str = "",
        rate: int = 0,
        format: AudioFormat = "pcm",
        timeout: float | None = None,
    ) -> AsyncGenerator[AudioChunk, None]:
        """Speak a whole text; audio chunks stream back as they are produced.

        Args:
            text: Plain text, not empty.
            voice: A voice name from `list_voices` (``+variant`` allowed); "" for the default.
            rate: Words per minute (80-450); 0 for the default.
            format: ``pcm`` (raw s16le) or ``wav`` (streamed WAV: header, then PCM).
            timeout: Deadline for the whole stream; the client's default when None.

        Raises:
            AgentClientError: The service refused the request (INVALID_ARGUMENT with reason
                ``EMPTY_TEXT``, ``TEXT_TOO_LONG``, ``INVALID_OPTIONS``; RESOURCE_EXHAUSTED
                ``TOO_MANY_SYNTHESES``) or the call failed.
        """
        request = _tts_pb2.SynthesizeRequest(text=text, config=_config(voice, rate, format))
        call = self._stub.Synthesize(
            request, timeout=timeout or self.timeout, metadata=self._metadata
        )
        return self._chunks(call, [])

    def synthesize_stream(
        self,
        text_deltas: AsyncIterable[str],
        *,
        voice: str = "",
        rate: int = 0,
        format: AudioFormat = "pcm",
        timeout: float | None = None,
    ) -> AsyncGenerator[AudioChunk, None]:
        """Speak text as it is written: send deltas, get the audio of each completed
        sentence or clause back while more text arrives. The end of `text_deltas` flushes
        the rest; the last chunk has ``last=True``.

        Options as for `synthesize`. If `text_deltas` raises, the call is cancelled and the
        same exception is raised from the iteration.
        """
        failure: list[BaseException] = []
        config = _config(voice, rate, format)

        async def requests() -> AsyncIterator[_tts_pb2.SynthesizeStreamRequest]:
            yield _tts_pb2.SynthesizeStreamRequest(config=config)
            # The server sends its headers once it accepted the config. Wait for them: a text
            # write racing a rejection can replace its status with INTERNAL (grpc/grpc#36066).
            await call.initial_metadata()
            if call.done():
                return
            try:
                async for delta in text_deltas:
                    if delta:
                        yield _tts_pb2.SynthesizeStreamRequest(text=delta)
            except Exception as exc:
                failure.append(exc)
                call.cancel()

        call = self._stub.SynthesizeStream(
            requests(), timeout=timeout or self.timeout, metadata=self._metadata
        )
        return self._chunks(call, failure)

    async def list_voices(
        self, *, language: str = "", timeout: float | None = None
    ) -> VoiceCatalog:
        """Every voice (speaking `language`, e.g. ``en``, when set) and the variants."""
        voices: list[Voice] = []
        variants: list[str] = []
        token = ""
        while True:
            request = _tts_pb2.ListVoicesRequest(language=language, page_token=token)
            try:
                response = await self._stub.ListVoices(
                    request, timeout=timeout or self.timeout, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as exc:
                raise AgentClientError.from_rpc_error(exc) from None
            voices.extend(
                Voice(
                    v.name,
                    v.display_name,
                    tuple(v.languages),
                    _GENDER_FROM_PB.get(v.gender, ""),
                )
                for v in response.voices
            )
            variants = list(response.variants)
            token = response.next_page_token
            if not token:
                return VoiceCatalog(voices, variants)
