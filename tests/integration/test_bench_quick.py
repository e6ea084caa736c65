"""Every benchmark runs in its --quick mode and prints its table, so none rots unnoticed.

A benchmark nobody runs breaks silently when the code it drives changes; here each script in
bench/ runs as `make bench` would run it, only with tiny sizes. The figures are not checked
(speed is what the benches are for, never a test assertion): only that the script exits 0 and
printed the line its table ends with.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
HELPERS = {"remote_middlewares.py"}
"""Modules in bench/ that are not benchmarks (the sidecars' middlewares)."""
TABLES = {
    "durability.py": "step keeps",
    "embedder_batches.py": "vs 32 (per-round)",
    "envoy_hop.py": "per further streamed message",
    "memory.py": "searches/s (median over rounds)",
    "middleware_overhead.py": "µs per middleware (per-round, from x20)",
    "output_guardrails.py": "a passing pattern guardrail",
    "peer_agentscope.py": "per middleware ((µs at 10 - µs at 0) / 10)",
    "pg_round_trips.py": "round trips per reply: exit",
    "remote_hook.py": "added latency per hook invocation",
    "remote_load.py": "three read-only watchers / one",
    "retrieval.py": "search latency, top_k",
    "scale_out.py": "one reply at a time, same PostgreSQL replica",
    "subscription_cost.py": "msgs/reply",
    "stream_throughput.py": "per-event work without gRPC",
    "tracing_overhead.py": "paired difference",
    "tts_latency.py": "time to first audio byte / round trip",
}
"""What each bench prints once its figures are in: a line of its last table."""
QUICK_TIMEOUT = 240.0


def test_every_bench_has_its_table_line() -> None:
    """A new bench must say what its table prints, or the quick run below would miss it."""
    benches = {p.name for p in BENCH.glob("*.py")} - HELPERS
    assert benches == set(TABLES)


@pytest.mark.parametrize("script", sorted(TABLES))
def test_bench_runs_quick(script: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(BENCH)])}
    result = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=QUICK_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert TABLES[script] in result.stdout, result.stdout[-4000:]
