"""Reply cost with the tracing middleware attached but no SDK tracer provider, vs without it.

Scripted model, one user message, a text answer (non-streaming and 20-chunk streaming).
Prints figures; asserts nothing. Target: <= 2 µs difference per reply.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time

from hookmesh.agent import Agent, AgentState
from hookmesh.agent.models import ScriptedChatModel
from hookmesh.middleware.builtin.tracing import TracingMiddleware

REPLIES = 4000
ROUNDS = 7


async def per_reply_us(stream: bool, traced: bool) -> float:
    text = "x" * 160 if stream else "hello"
    model = ScriptedChatModel([text], stream=stream, chunk_size=8, repeat=True)
    agent = Agent(model, middlewares=[TracingMiddleware()] if traced else [])
    rounds = []
    for _ in range(ROUNDS):
        gc.collect()
        start = time.perf_counter()
        for _ in range(REPLIES):
            agent.state = AgentState()
            async for _event in agent.reply("hi"):
                pass
        rounds.append((time.perf_counter() - start) / REPLIES * 1e6)
    return statistics.median(rounds)


async def main() -> None:
    print(f"{REPLIES} replies x {ROUNDS} rounds (median), no SDK tracer provider installed")
    for stream in (False, True):
        base = await per_reply_us(stream, traced=False)
        traced = await per_reply_us(stream, traced=True)
        label = "streaming 20 chunks" if stream else "non-streaming"
        print(
            f"{label:20s} without: {base:6.1f} µs  with TracingMiddleware: {traced:6.1f} µs"
            f"  difference: {traced - base:+5.2f} µs (target <= 2 µs)"
        )


if __name__ == "__main__":
    asyncio.run(main())
