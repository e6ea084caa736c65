"""The TTS middleware with real espeak-ng: real-time and batch, flat and agentic, in process
and via a sidecar, through the TTS service, and failing open or closed."""

from __future__ import annotations

import array
import asyncio
import io
import math
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookmesh.agent import Agent
from hookmesh.middleware.builtin.tts import WARNING_EVENT, TTSMiddleware
from hookmesh.models import ScriptedChatModel, ScriptedTurn
from hookmesh.schema import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockStartEvent,
    MessageKind,
    text_of,
)
from hookmesh.services.tts import TTSService, load_tts_config, start_tts_service
from hookmesh.tts import EspeakBackend, TTSEngine
from tests.agent_helpers import collect, echo, types
from tests.conftest import Attach

pytestmark = pytest.mark.timeout(60)

ANSWER = (
    "Hello there, this is the first sentence of the answer. Here comes a second one, a "
    "little longer than the first. And finally the third sentence ends the reply."
)
PCM_TYPE = "audio/pcm;rate=22050;channels=1"
RMS_FLOOR = 300.0


def streaming_model(*turns: str | ScriptedTurn, delay: float = 0.0) -> ScriptedChatModel:
    """A model that streams 8-character chunks, `delay` s apart (a simulated model latency)."""
    return ScriptedChatModel(list(turns), stream=True, chunk_size=8, delay=delay)


def audio_of(events: list[AgentEvent], block_id: str | None = None) -> bytes:
    return b"".join(
        e.data
        for e in events
        if isinstance(e, DataBlockDeltaEvent) and block_id in (None, e.block_id)
    )


def answer_text(events: list[AgentEvent]) -> str:
    return "".join(e.delta for e in events if e.type == "text_block_delta")  # type: ignore[union-attr]


def indexes(events: list[AgentEvent], tag: str, block_id: str) -> list[int]:
    """Positions of the events with this tag and block id."""
    return [
        i for i, e in enumerate(events) if e.type == tag and getattr(e, "block_id", "") == block_id
    ]


def assert_speech(pcm: bytes, words: int) -> None:
    samples = array.array("h", pcm)
    assert samples, "no audio"
    per_word = len(samples) / 22050 / words
    assert 0.15 <= per_word <= 1.0, f"{per_word:.3f} s per word"
    assert math.sqrt(sum(s * s for s in samples) / len(samples)) > RMS_FLOOR


def assert_well_formed(events: list[AgentEvent]) -> None:
    """Each speech block: start, deltas, end, after its text block started."""
    starts = {e.block_id: i for i, e in enumerate(events) if e.type == "data_block_start"}  # type: ignore[union-attr]
    ends = {e.block_id: i for i, e in enumerate(events) if e.type == "data_block_end"}  # type: ignore[union-attr]
    assert starts.keys() == ends.keys()
    for block_id, start in starts.items():
        deltas = indexes(events, "data_block_delta", block_id)
        assert deltas and start < min(deltas) and max(deltas) < ends[block_id]
        text_id = block_id.removesuffix("-speech")
        text_start = indexes(events, "text_block_start", text_id)[0]
        assert text_start < start
    assert events[-1].type == "reply_end"


def process_gone(pid: int) -> bool:
    """The pid is reaped (or reused by something that is not espeak-ng)."""
    try:
        return b"espeak" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return True


@pytest.fixture
async def tts_service() -> AsyncIterator[TTSService]:
    service = await start_tts_service(load_tts_config(), address="127.0.0.1:0")
    try:
        yield service
    finally:
        await service.stop(None)


# --- in process and via a sidecar ------------------------------------------------------------


async def test_realtime_speaks_while_the_model_is_still_writing(
    kind: MessageKind, attach: Attach
) -> None:
    tts = await attach(TTSMiddleware())
    agent = Agent(streaming_model(ANSWER, delay=0.05), kind=kind, middlewares=[tts])
    events = await collect(agent.reply("talk to me"))
    assert answer_text(events) == ANSWER
    assert agent.final_message is not None and text_of(agent.final_message) == ANSWER
    kinds = types(events)
    last_text_delta = len(kinds) - 1 - kinds[::-1].index("text_block_delta")
    first_audio = kinds.index("data_block_delta")
    assert first_audio < last_text_delta, "speech started before the model finished"
    start = next(e for e in events if isinstance(e, DataBlockStartEvent))
    assert (start.media_type, start.name) == (PCM_TYPE, "speech")
    # The tail of the audio follows the text block's end.
    assert kinds.index("text_block_end") < kinds.index("data_block_end")
    assert_well_formed(events)
    assert_speech(audio_of(events), len(ANSWER.split()))


