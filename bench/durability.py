"""What the reply journal costs: durability ``step`` against ``exit``, on SQLite and on
PostgreSQL, in one run.

One agent service in this process per store (its own event loop's share of the machine),
clients over loopback; each reply is a new session whose scripted model calls one tool, then
streams a short answer, so a reply has four step boundaries (the input, the model response
with its call, the call's start and its result) and its end. ``exit`` saves once at the end
(the behaviour before durable replies): the baseline of its store.

Rows are sampled in interleaved rounds after a warm-up (the order reversed every other
round), CONCURRENCY replies outstanding. Per row: replies/s (median of the rounds), latency
p50 and p99 over every reply; per store: replies/s of ``step`` as a share of ``exit``'s and
the p50 it adds per step boundary. Targets: ``step`` keeps at least 90% of ``exit``'s
replies/s and adds at most 1 ms p50 per step on SQLite. Prints figures; asserts nothing.

    .venv/bin/python bench/durability.py [--quick] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from hookmesh.client import AgentClient
from hookmesh.services.agent import AgentService, load_config, start_agent_service
from hookmesh.testing import EmbeddedPostgres

STEPS = 4
"""Step boundaries of one reply (its end is saved in both modes)."""


@dataclass
class Row:
    """One store and durability: replies/s per round, and every reply's latency (s)."""

    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _start(store: dict[str, Any], folder: str) -> AgentService:
    config = load_config(
        None,
        **store,
        tools=["hookmesh.suite.demo:get_weather"],
        models={
            "default": {
                "type": "scripted",
                "per_reply": True,
                "chunk_size": 16,
                "turns": [
                    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
                    "It is snowing in Oslo: take a warm coat and boots.",
                ],
            }
        },
    )
    return await start_agent_service(config, address="127.0.0.1:0")


async def _round(
    client: AgentClient, durability: str, count: int, concurrency: int, latencies: list[float]
) -> float:
    """`count` replies, `concurrency` outstanding; replies/s."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            began = time.perf_counter()
            events = [e async for e in client.reply("weather?", durability=durability)]  # type: ignore[arg-type]
            if events[-1].type != "reply_end":
                raise RuntimeError(f"a reply ended without reply_end: {events[-1]}")
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - began)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few replies, for a smoke run")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    concurrency, per_round, rounds, warmup = (20, 40, 2, 20) if args.quick else (200, 400, 5, 200)
    load_before = os.getloadavg()[0]
    async with AsyncExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        stores: dict[str, dict[str, Any]] = {"sqlite": {"store": f"sqlite:///{folder}/a.db"}}
        if not args.no_postgres:
            pg = stack.enter_context(EmbeddedPostgres())
            stores["postgresql"] = {"store": pg.url}
        clients: dict[str, AgentClient] = {}
        rows: dict[tuple[str, str], Row] = {}
        for name, store in stores.items():
            service = await _start(store, folder)
            stack.push_async_callback(service.stop, None)
            clients[name] = await stack.enter_async_context(
                AgentClient(f"127.0.0.1:{service.port}", timeout=120)
            )
            for mode in ("step", "exit"):
                await _round(clients[name], mode, warmup, concurrency, [])
                rows[name, mode] = Row()
        keys = list(rows)
        for i in range(rounds):
            for store, mode in keys if i % 2 == 0 else keys[::-1]:
                row = rows[store, mode]
                row.rates.append(
                    await _round(clients[store], mode, per_round, concurrency, row.latencies)
                )
    print(
        f"python, {os.cpu_count()} cpus, load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {rounds} interleaved rounds x {per_round} replies "
        f"per row, {concurrency} outstanding, after {warmup} warm-up; {STEPS} steps per reply"
    )
    print(f"\n{'store / durability':24s} {'replies/s':>10s} {'p50 ms':>8s} {'p99 ms':>8s}")
    for (store, mode), row in rows.items():
        rate = statistics.median(row.rates)
        p50, p99 = (_percentile(row.latencies, q) * 1e3 for q in (0.5, 0.99))
        print(f"  {store + ' ' + mode:22s} {rate:10.1f} {p50:8.2f} {p99:8.2f}")
    for store in stores:
        step, exit_ = rows[store, "step"], rows[store, "exit"]
        share = statistics.median(step.rates) / statistics.median(exit_.rates)
        added = (_percentile(step.latencies, 0.5) - _percentile(exit_.latencies, 0.5)) * 1e3
        print(
            f"  -> {store}: step keeps {share:.0%} of exit's replies/s (target >= 90%); "
            f"adds {added / STEPS:.2f} ms p50 per step (target <= 1 ms on SQLite)"
        )


if __name__ == "__main__":
    asyncio.run(main())
