"""Per-reply cost of the hook chain: µs per reply for N pass-through middlewares, as
differences to a reply with no middleware measured in the same run.

Scripted model, one user message, a text answer; non-streaming and 20-chunk streaming.
Pass-through middlewares implement on_reasoning and on_model_call, written two ways:
`natural` re-yields every event (``async for ... yield``); `direct` returns the downstream
stream itself (``return next_handler()``), which hookmesh supports at zero per-event cost.
Two more rows: the tracing middleware (no SDK tracer provider) as shipped (fail_closed) and
with ``fail_open``, whose difference is what a fail_open guard layer costs per reply.

Method (as bench/remote_hook.py): every agent and middleware is built before timing; each
reply is timed on its own, its fresh `AgentState` made outside the timed region; a warm-up
per row; then short interleaved rounds, the order reversed every other round (every row
samples every period of this shared machine alike); p50 and p99 pooled, and per-round
medians of each round's p50 difference to the no-middleware row (the figures to quote).
"none, again" is that same baseline sampled twice: its difference is the noise floor of
the method. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any

from hookmesh.agent import Agent, AgentState
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.tracing import TracingMiddleware
from hookmesh.models import ScriptedChatModel

WARMUP = 300
ROUNDS = 60
PER_ROUND = 50
"""Short batches, in an order reversed every other round: a row's place in the round (what
ran just before it, drift within the round) then hits every row alike."""
COUNTS = (1, 5, 20)


class NaturalPassThrough(Middleware):
    """Re-yields every reasoning event; awaits and returns the model result."""

    async def on_reasoning(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> AsyncIterator[Any]:
        async for event in next_handler():
            yield event

    async def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return await next_handler()


class DirectPassThrough(Middleware):
    """Hands the downstream stream through untouched."""

    def on_reasoning(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return next_handler()

    def on_model_call(
        self, agent: Any, kwargs: dict[str, Any], next_handler: Any
    ) -> Awaitable[Any]:
        return next_handler()


def _tracing(failure_mode: str) -> Middleware:
    mw = TracingMiddleware()
    mw.failure_mode = failure_mode  # type: ignore[assignment]
    return mw


@dataclass
class Row:
    """One configuration: an agent built once, and its samples (µs per reply)."""

    label: str
    agent: Agent
    samples: list[float] = field(default_factory=list)
    round_p50: list[float] = field(default_factory=list)


def _agent(stream: bool, middlewares: list[Middleware]) -> Agent:
    text = "x" * 160 if stream else "hello"
    model = ScriptedChatModel([text], stream=stream, chunk_size=8, repeat=True)
    return Agent(model, middlewares=middlewares)


def _rows(stream: bool) -> dict[str, Row]:
    rows = {
        "none": Row("none (baseline)", _agent(stream, [])),
        "none again": Row("none, again (noise floor)", _agent(stream, [])),
    }
    for cls, name in ((NaturalPassThrough, "natural"), (DirectPassThrough, "direct")):
        for n in COUNTS:
            rows[f"{name} {n}"] = Row(f"{name} x{n}", _agent(stream, [cls() for _ in range(n)]))
    rows["tracing closed"] = Row("tracing, fail_closed", _agent(stream, [_tracing("fail_closed")]))
    rows["tracing open"] = Row("tracing, fail_open", _agent(stream, [_tracing("fail_open")]))
    return rows


async def _sample(agent: Agent, n: int, out: list[float]) -> None:
    """Time `n` replies, each on its own fresh state (made before the timing starts)."""
    states = [AgentState() for _ in range(n)]
    gc.collect()
    for state in states:
        agent.state = state
        start = time.perf_counter()
        async for _event in agent.reply("hi"):
            pass
        out.append((time.perf_counter() - start) * 1e6)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _per_round(rows: dict[str, Row], key: str, base: str = "none") -> float:
    """Median over rounds of (key's p50 - base's p50) in the same round."""
    pairs = zip(rows[key].round_p50, rows[base].round_p50, strict=True)
    return statistics.median(a - b for a, b in pairs)


async def main() -> None:
    try:
        import uvloop

        loop = "uvloop" if isinstance(asyncio.get_running_loop(), uvloop.Loop) else "asyncio"
    except ImportError:
        loop = "asyncio"
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    modes = {stream: _rows(stream) for stream in (False, True)}
    every = [row for rows in modes.values() for row in rows.values()]
    for row in every:
        await _sample(row.agent, WARMUP, [])
    for i in range(ROUNDS):
        for row in every if i % 2 == 0 else every[::-1]:
            batch: list[float] = []
            await _sample(row.agent, PER_ROUND, batch)
            row.samples += batch
            row.round_p50.append(_pct(batch, 0.5))

    print(
        f"python {sys.version.split()[0]}, loop {loop}, {os.cpu_count()} cpus, load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {ROUNDS} interleaved rounds "
        f"(order reversed every other) x {PER_ROUND} = {ROUNDS * PER_ROUND} replies per row "
        f"after {WARMUP} warm-up"
    )
    for stream, rows in modes.items():
        base = rows["none"]
        print()
        print(f"{'streaming 20 chunks' if stream else 'non-streaming':28s} {'p50 µs':>8s}"
              f" {'p99 µs':>8s} {'+p50 µs':>8s} {'per-round +p50':>15s}")  # fmt: skip
        for key, row in rows.items():
            p50 = _pct(row.samples, 0.5)
            extra = "" if key == "none" else f"{p50 - _pct(base.samples, 0.5):8.2f}"
            per_round = "" if key == "none" else f"{_per_round(rows, key):15.2f}"
            print(
                f"  {row.label:26s} {p50:8.1f} {_pct(row.samples, 0.99):8.1f} {extra:>8s}"
                f" {per_round:>15s}"
            )
        for name in ("natural", "direct"):
            slope = _per_round(rows, f"{name} 20") / 20
            print(f"  -> {name}: {slope:.2f} µs per middleware (per-round, from x20)")
        guard = _per_round(rows, "tracing open", "tracing closed")
        print(f"  -> a fail_open guard on tracing: {guard:+.2f} µs per reply (per-round)")
        noise = _per_round(rows, "none again")
        print(f"  -> noise floor (the baseline against itself): {noise:+.2f} µs")
    print(f"\nwhole run {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    if parser.parse_args().quick:
        WARMUP, ROUNDS, PER_ROUND = 5, 2, 5
    asyncio.run(main())
