"""Reply cost with the tracing middleware attached but no SDK tracer provider, vs without it.

Scripted model, one user message, a text answer (non-streaming and 20-chunk streaming).
Prints figures; asserts nothing. Target: <= 2 µs difference per reply.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from hookmesh.agent import Agent, AgentState
from hookmesh.middleware.builtin.tracing import TracingMiddleware
from hookmesh.models import ScriptedChatModel

REPLIES = 2000
ROUNDS = 15


async def one_round(agent: Agent) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(REPLIES):
        agent.state = AgentState()
        async for _event in agent.reply("hi"):
            pass
    return (time.perf_counter() - start) / REPLIES * 1e6


async def compare(stream: bool) -> tuple[float, float, float]:
    """Median µs/reply without and with the middleware, and the median of paired differences
    (rounds alternate, so drift in machine load hits both sides alike)."""
    text = "x" * 160 if stream else "hello"
    plain = Agent(ScriptedChatModel([text], stream=stream, chunk_size=8, repeat=True))
    traced = Agent(
        ScriptedChatModel([text], stream=stream, chunk_size=8, repeat=True),
        middlewares=[TracingMiddleware()],
    )
    await one_round(plain)
    await one_round(traced)
    without, with_, diffs = [], [], []
    for _ in range(ROUNDS):
        a = await one_round(plain)
        b = await one_round(traced)
        without.append(a)
        with_.append(b)
        diffs.append(b - a)
    return statistics.median(without), statistics.median(with_), statistics.median(diffs)


async def main() -> None:
    print(f"{REPLIES} replies x {ROUNDS} alternating rounds, no SDK tracer provider installed")
    for stream in (False, True):
        base, traced, diff = await compare(stream)
        label = "streaming 20 chunks" if stream else "non-streaming"
        print(
            f"{label:20s} without: {base:6.1f} µs  with TracingMiddleware: {traced:6.1f} µs"
            f"  paired difference: {diff:+5.2f} µs (target <= 2 µs)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    if parser.parse_args().quick:
        REPLIES, ROUNDS = 20, 2
    asyncio.run(main())
