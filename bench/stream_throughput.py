"""Reply streaming throughput: events/s from AgentService.Reply against raw grpc.aio streaming.

One process, one event loop: the servers and their clients share it (the 2-process variant
moves the servers to a child process). Each round streams one reply of a scripted model that
answers ``TEXT_CHARS`` characters in ``CHUNK``-character deltas (one text_block_delta event
each), flat kind, no middlewares, SQLite store in a temp dir. It is counted by

- `raw`: a plain grpc.aio server-streaming method (generic handler, no interceptors) sending
  as many pre-built ``ReplyResponse`` messages as a reply has events, each the size of a
  text-delta response: the floor;
- `agent/stub`: ``AgentServiceStub.Reply`` on a plain channel, decoding ``ReplyResponse``
  only (what the server can deliver);
- `agent/client`: ``hookmesh.client.AgentClient.reply`` (adds the client's interceptors and
  the conversion to pydantic events).

Rounds are interleaved after a warm-up; figures are medians with the range over rounds,
plus p50/p99 of the gap between consecutive messages at the client. Then a breakdown of the
per-event server work without gRPC. Prints figures; asserts nothing.

Usage: ``python bench/stream_throughput.py [--loops asyncio,uvloop] [--rounds 5] [--no-2proc]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from hookmesh.agent import Agent
from hookmesh.agent.models import ScriptedChatModel
from hookmesh.client import AgentClient
from hookmesh.schema import TextBlockDeltaEvent, event_to_proto, make_user_text, message_to_proto
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc

TEXT_CHARS = 40_000
CHUNK = 8
ROUNDS = 5
TARGET = 0.70
"""AgentService events/s as a share of raw grpc.aio events/s that we aim for."""
TIMEOUT = 60.0
_RAW_METHOD = "/hookmesh.bench.RawStream/Stream"
_EVENTS_PER_REPLY = TEXT_CHARS // CHUNK + 6
"""Deltas plus reply_start, model_call_start, text_block_start/end, model_call_end, reply_end."""


def _loop_name() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    return "uvloop" if isinstance(asyncio.get_running_loop(), uvloop.Loop) else "asyncio"


def _delta_response() -> _agent_pb2.ReplyResponse:
    """A typical text-delta ``ReplyResponse``, ids as long as the agent's."""
    reply_id = "0" * 32
    event = TextBlockDeltaEvent(reply_id=reply_id, block_id=f"{reply_id}-1", delta="x" * CHUNK)
    return _agent_pb2.ReplyResponse(event=event_to_proto(event))


# --- servers -------------------------------------------------------------------------------