async def test_batch_speaks_each_finished_block_after_its_end(
    kind: MessageKind, attach: Attach
) -> None:
    tts = await attach(TTSMiddleware(mode="batch"))
    turns = [
        ScriptedTurn(text="Let me look that up.", tool_calls=[("echo", {"text": "x"})]),
        ScriptedTurn(text="Here is what I found, all of it."),
    ]
    agent = Agent(streaming_model(*turns), kind=kind, tools=[echo], middlewares=[tts])
    events = await collect(agent.reply("look it up"))
    assert_well_formed(events)
    text_ends = [i for i, e in enumerate(events) if e.type == "text_block_end"]
    speech = [e for e in events if isinstance(e, DataBlockStartEvent)]
    assert len(text_ends) == len(speech) == 2
    for end, start in zip(text_ends, speech, strict=True):
        text_id = events[end].block_id  # type: ignore[union-attr]
        assert start.block_id == f"{text_id}-speech"
        first = indexes(events, "data_block_delta", start.block_id)[0]
        assert end < first, "batch audio comes after the whole block"
        deltas = [e.delta for e in events if e.type == "text_block_delta" and e.block_id == text_id]  # type: ignore[union-attr]
        assert_speech(audio_of(events, start.block_id), len("".join(deltas).split()))
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_blank_text_is_not_spoken(kind: MessageKind, attach: Attach) -> None:
    tts = await attach(TTSMiddleware())
    agent = Agent(streaming_model("   "), kind=kind, middlewares=[tts])
    events = await collect(agent.reply("say nothing"))
    assert "data_block_start" not in types(events)
    assert not [e for e in events if isinstance(e, CustomEvent)]


async def test_a_bad_voice_fails_open_with_a_warning(kind: MessageKind, attach: Attach) -> None:
    tts = await attach(TTSMiddleware(voice="no-such-voice", mode="batch"))
    agent = Agent(streaming_model("Hello there. Nice to meet you."), kind=kind, middlewares=[tts])
    events = await collect(agent.reply("hi"))
    assert answer_text(events) == "Hello there. Nice to meet you."
    warnings = [e for e in events if isinstance(e, CustomEvent) and e.name == WARNING_EVENT]
    assert len(warnings) == 1 and warnings[0].value["reason"] == "INVALID_OPTIONS"
    assert "data_block_start" not in types(events)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


# --- through the TTS service -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["realtime", "batch"])
async def test_speech_from_the_service(
    kind: MessageKind, attach: Attach, tts_service: TTSService, mode: str
) -> None:
    tts = await attach(TTSMiddleware(f"127.0.0.1:{tts_service.port}", mode=mode))  # type: ignore[arg-type]
    agent = Agent(streaming_model(ANSWER, delay=0.05), kind=kind, middlewares=[tts])
    events = await collect(agent.reply("talk to me"))
    assert answer_text(events) == ANSWER
    assert_well_formed(events)
    assert_speech(audio_of(events), len(ANSWER.split()))
    if mode == "realtime":
        kinds = types(events)
        last_text_delta = len(kinds) - 1 - kinds[::-1].index("text_block_delta")
        assert kinds.index("data_block_delta") < last_text_delta


async def test_wav_format_streams_a_wav_file(kind: MessageKind, tts_service: TTSService) -> None:
    tts = TTSMiddleware(f"127.0.0.1:{tts_service.port}", format="wav")
    agent = Agent(streaming_model(ANSWER), kind=kind, middlewares=[tts])
    try:
        events = await collect(agent.reply("talk to me"))
    finally:
        await tts.aclose()
    start = next(e for e in events if isinstance(e, DataBlockStartEvent))
    assert start.media_type == "audio/wav"
    with wave.open(io.BytesIO(audio_of(events))) as wav:
        assert wav.getframerate() == 22050
        pcm = wav.readframes(10**9)
    assert_speech(pcm, len(ANSWER.split()))


