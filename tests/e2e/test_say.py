"""`hookmesh say`, `hookmesh serve tts` and `hookmesh chat --speak`, each run as its own
process, with real espeak-ng."""

from __future__ import annotations

import array
import asyncio
import math
import os
import signal
import sys
import wave
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.commands import DEADLINE, ROOT, run, start_up

pytestmark = pytest.mark.timeout(120)

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs away home."
RMS_FLOOR = 300.0


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def read_wav(path: Path) -> tuple[int, int, bytes]:
    with wave.open(str(path)) as wav:
        assert wav.getsampwidth() == 2
        return wav.getframerate(), wav.getnchannels(), wav.readframes(wav.getnframes())


def assert_speech(path: Path, words: int) -> float:
    rate, channels, pcm = read_wav(path)
    assert (rate, channels) == (22050, 1)
    samples = array.array("h", pcm)
    audio_seconds = len(samples) / rate  # the audio's length, not a wall-clock time
    assert 0.15 <= audio_seconds / words <= 1.0, f"{audio_seconds / words:.3f} s per word"
    assert math.sqrt(sum(s * s for s in samples) / len(samples)) > RMS_FLOOR
    return audio_seconds


@pytest.fixture
async def tts_server() -> AsyncIterator[str]:
    """`hookmesh serve tts` on a free port; stopped with SIGINT (it must exit 0)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hookmesh.cli",
        "serve",
        "tts",
        "--listen",
        "127.0.0.1:0",
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(DEADLINE):
            line = (await process.stdout.readline()).decode()
        assert line.startswith("tts service listening on "), line
        yield line.split()[-1]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert await process.wait() == 0


async def test_say_writes_a_wav_of_real_speech(tmp_path: Path) -> None:
    out = tmp_path / "out.wav"
    code, stdout, err = await run("say", TEXT, "-o", str(out), "--local")
    assert code == 0, err
    assert stdout.startswith(f"wrote {out} (") and "22050 Hz" in stdout
    assert_speech(out, len(TEXT.split()))
    assert files_in(tmp_path) == ["out.wav"]


async def test_say_rate_and_voice(tmp_path: Path) -> None:
    fast, slow = tmp_path / "fast.wav", tmp_path / "slow.wav"
    results = await asyncio.gather(
        run("say", TEXT, "-o", str(fast), "--rate", "300", "--voice", "en-us+f3", "--local"),
        run("say", TEXT, "-o", str(slow), "--rate", "120", "--voice", "en-us", "--local"),
    )
    assert [code for code, _, _ in results] == [0, 0], results
    words = len(TEXT.split())
    assert assert_speech(fast, words) < assert_speech(slow, words)


async def test_say_through_the_tts_service(tmp_path: Path, tts_server: str) -> None:
    out = tmp_path / "remote.wav"
    code, _, err = await run("say", TEXT, "-o", str(out), "--target", tts_server)
    assert code == 0, err
    assert_speech(out, len(TEXT.split()))


async def test_say_reports_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "none.wav"
    code, _, err = await run("say", "   ", "-o", str(out), "--local")
    assert (code, err) == (2, "error: give the text to say\n")
    code, _, err = await run("say", "hi", "-o", str(out), "--voice", "no-such-voice", "--local")
    assert code == 2 and "[INVALID_OPTIONS]" in err and "config.voice" in err
    code, _, err = await run("say", "hi", "-o", str(out), "--target", "127.0.0.1:1")
    assert code == 1 and "or use --local" in err
    code, _, err = await run("say", "hi", "-o", str(out), "--target", "nonsense")
    assert code == 2 and "is not host:port" in err
    assert files_in(tmp_path) == []


async def test_chat_speak_saves_the_replys_audio(tmp_path: Path) -> None:
    answer = "Sunny in Lisbon today, with a light breeze from the sea."
    config = tmp_path / "hookmesh.yaml"
    config.write_text(
        f"""
listen: 127.0.0.1:0
store: sqlite:///{tmp_path}/agent.db
grace_seconds: 1
models:
  default: {{type: scripted, turns: ["{answer}"], stream: true, chunk_size: 8}}
middlewares:
  - {{type: local, import: "hookmesh.middleware.builtin.tts:TTSMiddleware"}}
"""
    )
    suite = await start_up("--config", str(config))
    out = tmp_path / "reply.wav"
    try:
        code, stdout, err = await run(
            "chat", "--target", suite.addresses["agent"], "--speak", str(out), "weather?"
        )
        assert code == 0, err
        # The audio's line waits for the end of the streamed text instead of splitting it.
        assert f"\n{answer}\n  [data audio/pcm;rate=22050;channels=1 speech]" in stdout
        assert f"saved to {out}" in err
        assert_speech(out, len(answer.split()))
    finally:
        code, err = await suite.stop()
    assert code == 0, err
