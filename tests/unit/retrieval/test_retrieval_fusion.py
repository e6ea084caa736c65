"""Reciprocal rank fusion and the exact in-memory dense index."""

from __future__ import annotations

import numpy as np
import pytest

from hookmesh.retrieval import DenseIndex, l2_normalise, reciprocal_rank_fusion


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60)
    scores = {f.key: f.score for f in fused}
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 62)
    assert [f.key for f in fused] == ["b", "a", "d", "c"]
    assert {f.key: f.best_rank for f in fused} == {"a": 1, "b": 1, "c": 3, "d": 2}


def test_rrf_interleaves_rankings_whatever_their_raw_scores() -> None:
    # raw scores: one ranking's are 1000x the other's; rank fusion ignores them
    big = [("big-1", 900.0), ("big-2", 800.0), ("big-3", 700.0)]
    small = [("small-1", 0.9), ("small-2", 0.8)]
    by_raw = sorted(big + small, key=lambda kv: -kv[1])
    assert [k for k, _ in by_raw[:2]] == ["big-1", "big-2"]
    fused = reciprocal_rank_fusion([[k for k, _ in big], [k for k, _ in small]])
    assert [f.key for f in fused] == ["big-1", "small-1", "big-2", "small-2", "big-3"]


def test_rrf_is_deterministic_and_validates_k() -> None:
    rankings = [["x", "y"], ["y", "x"], ["z"]]
    assert reciprocal_rank_fusion(rankings) == reciprocal_rank_fusion(rankings)
    assert [f.key for f in reciprocal_rank_fusion(rankings)] == ["x", "y", "z"]
    assert reciprocal_rank_fusion([]) == []
    with pytest.raises(ValueError):
        reciprocal_rank_fusion(rankings, k=0)
    small_k = reciprocal_rank_fusion([["a"], ["b", "a"]], k=1)
    assert small_k[0].score == pytest.approx(1 / 2 + 1 / 3)


def test_rrf_breaks_ties_by_best_rank_then_first_position_then_ranking() -> None:
    # a and c tie on score (1/61 + 1/62) and on best rank (1). a first shows up in ranking 0
    # at position 2, c in ranking 1 at position 1: the earlier position wins over the
    # earlier ranking, so c comes first.
    fused = reciprocal_rank_fusion([["g", "a", "f"], ["c"], ["a", "c", "g", "f"]])
    assert [f.key for f in fused] == ["c", "a", "g", "f"]
    assert fused[0].score == fused[1].score and fused[0].best_rank == fused[1].best_rank == 1
    # y (ranks 5 and 1) and x (ranks 2 and 2) tie on score, 1/6 + 1/2 == 1/3 + 1/3 with k=1:
    # y's best rank wins although x shows up earlier.
    by_best = reciprocal_rank_fusion([["a", "x", "b", "c", "y"], ["y", "x"]], k=1)
    assert [(f.key, f.best_rank) for f in by_best[:2]] == [("y", 1), ("x", 2)]
    assert by_best[0].score == by_best[1].score
    # Only the position left: the rankings interleave, position 1 of each before position 2.
    interleaved = reciprocal_rank_fusion([["p1", "p2"], ["q1", "q2"]])
    assert [f.key for f in interleaved] == ["p1", "q1", "p2", "q2"]


def _unit(rows: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return l2_normalise(np.random.default_rng(seed).normal(size=(rows, dim)))


def test_dense_index_is_exact() -> None:
    vectors = _unit(3000)
    index = DenseIndex(8)
    with index.lock:  # grows past the initial capacity in three appends
        for part in range(3):
            rows = slice(part * 1000, (part + 1) * 1000)
            ids = np.arange(rows.start, rows.stop, dtype=np.int64)
            index.add(ids + 100, ids // 10, vectors[rows])
    query = vectors[1234]
    hits = index.search(query, 10)
    expected = np.argsort(-(vectors @ query))[:10]
    assert [h[0] - 100 for h in hits] == list(expected)
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)
    assert len(index) == 3000


def test_dense_index_removes_documents_and_compacts() -> None:
    vectors = _unit(200)
    index = DenseIndex(8)
    ids = np.arange(200, dtype=np.int64)
    with index.lock:
        index.add(ids, ids // 2, vectors)
        index.remove_documents(np.arange(0, 60, dtype=np.int64))  # 120 rows: compacts
    assert len(index) == 80
    hits = index.search(vectors[5], 200)
    assert len(hits) == 80 and min(h[0] for h in hits) == 120
    with index.lock:
        index.remove_documents(np.array([99], dtype=np.int64))
    assert {h[0] for h in index.search(vectors[5], 200)} == set(range(120, 198))


def test_dense_index_filters_by_document() -> None:
    vectors = _unit(50)
    index = DenseIndex(8)
    with index.lock:
        index.add(np.arange(50, dtype=np.int64), np.arange(50, dtype=np.int64) % 5, vectors)
    hits = index.search(vectors[0], 5, allow=lambda docs: docs == 3)
    assert len(hits) == 5 and all(h[0] % 5 == 3 for h in hits)
    assert index.search(vectors[0], 5, allow=lambda docs: docs == 99) == []
    assert DenseIndex(8).search(vectors[0], 5) == []