@pytest.mark.parametrize("mode", ["realtime", "batch"])
async def test_service_down_fails_open_text_still_arrives(
    kind: MessageKind, attach: Attach, mode: str
) -> None:
    stopped = await start_tts_service(load_tts_config(), address="127.0.0.1:0")
    await stopped.stop(None)  # nothing listens on its port now
    tts = await attach(TTSMiddleware(f"127.0.0.1:{stopped.port}", mode=mode, timeout=5))  # type: ignore[arg-type]
    turns = [
        ScriptedTurn(text="First I call a tool.", tool_calls=[("echo", {"text": "x"})]),
        ScriptedTurn(text=ANSWER),
    ]
    agent = Agent(streaming_model(*turns), kind=kind, tools=[echo], middlewares=[tts])
    events = await collect(agent.reply("talk to me"))
    assert answer_text(events) == "First I call a tool." + ANSWER
    warnings = [e for e in events if isinstance(e, CustomEvent) and e.name == WARNING_EVENT]
    # One warning: after the first failure the rest of the reply is not attempted.
    assert len(warnings) == 1
    assert warnings[0].value["reason"] == "UNAVAILABLE"
    assert "data_block_start" not in types(events)
    assert events[-1].finish_reason == "completed"  # type: ignore[union-attr]


async def test_service_down_fail_closed_ends_the_reply(kind: MessageKind, attach: Attach) -> None:
    stopped = await start_tts_service(load_tts_config(), address="127.0.0.1:0")
    await stopped.stop(None)
    tts = await attach(TTSMiddleware(f"127.0.0.1:{stopped.port}", failure_mode="fail_closed"))
    agent = Agent(streaming_model(ANSWER), kind=kind, middlewares=[tts])
    events = await collect(agent.reply("talk to me"))
    end = events[-1]
    assert end.type == "reply_end" and end.finish_reason == "error"
    assert end.error is not None and end.error.source == "middleware:tts"
    assert "speech synthesis failed" in end.error.message


# --- state, cancellation, construction -------------------------------------------------------


async def test_one_instance_serves_concurrent_replies(kind: MessageKind) -> None:
    tts = TTSMiddleware()
    tts.speaker()  # the shared engine, made once
    before = dict(vars(tts))
    texts = ["One voice says this sentence, then stops.", "Another one says something else."]
    agents = [Agent(streaming_model(t), kind=kind, middlewares=[tts]) for t in texts]
    results = await asyncio.gather(*(collect(a.reply("go")) for a in agents))
    assert vars(tts) == before, "no per-reply state on the instance"
    for text, events in zip(texts, results, strict=True):
        assert answer_text(events) == text
        reply_id = events[0].reply_id
        assert all(e.reply_id == reply_id for e in events)
        assert_speech(audio_of(events), len(text.split()))


async def test_leaving_the_reply_early_stops_espeak(kind: MessageKind) -> None:
    tts = TTSMiddleware()
    long_answer = "This sentence keeps the speech engine busy for a while. " * 40
    # The model is still writing when the reply is left: espeak-ng waits for more text and
    # would never exit by itself.
    agent = Agent(streaming_model(long_answer, delay=0.05), kind=kind, middlewares=[tts])
    engine = tts.speaker()
    assert isinstance(engine, TTSEngine) and isinstance(engine.backend, EspeakBackend)
    backend = engine.backend
    stream = agent.reply("talk")
    pids: frozenset[int] = frozenset()
    async with asyncio.timeout(10):
        async for event in stream:
            if event.type == "data_block_delta":
                pids = backend.live_pids
                break
    assert pids
    await stream.aclose()  # type: ignore[attr-defined]
    async with asyncio.timeout(10):
        await backend.wait_idle()
    assert all(process_gone(pid) for pid in pids)


def test_defaults_and_bad_parameters() -> None:
    tts = TTSMiddleware()
    assert (tts.target, tts.mode, tts.format, tts.failure_mode) == (
        "",
        "realtime",
        "pcm",
        "fail_open",
    )
    assert tts.middleware_key() == "tts"
    assert tts.implements("on_reply") and not tts.implements("on_reasoning")
    assert TTSMiddleware.subscriptions == {
        "on_reply": ("text_block_start", "text_block_delta", "text_block_end")
    }
    bad: list[dict[str, Any]] = [
        {"mode": "sometimes"},
        {"format": "mp3"},
        {"failure_mode": "maybe"},
        {"rate": -1},
        {"timeout": 0},
    ]
    for params in bad:
        with pytest.raises(ValueError):
            TTSMiddleware(**params)
