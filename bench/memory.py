"""Memory service benchmark: AddMemories and SearchMemories latency (p50/p99) over gRPC at
10k memories per user, SQLite against PostgreSQL, like with like. Prints figures and their
setup; asserts nothing.

Setup: one memory service per backend on loopback (no extraction model), both running for
the whole run, each holding two users with 10,000 memories (half from each of two agents),
bulk-loaded with `MemoryStore.import_memories` (no duplicate check) from synthetic
one-sentence facts about a user (templates over names, places, foods, hobbies...; every fact
distinct). Real all-MiniLM-L6-v2 vectors. Like with like:

- the bulk corpus is embedded once, before either backend loads it, and both load the same
  vectors (so "loaded in" is storage alone, for both);
- every timed call embeds its own text when it is made, on either backend: nothing computed
  for one backend is reused by the other, and no warm-up text is timed again;
- both commit durably: SQLite in WAL with synchronous=FULL (an fsync per commit), PostgreSQL
  with its default fsync and synchronous_commit (`EmbeddedPostgres(durable=True)`);
- the two backends are sampled in short interleaved rounds (order alternating), each round
  sending both the same inputs, so the machine's drift hits both alike.

Then, through `MemoryClient`, one call outstanding at a time:

- floor: a grpc.health Check round trip (what any RPC costs here), per backend;
- add: one new fact per AddMemories (near-duplicate search over the user's 10k memories,
  embedding, durable commit);
- search: one distinct query per SearchMemories (query embedding, dense and keyword legs,
  rank fusion), user scope, then user + agent scope (half the user's memories), top_k 5;
- search x4: four calls outstanding, for throughput.

    .venv/bin/python bench/memory.py [--quick] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hookmesh.client import MemoryClient
from hookmesh.memory import MemoryScope
from hookmesh.retrieval import Embedder, MiniLMEmbedder, Vectors, default_embedder
from hookmesh.services.memory import MemoryService, load_memory_config, start_memory_service
from hookmesh.testing import EmbeddedPostgres

ROUND = 20
"""Calls per backend per round."""
USERS = [MemoryScope("bench-alice", "agent-a"), MemoryScope("bench-bob", "agent-a")]

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


class PreloadedEmbedder:
    """The real embedder, with the bulk corpus's vectors computed once up front: both
    backends load the same vectors, and every other text (what a timed call sends) is
    embedded when it is asked for, every time."""

    def __init__(self, embedder: MiniLMEmbedder) -> None:
        self.embedder = embedder
        self.corpus: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    @property
    def tokenizer(self) -> Any:
        return self.embedder.tokenizer

    async def preload(self, texts: Sequence[str]) -> None:
        for text, row in zip(texts, await self.embedder.embed(texts), strict=True):
            self.corpus[text] = row

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if all(t in self.corpus for t in texts):
            return np.stack([self.corpus[t] for t in texts]).astype(np.float32)
        return await self.embedder.embed(texts)


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


@dataclass
class Backend:
    """One memory service under test and its clients."""

    name: str
    service: MemoryService
    client: MemoryClient
    channel: grpc.aio.Channel
    samples: dict[str, list[float]] = field(default_factory=dict)
    rates: list[float] = field(default_factory=list)

    async def health(self) -> None:
        stub = health_pb2_grpc.HealthStub(self.channel)
        await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)


async def start(name: str, config: dict[str, Any], embedder: Embedder, per_user: int) -> Backend:
    service: MemoryService = await start_memory_service(
        load_memory_config(None, **config), address="127.0.0.1:0", embedder=embedder
    )
    began = time.perf_counter()
    for i, scope in enumerate(USERS):
        texts = facts(per_user, seed=i)
        half = len(texts) // 2
        await service.store.import_memories(scope, texts[:half], batch=256)
        other = MemoryScope(scope.user_id, "agent-b")
        await service.store.import_memories(other, texts[half:], batch=256)
    loaded = time.perf_counter() - began
    analyze = getattr(service.store.knowledge, "analyze", None)
    if analyze is not None:
        await analyze()
    print(
        f"{name}: {len(USERS)} users x {per_user} memories (half from each of two agents)"
        f" loaded in {loaded:.1f} s (vectors precomputed)"
    )
    target = f"127.0.0.1:{service.port}"
    channel = grpc.aio.insecure_channel(target)
    client = MemoryClient(target, timeout=30)
    await channel.channel_ready()
    await client.wait_ready(10)
    return Backend(name, service, client, channel)


async def stop(backend: Backend) -> None:
    await backend.client.close()
    await backend.channel.close()
    await backend.service.stop(None)


Make = Callable[[Backend, Any], Callable[[], Awaitable[Any]]]


async def interleaved(
    backends: list[Backend], label: str, inputs: Sequence[Any], make: Make, outstanding: int = 1
) -> None:
    """Send `inputs` to every backend in rounds of ROUND, alternating which goes first."""
    for backend in backends:
        backend.samples[label] = []
    for r, start_at in enumerate(range(0, len(inputs), ROUND)):
        chunk = inputs[start_at : start_at + ROUND]
        for backend in backends if r % 2 == 0 else backends[::-1]:
            began = time.perf_counter()
            calls = [make(backend, item) for item in chunk]
            backend.samples[label] += await timed(calls, outstanding)
            if outstanding > 1:
                backend.rates.append(len(chunk) / (time.perf_counter() - began))


def report(backends: list[Backend]) -> None:
    labels = list(backends[0].samples)
    print()
    print(f"{'':32s}" + "".join(f"{b.name:>34s}" for b in backends))
    print(
        f"{'':32s}"
        + "".join(f"{'p50 ms':>10s}{'p99 ms':>10s}{'/floor':>8s}{'n':>6s}" for _ in backends)
    )
    for label in labels:
        cells = []
        for backend in backends:
            p50, p99 = quantiles(backend.samples[label])
            floor = quantiles(backend.samples["floor (health Check)"])[0]
            cells.append(
                f"{p50:10.2f}{p99:10.2f}{p50 / floor:7.1f}x{len(backend.samples[label]):6d}"
            )
        print(f"  {label:30s}" + "".join(cells))
    rates = ", ".join(f"{b.name} {statistics.median(b.rates):.0f}" for b in backends if b.rates)
    print(f"  search x4 outstanding, searches/s (median over rounds): {rates}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k memories per user, few calls")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    per_user, calls = (1_000, 60) if args.quick else (10_000, 300)
    load_before, began = os.getloadavg()[0], time.perf_counter()
    real = default_embedder()
    await real.load()
    embedder = PreloadedEmbedder(real)
    corpus = [t for i in range(len(USERS)) for t in facts(per_user, seed=i)]
    start_embed = time.perf_counter()
    await embedder.preload(corpus)
    rate = len(corpus) / (time.perf_counter() - start_embed)
    print(f"setup: {per_user} memories per user, {calls} timed calls per figure and backend")
    print(f"embedder: {real.name}, {rate:.0f} facts/s (bulk corpus, embedded once for both)")
    with tempfile.TemporaryDirectory(prefix="hookmesh-bench-memory-") as tmp:
        pg = None if args.no_postgres else EmbeddedPostgres(durable=True)
        backends: list[Backend] = []
        try:
            # NOTE(bench): PostgreSQL first: its initdb forks, best before gRPC has threads.
            url = await asyncio.to_thread(pg.start) if pg is not None else None
            backends.append(
                await start("sqlite", {"store": f"sqlite:///{tmp}/memory.db"}, embedder, per_user)
            )
            if url is not None:
                config = {"store": url, "namespace": "bench_memory"}
                backends.append(await start("postgresql", config, embedder, per_user))
            await measure(backends, per_user, calls)
        finally:
            for backend in backends:
                await stop(backend)
            if pg is not None:
                pg.stop()
    print(
        f"\n{os.cpu_count()} cpus, load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; whole run {time.perf_counter() - began:.0f} s"
    )


async def measure(backends: list[Backend], per_user: int, calls: int) -> None:
    alice = USERS[0]
    user_scope = MemoryScope(alice.user_id)
    queries = [q.replace("The user", "Who") for q in facts(calls * 3 + 40, seed=99)]
    warm, queries = queries[:40], queries[40:]
    fresh = facts(per_user + calls + 20, seed=0)[per_user:]
    warm_adds, fresh = fresh[:20], fresh[20:]
    for backend in backends:  # warm up: never timed again
        for _ in range(50):
            await backend.health()
        for q in warm:
            await backend.client.search(q, alice)
        for f in warm_adds:
            await backend.client.add(alice, facts=[f])
    await interleaved(backends, "floor (health Check)", range(calls), lambda b, _: b.health)
    await interleaved(
        backends,
        "add (1 fact, dedup check)",
        fresh,
        lambda b, f: lambda: b.client.add(alice, facts=[f]),
    )
    await interleaved(
        backends,
        "search (user scope)",
        queries[:calls],
        lambda b, q: lambda: b.client.search(q, user_scope),
    )
    await interleaved(
        backends,
        "search (user + agent scope)",
        queries[calls : 2 * calls],
        lambda b, q: lambda: b.client.search(q, alice),
    )
    await interleaved(
        backends,
        "search x4 outstanding",
        queries[2 * calls :],
        lambda b, q: lambda: b.client.search(q, user_scope),
        outstanding=4,
    )
    report(backends)


if __name__ == "__main__":
    asyncio.run(main())
