"""Time to the first audio byte: espeak-ng run directly vs through TTSService over loopback.

Setup: `hookmesh serve tts` in its own process (the production server: uvloop, health,
reflection, OpenTelemetry interceptor), and a plain grpc.aio echo server in another process
for the floor. The client (this process) measures, interleaved, RUNS times each after WARMUP:
  direct      spawn ``espeak-ng --stdout --stdin`` as the service does (vfork, pipes on the
              loop), write the text, read to the first PCM byte
  synthesize  Synthesize call start to the first response carrying audio (rest read untimed)
  realtime    on an open SynthesizeStream: send a finished sentence, time to its first audio
  unary       grpc unary round trip (echo server), and Health.Check on the TTS server
  bidi        one ping-pong on a long-lived bidi stream (echo server)
  stream      server-streaming call start to its first message (Health.Watch, TTS server)
Target: synthesize p50 <= direct p50 + bidi p50 + 2 ms. Rows are p50 and p99 over RUNS
samples each (p99 only with at least 100 samples; fewer would make it the maximum, and the
column says "max" then). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.tts import DEFAULT_MAX_TEXT_CHARS, spawn
from hookmesh.v1 import tts_pb2, tts_pb2_grpc

RUNS = 500
"""Samples per row: enough that p99 is a percentile (the 6th slowest), not the maximum."""
WARMUP = 20
TEXT = "Hello world, this is a short sentence to measure the latency of speech."
ROOT = Path(__file__).parents[1]
_ECHO = "/bench.Echo/"
_STREAM_CHARS = DEFAULT_MAX_TEXT_CHARS  # what the service takes per SynthesizeStream


def _identity(data: bytes) -> bytes:
    return data


# --- the echo server (run with --echo-server) ------------------------------------------------


async def _serve_echo() -> None:
    async def unary(request: bytes, unused_context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def bidi(
        requests: AsyncIterator[bytes], unused_context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, _identity, _identity),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi, _identity, _identity),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


# --- measurements ----------------------------------------------------------------------------


async def direct_first_byte() -> float:
    start = time.perf_counter()
    child = await spawn(["espeak-ng", "--stdout", "--stdin"])
    child.stdin.write(TEXT.encode())
    child.stdin.close()
    got = 0
    while got <= 44:  # the WAV header, then the first PCM byte
        data = await child.stdout.read(65536)
        if not data:
            raise RuntimeError("espeak-ng produced no audio")
        got += len(data)
    elapsed = time.perf_counter() - start
    child.kill()
    await child.exited
    return elapsed


async def synthesize_first_byte(stub: tts_pb2_grpc.TTSServiceStub) -> float:
    start = time.perf_counter()
    elapsed = 0.0
    async for response in stub.Synthesize(tts_pb2.SynthesizeRequest(text=TEXT), timeout=10):
        if response.chunk.data and not elapsed:
            elapsed = time.perf_counter() - start
    # Read to the end (untimed): a cancel mid-stream would be a different, rarer path.
    if not elapsed:
        raise RuntimeError("no audio")
    return elapsed


class RealtimeStream:
    """An open SynthesizeStream; each probe sends a finished sentence and waits for audio.

    A stream takes at most `_STREAM_CHARS` characters in all, so before it would run out the
    stream is replaced, outside the timing, and warmed with one untimed sentence.
    """

    def __init__(self, stub: tts_pb2_grpc.TTSServiceStub) -> None:
        self.stub = stub
        self._open()

    def _open(self) -> None:
        self.sent = 0
        self.outbox: asyncio.Queue[tts_pb2.SynthesizeStreamRequest] = asyncio.Queue()
        self.outbox.put_nowait(tts_pb2.SynthesizeStreamRequest(config=tts_pb2.SpeechConfig()))
        self.call = self.stub.SynthesizeStream(self._requests(), timeout=600)
        self.reader: AsyncIterator[tts_pb2.SynthesizeStreamResponse] = aiter(self.call)

    async def _requests(self) -> AsyncIterator[tts_pb2.SynthesizeStreamRequest]:
        while True:
            yield await self.outbox.get()

    async def probe(self) -> float:
        if self.sent + len(TEXT) + 1 > _STREAM_CHARS:
            self.close()
            self._open()
            await self._sentence()
        return await self._sentence()

    async def _sentence(self) -> float:
        start = time.perf_counter()
        # The space after the full stop is what tells the server the sentence is complete.
        self.outbox.put_nowait(tts_pb2.SynthesizeStreamRequest(text=TEXT + " "))
        self.sent += len(TEXT) + 1
        response = await anext(self.reader)
        elapsed = time.perf_counter() - start
        # Drain this sentence's audio: espeak-ng makes it ~1000x faster than real time.
        total = len(response.chunk.data)
        expected = await _sentence_bytes()
        while total < expected:
            total += len((await anext(self.reader)).chunk.data)
        return elapsed

    def close(self) -> None:
        self.call.cancel()


_SENTENCE_BYTES: list[int] = []


async def _sentence_bytes() -> int:
    """PCM bytes espeak-ng makes for TEXT spoken alone (line mode), measured once."""
    if not _SENTENCE_BYTES:
        child = await spawn(["espeak-ng", "--stdout"])
        child.stdin.write((TEXT + "\n").encode())
        child.stdin.close()
        out = await child.stdout.read()
        await child.exited
        _SENTENCE_BYTES.append(len(out) - 44)
    return _SENTENCE_BYTES[0]


async def unary_round_trip(echo: grpc.aio.Channel) -> float:
    method = echo.unary_unary(_ECHO + "Unary", _identity, _identity)
    start = time.perf_counter()
    await method(b"ping", timeout=10)
    return time.perf_counter() - start


async def health_check(health: health_pb2_grpc.HealthStub) -> float:
    start = time.perf_counter()
    await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
    return time.perf_counter() - start


class BidiPing:
    """One long-lived echo stream: each probe is one ping-pong."""

    def __init__(self, echo: grpc.aio.Channel) -> None:
        self.call = echo.stream_stream(_ECHO + "Bidi", _identity, _identity)(timeout=600)

    async def probe(self) -> float:
        start = time.perf_counter()
        await self.call.write(b"ping")
        await self.call.read()
        return time.perf_counter() - start

    def close(self) -> None:
        self.call.cancel()


async def stream_first_message(health: health_pb2_grpc.HealthStub) -> float:
    start = time.perf_counter()
    call = health.Watch(health_pb2.HealthCheckRequest(), timeout=10)
    await anext(aiter(call))
    elapsed = time.perf_counter() - start
    call.cancel()
    return elapsed


# --- the run ---------------------------------------------------------------------------------


def _start(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"{args} did not start: {line!r}")
    return process, line.split()[-1]


def _ms(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 in ms (the maximum when there are under 100 samples: see `_tail`)."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def _tail(count: int) -> str:
    return "p99 ms" if count >= 100 else "max ms"


async def main() -> None:
    load_before = os.getloadavg()[0]
    tts_process, tts_address = _start(
        "-m", "hookmesh.cli", "serve", "tts", "--listen", "127.0.0.1:0"
    )
    echo_process, echo_address = _start(__file__, "--echo-server")
    try:
        async with (
            grpc.aio.insecure_channel(tts_address) as tts_channel,
            grpc.aio.insecure_channel(echo_address) as echo_channel,
        ):
            await asyncio.wait_for(tts_channel.channel_ready(), 10)
            await asyncio.wait_for(echo_channel.channel_ready(), 10)
            stub = tts_pb2_grpc.TTSServiceStub(tts_channel)
            health = health_pb2_grpc.HealthStub(tts_channel)
            realtime = RealtimeStream(stub)
            bidi = BidiPing(echo_channel)
            probes: dict[str, Callable[[], Awaitable[float]]] = {
                "direct espeak-ng --stdout": direct_first_byte,
                "TTSService.Synthesize": lambda: synthesize_first_byte(stub),
                "SynthesizeStream (open)": realtime.probe,
                "grpc unary (echo)": lambda: unary_round_trip(echo_channel),
                "grpc unary (Health.Check)": lambda: health_check(health),
                "grpc bidi ping-pong (echo)": bidi.probe,
                "grpc stream 1st msg (Watch)": lambda: stream_first_message(health),
            }
            samples: dict[str, list[float]] = {name: [] for name in probes}
            for i in range(WARMUP + RUNS):
                for name, probe in probes.items():  # interleaved: drift hits all alike
                    elapsed = await probe()
                    if i >= WARMUP:
                        samples[name].append(elapsed)
            realtime.close()
            bidi.close()
    finally:
        for process in (tts_process, echo_process):
            process.terminate()
            process.wait(10)
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    print(
        f"python {sys.version.split()[0]}, client loop {loop}, server `hookmesh serve tts` "
        f"(uvloop) in its own process, {os.cpu_count()} cores (load average {load_before:.2f} "
        f"before, {os.getloadavg()[0]:.2f} after); {RUNS} runs after {WARMUP} warm-up, "
        f"interleaved; text: {len(TEXT.split())} words"
    )
    print(f"{'time to first audio byte / round trip':38s} {'p50 ms':>8s} {_tail(RUNS):>8s}")
    figures = {name: _ms(values) for name, values in samples.items()}
    for name, (p50, p99) in figures.items():
        print(f"  {name:36s} {p50:8.3f} {p99:8.3f}")
    direct = figures["direct espeak-ng --stdout"][0]
    synth = figures["TTSService.Synthesize"][0]
    bidi_rt = figures["grpc bidi ping-pong (echo)"][0]
    budget = direct + bidi_rt + 2.0
    verdict = "met" if synth <= budget else "MISSED"
    print(
        f"target: Synthesize p50 {synth:.3f} ms <= direct {direct:.3f} + bidi {bidi_rt:.3f} "
        f"+ 2 ms = {budget:.3f} ms: {verdict} (gRPC adds {synth - direct:+.3f} ms, "
        f"{synth / direct:.2f}x direct)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    options = parser.parse_args()
    if options.quick:
        RUNS, WARMUP = 10, 2
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve_echo() if options.echo_server else main())
    else:
        uvloop.run(_serve_echo() if options.echo_server else main())
