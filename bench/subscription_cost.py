"""What a served on_reply hook's subscriptions cost per reply: ``"*"`` verdicts (the Python
host's default: one round trip per event) against read-only ``"*"`` (sent as they pass) and
against narrowing to ``reply_end``, with no middleware as the baseline.

One streamed reply of the scripted model (chunk size 4: some 30 events) per sample; the
sidecar is served in this process on loopback. Rows are sampled in interleaved rounds so
drift (this machine is shared) hits every row alike. Prints median milliseconds per reply
and messages sent to the sidecar per reply; asserts nothing. ``--quick``: a few rounds.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Mapping

from hookmesh.agent import Agent
from hookmesh.middleware import AgentView, Middleware, ReplyArgs, ReplyNext
from hookmesh.models import ScriptedChatModel
from hookmesh.remote import SERVICE_NAME, RemoteMiddleware, serve_middleware
from hookmesh.schema import AgentEvent

ANSWER = "a fairly long answer streamed in many small chunks for the bench " * 2


class Verdicts(Middleware):
    """No subscriptions declared: the host's default, a verdict on every item."""

    async def on_reply(
        self, agent: AgentView, kwargs: ReplyArgs, next_handler: ReplyNext
    ) -> AsyncIterator[AgentEvent]:
        async for event in next_handler():
            yield event


class Watches(Verdicts):
    """Sees every item, read-only."""

    read_only_subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": ("*",)}


class Narrow(Verdicts):
    """A verdict on reply_end only."""

    subscriptions: Mapping[str, tuple[str, ...]] = {"on_reply": ("reply_end",)}


async def main(rounds: int) -> None:
    rows: dict[str, list[float]] = {"none": []}
    remotes: dict[str, RemoteMiddleware | None] = {"none": None}
    servers = []
    for name, cls in (("verdicts *", Verdicts), ("read-only *", Watches), ("reply_end", Narrow)):
        running = await serve_middleware(cls())
        servers.append((name, running))
        remotes[name] = await RemoteMiddleware.connect(f"127.0.0.1:{running.port}")
        rows[name] = []
    events = 0
    for _ in range(rounds):
        for name, remote in remotes.items():
            model = ScriptedChatModel([ANSWER], stream=True, chunk_size=4)
            agent = Agent(model, middlewares=[remote] if remote else [])
            began = time.perf_counter()
            events = len([e async for e in agent.reply("go")])
            rows[name].append((time.perf_counter() - began) * 1000)
    base = statistics.median(rows["none"])
    print(f"one streamed reply of {events} events, {rounds} rounds")
    print(f"{'subscriptions':14s} {'ms/reply':>9s} {'x none':>7s} {'msgs/reply':>11s}")
    counts = {name: sum(r.servicers[SERVICE_NAME].received.values()) for name, r in servers}
    for name, samples in rows.items():
        median = statistics.median(samples)
        msgs = f"{counts[name] / rounds:.0f}" if name in counts else "-"
        print(f"{name:14s} {median:9.2f} {median / base:7.1f} {msgs:>11s}")
    for remote in remotes.values():
        if remote is not None:
            await remote.aclose()
    for _, running in servers:
        await running.stop(None)


if __name__ == "__main__":
    asyncio.run(main(5 if "--quick" in sys.argv else 200))
