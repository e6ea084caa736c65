"""Memory service benchmark: AddMemories and SearchMemories latency (p50/p99) over gRPC at
10k memories per user, on SQLite and PostgreSQL. Prints figures and their setup; asserts
nothing.

Setup: one memory service per backend on loopback (no extraction model), two users with
10,000 memories each (half from each of two agents), bulk-loaded with
`MemoryStore.import_memories` (no duplicate check) from synthetic one-sentence facts about a
user (templates over names, places, foods, hobbies...; every fact distinct). Real
all-MiniLM-L6-v2 vectors, embedded once and reused for the second backend. Then, through
`MemoryClient`, one call outstanding at a time:

- floor: a grpc.health Check round trip (what any RPC costs here);
- add: one new fact per AddMemories (near-duplicate search over the user's 10k memories,
  embedding, durable commit; SQLite commits are fsync'd);
- search: one distinct query per SearchMemories (query embedding, dense and keyword legs,
  rank fusion), user scope, then user + agent scope (half the user's memories), top_k 5;
- search x4: four calls outstanding, for throughput.

    .venv/bin/python bench/memory.py [--quick] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hookmesh.client import MemoryClient
from hookmesh.memory import MemoryScope
from hookmesh.retrieval import Embedder, MiniLMEmbedder, Vectors, default_embedder
from hookmesh.services.memory import MemoryService, load_memory_config, start_memory_service
from tests.pg import EmbeddedPostgres

_NAMES = "Ana Ben Chloe Dev Eva Finn Gia Hugo Iris Jon Kai Lena Milo Nora Omar Pia Raj Sara Tom Uma"
_PLACES = "Lisbon Porto Oslo Lyon Kyoto Quito Lima Perth Cork Graz Bonn Turin Split Riga Malmo Pune"
_FOODS = "risotto ramen tacos falafel curry pho paella dumplings borscht ceviche gnocchi tagine"
_HOBBIES = (
    "chess climbing pottery cycling salsa origami fishing rowing karaoke birdwatching sailing"
)
_THINGS = "bicycle piano kayak camera telescope guitar drone scooter sewing-machine espresso-maker"
_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday"
_TEMPLATES = [
    "The user's friend {name} lives in {place}.",
    "The user ate {food} with {name} in {place}.",
    "The user practises {hobby} every {day} with {name}.",
    "The user bought a {thing} in {place} for {name}.",
    "The user wants to visit {place} to try the {food}.",
    "The user lent {name} a {thing} on {day}.",
    "The user's {hobby} club meets in {place} on {day}s.",
    "The user dislikes {food} but {name} loves it.",
]


def facts(count: int, seed: int) -> list[str]:
    """`count` distinct one-sentence facts."""
    words = {
        "name": _NAMES.split(),
        "place": _PLACES.split(),
        "food": _FOODS.split(),
        "hobby": _HOBBIES.split(),
        "thing": _THINGS.split(),
        "day": _DAYS.split(),
    }
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < count:
        template = rng.choice(_TEMPLATES)
        fact = template.format(**{k: rng.choice(v) for k, v in words.items()})
        if rng.random() < 0.3:
            fact = fact[:-1] + f", around {rng.randint(1990, 2025)}."
        out.setdefault(fact, None)
    return list(out)


class ReusedEmbedder:
    """The real embedder, computing each text once (the second backend reuses the vectors)."""

    def __init__(self, embedder: MiniLMEmbedder) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    @property
    def tokenizer(self) -> Any:
        return self.embedder.tokenizer

    async def embed(self, texts: Sequence[str]) -> Vectors:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            for text, row in zip(missing, await self.embedder.embed(missing), strict=True):
                self.vectors[text] = row
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def quantiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


async def timed(calls: Sequence[Callable[[], Awaitable[Any]]], outstanding: int = 1) -> list[float]:
    """Latency of each call, with `outstanding` calls in flight (workers drain on exit)."""
    queue = list(reversed(calls))
    out: list[float] = []

    async def worker() -> None:
        while queue:
            call = queue.pop()
            start = time.perf_counter()
            await call()
            out.append(time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(outstanding)))
    return out


def report(label: str, samples: list[float], floor: float | None = None) -> None:
    p50, p99 = quantiles(samples)
    ratio = f"   {p50 / floor:6.1f}x floor" if floor else ""
    print(f"  {label:30s} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms   n={len(samples)}{ratio}")


async def bench_backend(
    name: str, config: dict[str, Any], embedder: Embedder, per_user: int, calls: int
) -> None:
    service: MemoryService = await start_memory_service(
        load_memory_config(None, **config), address="127.0.0.1:0", embedder=embedder
    )
    target = f"127.0.0.1:{service.port}"
    users = [MemoryScope("bench-alice", "agent-a"), MemoryScope("bench-bob", "agent-a")]
    try:
        start = time.perf_counter()
        for i, scope in enumerate(users):
            texts = facts(per_user, seed=i)
            half = len(texts) // 2
            await service.store.import_memories(scope, texts[:half], batch=256)
            other = MemoryScope(scope.user_id, "agent-b")
            await service.store.import_memories(other, texts[half:], batch=256)
        loaded = time.perf_counter() - start
        print(
            f"{name}: {len(users)} users x {per_user} memories (half from each of two agents)"
            f" loaded in {loaded:.1f} s"
        )
        analyze = getattr(service.store.knowledge, "analyze", None)
        if analyze is not None:
            await analyze()
        async with grpc.aio.insecure_channel(target) as channel, MemoryClient(target) as client:
            await channel.channel_ready()
            await client.wait_ready(10)
            health = health_pb2_grpc.HealthStub(channel)
            check = health_pb2.HealthCheckRequest(service="")
            await timed([lambda: health.Check(check, timeout=10)] * 50)  # warm up
            floor = quantiles(await timed([lambda: health.Check(check, timeout=10)] * calls))[0]
            report("floor (health Check)", await timed([lambda: health.Check(check)] * calls))
            alice = users[0]
            queries = [q.replace("The user", "Who") for q in facts(calls * 3, seed=99)]
            await timed([lambda q=q: client.search(q, alice) for q in queries[:20]])  # warm up
            fresh = facts(per_user + calls, seed=0)[per_user:]
            adds = [lambda f=f: client.add(alice, facts=[f]) for f in fresh]
            report("add (1 fact, dedup check)", await timed(adds), floor)
            user_scope = MemoryScope(alice.user_id)
            report(
                "search (user scope)",
                await timed([lambda q=q: client.search(q, user_scope) for q in queries[:calls]]),
                floor,
            )
            report(
                "search (user + agent scope)",
                await timed(
                    [lambda q=q: client.search(q, alice) for q in queries[calls : 2 * calls]]
                ),
                floor,
            )
            start = time.perf_counter()
            window = [lambda q=q: client.search(q, user_scope) for q in queries[2 * calls :]]
            samples = await timed(window, outstanding=4)
            rate = len(samples) / (time.perf_counter() - start)
            report("search x4 outstanding", samples, floor)
            print(f"  {'':30s} {rate:.0f} searches/s")
    finally:
        await service.stop(None)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k memories per user, few calls")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    per_user, calls = (1_000, 50) if args.quick else (10_000, 300)
    real = default_embedder()
    await real.load()
    embedder = ReusedEmbedder(real)
    start = time.perf_counter()
    await embedder.embed(facts(per_user, seed=0)[:500])
    rate = 500 / (time.perf_counter() - start)
    print(f"setup: {per_user} memories per user, {calls} timed calls per figure")
    print(f"embedder: {real.name}, {rate:.0f} facts/s (bulk); query vectors are computed per call")
    with tempfile.TemporaryDirectory(prefix="hookmesh-bench-memory-") as tmp:
        await bench_backend(
            "sqlite", {"store": f"sqlite:///{tmp}/memory.db"}, embedder, per_user, calls
        )
    if not args.no_postgres:
        with EmbeddedPostgres() as pg:
            config = {"store": pg.url, "namespace": "bench_memory"}
            await bench_backend("postgresql", config, embedder, per_user, calls)


if __name__ == "__main__":
    asyncio.run(main())
