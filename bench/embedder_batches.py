"""Embedding throughput of the MiniLM embedder by batch size, on texts of about 100 tokens.

What docs/retrieval.md quotes when it says small batches beat 32: `MiniLMEmbedder` instances
that differ only in `batch_size` (default workers and threads), each loaded before timing,
embed the same TEXTS texts (60-140 tokens, mixed lengths, as an ingest batch sends them) in
one `embed` call per sample. A warm-up round, then ROUNDS interleaved rounds with the order
reversed every other round; the figure to quote is the median over rounds of each batch
size's throughput over batch 32's in the same round. Prints figures; asserts nothing.

    .venv/bin/python bench/embedder_batches.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time

from hookmesh.retrieval import MiniLMEmbedder

BATCH_SIZES = (8, 16, 32)
TEXTS = 64
"""Texts per `embed` call, as one ingest batch of 64 documents' chunks."""
ROUNDS = 8
_SENTENCES = [
    "Grey herons stand still in shallow water and spear fish with their long bills.",
    "Sourdough rises slowly because wild yeast and lactic bacteria ferment the dough.",
    "Tides follow the moon, with two highs and two lows on most coasts every day.",
    "The committee postponed the vote until the budget figures had been audited.",
    "A cold front brings gusty winds, a sharp drop in temperature and brief showers.",
    "Version control lets a team review every change before it reaches production.",
    "The museum's new wing holds ceramics from three centuries of coastal trade.",
    "Regular stretching after a run reduces stiffness but does not prevent injury.",
    "The library extended its opening hours during the examination period.",
    "Solar panels lose some efficiency on hot days, when the cells heat up.",
    "She rewrote the opening chapter twice before sending the draft to her editor.",
    "Rust forms when iron reacts with oxygen and water over a long time.",
]


def texts(tokenizer: object, count: int, seed: int = 7) -> list[str]:
    """`count` texts of 60-140 tokens, built from whole sentences."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        target = rng.randint(60, 140)
        parts: list[str] = []
        while len(tokenizer.token_spans(" ".join(parts))) < target:  # type: ignore[attr-defined]
            parts.append(rng.choice(_SENTENCES))
        out.append(" ".join(parts))
    return out


async def main() -> None:
    load_before, began = os.getloadavg()[0], time.perf_counter()
    embedders = {size: MiniLMEmbedder(batch_size=size) for size in BATCH_SIZES}
    for embedder in embedders.values():
        await embedder.load()
    sample = texts(embedders[8].tokenizer, TEXTS)
    tokens = [len(embedders[8].tokenizer.token_spans(t)) for t in sample]
    rates: dict[int, list[float]] = {size: [] for size in BATCH_SIZES}
    order = list(embedders.items())
    for i in range(ROUNDS + 1):
        for size, embedder in order if i % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            await embedder.embed(sample)
            if i:  # round 0 warms up
                rates[size].append(TEXTS / (time.perf_counter() - start))
    workers = embedders[8].workers
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {workers} workers x "
        f"{embedders[8].threads_per_worker} threads; {TEXTS} texts of {min(tokens)}-"
        f"{max(tokens)} tokens (median {statistics.median(tokens):.0f}) per embed call; "
        f"{ROUNDS} interleaved rounds after one warm-up"
    )
    head = f"{'batch size':>10s} {'texts/s p50':>12s} {'min':>8s} {'max':>8s}"
    print(f"{head} {'vs 32 (per-round)':>18s}")
    for size in BATCH_SIZES:
        ratio = statistics.median(a / b for a, b in zip(rates[size], rates[32], strict=True))
        print(
            f"{size:10d} {statistics.median(rates[size]):12.0f} {min(rates[size]):8.0f}"
            f" {max(rates[size]):8.0f} {ratio:17.2f}x"
        )
    print(f"\nwhole run {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    if parser.parse_args().quick:
        TEXTS, ROUNDS = 8, 1
    asyncio.run(main())
