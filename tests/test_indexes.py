"""Candidate indexes: exactness of Hamming search, LSH recall/precision, round trips."""

from __future__ import annotations

import numpy as np
import pytest

from mmdedup.index.hamming import HammingIndex, as_code_bytes
from mmdedup.index.lsh import BandLSH, optimal_params

# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #


def flip_bits(code: int, k: int, rng: np.random.Generator) -> np.uint64:
    """``code`` with exactly k distinct bits flipped."""
    mask = 0
    for bit in rng.choice(64, size=k, replace=False):
        mask |= 1 << int(bit)
    return np.uint64(int(code) ^ mask)


def brute_force(queries: np.ndarray, codes: np.ndarray, ids: np.ndarray, radius: int) -> set:
    d = np.bitwise_count(queries[:, None] ^ codes[None, :])
    q, j = np.nonzero(d <= radius)
    return set(zip(q.tolist(), ids[j].tolist(), d[q, j].tolist()))


def as_set(hits) -> set:
    return set(zip(hits.query.tolist(), hits.ids.tolist(), hits.dist.tolist()))


@pytest.fixture(scope="module")
def corpus():
    """5,000 random codes plus planted near-duplicates at distances 1..12."""
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**64, size=5000, dtype=np.uint64)
    planted = np.array([flip_bits(base[i], 1 + i % 12, rng) for i in range(600)], dtype=np.uint64)
    codes = np.concatenate([base, planted])
    ids = np.arange(len(codes), dtype=np.int64) * 10 + 3  # ids unlike positions
    return ids, codes


# --------------------------------------------------------------------------- #
# HammingIndex
# --------------------------------------------------------------------------- #


def test_code_bytes_is_a_view():
    codes = np.arange(1000, dtype=np.uint64)
    view = as_code_bytes(codes)
    assert view.shape == (1000, 8) and view.dtype == np.uint8
    assert np.shares_memory(view, codes)
    signed = codes.view(np.int64)
    assert np.shares_memory(as_code_bytes(signed), codes)
    with pytest.raises(TypeError):
        as_code_bytes(codes.astype(np.float64))


@pytest.mark.parametrize("radius", [0, 1, 3, 4, 6, 7, 8, 10, 12])
def test_search_equals_brute_force(corpus, radius):
    ids, codes = corpus
    index = HammingIndex.from_arrays(ids, codes)
    queries = np.concatenate([codes[:300], codes[5000:5300]])  # bases and planted copies
    assert as_set(index.search(queries, radius)) == brute_force(queries, codes, ids, radius)


@pytest.mark.parametrize("radius", range(3, 11))
def test_boundary_distance_r_found_r_plus_1_not(radius):
    rng = np.random.default_rng(radius)
    base = int(rng.integers(0, 2**64, dtype=np.uint64))
    # many codes at every distance 0..radius+1, to hit every split over the tables
    codes, dists = [], []
    for k in range(radius + 2):
        for _ in range(40):
            codes.append(flip_bits(base, k, rng))
            dists.append(k)
    codes = np.array(codes, dtype=np.uint64)
    noise = rng.integers(0, 2**64, size=2000, dtype=np.uint64)
    ids = np.arange(len(codes) + len(noise), dtype=np.int64)
    index = HammingIndex.from_arrays(ids, np.concatenate([codes, noise]))
    hits = index.search(np.array([base], dtype=np.uint64), radius)
    found = set(hits.ids.tolist())
    dists = np.array(dists)
    assert set(np.nonzero(dists <= radius)[0].tolist()) <= found
    assert not (set(np.nonzero(dists == radius + 1)[0].tolist()) & found)
    assert hits.dist.max() <= radius


def test_plan_is_exact_for_its_radius():
    index = HammingIndex()
    for radius in range(0, 20):
        nflip = index.plan(radius)
        if nflip is not None:
            assert index.max_exact_radius(nflip) >= radius
    assert index.plan(3) == 0  # the common case must stay on the 4-probe path


