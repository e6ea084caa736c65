"""An embedder wrapper that remembers recent vectors, so a fact is embedded once per add."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from hookmesh.retrieval import Embedder, Vectors


class CachingEmbedder:
    """Wraps an `Embedder`, reusing the vectors of recently embedded texts.

    An add first searches the scope for a near-identical memory, then ingests the fact: two
    embeddings of the same text. The store embeds through this wrapper, so the second one is
    a lookup. Same `name` and `dimension` as the wrapped embedder, so vectors stay
    comparable with stores opened without it. Used from one event loop (no locking needed:
    `embed` runs its bookkeeping on the loop, the model in the wrapped embedder's threads).

    Args:
        embedder: The embedder to wrap.
        size: Most texts remembered (least recently used ones are forgotten).
    """

    def __init__(self, embedder: Embedder, size: int = 512) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        """Texts answered from the cache (for tests and benchmarks)."""

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    @property
    def tokenizer(self) -> object:
        """The wrapped embedder's tokenizer, if it has one (chunking counts with it)."""
        return getattr(self.embedder, "tokenizer", None)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh_texts = set(missing)
        if missing:
            fresh = await self.embedder.embed(missing)
            for text, row in zip(missing, fresh, strict=True):
                self._cache[text] = row
                if len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        rows = []
        for text in texts:
            row = self._cache.get(text)
            if row is None:  # evicted by this very call (more texts than the cache holds)
                row = (await self.embedder.embed([text]))[0]
            else:
                self._cache.move_to_end(text)
                self.hits += text not in fresh_texts
            rows.append(row)
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)
