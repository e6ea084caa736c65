"""An exact in-memory vector index (numpy) over one knowledge base's chunks."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

_INITIAL_CAPACITY = 1024
_COMPACT_FRACTION = 0.25

Ids = npt.NDArray[np.int64]


class DenseIndex:
    """Exact cosine (dot-product of unit vectors) search over rows that are appended and
    deleted by document; thread-safe.

    Rows live in capacity-doubling buffers; deletes only clear an ``alive`` flag until a
    quarter of the rows are dead, then the buffers are compacted. A search copies the
    references and the alive flags under the lock and runs the matrix product outside it,
    so concurrent searches do not wait for each other, and appends never move rows a running
    search is reading (growth and compaction allocate new buffers).

    Args:
        dimension: Vector dimension.
    """

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.lock = threading.Lock()
        """Held by the store across "commit to the database, then update this index", so a
        lazy load never interleaves with an update."""
        self._vectors = np.empty((_INITIAL_CAPACITY, dimension), dtype=np.float32)
        self._ids = np.empty(_INITIAL_CAPACITY, dtype=np.int64)
        self._docs = np.empty(_INITIAL_CAPACITY, dtype=np.int64)
        self._alive = np.zeros(_INITIAL_CAPACITY, dtype=bool)
        self._size = 0
        self._dead = 0
        self.loaded = False

    def __len__(self) -> int:
        return self._size - self._dead

    def add(self, ids: Ids, docs: Ids, vectors: npt.NDArray[np.float32]) -> None:
        """Append rows (chunk ids, their document keys, unit vectors). Caller holds `lock`."""
        n = len(ids)
        if n == 0:
            return
        if self._size + n > len(self._ids):
            self._resize(max(2 * len(self._ids), self._size + n))
        end = self._size + n
        self._vectors[self._size : end] = vectors
        self._ids[self._size : end] = ids
        self._docs[self._size : end] = docs
        self._alive[self._size : end] = True
        self._size = end

    def remove_documents(self, docs: Ids) -> None:
        """Drop every row of these documents. Caller holds `lock`."""
        if self._size == 0 or len(docs) == 0:
            return
        hit = self._alive[: self._size] & np.isin(self._docs[: self._size], docs)
        count = int(hit.sum())
        if count:
            # NOTE(retrieval): a fresh array, not an in-place write: running searches hold
            # the old flags.
            alive = self._alive.copy()
            alive[: self._size] &= ~hit
            self._alive = alive
            self._dead += count
            if self._dead > _COMPACT_FRACTION * self._size:
                self._resize(max(_INITIAL_CAPACITY, 2 * (self._size - self._dead)))

    def search(
        self,
        query: npt.NDArray[np.float32],
        depth: int,
        allow: Callable[[Ids], npt.NDArray[np.bool_]] | None = None,
    ) -> list[tuple[int, float]]:
        """The `depth` best ``(chunk id, cosine)``, best first.

        Args:
            query: A unit vector.
            depth: How many to return at most.
            allow: Given the document keys of all rows, which rows may be returned.
        """
        with self.lock:
            n = self._size
            vectors, ids, docs, alive = self._vectors, self._ids, self._docs, self._alive
        if n == 0:
            return []
        mask = alive[:n]
        if allow is not None:
            mask = mask & allow(docs[:n])
        scores = vectors[:n] @ query.astype(np.float32, copy=False)
        candidates = np.flatnonzero(mask)
        if len(candidates) == 0:
            return []
        scores = scores[candidates]
        if len(candidates) > depth:
            top = np.argpartition(-scores, depth - 1)[:depth]
        else:
            top = np.arange(len(candidates))
        # best first; equal scores by chunk id so results are deterministic
        order = top[np.lexsort((ids[candidates[top]], -scores[top]))]
        return [(int(ids[candidates[i]]), float(scores[i])) for i in order]

    def _resize(self, capacity: int) -> None:
        keep = np.flatnonzero(self._alive[: self._size])
        size = len(keep)
        vectors = np.empty((capacity, self.dimension), dtype=np.float32)
        ids = np.empty(capacity, dtype=np.int64)
        docs = np.empty(capacity, dtype=np.int64)
        alive = np.zeros(capacity, dtype=bool)
        vectors[:size] = self._vectors[keep]
        ids[:size] = self._ids[keep]
        docs[:size] = self._docs[keep]
        alive[:size] = True
        self._vectors, self._ids, self._docs, self._alive = vectors, ids, docs, alive
        self._size, self._dead = size, 0