def test_hits_sorted_and_split(corpus):
    ids, codes = corpus
    index = HammingIndex.from_arrays(ids, codes)
    hits = index.search(codes[:50], 3)
    assert np.all(np.diff(hits.query) >= 0)
    groups = hits.per_query(50)
    assert len(groups) == 50
    for i, (gids, gdist) in enumerate(groups):
        assert ids[i] in gids.tolist()
        assert gdist[0] == 0


def test_remove_and_upsert():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 2**64, size=1000, dtype=np.uint64)
    ids = np.arange(1000, dtype=np.int64)
    index = HammingIndex.from_arrays(ids, codes, compact_at=0.9)
    assert index.remove([5, 6, 99999]) == 2
    assert len(index) == 998
    hits = index.search(codes[[5, 6, 7]], 0)
    assert hits.ids.tolist() == [7]
    # upsert: a new code under an existing id replaces the old one
    new = ~codes[7]
    index.add([7], np.array([new]))
    assert len(index) == 998
    assert index.search(codes[[7]], 0).ids.size == 0
    assert index.search(np.array([new]), 0).ids.tolist() == [7]
    assert sorted(index.ids().tolist()) == sorted(set(range(1000)) - {5, 6})


def test_compaction_keeps_results(corpus):
    ids, codes = corpus
    index = HammingIndex.from_arrays(ids, codes)
    gone = ids[::2]
    index.remove(gone)  # 50% dead > 25%: codes filtered, tables renumbered
    assert index._slots.n_dead == 0 and len(index._codes) == len(ids) - len(gone)
    keep = np.ones(len(ids), bool)
    keep[::2] = False
    queries = codes[:400]
    assert as_set(index.search(queries, 5)) == brute_force(queries, codes[keep], ids[keep], 5)


def test_unsorted_ids_remove():
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 2**64, size=500, dtype=np.uint64)
    ids = rng.permutation(10_000)[:500].astype(np.int64)
    index = HammingIndex.from_arrays(ids, codes, compact_at=0.9)
    index.remove(ids[:100])
    assert set(index.ids().tolist()) == set(ids[100:].tolist())
    assert index.search(codes[:100], 0).ids.size == 0
    assert index.search(codes[100:200], 0).ids.tolist() == ids[100:200].tolist()


def test_duplicate_ids_in_batch_rejected():
    with pytest.raises(ValueError):
        HammingIndex().add([1, 1], np.array([1, 2], dtype=np.uint64))


def test_pairs_once_without_self(corpus):
    ids, codes = corpus
    index = HammingIndex.from_arrays(ids, codes)
    batch = slice(5000, 5600)  # the planted copies, already indexed
    a, b, d = index.pairs(ids[batch], codes[batch], 3)
    assert np.all(a < b) and len(set(zip(a.tolist(), b.tolist()))) == len(a)
    expected = {(int(ids[i]), int(ids[5000 + i])) for i in range(600) if 1 + i % 12 <= 3}
    assert expected <= set(zip(a.tolist(), b.tolist()))


def test_save_load_round_trip_and_incremental_add(tmp_path, corpus):
    ids, codes = corpus
    index = HammingIndex.from_arrays(ids, codes, compact_at=0.9)
    index.remove(ids[:10])
    index.search(codes[:1], 3)  # builds the chunk tables, saved from then on
    manifest = index.save(tmp_path, "simhash")
    loaded = HammingIndex.load(tmp_path, manifest)
    assert len(loaded) == len(index) == len(ids) - 10
    queries = codes[:500]
    assert as_set(loaded.search(queries, 4)) == as_set(index.search(queries, 4))
    # incremental add after load, then a second round trip
    rng = np.random.default_rng(3)
    extra = rng.integers(0, 2**64, size=100, dtype=np.uint64)
    extra_ids = np.arange(10**6, 10**6 + 100, dtype=np.int64)
    loaded.add(extra_ids, extra)
    assert loaded.search(extra, 0).ids.tolist() == extra_ids.tolist()
    again = HammingIndex.load(tmp_path, loaded.save(tmp_path, "simhash", manifest))
    assert len(again) == len(ids) - 10 + 100
    all_ids, all_codes = again.arrays()
    assert sorted(all_ids.tolist()) == sorted(ids[10:].tolist() + extra_ids.tolist())


