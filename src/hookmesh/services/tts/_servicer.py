"""TTSServicer: the TTSService RPCs over a `TTSEngine`."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import grpc

from hookmesh.errors import SchemaError
from hookmesh.tts import AudioChunk, TTSEngine, Voice
from hookmesh.v1 import tts_pb2 as _tts_pb2
from hookmesh.v1 import tts_pb2_grpc as _tts_grpc

_T = TypeVar("_T")
_DEFAULT_PAGE = 200
_MAX_PAGE = 1000
_PAGE_TOKEN = re.compile(r"[0-9]{1,9}")
"""A next_page_token as ListVoices hands it out: an ASCII offset, short enough for `int`
(``str.isdigit`` also takes digits such as "²" that `int` refuses, and no length limit lets
a token pass Python's 4,300-digit conversion limit)."""
FORMAT_FROM_PB: dict[int, str] = {
    _tts_pb2.AUDIO_FORMAT_UNSPECIFIED: "pcm",
    _tts_pb2.AUDIO_FORMAT_PCM: "pcm",
    _tts_pb2.AUDIO_FORMAT_WAV: "wav",
}
FORMAT_TO_PB = {"pcm": _tts_pb2.AUDIO_FORMAT_PCM, "wav": _tts_pb2.AUDIO_FORMAT_WAV}
GENDER_TO_PB = {
    "": _tts_pb2.VOICE_GENDER_UNSPECIFIED,
    "male": _tts_pb2.VOICE_GENDER_MALE,
    "female": _tts_pb2.VOICE_GENDER_FEMALE,
}


def chunk_to_pb(chunk: AudioChunk) -> _tts_pb2.AudioChunk:
    """The proto of an audio chunk."""
    return _tts_pb2.AudioChunk(
        data=chunk.data,
        sample_rate=chunk.sample_rate,
        channels=chunk.channels,
        sample_format=_tts_pb2.SAMPLE_FORMAT_S16LE,
        sequence_number=chunk.sequence_number,
        last=chunk.last,
        format=FORMAT_TO_PB[chunk.format],
    )


def voice_to_pb(voice: Voice) -> _tts_pb2.Voice:
    """The proto of a voice."""
    return _tts_pb2.Voice(
        name=voice.name,
        display_name=voice.display_name,
        languages=voice.languages,
        gender=GENDER_TO_PB[voice.gender],
    )


def _format(value: int) -> str:
    # An enum number this server does not know is passed on as-is: the engine reports it.
    return FORMAT_FROM_PB.get(value, f"#{value}")


async def _pumped(
    chunks: AsyncGenerator[AudioChunk, None],
    context: grpc.aio.ServicerContext,
    wrap: Callable[[AudioChunk], _T],
) -> AsyncIterator[_T]:
    """`wrap(chunk)` for each chunk, the synthesis running in a task that the RPC's end stops.

    NOTE(hookmesh): when a client cancels while grpc is sending, the handler's generator is
    left suspended at its yield until garbage collection, and so would the engine be. The
    RPC's done callback cancels the pump task at once instead; the queue of one keeps flow
    control end to end.
    """
    queue: asyncio.Queue[AudioChunk | Exception | None] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async with aclosing(chunks):
                async for chunk in chunks:
                    await queue.put(chunk)
        except Exception as exc:
            await queue.put(exc)
        else:
            await queue.put(None)

    task = asyncio.create_task(pump())
    context.add_done_callback(lambda _: task.cancel())
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield wrap(item)
    finally:
        task.cancel()


def _synthesize_response(chunk: AudioChunk) -> Any:
    return _tts_pb2.SynthesizeResponse(chunk=chunk_to_pb(chunk))


def _stream_response(chunk: AudioChunk) -> Any:
    return _tts_pb2.SynthesizeStreamResponse(chunk=chunk_to_pb(chunk))


async def _text_deltas(
    requests: AsyncIterator[_tts_pb2.SynthesizeStreamRequest],
) -> AsyncIterator[str]:
    """The text deltas after the config; a second config or an empty message is an error."""
    async for request in requests:
        arm = request.WhichOneof("message")
        if arm == "text":
            yield request.text
        elif arm == "config":
            raise SchemaError.single(
                "config", "send the config once, as the first message", reason="CONFIG_REPEATED"
            )
        else:
            raise SchemaError.single("message", "set config or text", reason="INVALID_SCHEMA")


class TTSServicer(_tts_grpc.TTSServiceServicer):
    """Serves synthesis from a `TTSEngine`, which holds the checks and limits.

    Args:
        engine: The engine (backend, text limit, concurrency limit).
    """

    def __init__(self, engine: TTSEngine) -> None:
        self.engine = engine

    async def Synthesize(
        self, request: _tts_pb2.SynthesizeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_tts_pb2.SynthesizeResponse]:
        config = request.config
        chunks = self.engine.synthesize(
            request.text,
            voice=config.voice,
            rate=config.rate,
            format=_format(config.format),  # type: ignore[arg-type]
        )
        async for response in _pumped(chunks, context, _synthesize_response):
            yield response

    async def SynthesizeStream(
        self,
        request_iterator: AsyncIterator[_tts_pb2.SynthesizeStreamRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[_tts_pb2.SynthesizeStreamResponse]:
        requests = aiter(request_iterator)
        first = await anext(requests, None)
        if first is None or first.WhichOneof("message") != "config":
            raise SchemaError.single(
                "config", "send a config message first", reason="CONFIG_EXPECTED"
            )
        config = first.config
        stream = await self.engine.open_stream(
            voice=config.voice,
            rate=config.rate,
            format=_format(config.format),  # type: ignore[arg-type]
        )
        try:
            # The config is accepted: say so before any audio, so a client may wait for it
            # before sending text (a write racing a rejection can mask its status).
            await context.send_initial_metadata(())
            chunks = stream.chunks(_text_deltas(requests))
            async for response in _pumped(chunks, context, _stream_response):
                yield response
        finally:
            await stream.aclose()

    async def ListVoices(
        self, request: _tts_pb2.ListVoicesRequest, context: grpc.aio.ServicerContext
    ) -> _tts_pb2.ListVoicesResponse:
        size = request.page_size or _DEFAULT_PAGE
        if not 0 < size <= _MAX_PAGE:
            raise SchemaError.single("page_size", f"use 0 (default {_DEFAULT_PAGE}) to {_MAX_PAGE}")
        token = request.page_token
        if token and not _PAGE_TOKEN.fullmatch(token):
            raise SchemaError.single("page_token", "pass a next_page_token as returned")
        start = int(token or 0)
        catalog = await self.engine.list_voices(request.language)
        page = catalog.voices[start : start + size]
        more = start + size < len(catalog.voices)
        return _tts_pb2.ListVoicesResponse(
            voices=[voice_to_pb(v) for v in page],
            variants=catalog.variants,
            next_page_token=str(start + size) if more else "",
        )
