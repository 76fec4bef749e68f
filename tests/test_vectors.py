"""The embedding index: exact below the flat threshold, near-exact above it, with deletes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mmdedup.index.vectors import VectorIndex


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def brute(base: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    sims = queries @ base.T
    return [ids[np.argsort(-row)[:k]].tolist() for row in sims]


def test_flat_search_is_exact_and_respects_min_score() -> None:
    rng = np.random.default_rng(0)
    base, ids = unit(rng, 500, 32), np.arange(1000, 1500)
    index = VectorIndex(32)
    index.add(ids, base)
    q = unit(rng, 20, 32)
    got = index.search(q, 5)
    assert [got.ids[got.query == i].tolist() for i in range(20)] == brute(base, ids, q, 5)
    high = index.search(base[:3], 5, min_score=0.99)
    assert high.ids.tolist() == [1000, 1001, 1002] and np.allclose(high.score, 1.0, atol=1e-5)


def test_hnsw_above_threshold_finds_near_duplicates() -> None:
    rng = np.random.default_rng(1)
    base = unit(rng, 3000, 48)
    index = VectorIndex(48, flat_below=1000)
    index.add(np.arange(3000), base)
    assert index.kind == "hnsw"
    noisy = base[:200] + 0.05 * unit(rng, 200, 48)
    got = index.search(noisy / np.linalg.norm(noisy, axis=1, keepdims=True), 1)
    assert np.mean(got.ids == np.arange(200)) >= 0.99


def test_remove_save_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    base = unit(rng, 100, 16)
    index = VectorIndex(16)
    index.add(np.arange(100), base)
    assert index.remove(np.array([5, 6, 999])) == 2
    assert 5 not in index.search(base[5:6], 3).ids.tolist()
    index.add(np.array([5]), base[5:6])  # re-added
    loaded = VectorIndex.load(tmp_path, index.save(tmp_path, "v"))
    assert len(loaded) == 99 and sorted(loaded.ids().tolist()) == sorted(set(range(100)) - {6})
    assert loaded.search(base[5:6], 1).ids.tolist() == [5]
