"""Agent replicas behind Envoy on PostgreSQL against one replica direct on SQLite.

One run on loopback, every server in its own process (`hookmesh serve agent`, scripted model,
one streamed answer per reply, a new session per reply):

* floor: a grpc.health.v1 Check round trip, direct to a replica.
* throughput rows, the same client load (CONCURRENCY replies outstanding, REPLIES per round):
  one replica direct on SQLite (the baseline), one replica behind Envoy on PostgreSQL, two
  replicas behind Envoy on PostgreSQL. Replies/s per round (median over rounds), latency p50
  and p99 over every reply of the row; CPU per reply of each process (this client, each
  replica, each Envoy, PostgreSQL with its backends) from the kernel's counters.
* Envoy's added latency: one reply at a time to the same PostgreSQL replica, direct and
  through Envoy; p50 of each and their ratio (per round, median).
* the cost model checked: after the interleaved rounds, the PostgreSQL replica is pinned to
  one core and everything else of the run (this client, Envoy, PostgreSQL) to the other
  (every thread, `sched_setaffinity`), the one-replica Envoy row runs again, and its
  replies/s is printed beside what the model predicts from that row's own CPU per reply:
  min(1e6 / replica µs, 1e6 / (client + Envoy + PostgreSQL µs)). Other work on the machine
  is not pinned away, so it takes from both cores.

Rows are sampled in interleaved rounds after a warm-up, so drift on this shared machine hits
every row alike. The machine's load average is printed with the figures. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.client import AgentClient
from hookmesh.testing import EmbeddedPostgres, EnvoyProxy, agent_process

ENVOY_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "envoy" / "hookmesh.yaml"
"""The Envoy config the project ships, run with the replicas in place of its DNS names."""

CONCURRENCY = 32
REPLIES = 320
ROUNDS = 5
SERIAL = 100
TIMEOUT = 60.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _load(client: AgentClient, count: int, latencies: list[float]) -> float:
    """`count` replies with CONCURRENCY outstanding; returns replies/s."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            start = time.perf_counter()
            await client.text("hi")
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return count / (time.perf_counter() - start)


async def _serial(client: AgentClient, count: int) -> list[float]:
    out = []
    for _ in range(count):
        start = time.perf_counter()
        await client.text("hi")
        out.append(time.perf_counter() - start)
    return out


async def _floor(address: str, count: int) -> float:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        times = []
        for _ in range(count):
            start = time.perf_counter()
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _tree_cpu(root: int) -> float:
    """CPU seconds of a process, its reaped children and its live descendants (PostgreSQL's
    backends are its postmaster's children), from the kernel's counters."""
    total = 0.0
    for pid in _tree(root):
        try:
            total += sum(int(f) for f in _stat(pid)[11:15]) / _TICK
        except OSError:
            continue
    return total


def _tree(root: int) -> list[int]:
    """`root` and its live descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            except (OSError, IndexError):
                continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def _pin(pids: list[int], cpus: set[int]) -> None:
    """Every thread of `pids` (and their descendants) onto `cpus`; threads and processes
    they start later inherit it."""
    for root in pids:
        for pid in _tree(root):
            try:
                tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for task in tasks:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(task, cpus)


def _components(replicas: dict[str, int]) -> dict[str, int]:
    """The processes whose CPU is reported: each replica, Envoy (both proxies) and PostgreSQL,
    found among this process's children by name."""
    found = dict(replicas)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) != os.getpid():
                    continue
                name = (entry / "comm").read_text().strip()
            except (OSError, IndexError):
                continue
            if name in ("envoy", "postgres"):
                found[f"{name} {sum(k.startswith(name) for k in found) + 1}"] = int(entry.name)
    return found


def _cpu_now(components: dict[str, int]) -> dict[str, float]:
    return {"client": time.process_time()} | {k: _tree_cpu(p) for k, p in components.items()}


