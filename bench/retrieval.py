"""Retrieval benchmark: ingest throughput against the raw embedder, and search latency
(dense, lexical, hybrid) at 10k and 100k chunks on SQLite and PostgreSQL. Prints figures
and their targets; asserts nothing.

Corpus: real English text (docstrings of the standard library and a few installed packages),
cut into documents of several paragraphs and chunked with the default options (128 tokens,
32 overlap). The 10k-chunk stores hold real all-MiniLM-L6-v2 vectors (embedded once, then
reused for the second backend). The 100k-chunk stores keep real text for full-text search,
but their vectors are synthesised (a real 10k vector plus noise, chosen by a hash of the
chunk text) so the run stays bounded; queries go through the same synthetic embedder.
Search latencies are the store's own: query vectors are computed before timing, and the
real embedder's per-query cost is printed separately.

    .venv/bin/python bench/retrieval.py [--quick] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import io
import os
import pkgutil
import random
import re
import shutil
import sys
import tempfile
import time
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hookmesh.retrieval import (
    Chunker,
    Document,
    Embedder,
    KnowledgeStore,
    MiniLMEmbedder,
    PostgresKnowledgeStore,
    Vectors,
    l2_normalise,
    open_knowledge_store,
)
from hookmesh.testing import EmbeddedPostgres

_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "ensurepip"}
_SKIP |= {"venv", "lib2to3", "pydoc", "webbrowser", "test", "curses", "readline", "pty", "tty"}
_PACKAGES = ["numpy", "hypothesis", "pydantic", "psycopg", "google.protobuf", "rich", "httpx"]
_MODES = ("dense", "lexical", "hybrid")
_BATCH = 64  # documents per ingest call
_TOP_K = 10


def _paragraphs_of(objects: Sequence[Any], out: dict[str, None]) -> None:
    for obj in objects:
        try:
            doc = inspect.getdoc(obj)
        except Exception:
            continue
        for paragraph in re.split(r"\n\s*\n", doc or ""):
            text = " ".join(paragraph.split())
            if len(text.split()) >= 8 and sum(c.isalpha() for c in text) > 0.6 * len(text):
                out[text] = None


def _import_quietly(name: str) -> Any:
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        try:
            return importlib.import_module(name)
        except BaseException:
            return None


def corpus() -> list[str]:
    """Unique English paragraphs from docstrings (stdlib, then a few installed packages)."""
    found: dict[str, None] = {}
    modules = []
    for name in sorted(sys.stdlib_module_names - _SKIP):
        if not name.startswith("_"):
            modules.append(_import_quietly(name))
    for top in _PACKAGES:
        package = _import_quietly(top)
        modules.append(package)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), f"{top}."):
            if "test" not in info.name and "__main__" not in info.name:
                modules.append(_import_quietly(info.name))
    for module in filter(None, modules):
        members = [v for v in vars(module).values() if callable(v)]
        _paragraphs_of([module, *members], found)
        for cls in (v for v in members if inspect.isclass(v)):
            _paragraphs_of([v for v in vars(cls).values() if callable(v)], found)
    return list(found)


def make_documents(paragraphs: list[str], count: int, seed: int, prefix: str) -> list[Document]:
    """`count` documents of 4-10 paragraphs drawn at random (a paragraph may recur)."""
    rng = random.Random(seed)
    return [
        Document(f"{prefix}{i}", "\n\n".join(rng.sample(paragraphs, rng.randint(4, 10))))
        for i in range(count)
    ]


class CachedEmbedder:
    """Computes each text's vector once (so a second backend reuses the first's vectors)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray[Any, Any]] = {}
        self.name, self.dimension = inner.name, inner.dimension

    async def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, await self.inner.embed(missing), strict=True):
                self.cache[text] = vector
        return np.array([self.cache[t] for t in texts], dtype=np.float32).reshape(
            len(texts), self.dimension
        )


class SyntheticEmbedder:
    """A real vector plus noise, picked by the text's CRC: realistic clusters, no model."""

    name = "synthetic-minilm-384"
    dimension = 384

    def __init__(self, base: np.ndarray[Any, Any], noise: float = 0.35) -> None:
        self.base, self.noise = base, noise

    async def embed(self, texts: Sequence[str]) -> Vectors:
        rows = []
        for text in texts:
            seed = zlib.crc32(text.encode())
            rng = np.random.default_rng(seed)
            base = self.base[seed % len(self.base)]
            rows.append(base + self.noise * rng.normal(size=self.dimension) / 20)
        return l2_normalise(np.array(rows, dtype=np.float32).reshape(len(texts), self.dimension))


async def ingest_all(store: KnowledgeStore, kb: str, docs: list[Document]) -> tuple[int, float]:
    """(chunks stored, seconds)."""
    started = time.perf_counter()
    chunks = 0
    for i in range(0, len(docs), _BATCH):
        chunks += sum(r.chunk_count for r in await store.ingest(kb, docs[i : i + _BATCH]))
    return chunks, time.perf_counter() - started


async def latency(
    store: KnowledgeStore, kb: str, queries: list[str], mode: str, calls: int
) -> tuple[float, float]:
    """(p50, p99) milliseconds of sequential searches, after a warm-up."""
    for query in queries[:20]:
        await store.search(query, [kb], mode=mode, top_k=_TOP_K)  # type: ignore[arg-type]
    times = []
    for n in range(calls):
        started = time.perf_counter()
        await store.search(queries[n % len(queries)], [kb], mode=mode, top_k=_TOP_K)  # type: ignore[arg-type]
        times.append((time.perf_counter() - started) * 1000)
    p50, p99 = np.percentile(times, [50, 99])
    return float(p50), float(p99)


