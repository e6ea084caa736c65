"""Reciprocal rank fusion: merging rankings whose raw scores are not comparable."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

DEFAULT_RRF_K = 60
"""The usual RRF constant (Cormack et al., 2009): damps the weight of the very top ranks."""


@dataclass(frozen=True, slots=True)
class Fused(Generic[K]):
    """One item of a fused ranking."""

    key: K
    """The item."""
    score: float
    """Sum over the rankings it appears in of ``1 / (k + rank)``."""
    best_rank: int
    """Its best (smallest) 1-based rank in any input ranking."""


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]], k: int = DEFAULT_RRF_K
) -> list[Fused[K]]:
    """Fuse rankings (each best first) by rank alone, never by their raw scores.

    Equal scores are ordered by the best single rank, then by where the item first shows up
    when the rankings are read in the given order: its position there, then that ranking's
    index. So ties interleave the rankings rank by rank (position 1 of each, then 2, ...)
    rather than emptying the first ranking before the second, and the result is
    deterministic.

    Args:
        rankings: Item keys, best first; an item may appear in several rankings.
        k: The RRF constant (> 0).

    Returns:
        Every item once, best first.
    """
    if k <= 0:
        raise ValueError("the RRF constant k must be positive")
    score: dict[K, float] = {}
    best: dict[K, int] = {}
    first_seen: dict[K, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        for position, key in enumerate(ranking):
            rank = position + 1
            score[key] = score.get(key, 0.0) + 1.0 / (k + rank)
            if rank < best.get(key, rank + 1):
                best[key] = rank
            first_seen.setdefault(key, (position, r))
    order = sorted(score, key=lambda key: (-score[key], best[key], first_seen[key]))
    return [Fused(key, score[key], best[key]) for key in order]
