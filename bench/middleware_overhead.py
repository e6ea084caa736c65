"""Per-reply cost of the hook chain: µs per reply for N pass-through middlewares.

Scripted model, one user message, a text answer; non-streaming and 20-chunk streaming.
Pass-through middlewares implement on_reasoning and on_model_call, written two ways:
`natural` re-yields every event (``async for ... yield``); `direct` returns the downstream
stream itself (``return next_handler()``), which hookmesh supports at zero per-event cost.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from hookmesh.agent import Agent, AgentState
from hookmesh.agent.models import ScriptedChatModel
from hookmesh.middleware import Middleware

REPLIES = 3000
ROUNDS = 5
COUNTS = (0, 1, 5, 20)


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

    def on_model_call(self, agent: Any, kwargs: dict[str, Any], next_handler: Any) -> Any:
        return next_handler()


async def per_reply_us(n: int, cls: type[Middleware], stream: bool) -> float:
    text = "x" * 160 if stream else "hello"
    model = ScriptedChatModel([text], stream=stream, chunk_size=8, repeat=True)
    agent = Agent(model, middlewares=[cls() for _ in range(n)])
    best = []
    for _ in range(ROUNDS):
        gc.collect()
        start = time.perf_counter()
        for _ in range(REPLIES):
            agent.state = AgentState()
            async for _event in agent.reply("hi"):
                pass
        best.append((time.perf_counter() - start) / REPLIES * 1e6)
    return statistics.median(best)


async def main() -> None:
    try:
        import uvloop

        loop = "uvloop" if isinstance(asyncio.get_running_loop(), uvloop.Loop) else "asyncio"
    except ImportError:
        loop = "asyncio"
    print(
        f"python {sys.version.split()[0]}, loop {loop}, "
        f"{REPLIES} replies x {ROUNDS} rounds (median)"
    )
    for stream in (False, True):
        label = "streaming 20 chunks" if stream else "non-streaming"
        for cls in (NaturalPassThrough, DirectPassThrough):
            figures = {n: await per_reply_us(n, cls, stream) for n in COUNTS}
            per_mw = (figures[20] - figures[0]) / 20
            row = "  ".join(f"N={n}: {v:7.1f} µs" for n, v in figures.items())
            print(f"{label:20s} {cls.__name__:19s} {row}  -> {per_mw:5.2f} µs/middleware")


if __name__ == "__main__":
    asyncio.run(main())