def _config(folder: Path, name: str, store: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"store": store, "grace_seconds": 1}))
    return path


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="hookmesh-scale-"))
    async with AsyncExitStack() as stack:
        pg = stack.enter_context(EmbeddedPostgres())
        sqlite = await stack.enter_async_context(
            agent_process(_config(folder, "sqlite", f"sqlite:///{folder}/agent.db"))
        )
        pg_config = _config(folder, "pg", pg.url)
        first = await stack.enter_async_context(agent_process(pg_config))
        second = await stack.enter_async_context(agent_process(pg_config))
        one = await stack.enter_async_context(EnvoyProxy({"agent": [first.address]}, ENVOY_CONFIG))
        two = await stack.enter_async_context(
            EnvoyProxy({"agent": [first.address, second.address]}, ENVOY_CONFIG)
        )
        rows: dict[str, Callable[[], AgentClient]] = {
            "1 replica, SQLite, direct": lambda: AgentClient(sqlite.address, timeout=TIMEOUT),
            "1 replica, PostgreSQL, Envoy": lambda: AgentClient(
                one.address("agent"), timeout=TIMEOUT
            ),
            "2 replicas, PostgreSQL, Envoy": lambda: AgentClient(
                two.address("agent"), timeout=TIMEOUT
            ),
        }
        clients = {name: await stack.enter_async_context(make()) for name, make in rows.items()}
        direct = await stack.enter_async_context(AgentClient(first.address, timeout=TIMEOUT))
        proxied = clients["1 replica, PostgreSQL, Envoy"]

        components = _components(
            {"replica sqlite": sqlite.pid, "replica pg 1": first.pid, "replica pg 2": second.pid}
        )
        cpu: dict[str, dict[str, float]] = {name: {} for name in rows}
        floor = await _floor(first.address, 200)
        for client in (*clients.values(), direct):  # warm-up: connections, caches, JIT-free
            await _load(client, CONCURRENCY * 2, [])
        throughput: dict[str, list[float]] = {name: [] for name in rows}
        latency: dict[str, list[float]] = {name: [] for name in rows}
        envoy_ratio: list[float] = []
        serial: dict[str, list[float]] = {"direct": [], "envoy": []}
        for _ in range(ROUNDS):
            for name, client in clients.items():
                before = _cpu_now(components)
                throughput[name].append(await _load(client, REPLIES, latency[name]))
                for part, value in _cpu_now(components).items():
                    cpu[name][part] = cpu[name].get(part, 0.0) + value - before[part]
            d = await _serial(direct, SERIAL)
            e = await _serial(proxied, SERIAL)
            serial["direct"] += d
            serial["envoy"] += e
            envoy_ratio.append(statistics.median(e) / statistics.median(d))
        pinned_cpu: dict[str, float] = {}
        pinned_rates: list[float] = []
        everything = set(range(os.cpu_count() or 1))
        if len(everything) >= 2:
            others = [os.getpid(), *(p for k, p in components.items() if k != "replica pg 1")]
            _pin([first.pid], {0})
            _pin(others, everything - {0})
            try:
                await _load(proxied, CONCURRENCY * 2, [])
                for _ in range(ROUNDS):
                    before = _cpu_now(components)
                    pinned_rates.append(await _load(proxied, REPLIES, []))
                    for part, value in _cpu_now(components).items():
                        pinned_cpu[part] = pinned_cpu.get(part, 0.0) + value - before[part]
            finally:
                _pin([first.pid, *others], everything)

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min)")
    print(
        f"client load: {CONCURRENCY} replies outstanding, {REPLIES} per round, {ROUNDS} rounds"
        " (interleaved), scripted model, a new session per reply"
    )
    print(f"floor: grpc health Check round trip, direct: {floor * 1e3:.2f} ms p50")
    base = statistics.median(throughput["1 replica, SQLite, direct"])
    print(f"{'row':32} {'replies/s':>10} {'vs base':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name in rows:
        rate = statistics.median(throughput[name])
        p50 = _percentile(latency[name], 0.50) * 1e3
        p99 = _percentile(latency[name], 0.99) * 1e3
        print(f"{name:32} {rate:10.1f} {rate / base:8.2f} {p50:8.2f} {p99:8.2f}")
    parts = list(cpu[next(iter(rows))])
    print("CPU per reply, µs, of each process (its own counters; PostgreSQL with its backends):")
    print(f"{'row':32} " + " ".join(f"{p:>14}" for p in parts))
    for name in rows:
        cells = " ".join(f"{cpu[name][p] / (REPLIES * ROUNDS) * 1e6:14.0f}" for p in parts)
        print(f"{name:32} {cells}")
    if pinned_rates:
        per = {k: v / (REPLIES * ROUNDS) * 1e6 for k, v in pinned_cpu.items()}
        rest = per["client"] + sum(v for k, v in per.items() if k.startswith(("envoy", "postgres")))
        replica = per["replica pg 1"]
        predicted = min(1e6 / replica, 1e6 / rest)
        measured = statistics.median(pinned_rates)
        print(
            f"pinned: replica pg 1 on core 0, client + Envoy + PostgreSQL on the rest: "
            f"{measured:.1f} replies/s; CPU per reply replica {replica:.0f} µs, the rest "
            f"{rest:.0f} µs; model {predicted:.1f} replies/s "
            f"({'replica' if replica >= rest else 'the rest'} saturates first); "
            f"measured/model {measured / predicted:.2f}"
        )
    d50 = statistics.median(serial["direct"]) * 1e3
    e50 = statistics.median(serial["envoy"]) * 1e3
    print(
        f"one reply at a time, same PostgreSQL replica: direct {d50:.2f} ms p50, through Envoy"
        f" {e50:.2f} ms p50 (+{e50 - d50:.2f} ms); ratio envoy/direct per round, median:"
        f" {statistics.median(envoy_ratio):.3f}"
    )


def run(main_coro: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run on uvloop when installed (as the services do)."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main_coro())
        return
    uvloop.run(main_coro())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    if parser.parse_args().quick:
        CONCURRENCY, REPLIES, ROUNDS, SERIAL = 4, 8, 1, 5
    run(main)