def queries_from(paragraphs: list[str], count: int, seed: int) -> list[str]:
    """Question-like queries: the first 6-10 words of random paragraphs."""
    rng = random.Random(seed)
    return [" ".join(p.split()[: rng.randint(6, 10)]) for p in rng.sample(paragraphs, count)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--calls", type=int, default=300, help="timed searches per figure")
    args = parser.parse_args()
    sizes = {"throughput": 16, "10k": 40, "100k": 80} if args.quick else {}
    if args.quick:
        args.calls = min(args.calls, 20)
    sizes = {"throughput": 120, "10k": 3450, "100k": 34500} | sizes

    started = time.perf_counter()
    paragraphs = corpus()
    print(f"corpus: {len(paragraphs)} paragraphs, {sum(map(len, paragraphs)) / 1e6:.1f} M chars")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    embedder = MiniLMEmbedder()
    await embedder.load()
    print(
        f"embedder: {embedder.name}, batch 8, {embedder.workers} workers x "
        f"{embedder.threads_per_worker} threads; chunking 128 tokens / 32 overlap; top_k {_TOP_K}"
    )
    workdir = Path(tempfile.mkdtemp(prefix="hookmesh-bench-"))
    server = None if args.no_postgres else EmbeddedPostgres()
    backends = {"sqlite": f"sqlite:///{workdir}/bench-%s.db"}
    if server is not None:
        backends["postgresql"] = server.start()
    try:
        await run(args, sizes, paragraphs, embedder, backends)
    finally:
        if server is not None:
            server.stop()
        embedder.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"total bench time {time.perf_counter() - started:.0f} s")


async def open_store(url: str, tag: str, embedder: Embedder) -> KnowledgeStore:
    if url.startswith("sqlite"):
        return await open_knowledge_store(url % tag, embedder)
    return await open_knowledge_store(url, embedder, namespace=f"bench_{tag}", max_connections=4)


async def run(
    args: argparse.Namespace,
    sizes: dict[str, int],
    paragraphs: list[str],
    embedder: MiniLMEmbedder,
    backends: dict[str, str],
) -> None:
    # 1. ingest throughput against the raw embedder, same texts, same run
    docs = make_documents(paragraphs, sizes["throughput"], seed=1, prefix="t")
    chunker = Chunker(embedder.tokenizer)
    texts = [c.text for d in docs for c in chunker.chunk(d.id, d.text)]
    await embedder.embed(texts[:64])  # warm up
    raw = []
    for _ in range(2):
        t = time.perf_counter()
        await embedder.embed(texts)
        raw.append(len(texts) / (time.perf_counter() - t))
    print(f"\n== ingest throughput ({len(docs)} documents, {len(texts)} chunks) ==")
    runs = f"runs {raw[0]:.1f}, {raw[1]:.1f}"
    print(f"raw embedder            {np.mean(raw):7.1f} chunks/s  ({runs})")
    for backend, url in backends.items():
        store = await open_store(url, "throughput", embedder)
        await store.create_knowledge_base("kb")
        chunks, seconds = await ingest_all(store, "kb", docs)
        await store.close()
        rate = chunks / seconds
        print(
            f"ingest {backend:<16} {rate:7.1f} chunks/s  = {100 * rate / np.mean(raw):.0f}% "
            "of raw (target >= 80%)"
        )

    # 2. search latency at 10k (real vectors) and 100k (synthetic vectors) chunks
    queries = queries_from(paragraphs, 200, seed=7)
    cached = CachedEmbedder(embedder)
    results: list[tuple[str, str, int, str, float, float]] = []
    for size, count in (("10k", sizes["10k"]), ("100k", sizes["100k"])):
        docs = make_documents(paragraphs, count, seed=11 if size == "10k" else 13, prefix=size)
        active: Embedder = cached
        if size == "100k":
            base = np.array(list(cached.cache.values()), dtype=np.float32)
            active = SyntheticEmbedder(base)
        await active.embed(queries)  # query vectors are ready before timing
        print(f"\n== {size}: {len(docs)} documents ==")
        for backend, url in backends.items():
            store = await open_store(url, size, active)
            await store.create_knowledge_base("kb")
            chunks, seconds = await ingest_all(store, "kb", docs)
            if isinstance(store, PostgresKnowledgeStore):
                await store.analyze()  # as autovacuum would shortly
            note = "synthetic vectors"
            if size == "10k":
                note = "real vectors" + (", embedded here" if backend == "sqlite" else ", cached")
            print(f"{backend:<11} {chunks} chunks stored in {seconds:6.1f} s ({note})")
            for mode in _MODES:
                p50, p99 = await latency(store, "kb", queries, mode, args.calls)
                results.append((size, backend, chunks, mode, p50, p99))
            await store.close()

    t_query = []
    for query in queries[:50]:
        t = time.perf_counter()
        await embedder.embed([query])
        t_query.append((time.perf_counter() - t) * 1000)
    print("\n== search latency, top_k 10, one call at a time (ms; store only) ==")
    print(f"{'size':<5} {'backend':<11} {'chunks':>7} {'mode':<8} {'p50':>7} {'p99':>7}")
    for size, backend, chunks, mode, p50, p99 in results:
        print(f"{size:<5} {backend:<11} {chunks:>7} {mode:<8} {p50:7.2f} {p99:7.2f}")
    q50, q99 = np.percentile(t_query, [50, 99])
    print(f"query embedding (real model, one query): p50 {q50:.2f} ms, p99 {q99:.2f} ms")
    print("targets: ingest >= 80% of raw embedder throughput; search latency: figures only")


if __name__ == "__main__":
    asyncio.run(main())