def test_load_rejects_other_files(tmp_path):
    manifest = BandLSH(0.8).save(tmp_path, "x")
    with pytest.raises(ValueError):
        HammingIndex.load(tmp_path, manifest)


# --------------------------------------------------------------------------- #
# optimal_params
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9])
@pytest.mark.parametrize("num_perm", [64, 128])
def test_optimal_params_match_datasketch(threshold, num_perm):
    datasketch_lsh = pytest.importorskip("datasketch.lsh")
    assert optimal_params(threshold, num_perm) == datasketch_lsh._optimal_param(threshold, num_perm, 0.5, 0.5)


def test_optimal_params_weights_match_datasketch():
    datasketch_lsh = pytest.importorskip("datasketch.lsh")
    assert optimal_params(0.7, 128, 0.2, 0.8) == datasketch_lsh._optimal_param(0.7, 128, 0.2, 0.8)


# --------------------------------------------------------------------------- #
# BandLSH
# --------------------------------------------------------------------------- #

_SEEDS = np.random.default_rng(11).integers(1, 2**63, size=128, dtype=np.uint64)


def minhash(sets: np.ndarray) -> np.ndarray:
    """Honest MinHash of integer sets (n, set_size): min over 128 seeded splitmix64 hashes."""
    x = sets.astype(np.uint64)[:, :, None] ^ _SEEDS[None, None, :]
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x.min(axis=1) >> np.uint64(32)).astype(np.uint32)


def set_pairs(n: int, size: int, replaced: int, rng: np.random.Generator, offset: int):
    """n pairs of sets with Jaccard (size - replaced) / (size + replaced)."""
    a = offset + np.arange(n * size).reshape(n, size)
    b = a.copy()
    fresh = offset + n * size + np.arange(n * replaced).reshape(n, replaced)
    cols = np.argsort(rng.random((n, size)), axis=1)[:, :replaced]
    np.put_along_axis(b, cols, fresh, axis=1)
    return a, b


def pair_hit_rate(threshold: float, replaced: int, n: int = 300, size: int = 200) -> float:
    rng = np.random.default_rng(replaced)
    a, b = set_pairs(n, size, replaced, rng, offset=10**9)
    lsh = BandLSH(threshold)
    lsh.add(np.arange(n), minhash(a))
    cand = lsh.query(minhash(b))
    return int(np.sum(cand.ids == cand.query)) / n


def test_lsh_finds_pairs_above_threshold():
    # J = 195/205 = 0.95 -> P(candidate) = 0.998 at (9 bands, 13 rows)
    assert pair_hit_rate(0.8, replaced=5) >= 0.97
    # J = 190/210 = 0.905 -> 0.94
    assert pair_hit_rate(0.8, replaced=10) >= 0.85


def test_lsh_rarely_finds_pairs_below_threshold():
    # J = 134/266 = 0.50 -> 0.001;  J = 150/250 = 0.6 -> 0.012
    assert pair_hit_rate(0.8, replaced=66) <= 0.02
    assert pair_hit_rate(0.8, replaced=50) <= 0.04


def test_lsh_unrelated_documents_are_not_candidates():
    rng = np.random.default_rng(5)
    sigs = rng.integers(0, 2**32, size=(5000, 128), dtype=np.uint32)
    lsh = BandLSH(0.5)
    lsh.add(np.arange(5000), sigs)
    c = lsh.query(sigs)
    assert c.query.tolist() == list(range(5000)) and c.ids.tolist() == list(range(5000))


def near_copies(sigs: np.ndarray, keep: float, rng: np.random.Generator) -> np.ndarray:
    out = sigs.copy()
    change = rng.random(out.shape) > keep
    out[change] = rng.integers(0, 2**32, size=int(change.sum()), dtype=np.uint32)
    return out


