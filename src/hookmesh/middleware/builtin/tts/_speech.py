"""The TTS middleware's machinery: one text block's synthesis, batch or real time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal, Protocol

from hookmesh.errors import HookmeshError
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
)

if TYPE_CHECKING:
    from hookmesh.middleware import AgentView, FailureMode
    from hookmesh.tts import AudioChunk, AudioFormat

log = logging.getLogger("hookmesh.middleware.tts")

TTSMode = Literal["realtime", "batch"]
WARNING_EVENT = "tts.warning"
"""Name of the custom event that reports a synthesis failure under ``fail_open``."""


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


class Voice(Protocol):
    """What a text block's speech needs of the TTS middleware: its speaker and settings."""

    name: str
    mode: TTSMode
    timeout: float
    target: str
    failure_mode: FailureMode

    def speaker(self) -> Speaker: ...

    def options(self) -> dict[str, Any]: ...


class _Block:
    """The speech of one text block: its data block events, in either mode."""

    def __init__(
        self, mw: Voice, agent: AgentView, state: dict[str, Any], text_block_id: str
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
