"""Text to speech: the reply's text blocks also arrive as audio data blocks, spoken as written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from hookmesh.errors import HookmeshError
from hookmesh.middleware._base import EventHandler, FailureMode, Middleware
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
)

if TYPE_CHECKING:
    from hookmesh.agent import Agent
    from hookmesh.client._tts_client import TTSClient
    from hookmesh.services.tts import AudioChunk, AudioFormat, TTSEngine

log = logging.getLogger("hookmesh.middleware.tts")

TTSMode = Literal["realtime", "batch"]
WARNING_EVENT = "tts.warning"
"""Name of the custom event that reports a synthesis failure under ``fail_open``."""
_LOCAL_MAX_TEXT_CHARS = 1_000_000


class TTSError(HookmeshError):
    """Speech synthesis failed and the middleware fails closed."""

    reason = "TTS_FAILED"


class Speaker(Protocol):
    """What the middleware speaks through: `TTSClient` (a service) or `TTSEngine` (in process)."""

    def synthesize(
        self, text: str, *, voice: str = ..., rate: int = ..., format: AudioFormat = ...
    ) -> AsyncGenerator[AudioChunk, None]: ...

    def synthesize_stream(
        self,
        text_deltas: AsyncIterable[str],
        *,
        voice: str = ...,
        rate: int = ...,
        format: AudioFormat = ...,
    ) -> AsyncGenerator[AudioChunk, None]: ...


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "TTS_TIMEOUT"
    reason = getattr(exc, "reason", "")
    code = getattr(exc, "code", None)
    return str(reason or getattr(code, "name", "") or "TTS_FAILED")


class _LiveStream:
    """A real-time synthesis of one text block: deltas in, chunks collected as they come.

    The synthesis runs in its own task so audio gathers while the reply is blocked on the
    model; `take` hands over what is ready without waiting.
    """

    def __init__(self, speaker: Speaker, options: dict[str, Any], timeout: float) -> None:
        self._deltas: asyncio.Queue[str | None] = asyncio.Queue()
        self._ready: list[AudioChunk] = []
        self._wake = asyncio.Event()
        self.error: BaseException | None = None
        self._task = asyncio.create_task(self._run(speaker, options, timeout))

    async def _text(self) -> AsyncIterator[str]:
        while (delta := await self._deltas.get()) is not None:
            yield delta

    async def _run(self, speaker: Speaker, options: dict[str, Any], timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                chunks = speaker.synthesize_stream(self._text(), **options)
                async with aclosing(chunks):
                    async for chunk in chunks:
                        self._ready.append(chunk)
                        self._wake.set()
        except Exception as exc:
            self.error = exc
        finally:
            self._wake.set()

    @property
    def failed(self) -> bool:
        """The synthesis ended with an error (after any audio it produced was taken)."""
        return self._task.done() and self.error is not None and not self._ready

    def push(self, delta: str) -> None:
        self._deltas.put_nowait(delta)

    def take(self) -> list[AudioChunk]:
        """The chunks ready now (never waits)."""
        ready, self._ready = self._ready, []
        return ready

    async def finish(self) -> AsyncGenerator[AudioChunk, None]:
        """End the text, then yield the rest of the audio as it is produced."""
        self._deltas.put_nowait(None)
        while True:
            self._wake.clear()
            ready = self.take()
            if not ready:
                if self._task.done():
                    break
                await self._wake.wait()
                continue
            for chunk in ready:  # more may arrive while suspended here: the next take gets it
                yield chunk
        if self.error is not None:
            raise self.error

    async def cancel(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class _Block:
    """The speech of one text block: its data block events, in either mode."""

    def __init__(
        self, mw: TTSMiddleware, agent: Agent, state: dict[str, Any], text_block_id: str
    ) -> None:
        self.mw = mw
        self.reply_id = agent.reply_id
        self.state = state
        self.text_block_id = text_block_id
        self.data_block_id = f"{text_block_id}-speech"
        self.started = False
        self.closed = False
        self.parts: list[str] = []
        self.live = (
            _LiveStream(mw.speaker(), mw.options(), mw.timeout) if mw.mode == "realtime" else None
        )

    def add(self, delta: str) -> None:
        if self.live is not None:
            self.live.push(delta)
        else:
            self.parts.append(delta)

    def _audio(self, chunk: AudioChunk) -> list[AgentEvent]:
        if not chunk.data:
            return []
        out: list[AgentEvent] = []
        if not self.started:
            self.started = True
            out.append(
                DataBlockStartEvent(
                    reply_id=self.reply_id,
                    block_id=self.data_block_id,
                    media_type=chunk.media_type,
                    name=self.mw.name,
                )
            )
        out.append(
            DataBlockDeltaEvent(
                reply_id=self.reply_id, block_id=self.data_block_id, data=chunk.data
            )
        )
        return out

    def ready(self) -> list[AgentEvent]:
        """Data events for the audio ready now (real time only; never waits)."""
        if self.live is None or self.closed:
            return []
        out = [event for chunk in self.live.take() for event in self._audio(chunk)]
        if self.live.failed:
            assert self.live.error is not None
            out.extend(self._fail(self.live.error))
        return out

    async def _batch(self) -> AsyncGenerator[AudioChunk, None]:
        text = "".join(self.parts)
        if not text.strip():
            return
        chunks = self.mw.speaker().synthesize(text, **self.mw.options())
        async with aclosing(chunks):
            while True:
                # NOTE(hookmesh): a deadline per chunk, never around a yield (a timeout that
                # fires while suspended would cancel the consumer, not this generator).
                async with asyncio.timeout(self.mw.timeout):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    return
                yield chunk

    async def finish(self) -> AsyncIterator[AgentEvent]:
        """The rest of the block's audio (all of it in batch mode), then its end."""
        if self.closed:
            return
        source = self.live.finish() if self.live is not None else self._batch()
        failure: Exception | None = None
        try:
            async with aclosing(source):
                async for chunk in source:
                    for event in self._audio(chunk):
                        yield event
        except Exception as exc:
            failure = exc
        if failure is not None:
            for event in self._fail(failure):
                yield event
            return
        self.closed = True
        if self.started:
            self.state["spoken"] = self.state.get("spoken", 0) + 1
            yield DataBlockEndEvent(reply_id=self.reply_id, block_id=self.data_block_id)

    def _fail(self, exc: BaseException) -> list[AgentEvent]:
        """Close the block after a failure: raise (fail_closed) or warn and go on silently."""
        self.closed = True
        where = self.mw.target or "in-process espeak-ng"
        if self.mw.failure_mode == "fail_closed":
            raise TTSError(
                f"speech synthesis failed ({where}): {exc}",
                metadata={"blockId": self.text_block_id, "cause": _reason(exc)},
            ) from exc
        log.warning("speech synthesis failed (%s); the reply goes on without audio: %s", where, exc)
        self.state["failed"] = True
        out: list[AgentEvent] = []
        if self.started:
            out.append(DataBlockEndEvent(reply_id=self.reply_id, block_id=self.data_block_id))
        out.append(
            CustomEvent(
                reply_id=self.reply_id,
                name=WARNING_EVENT,
                value={
                    "reason": _reason(exc),
                    "message": f"speech synthesis failed ({where}); text only from here",
                    "blockId": self.text_block_id,
                },
            )
        )
        return out

    async def cancel(self) -> None:
        if self.live is not None:
            await self.live.cancel()