def test_lsh_remove_compact_and_upsert():
    rng = np.random.default_rng(6)
    sigs = rng.integers(0, 2**32, size=(2000, 128), dtype=np.uint32)
    ids = np.arange(2000, dtype=np.int64) + 100
    lsh = BandLSH(0.8)
    lsh.add(ids, sigs)
    assert lsh.remove([100, 101, 5]) == 2 and len(lsh) == 1998
    c = lsh.query(sigs[:3])
    assert c.ids.tolist() == [102]
    lsh.remove(ids[2:1000])  # now 50% dead: compaction renumbers positions
    assert lsh._slots.n_dead == 0 and lsh._runs.main_end + len(lsh._runs.tail[0]) == 1000
    c = lsh.query(sigs)
    assert c.ids.tolist() == ids[1000:].tolist() and c.query.tolist() == list(range(1000, 2000))
    # upsert: the old signature of id 1500 no longer leads to it
    lsh.add([1500], sigs[[0]])
    assert lsh.query(sigs[[1400]]).ids.size == 0
    assert lsh.query(sigs[[0]]).ids.tolist() == [1500]


def test_lsh_many_small_batches_equal_one_bulk_add():
    rng = np.random.default_rng(8)
    base = rng.integers(0, 2**32, size=(3000, 128), dtype=np.uint32)
    sigs = np.concatenate([base, near_copies(base, 0.97, rng)])
    ids = np.arange(len(sigs), dtype=np.int64)
    bulk = BandLSH(0.8)
    bulk.add(ids, sigs)
    small = BandLSH(0.8)
    for s in range(0, len(sigs), 250):
        small.add(ids[s:s + 250], sigs[s:s + 250])
        small.query(sigs[:1])  # forces the pending -> tail -> main path between batches
    a, b = bulk.query(sigs), small.query(sigs)
    assert np.array_equal(a.query, b.query) and np.array_equal(a.ids, b.ids)


def test_lsh_pairs_batch_against_everything():
    rng = np.random.default_rng(9)
    old = rng.integers(0, 2**32, size=(1000, 128), dtype=np.uint32)
    lsh = BandLSH(0.8)
    lsh.add(np.arange(1000), old)
    new = np.concatenate([old[:50], old[:50]])  # exact copies: of old items and of each other
    new_ids = np.arange(5000, 5100)
    lsh.add(new_ids, new)
    a, b = lsh.pairs(new_ids, new)
    got = set(zip(a.tolist(), b.tolist()))
    expected = set()
    for i in range(50):
        group = sorted([i, 5000 + i, 5050 + i])
        expected |= {(group[0], group[1]), (group[0], group[2]), (group[1], group[2])}
    assert got == expected and np.all(a < b)


def test_lsh_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(10)
    sigs = rng.integers(0, 2**32, size=(3000, 128), dtype=np.uint32)
    near = near_copies(sigs[:500], 0.95, rng)
    ids = np.arange(3000, dtype=np.int64) * 7
    lsh = BandLSH(0.7)
    lsh.add(ids, sigs)
    lsh.remove(ids[:20])
    manifest = lsh.save(tmp_path, "minhash")
    loaded = BandLSH.load(tmp_path, manifest)
    assert (loaded.bands, loaded.rows, loaded.threshold) == (lsh.bands, lsh.rows, 0.7)
    assert len(loaded) == 2980
    before, after = lsh.query(near), loaded.query(near)
    assert np.array_equal(before.query, after.query) and np.array_equal(before.ids, after.ids)
    extra_ids = np.arange(10**6, 10**6 + 10, dtype=np.int64)
    loaded.add(extra_ids, near[:10])
    assert loaded.remove(ids[30:40]) == 10
    c = loaded.query(near[:10])
    assert set(extra_ids.tolist()) <= set(c.ids.tolist())
    assert len(BandLSH.load(tmp_path, loaded.save(tmp_path, "minhash", manifest))) == 2980 + 10 - 10


def test_lsh_rejects_wrong_signatures():
    lsh = BandLSH(0.8)
    with pytest.raises(ValueError):
        lsh.add([1], np.zeros((1, 64), np.uint32))
    with pytest.raises(ValueError):
        lsh.add([1, 2], np.zeros((1, 128), np.uint32))


def test_lsh_memory_is_bands_times_8_bytes():
    rng = np.random.default_rng(12)
    n = 20_000
    lsh = BandLSH(0.8)
    lsh.add(np.arange(n), rng.integers(0, 2**32, size=(n, 128), dtype=np.uint32))
    lsh.query(np.zeros((1, 128), np.uint32))
    assert lsh.nbytes() / n <= 8 * lsh.bands + 8 + 1
