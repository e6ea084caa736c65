"""The TTS service over real gRPC on loopback, with real espeak-ng: streamed speech, real-time
streams, bad input, limits, cancellation, voices, shutdown; plus its text segmenter."""

from __future__ import annotations

import array
import asyncio
import io
import math
import struct
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.client import AgentClientError, TTSClient
from hookmesh.services.tts import SERVICE_NAME, TTSService, load_tts_config, start_tts_service
from hookmesh.tts import AudioChunk, EspeakBackend, Segmenter, parse_voices
from hookmesh.v1 import tts_pb2, tts_pb2_grpc
from tests.servers import stopped_at_exit, target

pytestmark = pytest.mark.timeout(60)

SHORT = 10.0
SENTENCE = "The quick brown fox jumps over the lazy dog near the quiet river bank."
RMS_FLOOR = 300.0
LONG_TEXT = "This sentence is here to keep the speech engine busy for a good while. " * 700

Start = Callable[..., Awaitable[TTSService]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """Start TTS services on 127.0.0.1:0 (real espeak-ng); stopped at the end."""

    async def run(**config: Any) -> TTSService:
        return await start_tts_service(load_tts_config(**config), address="127.0.0.1:0")

    async with stopped_at_exit(run) as started:
        yield started


def rms(pcm: bytes) -> float:
    samples = array.array("h", pcm[: len(pcm) - len(pcm) % 2])
    return math.sqrt(sum(s * s for s in samples) / max(1, len(samples)))


def seconds(pcm: bytes, rate: int = 22050) -> float:
    return len(pcm) / 2 / rate


def assert_plausible_speech(pcm: bytes, words: int) -> None:
    per_word = seconds(pcm) / words
    assert 0.15 <= per_word <= 1.0, f"{per_word:.3f} s per word"
    assert rms(pcm) > RMS_FLOOR


def process_gone(pid: int) -> bool:
    """The pid is reaped (or reused by something that is not espeak-ng)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return True
    return b"espeak" not in cmdline


async def collect(chunks: AsyncIterator[AudioChunk]) -> list[AudioChunk]:
    async with asyncio.timeout(SHORT):
        return [chunk async for chunk in chunks]


def check_sequence(chunks: list[AudioChunk]) -> None:
    assert [c.sequence_number for c in chunks] == list(range(len(chunks)))
    assert [c.last for c in chunks] == [False] * (len(chunks) - 1) + [True]


# --- Synthesize ------------------------------------------------------------------------------


async def test_synthesize_streams_real_speech(start: Start) -> None:
    service = await start()
    async with TTSClient(target(service), timeout=SHORT) as client:
        chunks = await collect(client.synthesize(SENTENCE))
    check_sequence(chunks)
    assert len(chunks) > 2, "the audio arrives in pieces, as produced"
    assert {(c.sample_rate, c.channels, c.format, c.sample_format) for c in chunks} == {
        (22050, 1, "pcm", "s16le")
    }
    assert all(len(c.data) % 2 == 0 for c in chunks), "whole frames"
    assert chunks[0].media_type == "audio/pcm;rate=22050;channels=1"
    assert_plausible_speech(b"".join(c.data for c in chunks), len(SENTENCE.split()))


async def test_synthesize_wav_opens_with_the_wave_module(start: Start) -> None:
    service = await start()
    async with TTSClient(target(service), timeout=SHORT) as client:
        chunks = await collect(client.synthesize(SENTENCE, format="wav", rate=300))
        slow = await collect(client.synthesize(SENTENCE, rate=100))
    data = b"".join(c.data for c in chunks)
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    assert struct.unpack_from("<I", data, 40)[0] == 0xFFFFFFFF  # streamed: length unknown
    assert chunks[0].media_type == "audio/wav"
    with wave.open(io.BytesIO(data)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (22050, 1, 2)
        pcm = wav.readframes(10**9)
    assert pcm == data[44:]
    fast_s, slow_s = seconds(pcm), seconds(b"".join(c.data for c in slow))
    assert fast_s < slow_s, "300 words per minute is quicker than 100"


async def test_voices_and_variants_change_the_audio(start: Start) -> None:
    service = await start()
    async with TTSClient(target(service), timeout=SHORT) as client:
        default = b"".join(c.data for c in await collect(client.synthesize(SENTENCE)))
        female = await collect(client.synthesize(SENTENCE, voice="en-us+f3"))
    assert_plausible_speech(b"".join(c.data for c in female), len(SENTENCE.split()))
    assert b"".join(c.data for c in female) != default


# --- SynthesizeStream ------------------------------------------------------------------------


async def test_stream_speaks_a_sentence_while_more_text_is_coming(start: Start) -> None:
    service = await start()
    first_audio = asyncio.Event()
    sent_after_audio: list[str] = []

    async def deltas() -> AsyncIterator[str]:
        for piece in ("The first sentence is ", "complete here. ", "The second one"):
            yield piece
        # The stream stays open: the first sentence's audio must come back without a close.
        async with asyncio.timeout(SHORT):
            await first_audio.wait()
        for piece in (" arrives only after that audio", ", and it ends here."):
            sent_after_audio.append(piece)
            yield piece

    chunks: list[AudioChunk] = []
    async with TTSClient(target(service), timeout=SHORT) as client, asyncio.timeout(SHORT):
        async for chunk in client.synthesize_stream(deltas()):
            chunks.append(chunk)
            if chunk.data:
                first_audio.set()
    assert sent_after_audio, "text was still being sent after the first audio arrived"
    check_sequence(chunks)
    text = "The first sentence is complete here. The second one arrives only after that audio"
    assert_plausible_speech(b"".join(c.data for c in chunks), len(text.split()) + 4)


async def test_stream_with_no_text_ends_with_one_empty_last_chunk(start: Start) -> None:
    service = await start()

    async def nothing() -> AsyncIterator[str]:
        for piece in ("", "   "):
            yield piece

    async with TTSClient(target(service), timeout=SHORT) as client:
        chunks = await collect(client.synthesize_stream(nothing(), format="wav"))
    assert len(chunks) == 1 and chunks[0].last
    assert len(chunks[0].data) == 44  # just the WAV header


async def test_stream_input_error_cancels_the_call_and_is_raised(start: Start) -> None:
    service = await start()

    async def broken() -> AsyncIterator[str]:
        yield "Some text. "
        raise RuntimeError("the model failed")

    async with TTSClient(target(service), timeout=SHORT) as client:
        with pytest.raises(RuntimeError, match="the model failed"):
            await collect(client.synthesize_stream(broken()))
    async with asyncio.timeout(SHORT):
        await service.engine.wait_idle()
        await service.backend.wait_idle()  # type: ignore[attr-defined]


# --- bad input -------------------------------------------------------------------------------

BAD_SYNTHESIZE: list[tuple[str, tts_pb2.SynthesizeRequest, str, list[str]]] = [
    ("empty text", tts_pb2.SynthesizeRequest(), "EMPTY_TEXT", ["text"]),
    ("blank text", tts_pb2.SynthesizeRequest(text=" \n\t "), "EMPTY_TEXT", ["text"]),
    ("too long", tts_pb2.SynthesizeRequest(text="x" * 101), "TEXT_TOO_LONG", ["text"]),
    (
        "unknown voice",
        tts_pb2.SynthesizeRequest(text="hi", config=tts_pb2.SpeechConfig(voice="no-such-voice")),
        "INVALID_OPTIONS",
        ["config.voice"],
    ),
    (
        "unknown variant",
        tts_pb2.SynthesizeRequest(text="hi", config=tts_pb2.SpeechConfig(voice="en+nobody")),
        "INVALID_OPTIONS",
        ["config.voice"],
    ),
    (
        "rate too slow, format unknown",
        tts_pb2.SynthesizeRequest(text="hi", config=tts_pb2.SpeechConfig(rate=10, format=7)),  # type: ignore[arg-type]
        "INVALID_OPTIONS",
        ["config.rate", "config.format"],
    ),
    (
        "rate too fast",
        tts_pb2.SynthesizeRequest(text="hi", config=tts_pb2.SpeechConfig(rate=1000)),
        "INVALID_OPTIONS",
        ["config.rate"],
    ),
]


@pytest.mark.parametrize(
    ("request_pb", "reason", "fields"),
    [case[1:] for case in BAD_SYNTHESIZE],
    ids=[case[0] for case in BAD_SYNTHESIZE],
)
async def test_bad_synthesize_requests_are_invalid_argument(
    start: Start, request_pb: tts_pb2.SynthesizeRequest, reason: str, fields: list[str]
) -> None:
    service = await start(max_text_chars=100)
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = tts_pb2_grpc.TTSServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async with asyncio.timeout(SHORT):
                [r async for r in stub.Synthesize(request_pb, timeout=SHORT)]
        error = AgentClientError.from_rpc_error(caught.value)
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert error.reason == reason
        assert [v.field for v in error.violations] == fields
        # The server is still up.
        good = tts_pb2.SynthesizeRequest(text="still here")
        async with asyncio.timeout(SHORT):
            responses = [r async for r in stub.Synthesize(good, timeout=SHORT)]
        assert responses[-1].chunk.last


def _config(**fields: Any) -> tts_pb2.SynthesizeStreamRequest:
    return tts_pb2.SynthesizeStreamRequest(config=tts_pb2.SpeechConfig(**fields))


def _text(text: str) -> tts_pb2.SynthesizeStreamRequest:
    return tts_pb2.SynthesizeStreamRequest(text=text)


BAD_STREAMS: list[tuple[str, list[tts_pb2.SynthesizeStreamRequest], str, str]] = [
    ("no messages", [], "CONFIG_EXPECTED", "config"),
    ("text first", [_text("hello")], "CONFIG_EXPECTED", "config"),
    ("config twice", [_config(), _text("Hello. "), _config()], "CONFIG_REPEATED", "config"),
    ("empty message", [_config(), tts_pb2.SynthesizeStreamRequest()], "INVALID_SCHEMA", "message"),
    # A rejected config: a raw client that writes text without waiting for the headers can
    # see INTERNAL instead (grpc/grpc#36066); TTSClient waits (see the test below).
    ("bad voice", [_config(voice="no-such-voice")], "INVALID_OPTIONS", "config.voice"),
    ("bad rate", [_config(rate=5000)], "INVALID_OPTIONS", "config.rate"),
    ("too much", [_config(), _text("Hello there. " * 5), _text("x" * 60)], "TEXT_TOO_LONG", "text"),
]


@pytest.mark.parametrize(
    ("messages", "reason", "field"),
    [case[1:] for case in BAD_STREAMS],
    ids=[case[0] for case in BAD_STREAMS],
)
async def test_bad_streams_are_invalid_argument(
    start: Start, messages: list[tts_pb2.SynthesizeStreamRequest], reason: str, field: str
) -> None:
    service = await start(max_text_chars=100)

    async def requests() -> AsyncIterator[tts_pb2.SynthesizeStreamRequest]:
        for message in messages:
            yield message

    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = tts_pb2_grpc.TTSServiceStub(channel)
        responses: list[tts_pb2.SynthesizeStreamResponse] = []
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async with asyncio.timeout(SHORT):
                async for response in stub.SynthesizeStream(requests(), timeout=SHORT):
                    responses.append(response)
    error = AgentClientError.from_rpc_error(caught.value)
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason), error.message
    assert [v.field for v in error.violations] == [field]
    assert not any(r.chunk.last for r in responses), "an error close has no last chunk"
    async with asyncio.timeout(SHORT):
        await service.engine.wait_idle()
        await service.backend.wait_idle()  # type: ignore[attr-defined]


async def test_a_rejected_config_is_reported_to_a_client_with_text_to_send(
    start: Start,
) -> None:
    service = await start()

    async def eager() -> AsyncIterator[str]:
        for piece in ("Text the client ", "has ready at once. ", "And more."):
            yield piece

    async with TTSClient(target(service), timeout=SHORT) as client:
        for _ in range(20):  # the race it avoids was rare (about 1 in 300)
            with pytest.raises(AgentClientError) as caught:
                await collect(client.synthesize_stream(eager(), voice="no-such-voice", rate=9))
            assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert caught.value.reason == "INVALID_OPTIONS"
            fields = [v.field for v in caught.value.violations]
            assert fields == ["config.voice", "config.rate"]


# --- limits and cancellation -----------------------------------------------------------------


async def test_over_the_concurrency_limit_is_resource_exhausted(start: Start) -> None:
    service = await start(max_concurrent=1, max_text_chars=len(LONG_TEXT))
    async with TTSClient(target(service), timeout=SHORT) as client:
        held = client.synthesize(LONG_TEXT)
        async with asyncio.timeout(SHORT):
            first = await anext(held)  # started: the only slot is taken until `held` ends
        assert first.data
        with pytest.raises(AgentClientError) as caught:
            await collect(client.synthesize("one more"))
        assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert caught.value.reason == "TOO_MANY_SYNTHESES"

        async def one() -> AsyncIterator[str]:
            yield "one more"

        with pytest.raises(AgentClientError) as caught:
            await collect(client.synthesize_stream(one()))
        assert caught.value.reason == "TOO_MANY_SYNTHESES"
        await held.aclose()  # cancels the call
        async with asyncio.timeout(SHORT):
            await service.engine.wait_idle()
        chunks = await collect(client.synthesize("the slot is free again"))
        assert chunks[-1].last


async def test_cancelling_synthesize_kills_espeak(start: Start) -> None:
    service = await start(max_text_chars=len(LONG_TEXT))
    backend = service.backend
    assert isinstance(backend, EspeakBackend)
    async with TTSClient(target(service), timeout=SHORT) as client:
        chunks = client.synthesize(LONG_TEXT)
        async with asyncio.timeout(SHORT):
            await anext(chunks)
        pids = backend.live_pids
        assert len(pids) == 1 and not any(process_gone(pid) for pid in pids)
        await chunks.aclose()  # mid-synthesis: minutes of audio are still to come
        async with asyncio.timeout(SHORT):
            await backend.wait_idle()
            await service.engine.wait_idle()
    assert backend.live_pids == frozenset()
    assert all(process_gone(pid) for pid in pids)


async def test_cancelling_a_stream_kills_espeak(start: Start) -> None:
    service = await start(max_text_chars=len(LONG_TEXT))
    backend = service.backend
    assert isinstance(backend, EspeakBackend)
    hold = asyncio.Event()

    async def deltas() -> AsyncIterator[str]:
        yield LONG_TEXT
        await hold.wait()  # never set: the input stays open

    async with TTSClient(target(service), timeout=SHORT) as client:
        chunks = client.synthesize_stream(deltas())
        async with asyncio.timeout(SHORT):
            await anext(chunks)
        pids = backend.live_pids
        assert len(pids) == 1
        await chunks.aclose()
        async with asyncio.timeout(SHORT):
            await backend.wait_idle()
            await service.engine.wait_idle()
    assert all(process_gone(pid) for pid in pids)


async def test_stop_ends_syntheses_and_reports_not_serving(start: Start) -> None:
    service = await start(max_text_chars=len(LONG_TEXT))
    backend = service.backend
    assert isinstance(backend, EspeakBackend)
    async with TTSClient(target(service), timeout=SHORT) as client:
        chunks = client.synthesize(LONG_TEXT)
        async with asyncio.timeout(SHORT):
            await anext(chunks)
        pids = backend.live_pids
        async with asyncio.timeout(SHORT):
            await service.stop(0)
        with pytest.raises(AgentClientError):
            await collect(chunks)
    assert all(process_gone(pid) for pid in pids)
    assert backend.live_pids == frozenset()
    status = await service.server.health.Check(
        health_pb2.HealthCheckRequest(service=SERVICE_NAME), None
    )
    assert status.status == health_pb2.HealthCheckResponse.NOT_SERVING


# --- voices, health, config ------------------------------------------------------------------


async def test_list_voices_filters_and_pages(start: Start) -> None:
    service = await start()
    async with TTSClient(target(service), timeout=SHORT) as client:
        everything = await client.list_voices()
        english = await client.list_voices(language="en")
    assert len(everything.voices) > 50
    names = [v.name for v in english.voices]
    assert "en-us" in names and "en-gb" in names
    assert all(any(code.split("-")[0] == "en" for code in v.languages) for v in english.voices)
    us = next(v for v in english.voices if v.name == "en-us")
    assert us.display_name == "English (America)" and us.gender == "male"
    assert "f3" in english.variants
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = tts_pb2_grpc.TTSServiceStub(channel)
        page = await stub.ListVoices(tts_pb2.ListVoicesRequest(page_size=5), timeout=SHORT)
        assert len(page.voices) == 5 and page.next_page_token
        rest = await stub.ListVoices(
            tts_pb2.ListVoicesRequest(page_size=1000, page_token=page.next_page_token),
            timeout=SHORT,
        )
        assert [v.name for v in [*page.voices, *rest.voices]] == [v.name for v in everything.voices]
        assert not rest.next_page_token
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ListVoices(tts_pb2.ListVoicesRequest(page_size=5000), timeout=SHORT)
        error = AgentClientError.from_rpc_error(caught.value)
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")
        assert [v.field for v in error.violations] == ["page_size"]


@pytest.mark.parametrize(
    "token",
    ["9" * 4301, "\u00b2", "-1", "1 ", "12345678901"],
    ids=["4301 digits", "superscript", "negative", "space", "too long"],
)
async def test_a_page_token_not_handed_out_is_invalid_argument(start: Start, token: str) -> None:
    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        stub = tts_pb2_grpc.TTSServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ListVoices(tts_pb2.ListVoicesRequest(page_token=token), timeout=SHORT)
        error = AgentClientError.from_rpc_error(caught.value)
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SCHEMA")
        assert [v.field for v in error.violations] == ["page_token"]
        assert (await stub.ListVoices(tts_pb2.ListVoicesRequest(), timeout=SHORT)).voices


async def test_health_is_serving(start: Start) -> None:
    service = await start()
    async with grpc.aio.insecure_channel(target(service)) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE_NAME):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=SHORT)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_missing_engine_fails_at_start() -> None:
    from hookmesh.tts import BackendError

    with pytest.raises(BackendError) as caught:
        await start_tts_service(
            load_tts_config(espeak_binary="/nonexistent/espeak-ng"), address="127.0.0.1:0"
        )
    assert caught.value.reason == "ENGINE_NOT_INSTALLED"


def test_config_from_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_tts_config().listen == "127.0.0.1:7003"
    path = tmp_path / "tts.yaml"
    path.write_text("max_concurrent: 2\nmax_text_chars: 500\n")
    monkeypatch.setenv("HOOKMESH_TTS_MAX_CONCURRENT", "3")
    config = load_tts_config(path)
    assert (config.max_concurrent, config.max_text_chars) == (3, 500)
    path.write_text("max_concurent: 2\n")
    with pytest.raises(ValueError, match="max_concurent"):
        load_tts_config(path)


# --- the pieces: segmenter, voice list --------------------------------------------------------


@pytest.mark.parametrize(
    ("deltas", "segments", "rest"),
    [
        (["Hello there. How are", " you? Fine"], ["Hello there.", "How are you?"], ["Fine"]),
        (["It costs 3.", "14 euros. Ok"], ["It costs 3.14 euros."], ["Ok"]),
        (["Wait.", " ", "Go"], ["Wait."], ["Go"]),
        (['He said "stop." Then', " left"], ['He said "stop."'], ["Then left"]),
        (["Short, then", " more"], [], ["Short, then more"]),
        (
            ["This clause is long enough to stand alone, and this one follows"],
            ["This clause is long enough to stand alone,"],
            ["and this one follows"],
        ),
        (["line one\nline two"], ["line one"], ["line two"]),
        (["   ", "\n\n"], [], []),
    ],
)
def test_segmenter_cuts_at_sentence_and_clause_ends(
    deltas: list[str], segments: list[str], rest: list[str]
) -> None:
    segmenter = Segmenter()
    out = [segment for delta in deltas for segment in segmenter.push(delta)]
    assert out == segments
    assert segmenter.flush() == rest


def test_segmenter_cuts_text_without_punctuation_at_a_space() -> None:
    segmenter = Segmenter(max_chars=40)
    words = " ".join(f"word{i}" for i in range(30))
    out = segmenter.push(words) + segmenter.flush()
    assert " ".join(out) == words
    assert all(len(segment) <= 40 for segment in out)


def test_parse_voices_reads_espeak_columns() -> None:
    text = (
        "Pty Language       Age/Gender VoiceName          File                 Other Languages\n"
        " 2  en-us           --/M      English_(America)  gmw/en-US            (en 3)\n"
        " 5  yue             --/M      Chinese_(Cantonese) sit/yue              (zh-yue 5)(zh 8)\n"
        " 5  yue             --/F      Chinese_(Jyutping) sit/yue-Latn-jyutping (zh 8)\n"
    )
    voices = [voice for voice, _ in parse_voices(text)]
    assert [(v.name, v.languages, v.gender) for v in voices] == [
        ("en-us", ("en-us", "en"), "male"),
        ("yue", ("yue", "zh-yue", "zh"), "male"),
        ("sit/yue-Latn-jyutping", ("yue", "zh"), "female"),
    ]
    assert voices[0].display_name == "English (America)"