async def start_raw_server(address: str = "127.0.0.1:0") -> tuple[grpc.aio.Server, int]:
    """A bare grpc.aio server streaming N copies of one pre-built message (N in the request)."""
    message = _delta_response()

    async def stream(request: bytes, unused_context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        for _ in range(int(request)):
            yield message

    handler = grpc.method_handlers_generic_handler(
        _RAW_METHOD.split("/")[1],
        {
            "Stream": grpc.unary_stream_rpc_method_handler(
                stream, response_serializer=_agent_pb2.ReplyResponse.SerializeToString
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(address)
    await server.start()
    return server, port


async def start_agent(tmp: str, address: str = "127.0.0.1:0") -> AgentService:
    """The production agent service with a streaming scripted model."""
    config = load_config(
        store=f"sqlite:///{tmp}/agent.db",
        models={
            "default": {
                "type": "scripted",
                "turns": ["x" * TEXT_CHARS],
                "stream": True,
                "chunk_size": CHUNK,
            }
        },
        agent={"kind": "flat"},
    )
    return await start_agent_service(config, address=address)


# --- clients -------------------------------------------------------------------------------

Round = Callable[[], Awaitable[tuple[int, float, list[float]]]]


async def _count(stream: AsyncIterator[Any]) -> tuple[int, float, list[float]]:
    stamps = []
    clock = time.perf_counter
    start = clock()
    async for _ in stream:
        stamps.append(clock())
    elapsed = clock() - start
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return len(stamps), elapsed, gaps


def raw_round(channel: grpc.aio.Channel) -> Round:
    method = channel.unary_stream(
        _RAW_METHOD, response_deserializer=_agent_pb2.ReplyResponse.FromString
    )
    request = str(_EVENTS_PER_REPLY).encode()
    return lambda: _count(method(request, timeout=TIMEOUT))


def stub_round(channel: grpc.aio.Channel) -> Round:
    stub = _agent_grpc.AgentServiceStub(channel)
    request = _agent_pb2.ReplyRequest(messages=[message_to_proto(make_user_text("flat", "hi"))])
    return lambda: _count(stub.Reply(request, timeout=TIMEOUT))


def client_round(client: AgentClient) -> Round:
    return lambda: _count(client.reply("hi", timeout=TIMEOUT))


async def measure(rounds: dict[str, Round], n_rounds: int) -> dict[str, list[Any]]:
    """Warm up each, then run `n_rounds` interleaved rounds; (count, elapsed, gaps) per round."""
    for run in rounds.values():
        await run()
    results: dict[str, list[Any]] = {name: [] for name in rounds}
    for _ in range(n_rounds):
        for name, run in rounds.items():
            gc.collect()
            results[name].append(await run())
    return results


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def report(title: str, results: dict[str, list[Any]]) -> None:
    print(f"  {title}")
    rates: dict[str, float] = {}
    for name, rows in results.items():
        per_round = [count / elapsed for count, elapsed, _ in rows]
        gaps = [g for _, _, round_gaps in rows for g in round_gaps]
        rates[name] = statistics.median(per_round)
        counts = {count for count, _, _ in rows}
        print(
            f"    {name:13s} {rates[name]:9,.0f} events/s "
            f"(rounds {min(per_round):,.0f}-{max(per_round):,.0f}; {'/'.join(map(str, counts))} "
            f"msgs)  gap p50 {_pct(gaps, 0.5) * 1e6:6.1f} µs  p99 {_pct(gaps, 0.99) * 1e6:7.1f} µs"
        )
    raw = rates["raw"]
    for name in ("agent/stub", "agent/client"):
        if name in rates:
            ratio = rates[name] / raw
            print(
                f"    {name} / raw = {ratio:5.1%}  (target >= {TARGET:.0%}: "
                f"{'met' if ratio >= TARGET else 'missed'})"
            )


async def one_process(n_rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw_server, raw_port = await start_raw_server()
        agent = await start_agent(tmp)
        raw_channel = grpc.aio.insecure_channel(f"127.0.0.1:{raw_port}")
        agent_channel = grpc.aio.insecure_channel(f"127.0.0.1:{agent.port}")
        client = AgentClient(f"127.0.0.1:{agent.port}", timeout=TIMEOUT)
        try:
            await raw_channel.channel_ready()
            await agent_channel.channel_ready()
            results = await measure(
                {
                    "raw": raw_round(raw_channel),
                    "agent/stub": stub_round(agent_channel),
                    "agent/client": client_round(client),
                },
                n_rounds,
            )
        finally:
            await client.close()
            await raw_channel.close()
            await agent_channel.close()
            await agent.stop(None)
            await raw_server.stop(None)
    report(f"1 process ({_loop_name()}): servers and clients on one loop", results)


async def two_processes(loop: str, n_rounds: int) -> None:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", loop],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        raw_port, agent_port = map(int, child.stdout.readline().split())
        raw_channel = grpc.aio.insecure_channel(f"127.0.0.1:{raw_port}")
        agent_channel = grpc.aio.insecure_channel(f"127.0.0.1:{agent_port}")
        try:
            await raw_channel.channel_ready()
            await agent_channel.channel_ready()
            results = await measure(
                {"raw": raw_round(raw_channel), "agent/stub": stub_round(agent_channel)},
                n_rounds,
            )
        finally:
            await raw_channel.close()
            await agent_channel.close()
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    report(f"2 processes ({loop} both sides): servers in a child process", results)


async def serve_child() -> None:
    """Child of the 2-process variant: serve until stdin closes."""
    with tempfile.TemporaryDirectory() as tmp:
        raw_server, raw_port = await start_raw_server()
        agent = await start_agent(tmp)
        print(raw_port, agent.port, flush=True)
        await asyncio.to_thread(sys.stdin.read)
        await agent.stop(None)
        await raw_server.stop(None)


# --- breakdown -----------------------------------------------------------------------------


async def breakdown() -> None:
    """µs per event of each server-side stage, in-process, without gRPC."""
    model = ScriptedChatModel(["x" * TEXT_CHARS], stream=True, chunk_size=CHUNK, repeat=True)

    async def run(stage: Callable[[Any], Any]) -> float:
        best = []
        for _ in range(3):
            agent = Agent(model, kind="flat", system_prompt="You are a helpful assistant.")
            gc.collect()
            n = 0
            start = time.perf_counter()
            async for event in agent.reply("hi"):
                stage(event)
                n += 1
            best.append((time.perf_counter() - start) / n * 1e6)
        return min(best)

    response = _agent_pb2.ReplyResponse
    stages = {
        "agent events": lambda ev: None,
        "+ event_to_proto": event_to_proto,
        "+ ReplyResponse(event=)": lambda ev: response(event=event_to_proto(ev)),
        "+ SerializeToString": lambda ev: response(event=event_to_proto(ev)).SerializeToString(),
    }
    print("  per-event server work without gRPC (min of 3 replies):")
    previous = 0.0
    for name, stage in stages.items():
        us = await run(stage)
        print(f"    {name:26s} {us:6.2f} µs cumulative  ({us - previous:+.2f})")
        previous = us


# --- main ----------------------------------------------------------------------------------


def _run(coro_fn: Callable[[], Awaitable[None]], loop: str) -> None:
    if loop == "uvloop":
        import uvloop

        uvloop.run(coro_fn())  # type: ignore[arg-type]
    else:
        asyncio.run(coro_fn())  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="asyncio,uvloop")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--no-2proc", action="store_true", help="skip the 2-process variant")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _run(serve_child, args.serve)
        return
    size = _delta_response().ByteSize()
    print(
        f"python {sys.version.split()[0]}, grpcio {grpc.__version__}; one reply = "
        f"{_EVENTS_PER_REPLY} events ({TEXT_CHARS} chars in {CHUNK}-char deltas), "
        f"text-delta ReplyResponse = {size} bytes; raw sends {_EVENTS_PER_REPLY} of those; "
        f"{args.rounds} rounds after 1 warm-up (median, range)"
    )
    for loop in args.loops.split(","):
        print(f"loop {loop}")
        _run(lambda: one_process(args.rounds), loop)
        if not args.no_2proc:
            _run(lambda: two_processes(loop, args.rounds), loop)  # noqa: B023
    _run(breakdown, "asyncio")


if __name__ == "__main__":
    main()