class TTSMiddleware(Middleware):
    """Speaks the reply: each text block's audio follows it as a data block.

    Real-time mode (default) opens a synthesis stream when a text block starts, pushes each
    text delta into it, and after every event that passes drains the audio that is ready
    (never waiting), so speech streams while the model is still writing; at the block's end
    it flushes the rest and waits for it. Batch mode synthesises each finished block at its
    text_block_end. Either way the audio arrives as data_block_start / data_block_delta /
    data_block_end (block id ``<text block id>-speech``, media type
    ``audio/pcm;rate=22050;channels=1``, or ``audio/wav`` for a streamed WAV), each byte after
    the text it speaks: ready audio is yielded before the event that revealed it, and the
    tail follows the block's text_block_end. The algorithm works on events, so both message
    kinds behave the same, locally and in a sidecar.

    Synthesis runs on a TTSService (`target`, over the gRPC client) or, with no target, on
    espeak-ng in this process. When it fails (service down, timeout, bad voice) and
    `failure_mode` is ``fail_open`` (default), the text still arrives, the open data block is
    ended, a ``tts.warning`` custom event says why, and the rest of the reply is not spoken;
    ``fail_closed`` ends the reply with an error instead (reason ``TTS_FAILED``).

    State: ``{"spoken": int, "failed": bool}`` in ``middle_context["tts"][reply_id]``, reset
    when a reply starts. Live synthesis streams are local to the reply's on_reply call; the
    instance keeps only its (shared) client or engine.

    Not supported: reasoning blocks and tool results are not spoken; a reply interrupted
    mid-block gets no data_block_end for that block; sidecars see only text events, so they
    drain audio at text events only.

    Example:
        >>> agent = Agent(model, middlewares=[TTSMiddleware(target="127.0.0.1:7003")])

    Args:
        target: ``host:port`` of a TTSService; empty runs espeak-ng in process.
        mode: ``realtime`` (speak while the text streams) or ``batch`` (each finished block).
        voice: A voice name (see ``hookmesh say --help`` / ListVoices); "" for the default.
        rate: Words per minute (80-450); 0 for the engine's default.
        format: ``pcm`` (raw s16le) or ``wav`` (streamed WAV: header, then PCM).
        failure_mode: ``fail_open`` (warn, keep the text) or ``fail_closed`` (end the reply).
        timeout: Seconds one block's synthesis may take (a real-time stream lasts as long as
            its block) and, in batch mode, the longest wait for the next chunk.
        token_env: Environment variable holding the service's bearer token (a secret).
        name: Display name of the audio data blocks.
    """

    subscriptions: ClassVar[dict[str, tuple[str, ...]]] = {
        "on_reply": ("text_block_start", "text_block_delta", "text_block_end"),
    }

    def __init__(
        self,
        target: str = "",
        *,
        mode: TTSMode = "realtime",
        voice: str = "",
        rate: int = 0,
        format: AudioFormat = "pcm",
        failure_mode: FailureMode = "fail_open",
        timeout: float = 300.0,
        token_env: str | None = None,
        name: str = "speech",
    ) -> None:
        if mode not in ("realtime", "batch"):
            raise ValueError(f"mode must be 'realtime' or 'batch', not {mode!r}")
        if format not in ("pcm", "wav"):
            raise ValueError(f"format must be 'pcm' or 'wav', not {format!r}")
        if failure_mode not in ("fail_open", "fail_closed"):
            raise ValueError(
                f"failure_mode must be 'fail_open' or 'fail_closed', not {failure_mode!r}"
            )
        if rate < 0:
            raise ValueError("rate must be 0 (default) or a words-per-minute figure")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.target = target
        self.mode: TTSMode = mode
        self.voice = voice
        self.rate = rate
        self.format: AudioFormat = format
        self.failure_mode = failure_mode
        self.timeout = timeout
        self.token_env = token_env
        self.name = name
        self._engine: TTSEngine | None = None
        self._client: TTSClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def middleware_key(self) -> str:
        return "tts"

    def options(self) -> dict[str, Any]:
        """The synthesis options every call passes."""
        return {"voice": self.voice, "rate": self.rate, "format": self.format}

    def speaker(self) -> Speaker:
        """The service client (one channel per event loop) or the in-process engine."""
        if not self.target:
            if self._engine is None:
                from hookmesh.services.tts import TTSEngine

                self._engine = TTSEngine(max_text_chars=_LOCAL_MAX_TEXT_CHARS)
            return self._engine
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from hookmesh.client._tts_client import TTSClient

            token = os.environ.get(self.token_env) if self.token_env else None
            self._client = TTSClient(self.target, timeout=self.timeout, token=token)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the service channel, if one is open."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def on_reply(
        self, agent: Agent, kwargs: dict[str, Any], next_handler: EventHandler
    ) -> AsyncIterator[AgentEvent]:
        """Wraps the whole reply; speaks text blocks, passing every event through.

        Sees every event locally (a sidecar sees only text block events). Synthesis failures
        are handled here, per `failure_mode`; any other error is left to the agent, which
        applies the same failure mode.
        """
        state = self.state(agent)
        if kwargs.get("resume") is None:
            state.clear()
        blocks: dict[str, _Block] = {}
        try:
            async for event in next_handler():
                ended: _Block | None = None
                if event.type == "text_block_start" and not state.get("failed"):
                    blocks[event.block_id] = _Block(self, agent, state, event.block_id)
                elif event.type == "text_block_delta" and event.block_id in blocks:
                    blocks[event.block_id].add(event.delta)
                elif event.type == "text_block_end":
                    ended = blocks.get(event.block_id)
                for block in list(blocks.values()):
                    for ready in block.ready():
                        yield ready
                if ended is None:
                    yield event
                    continue
                # NOTE(hookmesh): a copy, so that through a sidecar too the block's tail audio
                # follows its text_block_end (a kept original would overtake the emits).
                yield event.model_copy()
                async for audio in ended.finish():
                    yield audio
                del blocks[ended.text_block_id]  # only now: leaving during the tail cancels it
        finally:
            for block in blocks.values():
                with contextlib.suppress(Exception):
                    await block.cancel()
