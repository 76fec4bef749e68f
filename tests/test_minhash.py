"""MinHash and weighted MinHash: estimates checked against the exact (weighted) Jaccard of
the sets themselves, identical and disjoint sets, weights that matter, non-positive weights
dropped, and the kernels equal to their per-document definitions."""

from __future__ import annotations

import numpy as np
import pytest

from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract.minhash import EMPTY, MinHash, WeightedMinHash, jaccard
from mmdedup.extract.hashing import hash_tokens
from mmdedup.extract.tokenbatch import TokenBatch, collapse_terms

from sketch_helpers import SIGNERS, reference_expand, reference_oph, zipf_docs


def pair_with_jaccard(rng: np.random.Generator, size: int, j: float) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of `size` random 64-bit hashes with Jaccard exactly close to j."""
    common = int(round(2 * size * j / (1 + j)))
    pool = rng.integers(0, 2**63, 2 * size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    pool = np.unique(pool)[: 2 * size - common]
    rng.shuffle(pool)
    shared, rest = pool[:common], pool[common:]
    a = np.concatenate([shared, rest[: size - common]])
    b = np.concatenate([shared, rest[size - common : 2 * (size - common)]])
    return a, b


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / len(sa | sb)


@pytest.mark.parametrize("variant", ["oph", "kperm"])
def test_minhash_estimates_jaccard(variant: str) -> None:
    rng = np.random.default_rng(21)
    pairs, truth = [], []
    for size in (6, 20, 60, 200, 1000, 3000):
        for j in (0.05, 0.2, 0.4, 0.6, 0.8, 0.95):
            for _ in range(4):
                a, b = pair_with_jaccard(rng, size, j)
                pairs += [a, b]
                truth.append(exact_jaccard(a, b))
    sig = SIGNERS[variant](TokenBatch.from_arrays(pairs))
    assert sig.dtype == np.uint32 and sig.shape == (len(pairs), 128)
    est = jaccard(sig[0::2], sig[1::2])
    err = np.abs(est - np.array(truth))
    assert err.mean() < 0.035  # sqrt(J(1-J)/128) is up to 0.044; E|error| ~ 0.8 of that
    assert err.max() < 0.14
    assert abs((est - np.array(truth)).mean()) < 0.015  # no bias


def test_minhash_of_identical_and_disjoint_sets() -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2**63, 500, dtype=np.uint64)
    b = rng.integers(0, 2**63, 500, dtype=np.uint64)
    for name in ("oph", "kperm"):
        sig = SIGNERS[name](TokenBatch.from_arrays([a, a[::-1], b]))
        assert jaccard(sig[0], sig[1]) == 1.0
        assert jaccard(sig[0], sig[2]) < 0.05


def test_jaccard_broadcasts_one_against_many() -> None:
    rng = np.random.default_rng(4)
    docs = [rng.integers(0, 2**63, 100, dtype=np.uint64) for _ in range(5)]
    sig = MinHash(64)(TokenBatch.from_arrays(docs))
    one_vs_many = jaccard(sig[0], sig)
    assert one_vs_many.shape == (5,) and one_vs_many[0] == 1.0
    assert np.allclose(one_vs_many, [jaccard(sig[0], s) for s in sig])
    assert jaccard(sig[:, None, :], sig[None, :, :]).shape == (5, 5)


# --- weighted MinHash -----------------------------------------------------------------


def weighted_pair(rng: np.random.Generator, size: int, overlap: float):
    terms = rng.integers(0, 2**63, 3 * size, dtype=np.uint64)
    shared = int(size * overlap)
    ta = terms[:size]
    tb = np.concatenate([terms[:shared], terms[size : 2 * size - shared]])
    wa = rng.lognormal(0.0, 1.0, size)
    wb = np.concatenate([wa[:shared] * rng.lognormal(0.0, 0.3, shared), rng.lognormal(0.0, 1.0, size - shared)])
    return ta, wa, tb, wb


def exact_weighted_jaccard(ta, wa, tb, wb) -> float:
    da = dict(zip(ta.tolist(), wa.astype(np.float32).tolist()))
    db = dict(zip(tb.tolist(), wb.astype(np.float32).tolist()))
    keys = set(da) | set(db)
    num = sum(min(da.get(k, 0.0), db.get(k, 0.0)) for k in keys)
    den = sum(max(da.get(k, 0.0), db.get(k, 0.0)) for k in keys)
    return num / den


@pytest.mark.parametrize("variant", ["icws", "0bit"])
def test_weighted_minhash_estimates_weighted_jaccard(variant: str) -> None:
    rng = np.random.default_rng(31)
    hashes, weights, truth = [], [], []
    for size in (5, 30, 150, 600):
        for overlap in (0.1, 0.4, 0.7, 0.9, 1.0):
            for _ in range(4):
                ta, wa, tb, wb = weighted_pair(rng, size, overlap)
                hashes += [ta, tb]
                weights += [wa, wb]
                truth.append(exact_weighted_jaccard(ta, wa, tb, wb))
    sig = SIGNERS[variant](TokenBatch.from_arrays(hashes, weights))
    est = jaccard(sig[0::2], sig[1::2])
    err = est - np.array(truth)
    assert np.abs(err).mean() < 0.035
    assert np.abs(err).max() < 0.15
    assert abs(err.mean()) < (0.015 if variant == "icws" else 0.03)


def tfidf_pair(rng: np.random.Generator, size: int, overlap: float):
    """Two documents' TF-IDF terms: (1 + ln tf) * idf, idf in [0.5, 12], some tf changed."""
    terms = rng.integers(0, 2**63, 3 * size, dtype=np.uint64)
    idf = rng.uniform(0.5, 12.0, 3 * size)
    shared = int(size * overlap)
    pick = np.r_[0:shared, size : 2 * size - shared]
    tf_a = rng.geometric(0.6, size)
    tf_b = np.r_[np.where(rng.random(shared) < 0.3, rng.geometric(0.6, shared), tf_a[:shared]),
                 rng.geometric(0.6, size - shared)]
    return terms[:size], (1 + np.log(tf_a)) * idf[:size], terms[pick], (1 + np.log(tf_b)) * idf[pick]


