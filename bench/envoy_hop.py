"""What one Envoy hop adds to a gRPC call, per call and per streamed message, and what part
of it Envoy's config costs.

One run on loopback: a raw grpc.aio server in its own process (this file, ``--server``:
bytes in, bytes out, no hookmesh code) reached directly and through Envoy running the
project's config (`deploy/envoy/hookmesh.yaml`, `--concurrency 1`, as `scale_out.py` runs it)
and through a bare Envoy (the same listener and cluster without retry policy and health
checks). Per path, one call at a time: a unary call, and server-streaming calls of 1, 10
and 40 messages of PAYLOAD bytes (a reply streams tens of events). Rows are sampled in
short interleaved rounds; the figure is the median over rounds of each round's p50, and
Envoy's CPU per call is read from its own counters (/proc). The per-message cost is the
slope between the 1- and 40-message rows. Prints figures; asserts nothing.

    .venv/bin/python bench/envoy_hop.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from hookmesh._security import open_channel
from hookmesh.testing import EnvoyProxy, stop_process

ENVOY_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "envoy" / "hookmesh.yaml"
PAYLOAD = 120
"""Bytes per streamed message: about one serialized text-delta ReplyResponse."""
COUNTS = (1, 10, 40)
IDLE_MS = (2, 5)
"""Milliseconds the server waits before the first of 10 messages in the idle rows: a reply's
first event comes after its store work (2-3 ms on SQLite, more on PostgreSQL)."""
START_TIMEOUT = 30.0
CALL_TIMEOUT = 10.0
_UNARY = "/hookmesh.bench.Hop/Unary"
_STREAM = "/hookmesh.bench.Hop/Stream"


# --- the server process ----------------------------------------------------------------------


async def _unary(request: bytes, unused_context: Any) -> bytes:
    return request


async def _stream(request: bytes, unused_context: Any) -> AsyncIterator[bytes]:
    message = b"x" * PAYLOAD
    count, idle_ms = int.from_bytes(request[:4], "big"), int.from_bytes(request[4:], "big")
    if idle_ms:
        await asyncio.sleep(idle_ms / 1000)
    for _ in range(count):
        yield message


async def _serve() -> None:
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "hookmesh.bench.Hop",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(_unary),
            "Stream": grpc.unary_stream_rpc_method_handler(_stream),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    checks = health.aio.HealthServicer()
    await checks.set("hookmesh.v1.AgentService", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    await stop.wait()
    await server.stop(1.0)


# --- measuring -------------------------------------------------------------------------------


def _bare_config(folder: Path) -> Path:
    """The shipped config's agent listener and cluster without retries and health checks."""
    loaded = yaml.safe_load(ENVOY_CONFIG.read_text())
    resources = loaded["static_resources"]
    for listener in resources["listeners"]:
        manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
        for host in manager["route_config"]["virtual_hosts"]:
            for route in host["routes"]:
                route["route"].pop("retry_policy", None)
    for cluster in resources["clusters"]:
        cluster.pop("health_checks", None)
        cluster.pop("circuit_breakers", None)
    path = folder / "bare.yaml"
    path.write_text(yaml.safe_dump(loaded))
    return path


