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

Rounds are interleaved after a warm-up; figures are medians with the range over rounds, CPU
per event (the whole process; server and client processes apart in the 2-process variant;
CPU is steadier than wall time on a shared machine) and p50/p99 of the gap between
consecutive messages at the client. Then the per-event work without gRPC, stage by stage.
Prints figures; asserts nothing.

Usage: ``python bench/stream_throughput.py [--loops asyncio,uvloop] [--rounds 7] [--no-2proc]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import statistics
import sys
import tempfile
import time
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

import grpc

from hookmesh.agent import Agent
from hookmesh.client import AgentClient
from hookmesh.models import ScriptedChatModel
from hookmesh.schema import (
    TextBlockDeltaEvent,
    event_from_proto,
    event_to_proto,
    make_user_text,
    message_to_proto,
)
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.v1 import agent_pb2 as _agent_pb2
from hookmesh.v1 import agent_pb2_grpc as _agent_grpc

TEXT_CHARS = 40_000
CHUNK = 8
ROUNDS = 7
TARGET = 0.90
"""AgentService events/s as a share of raw grpc.aio events/s that we aim for."""
TIMEOUT = 60.0
_RAW_METHOD = "/hookmesh.bench.RawStream/Stream"
_EVENTS_PER_REPLY = TEXT_CHARS // CHUNK + 6
_CHILD_ARGS: tuple[str, ...] = ()
"""What the 2-process variant's child gets beside its loop (--quick passes on)."""
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


async def _agent_delta_size() -> int:
    """Serialized size of the first text_block_delta ``ReplyResponse`` of a real reply."""
    agent = Agent(ScriptedChatModel(["x" * CHUNK * 2], stream=True, chunk_size=CHUNK))
    async for event in agent.reply("hi"):
        if event.type == "text_block_delta":
            size = _agent_pb2.ReplyResponse(event=event_to_proto(event)).ByteSize()
    return size


# --- servers -------------------------------------------------------------------------------