def test_expanded_minhash_estimates_weighted_jaccard() -> None:
    rng = np.random.default_rng(32)
    for make, scale, tolerance in ((tfidf_pair, None, (0.035, 0.15, 0.015)),
                                   (weighted_pair, 3.0, (0.035, 0.15, 0.015)),
                                   (weighted_pair, 1.0, (0.045, 0.35, 0.02))):  # w ~ delta: coarser
        hashes, weights, truth = [], [], []
        for size in (5, 30, 150, 600):
            for overlap in (0.1, 0.4, 0.7, 0.9, 1.0):
                for _ in range(4):
                    ta, wa, tb, wb = make(rng, size, overlap)
                    if scale is not None:
                        wa, wb = wa * scale, wb * scale
                    hashes += [ta, tb]
                    weights += [wa, wb]
                    truth.append(exact_weighted_jaccard(ta, wa, tb, wb))
        sig = WeightedMinHash(128)(TokenBatch.from_arrays(hashes, weights))
        err = jaccard(sig[0::2], sig[1::2]) - np.array(truth)
        mean_abs, max_abs, bias = tolerance
        assert np.abs(err).mean() < mean_abs, (make.__name__, scale, np.abs(err).mean())
        assert np.abs(err).max() < max_abs, (make.__name__, scale, np.abs(err).max())
        assert abs(err.mean()) < bias, (make.__name__, scale, err.mean())