def _cpu_seconds(pid: int) -> float:
    """utime + stime of one process, from /proc (its own counters)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Probe = Callable[[], Awaitable[Any]]


async def _sample(probe: Probe, n: int) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        await probe()
        out.append((time.perf_counter() - began) * 1e6)
    return out


def _p50(values: list[float]) -> float:
    return statistics.median(values)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.server:
        await _serve()
        return
    rounds, per_round, warmup = (2, 10, 10) if args.quick else (12, 150, 200)
    load_before = os.getloadavg()[0]
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--server", stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    folder = Path(tempfile.mkdtemp(prefix="hookmesh-bench-"))
    envoys: dict[str, EnvoyProxy] = {}
    channels: list[grpc.aio.Channel] = []
    try:
        async with asyncio.timeout(START_TIMEOUT):
            line = (await process.stdout.readline()).decode().strip()
        address = line.removeprefix("listening on ")
        for name, config in (("envoy", ENVOY_CONFIG), ("bare envoy", _bare_config(folder))):
            envoys[name] = await EnvoyProxy({"agent": [address]}, config).start()
        targets = {
            "direct": address,
            "hookmesh channel": address,
            **{k: e.address("agent") for k, e in envoys.items()},
        }
        probes: dict[tuple[str, str], Probe] = {}
        for path, target in targets.items():
            # The clients' channel (open_channel: OpenTelemetry's client interceptors and
            # keepalive), direct: what the interceptors cost per call.
            channel = (
                open_channel(target)
                if path == "hookmesh channel"
                else grpc.aio.insecure_channel(target)
            )
            channels.append(channel)
            await asyncio.wait_for(channel.channel_ready(), START_TIMEOUT)
            unary = channel.unary_unary(_UNARY)
            stream = channel.unary_stream(_STREAM)

            async def call_unary(unary: Any = unary) -> None:
                await unary(b"x" * PAYLOAD, timeout=CALL_TIMEOUT)

            probes[path, "unary"] = call_unary
            for count in COUNTS:

                async def call_stream(stream: Any = stream, count: int = count) -> None:
                    async for _message in stream(count.to_bytes(4, "big"), timeout=CALL_TIMEOUT):
                        pass

                probes[path, f"stream x{count}"] = call_stream
            for idle in IDLE_MS:

                async def call_idle(stream: Any = stream, idle: int = idle) -> None:
                    request = (10).to_bytes(4, "big") + idle.to_bytes(2, "big")
                    async for _message in stream(request, timeout=CALL_TIMEOUT):
                        pass

                probes[path, f"x10 idle {idle}ms"] = call_idle
        for probe in probes.values():
            await _sample(probe, warmup)
        p50s: dict[tuple[str, str], list[float]] = {key: [] for key in probes}
        cpu: dict[tuple[str, str], float] = dict.fromkeys(probes, 0.0)
        keys = list(probes)
        for i in range(rounds):
            for key in keys if i % 2 == 0 else keys[::-1]:
                envoy = envoys.get(key[0])
                pid = envoy._process.pid if envoy is not None and envoy._process else 0
                before = _cpu_seconds(pid) if pid else 0.0
                p50s[key].append(_p50(await _sample(probes[key], per_round)))
                if pid:
                    cpu[key] += (_cpu_seconds(pid) - before) / per_round / rounds * 1e6
    finally:
        for channel in channels:
            await channel.close()
        for envoy in envoys.values():
            await envoy.stop()
        await stop_process(process, START_TIMEOUT)
    print(
        f"python, grpcio {grpc.__version__}, {os.cpu_count()} cpus, load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {rounds} interleaved "
        f"rounds x {per_round} calls per row after {warmup} warm-up, one call at a time; "
        f"{PAYLOAD} B per message; Envoy --concurrency 1"
    )
    kinds = ["unary", *(f"stream x{n}" for n in COUNTS), *(f"x10 idle {n}ms" for n in IDLE_MS)]
    others = [p for p in targets if p != "direct"]
    print(f"\n{'call':16s}" + "".join(f"{p + ' p50 µs':>24s}" for p in targets), end="")
    print("".join(f"{p + ' +µs':>22s}" for p in others) + f"{'envoy cpu µs':>14s}")
    added: dict[str, dict[str, float]] = {p: {} for p in others}
    for kind in kinds:
        row = {p: statistics.median(p50s[p, kind]) for p in targets}
        for p in others:
            added[p][kind] = statistics.median(
                e - d for e, d in zip(p50s[p, kind], p50s["direct", kind], strict=True)
            )
        print(
            f"  {kind:14s}"
            + "".join(f"{row[p]:24.1f}" for p in targets)
            + "".join(f"{added[p][kind]:22.1f}" for p in others)
            + f"{cpu['envoy', kind]:14.1f}"
        )
    first, last = COUNTS[0], COUNTS[-1]
    for p in envoys:
        slope = (added[p][f"stream x{last}"] - added[p][f"stream x{first}"]) / (last - first)
        print(
            f"  -> {p}: +{added[p]['unary']:.0f} µs per unary call, "
            f"+{added[p][f'stream x{first}']:.0f} µs per one-message stream, "
            f"+{slope:.1f} µs per further streamed message; after the server idled "
            + ", ".join(f"{n} ms +{added[p][f'x10 idle {n}ms']:.0f} µs" for n in IDLE_MS)
            + f" (back to back +{added[p]['stream x10']:.0f})"
        )
    print(
        f"  -> hookmesh channel (OpenTelemetry client interceptors), direct: "
        f"+{added['hookmesh channel']['unary']:.0f} µs per unary call, "
        f"+{added['hookmesh channel']['stream x10']:.0f} µs per 10-message stream"
    )


if __name__ == "__main__":
    asyncio.run(main())
