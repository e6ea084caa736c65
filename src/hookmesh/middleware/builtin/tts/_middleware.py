"""Text to speech: the reply's text blocks also arrive as audio data blocks, spoken as written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from hookmesh._security import ClientTLS
from hookmesh.middleware import AgentView, ReplyArgs, ReplyNext
from hookmesh.middleware._base import FailureMode, Middleware
from hookmesh.middleware.builtin.tts._speech import (
    WARNING_EVENT,
    Speaker,
    TTSError,
    TTSMode,
    _Block,
)
from hookmesh.schema import (
    AgentEvent,
)

if TYPE_CHECKING:
    from hookmesh.client import TTSClient
    from hookmesh.tts import AudioFormat, TTSEngine

log = logging.getLogger("hookmesh.middleware.tts")

_LOCAL_MAX_TEXT_CHARS = 1_000_000


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
        tls: TLS to the service: ``ca_cert``, and for mTLS ``client_cert`` and
            ``client_key`` (file paths); plaintext when unset.
        name: Display name of the audio data blocks.
    """

    subscriptions: Mapping[str, tuple[str, ...]] = {
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
        tls: Mapping[str, str] | None = None,
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
        self.tls = ClientTLS(**tls) if tls else None
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
                from hookmesh.tts import TTSEngine

                self._engine = TTSEngine(max_text_chars=_LOCAL_MAX_TEXT_CHARS)
            return self._engine
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from hookmesh.client import TTSClient

            token = os.environ.get(self.token_env) if self.token_env else None
            self._client = TTSClient(self.target, timeout=self.timeout, token=token, tls=self.tls)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the service channel, if one is open."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
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
                if event.source_path:
                    pass  # a nested run's text is progress, not the answer: never spoken
                elif event.type == "text_block_start" and not state.get("failed"):
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


__all__ = ["WARNING_EVENT", "Speaker", "TTSError", "TTSMiddleware", "TTSMode"]