def test_expanded_minhash_units() -> None:
    wmh = WeightedMinHash(128)
    terms = np.arange(1, 2001, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    w = np.full(2000, 2.3)
    copies, offsets = wmh.units(TokenBatch.from_arrays([terms], [w]))
    assert set(copies.tolist()) == {2, 3} and abs(copies.mean() - 2.3) < 0.05  # unbiased rounding
    assert offsets.tolist() == [0, int(copies.sum())]
    # Rounding is consistent per term and monotone in the weight: min(units) = units(min).
    more, _ = wmh.units(TokenBatch.from_arrays([terms], [w * 1.5]))
    assert np.all(more >= copies)
    capped, _ = wmh.units(TokenBatch.from_arrays([terms[:3]], [np.array([1e6, 1e9, 0.5])]))
    assert capped[:2].tolist() == [256, 256]
    # Weights far below delta keep the document alive (one unit per term), not empty.
    tiny = WeightedMinHash(64)(TokenBatch.from_arrays([terms[:5], terms[:5]], [np.full(5, 1e-3)] * 2))
    assert (tiny != EMPTY).all() and jaccard(tiny[0], tiny[1]) == 1.0


def test_weighted_minhash_sees_weights_not_just_sets() -> None:
    rng = np.random.default_rng(8)
    terms = rng.integers(0, 2**63, 200, dtype=np.uint64)
    w1 = np.ones(200)
    w2 = np.where(np.arange(200) < 100, 10.0, 0.1)  # same set, very different weights
    for variant in ("expand", "icws"):
        wmh = WeightedMinHash(128, variant=variant)
        sig = wmh(TokenBatch.from_arrays([terms, terms, terms], [w1, w2, w1 * 3]))
        exact = exact_weighted_jaccard(terms, w1, terms, w2)
        assert abs(jaccard(sig[0], sig[1]) - exact) < 0.1 and exact < 0.3
        assert jaccard(sig[0], sig[2]) < 0.6  # scaling changes the weights: not the same set
        tf = wmh(hash_tokens([["a", "a", "b"], ["b", "a", "a"], ["a", "b"]]))
        assert jaccard(tf[0], tf[1]) == 1.0 and jaccard(tf[0], tf[2]) < 1.0


def test_weighted_minhash_drops_nonpositive_weights() -> None:
    terms = np.arange(1, 11, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    w = np.linspace(1, 2, 10)
    w_zero = w.copy()
    w_zero[:3] = 0.0
    batch = TokenBatch.from_arrays([terms, terms[3:], terms, terms[:0]], [w_zero, w[3:], np.zeros(10), w[:0]])
    for variant in ("expand", "icws", "0bit"):
        sig = WeightedMinHash(64, variant=variant)(batch)
        assert jaccard(sig[0], sig[1]) == 1.0
        assert (sig[2] == EMPTY).all() and (sig[3] == EMPTY).all()
        assert (sig[:2] != EMPTY).all()
    # Already collapsed input (distinct terms in hash order, as textsig passes) is taken as is.
    order = np.argsort(terms)
    direct = WeightedMinHash(64)(TokenBatch.from_arrays([terms[order]], [w[order]]))
    shuffled = WeightedMinHash(64)(TokenBatch.from_arrays([terms[::-1]], [w[::-1]]))
    doubled = WeightedMinHash(64)(TokenBatch.from_arrays([np.r_[terms, terms]], [np.r_[w, w] / 2]))
    assert np.array_equal(direct, shuffled) and np.array_equal(direct, doubled)


def test_minhash_kernels_equal_their_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = zipf_docs(13, 25, 300, vocab_size=400) + [[], ["one"], ["w"] * 900]
    batch = hash_tokens(docs)
    terms = collapse_terms(batch)
    tfidf = terms.with_weights(terms.weights * ((terms.hashes % np.uint64(13)).astype(np.float32) + 0.5))
    tiny = terms.with_weights(np.full(len(terms.hashes), 0.01, np.float32))  # no unit: one a term
    for k in (128, 100):
        oph = MinHash(k)
        got = oph(batch)
        for i in range(batch.n_docs):
            assert np.array_equal(got[i], reference_oph(np.unique(batch.doc(i)), oph)), (k, i)
        for signer in (WeightedMinHash(k), WeightedMinHash(k, delta=0.5)):
            for t in (terms, tfidf, tiny):
                want = np.stack([reference_expand(t.doc(i), t.weights[t.offsets[i]:t.offsets[i + 1]], signer)
                                 for i in range(t.n_docs)])
                assert np.array_equal(signer(t), want)
                ids, first = minhash_mod.term_ids(t.hashes)  # shared units, from a table
                vocab = (ids, t.hashes[first])
                if t is tfidf:  # (several units a term, most terms shared: from the table)
                    assert signer._unit_table(vocab, signer.units(t)[0]) is not None
                assert np.array_equal(signer.sign_terms(t, vocab), want)
                # any order of a document's terms: here descending
                shuffled = TokenBatch.from_arrays([np.sort(t.doc(i))[::-1] for i in range(t.n_docs)],
                                                  [t.weights[t.offsets[i]:t.offsets[i + 1]][np.argsort(t.doc(i))[::-1]]
                                                   for i in range(t.n_docs)])
                assert np.array_equal(signer.sign_terms(shuffled), want)
    monkeypatch.setattr(minhash_mod, "_CHUNK_TOKENS", 70)
    monkeypatch.setattr(minhash_mod, "VOCAB_MIN_TERMS", 1)
    signer = WeightedMinHash(128)
    want = np.stack([reference_expand(tfidf.doc(i), tfidf.weights[tfidf.offsets[i]:tfidf.offsets[i + 1]], signer)
                     for i in range(tfidf.n_docs)])
    assert np.array_equal(signer.sign_terms(tfidf), want)
