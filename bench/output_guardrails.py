"""Per-reply cost of structured output and of guardrails: µs per reply for an output schema
(native strategy, and the tool strategy) and for one input guardrail (a passing pattern one,
blocking and parallel; a passing length one), as differences to a reply with neither,
measured in the same run.

Scripted model, one user message, the same JSON answer in every row (so the rows differ only
by what is measured); non-streaming and 20-chunk streaming. The output schema is compiled
once, before timing, as the agent service does with its configured one. Target: a passing
pattern guardrail costs at most 5% of a reply with an empty chain.

Method (as bench/middleware_overhead.py): every agent is built before timing; each reply is
timed on its own, its fresh `AgentState` made outside the timed region; a warm-up per row;
then short interleaved rounds, the order reversed every other round; p50 and p99 pooled, and
per-round medians of each round's p50 difference to the baseline (the figures to quote).
"pass-through on_reply" is the least any one middleware costs (the chain layer itself). A
check that is a plain function (pattern, length) has decided before a model call could
start, so it runs blocking in either mode; the "async pattern" rows give the same check as a
coroutine, to measure the parallel mode itself (a task and a race per event of the first
step).
"none, again" is the baseline sampled twice: its difference is the noise floor. Prints
figures; asserts nothing.

    .venv/bin/python bench/output_guardrails.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from hookmesh.agent import FINAL_TOOL, Agent, AgentState, OutputSpec, output_spec
from hookmesh.middleware import Middleware
from hookmesh.middleware.builtin.guardrails import LengthGuardrail, PatternGuardrail
from hookmesh.models import ScriptedChatModel, ScriptedTurn

SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
DENY = [r"\bpassword\b", r"\b(?:api|secret)[ _-]?key\b", r"\d{16}", "DROP TABLE"]


class PassThrough(Middleware):
    """An on_reply that hands the reply through: what any one middleware costs at least."""

    def on_reply(self, agent: Any, kwargs: Any, next_handler: Any) -> Any:
        return next_handler()


class AsyncPattern(PatternGuardrail):
    """The pattern check as a coroutine (as a judge's is): what the parallel mode runs in a
    task alongside the model call."""

    async def check(self, agent: Any, subject: Any) -> Any:  # type: ignore[override]
        return super().check(agent, subject)


@dataclass
class Row:
    """One configuration: an agent built once, what a reply asks for, its samples (µs)."""

    label: str
    agent: Agent
    output: OutputSpec | None = None
    samples: list[float] = field(default_factory=list)
    round_p50: list[float] = field(default_factory=list)


def _answer(stream: bool) -> dict[str, str]:
    return {"note": "x" * (150 if stream else 8)}


def _agent(stream: bool, middlewares: list[Middleware], *, tool: bool = False) -> Agent:
    answer = _answer(stream)
    turn = ScriptedTurn(tool_calls=[(FINAL_TOOL, answer)]) if tool else json.dumps(answer)
    model = ScriptedChatModel(
        [turn], stream=stream, chunk_size=8, repeat=True, native_output=not tool
    )
    return Agent(model, middlewares=middlewares)


def _rows(stream: bool) -> dict[str, Row]:
    spec = output_spec(SCHEMA, name="Note")
    return {
        "none": Row("none (baseline)", _agent(stream, [])),
        "none again": Row("none, again (noise floor)", _agent(stream, [])),
        "floor": Row("pass-through on_reply", _agent(stream, [PassThrough()])),
        "native": Row("output schema, native", _agent(stream, []), spec),
        "tool": Row("output schema, tool", _agent(stream, [], tool=True), spec),
        "pattern": Row("pattern input, blocking", _agent(stream, [PatternGuardrail(deny=DENY)])),
        "parallel": Row(
            "pattern input, parallel",
            _agent(stream, [PatternGuardrail(deny=DENY, mode="parallel")]),
        ),
        "async": Row("async pattern, blocking", _agent(stream, [AsyncPattern(deny=DENY)])),
        "async parallel": Row(
            "async pattern, parallel",
            _agent(stream, [AsyncPattern(deny=DENY, mode="parallel")]),
        ),
        "length": Row("length input, blocking", _agent(stream, [LengthGuardrail(max_chars=4000)])),
    }


async def _sample(row: Row, n: int, out: list[float]) -> None:
    """Time `n` replies, each on its own fresh state (made before the timing starts)."""
    states = [AgentState() for _ in range(n)]
    agent, output = row.agent, row.output
    gc.collect()
    for state in states:
        agent.state = state
        start = time.perf_counter()
        async for _event in agent.reply("What is the note?", output=output):
            pass
        out.append((time.perf_counter() - start) * 1e6)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _per_round(rows: dict[str, Row], key: str) -> float:
    """Median over rounds of (key's p50 - the baseline's p50) in the same round."""
    pairs = zip(rows[key].round_p50, rows["none"].round_p50, strict=True)
    return statistics.median(a - b for a, b in pairs)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few replies, for a smoke run")
    args = parser.parse_args()
    warmup, rounds, per_round = (30, 4, 20) if args.quick else (300, 60, 50)
    began, load_before = time.perf_counter(), os.getloadavg()[0]
    modes = {stream: _rows(stream) for stream in (False, True)}
    every = [row for rows in modes.values() for row in rows.values()]
    for row in every:
        await _sample(row, warmup, [])
    for i in range(rounds):
        for row in every if i % 2 == 0 else every[::-1]:
            batch: list[float] = []
            await _sample(row, per_round, batch)
            row.samples += batch
            row.round_p50.append(_pct(batch, 0.5))

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {rounds} interleaved rounds "
        f"(order reversed every other) x {per_round} = {rounds * per_round} replies per row "
        f"after {warmup} warm-up{' (--quick)' if args.quick else ''}"
    )
    for stream, rows in modes.items():
        base = _pct(rows["none"].samples, 0.5)
        print()
        print(f"{'streaming 20 chunks' if stream else 'non-streaming':28s} {'p50 µs':>8s}"
              f" {'p99 µs':>8s} {'per-round +p50 µs':>18s} {'of baseline':>12s}")  # fmt: skip
        for key, row in rows.items():
            extra = "" if key == "none" else f"{_per_round(rows, key):18.2f}"
            share = "" if key == "none" else f"{100 * _per_round(rows, key) / base:11.1f}%"
            print(
                f"  {row.label:26s} {_pct(row.samples, 0.5):8.1f} {_pct(row.samples, 0.99):8.1f}"
                f" {extra:>18s} {share:>12s}"
            )
        pattern = 100 * _per_round(rows, "pattern") / base
        print(f"  -> a passing pattern guardrail: {pattern:+.1f}% of a reply (target: <= 5%)")
    print(f"\nwhole run {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    asyncio.run(main())