async def start_raw_server(address: str = "127.0.0.1:0") -> tuple[grpc.aio.Server, int]:
    """A bare grpc.aio server streaming N copies of one pre-built message (N in the request)."""
    message = _delta_response()

    async def stream(
        request: bytes, unused_context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
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

Round = Callable[[], AsyncIterator[Any]]
"""Starts one call; iterating it yields the messages (or events) received."""


class Sample(NamedTuple):
    """One round: messages received, wall seconds, CPU seconds, client-side gaps."""

    messages: int
    wall: float
    cpu: float
    """The whole process in the 1-process variant; the client's in the 2-process one."""
    server_cpu: float
    """The server process's (2-process variant only)."""
    gaps: list[float]


def raw_round(channel: grpc.aio.Channel) -> Round:
    method = channel.unary_stream(
        _RAW_METHOD, response_deserializer=_agent_pb2.ReplyResponse.FromString
    )
    request = str(_EVENTS_PER_REPLY).encode()
    return lambda: method(request, timeout=TIMEOUT)


def stub_round(channel: grpc.aio.Channel) -> Round:
    stub = _agent_grpc.AgentServiceStub(channel)
    request = _agent_pb2.ReplyRequest(messages=[message_to_proto(make_user_text("flat", "hi"))])
    return lambda: stub.Reply(request, timeout=TIMEOUT)


def client_round(client: AgentClient) -> Round:
    return lambda: client.reply("hi", timeout=TIMEOUT)


CpuClock = Callable[[], Awaitable[tuple[float, float]]]
"""CPU seconds used so far by this process and by the server's (0 when it is this one)."""


async def _own_cpu() -> tuple[float, float]:
    return time.process_time(), 0.0


async def _sample(run: Round, cpu: CpuClock) -> Sample:
    clock = time.perf_counter
    stamps = []
    cpu_start, server_start = await cpu()
    start = clock()
    async for _ in run():
        stamps.append(clock())
    wall = clock() - start
    cpu_end, server_end = await cpu()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return Sample(len(stamps), wall, cpu_end - cpu_start, server_end - server_start, gaps)


async def measure(
    rounds: dict[str, Round], n_rounds: int, cpu: CpuClock = _own_cpu
) -> dict[str, list[Sample]]:
    """Warm up each kind, then run `n_rounds` interleaved rounds of every kind."""
    for run in rounds.values():
        await _sample(run, cpu)
    results: dict[str, list[Sample]] = {name: [] for name in rounds}
    for _ in range(n_rounds):
        for name, run in rounds.items():
            gc.collect()
            results[name].append(await _sample(run, cpu))
    return results


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _cpu_us(samples: list[Sample], server: bool) -> float:
    return statistics.median(
        (s.server_cpu if server else s.cpu) / s.messages * 1e6 for s in samples
    )


def report(title: str, results: dict[str, list[Sample]], two_processes: bool = False) -> None:
    """Print events/s, CPU per event and gaps per kind, then each kind's ratio to raw.

    The CPU ratio compares the whole process (1 process) or the server process (2).
    """
    print(f"  {title}")
    rates: dict[str, list[float]] = {}
    cpu_us: dict[str, float] = {}
    for name, samples in results.items():
        rates[name] = [s.messages / s.wall for s in samples]
        cpu_us[name] = _cpu_us(samples, server=two_processes)
        cpu = (
            f"CPU server {cpu_us[name]:4.1f} + client {_cpu_us(samples, server=False):4.1f}"
            if two_processes
            else f"CPU {cpu_us[name]:4.1f}"
        )
        gaps = [g for s in samples for g in s.gaps]
        counts = "/".join(str(c) for c in sorted({s.messages for s in samples}))
        print(
            f"    {name:12s} {statistics.median(rates[name]):7,.0f} events/s "
            f"(rounds {min(rates[name]):6,.0f}-{max(rates[name]):6,.0f}, {counts} msgs)  "
            f"{cpu} µs/event  "
            f"gap p50 {_pct(gaps, 0.5) * 1e6:4.0f} µs p99 {_pct(gaps, 0.99) * 1e6:4.0f} µs"
        )
    raw = rates["raw"]
    for name in ("agent/stub", "agent/client"):
        if name not in rates:
            continue
        ratio = statistics.median(rates[name]) / statistics.median(raw)
        pairs = sorted(a / r for a, r in zip(rates[name], raw, strict=True))
        by_cpu = cpu_us["raw"] / cpu_us[name]
        print(
            f"    {name} / raw = {ratio:4.0%} of events/s  (target >= {TARGET:.0%}: "
            f"{'met' if ratio >= TARGET else 'MISSED'}; round pairs {pairs[0]:.0%}-"
            f"{pairs[-1]:.0%}; {by_cpu:.0%} by {'server ' if two_processes else ''}CPU/event)"
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
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", loop, *_CHILD_ARGS, stdin=PIPE, stdout=PIPE
    )
    assert child.stdout is not None and child.stdin is not None
    pipe_in, pipe_out = child.stdin, child.stdout

    async def both_cpu() -> tuple[float, float]:
        # NOTE(bench): asks the child for its CPU clock, outside the timed window.
        pipe_in.write(b"\n")
        await pipe_in.drain()
        return time.process_time(), float(await pipe_out.readline())

    try:
        raw_port, agent_port = map(int, (await pipe_out.readline()).split())
        raw_channel = grpc.aio.insecure_channel(f"127.0.0.1:{raw_port}")
        agent_channel = grpc.aio.insecure_channel(f"127.0.0.1:{agent_port}")
        try:
            await raw_channel.channel_ready()
            await agent_channel.channel_ready()
            results = await measure(
                {"raw": raw_round(raw_channel), "agent/stub": stub_round(agent_channel)},
                n_rounds,
                both_cpu,
            )
        finally:
            await raw_channel.close()
            await agent_channel.close()
    finally:
        pipe_in.close()
        await asyncio.wait_for(child.wait(), 30)
    report(f"2 processes ({loop} both sides): servers in a child process", results, True)


async def serve_child() -> None:
    """Child of the 2-process variant: serve, answer each stdin line with its CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        raw_server, raw_port = await start_raw_server()
        agent = await start_agent(tmp)
        print(raw_port, agent.port, flush=True)
        while await asyncio.to_thread(sys.stdin.readline):
            print(time.process_time(), flush=True)
        await agent.stop(None)
        await raw_server.stop(None)


# --- breakdown -----------------------------------------------------------------------------


async def breakdown() -> None:
    """µs per event of each stage, in-process and without gRPC (best of 5 replies)."""
    model = ScriptedChatModel(["x" * TEXT_CHARS], stream=True, chunk_size=CHUNK, repeat=True)

    async def per_event_us(stage: Callable[[Any], Any]) -> float:
        times = []
        for _ in range(6):  # the first is a warm-up
            agent = Agent(model, kind="flat", system_prompt="You are a helpful assistant.")
            gc.collect()
            n = 0
            start = time.perf_counter()
            async for event in agent.reply("hi"):
                stage(event)
                n += 1
            times.append((time.perf_counter() - start) / n * 1e6)
        return min(times[1:])

    response = _agent_pb2.ReplyResponse
    server = {
        "agent events (model chunks -> pydantic events)": lambda ev: None,
        "+ event_to_proto": event_to_proto,
        "+ ReplyResponse(event=...)": lambda ev: response(event=event_to_proto(ev)),
        "+ SerializeToString (gRPC does it)": lambda ev: response(
            event=event_to_proto(ev)
        ).SerializeToString(),
    }
    print("per-event work without gRPC (asyncio, best of 5 replies), server side, cumulative:")
    previous = 0.0
    for name, stage in server.items():
        us = await per_event_us(stage)
        print(f"    {name:48s} {us:5.2f} µs ({us - previous:+.2f})")
        previous = us
    wire = _delta_response().SerializeToString()
    decoded = response.FromString(wire)
    n = 20_000
    for name, fn in {
        "ReplyResponse.FromString (both clients)": lambda: response.FromString(wire),
        "event_from_proto (AgentClient only)": lambda: event_from_proto(decoded.event),
    }.items():
        start = time.perf_counter()
        for _ in range(n):
            fn()
        print(f"    client: {name:40s} {(time.perf_counter() - start) / n * 1e6:5.2f} µs")


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
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    args = parser.parse_args()
    if args.quick:
        global TEXT_CHARS, _EVENTS_PER_REPLY, _CHILD_ARGS
        TEXT_CHARS, args.rounds, _CHILD_ARGS = 800, 1, ("--quick",)
        _EVENTS_PER_REPLY = TEXT_CHARS // CHUNK + 6
    if args.serve:
        _run(serve_child, args.serve)
        return
    size = _delta_response().ByteSize()
    agent_size = asyncio.run(_agent_delta_size())
    print(
        f"python {sys.version.split()[0]}, grpcio {grpc.__version__}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}\none reply = {_EVENTS_PER_REPLY} events "
        f"({TEXT_CHARS} chars in {CHUNK}-char deltas); a text-delta ReplyResponse from the "
        f"agent is {agent_size} bytes; raw sends {_EVENTS_PER_REPLY} messages of {size} bytes; "
        f"{args.rounds} rounds after 1 warm-up (median, range over rounds)"
    )
    for loop in args.loops.split(","):
        print(f"loop {loop}")
        _run(lambda: one_process(args.rounds), loop)
        if not args.no_2proc:
            _run(lambda: two_processes(loop, args.rounds), loop)  # noqa: B023
    _run(breakdown, "asyncio")


if __name__ == "__main__":
    main()
