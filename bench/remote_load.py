"""Throughput under load with sidecars that only watch: read-only subscriptions, measured.

200 replies in flight at once in one agent process (scripted streamed model, about 26 events
per reply), each sidecar in its own ``hookmesh sidecar`` process serving an on_reply
middleware that watches every event. Rows: no sidecar; 1 and 3 read-only all-event watchers
(``read_only_subscriptions={"on_reply": ("*",)}``: items sent as they pass, no verdict
awaited); and, for contrast, 1 and 3 watchers subscribed the old way (``"*"``, a verdict
round trip per event). Rows run in short interleaved rounds after a warm-up; replies/s is the
median over rounds, ratios are taken within each round. Targets: each read-only watcher costs
at most 10% of the replies/s without sidecars, and p99 <= 3x p50 with three. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from hookmesh.testing import stop_process

CONCURRENCY = 200
PER_ROUND = 600
"""Replies per row per round (each row keeps CONCURRENCY replies in flight)."""
ROUNDS = 5
WARMUP = 400
BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from remote_hook import START_TIMEOUT, _run, _sidecar, _start_all  # noqa: E402
from remote_hook import process_cpu as _cpu  # noqa: E402


async def _batch(middlewares: list[Any], replies: int) -> tuple[float, list[float], int]:
    """Run `replies` replies, CONCURRENCY at a time; returns (seconds, per-reply ms, events)."""
    from hookmesh.agent import Agent
    from hookmesh.models import ScriptedChatModel

    latencies: list[float] = []
    left = replies
    events = 0

    async def worker() -> None:
        nonlocal left, events
        agent = Agent(
            ScriptedChatModel(["x" * 160], stream=True, chunk_size=8, repeat=True),
            middlewares=middlewares,
        )
        while left > 0:
            left -= 1
            began = time.perf_counter()
            async for event in agent.reply("hi"):
                events += 1
                if event.type == "reply_end" and event.finish_reason != "completed":
                    raise RuntimeError(f"a reply failed: {event.error}")
            latencies.append((time.perf_counter() - began) * 1e3)
            agent.state.context.clear()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - began, latencies, events


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    from hookmesh.remote import RemoteMiddleware

    load_before = os.getloadavg()[0]
    kinds = ("WatchEveryReplyEvent", "EveryReplyEvent")
    started = await _start_all(*(_sidecar(k) for k in kinds for _ in range(3)))
    processes = [p for p, _ in started]
    remotes: list[RemoteMiddleware] = []
    try:
        for _, target in started:
            remotes.append(await RemoteMiddleware.connect(target, timeout=30))
        used = {
            "none": [],
            "1 read-only": [0],
            "3 read-only": [0, 1, 2],
            "1 verdict (contrast)": [3],
            "3 verdict (contrast)": [3, 4, 5],
        }
        rows = {name: [remotes[i] for i in ids] for name, ids in used.items()}
        for middlewares in rows.values():
            await _batch(middlewares, WARMUP)
        rates: dict[str, list[float]] = {k: [] for k in rows}
        latencies: dict[str, list[float]] = {k: [] for k in rows}
        agent_cpu = dict.fromkeys(rows, 0.0)
        sidecar_cpu = dict.fromkeys(rows, 0.0)
        events = dict.fromkeys(rows, 0)
        for _ in range(ROUNDS):
            for name, middlewares in rows.items():
                pids = [processes[i].pid for i in used[name]]
                before = time.process_time(), sum(map(_cpu, pids))
                seconds, batch, count = await _batch(middlewares, PER_ROUND)
                agent_cpu[name] += time.process_time() - before[0]
                sidecar_cpu[name] += sum(map(_cpu, pids)) - before[1]
                events[name] += count
                rates[name].append(PER_ROUND / seconds)
                latencies[name] += batch
    finally:
        for remote in remotes:
            await remote.aclose()
        await asyncio.gather(*(stop_process(p, START_TIMEOUT) for p in processes))

    print(
        f"{CONCURRENCY} replies in flight, {PER_ROUND} replies per row per round, {ROUNDS} "
        f"interleaved rounds after {WARMUP} warm-up replies per row; scripted streamed model "
        f"(~26 events per reply); each sidecar its own process; {os.cpu_count()} cpus, load "
        f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print()
    head = ("replies/s", "vs none", "cost each", "p50 ms", "p99 ms", "p99/p50")
    print(f"{'row':22s} " + " ".join(f"{h:>10s}" for h in head))
    for name in rows:
        rate = statistics.median(rates[name])
        vs = statistics.median(r / n for r, n in zip(rates[name], rates["none"], strict=True))
        count = int(name[0]) if name[0].isdigit() else 0
        cost = (1 - vs) / count if count else 0.0
        p50, p99 = _pct(latencies[name], 0.5), _pct(latencies[name], 0.99)
        print(
            f"{name:22s} {rate:10.0f} {vs:9.2f}x {cost:9.1%} {p50:10.1f} {p99:10.1f}"
            f" {p99 / p50:9.2f}x"
        )
    replies = PER_ROUND * ROUNDS
    base_agent = agent_cpu["none"] / replies * 1e6
    print()
    print(
        f"CPU per reply from each process's own counters ({events['none'] / replies:.0f} events"
        " per reply; this process is the agent, each sidecar its own process):"
    )
    head = ("agent µs", "+agent µs", "sidecars µs", "each µs", "agent/event")
    print(f"{'row':22s} " + " ".join(f"{h:>11s}" for h in head))
    for name, ids in used.items():
        agent = agent_cpu[name] / replies * 1e6
        side = sidecar_cpu[name] / replies * 1e6
        watched = events[name] / replies * len(ids)
        per_event = f"{(agent - base_agent) / watched:10.2f}" if ids else ""
        each = side / len(ids) if ids else 0.0
        print(
            f"{name:22s} {agent:11.0f} {agent - base_agent:11.0f} {side:11.0f} {each:11.0f}"
            f" {per_event:>11s}"
        )
    print(
        "  agent/event: the agent's CPU per watched event over the row without sidecars "
        "(target <= 2 µs read-only); with one read-only watcher, target >= 50% of none's "
        "replies/s."
    )
    for kind in ("read-only", "verdict (contrast)"):
        pairs = zip(rates[f"3 {kind}"], rates[f"1 {kind}"], strict=True)
        ratio = statistics.median(three / one for three, one in pairs)
        print(f"  three {kind} watchers / one: {ratio:.2f}x replies/s")
    print(
        "  vs none: median over rounds of the row's replies/s over none's in the same round;\n"
        "  cost each: (1 - vs none) / sidecars. Targets: read-only cost each <= 10%, "
        "p99/p50 <= 3x with three."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    if parser.parse_args().quick:
        CONCURRENCY, PER_ROUND, ROUNDS, WARMUP = 10, 20, 1, 10
    _run(main())
