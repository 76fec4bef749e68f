"""SimHash: weighted and unweighted codes equal the textbook definition (the bytes kernel
too), near-duplicates land close and unrelated texts far, Hamming distance as popcount."""

from __future__ import annotations

import random

import numpy as np

from mmdedup.extract import simhash as simhash_mod
from mmdedup.extract.simhash import hamming, simhash64
from mmdedup.extract.hashing import hash_tokens
from mmdedup.extract.tokenbatch import TokenBatch

from sketch_helpers import random_words, textbook_simhash, zipf_docs


def test_simhash_equals_textbook_definition_weighted_and_not() -> None:
    docs = zipf_docs(1, 40, 300)
    batch = hash_tokens(docs)
    rng = np.random.default_rng(3)
    weights = rng.integers(1, 40, len(batch.hashes)) / 8.0  # exact in float32
    codes = simhash64(batch)
    wcodes = simhash64(batch.with_weights(weights))
    for i in range(batch.n_docs):
        hs = batch.doc(i).tolist()
        assert int(codes[i]) == textbook_simhash(hs)
        w = weights[batch.offsets[i] : batch.offsets[i + 1]].tolist()
        assert int(wcodes[i]) == textbook_simhash(hs, w)
    # Unit weights give the unweighted code: the two paths agree.
    assert np.array_equal(simhash64(batch.with_weights(np.ones(len(batch.hashes)))), codes)


def test_simhash_near_duplicates_close_unrelated_far() -> None:
    rng = random.Random(11)
    vocab = random_words(rng, 5000)
    base = [[rng.choice(vocab) for _ in range(400)] for _ in range(30)]
    near = []
    for doc in base:
        copy = list(doc)
        for _ in range(8):  # 2% of the words replaced
            copy[rng.randrange(len(copy))] = rng.choice(vocab)
        near.append(copy)
    codes = simhash64(hash_tokens(base + near))
    a, b = codes[:30], codes[30:]
    assert hamming(a, b).max() <= 12
    assert hamming(a, b).mean() <= 5
    unrelated = hamming(a[:, None], a[None, :])[~np.eye(30, dtype=bool)]
    assert 28 <= unrelated.mean() <= 36
    assert unrelated.min() >= 14


def test_hamming_is_vectorized_popcount() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**63, 50, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, 50, dtype=np.uint64)
    got = hamming(a, b)
    assert got.tolist() == [bin(int(x) ^ int(y)).count("1") for x, y in zip(a, b)]
    assert hamming(a[0], a).shape == (50,) and hamming(a[0], a)[0] == 0
    assert hamming(a[:, None], b[None, :]).shape == (50, 50)


def test_weighted_simhash_by_bytes_equals_textbook() -> None:
    rng = np.random.default_rng(12)
    docs = [rng.integers(0, 2**64, size=k, dtype=np.uint64) for k in (0, 1, 63, 64, 65, 200, 0, 130, 5)]
    h = np.uint64(0x0123456789ABCDEF)
    docs.append(np.array([h, ~h] * 40, np.uint64))  # exact ties on every bit: 0
    weights = [rng.integers(0, 40, len(d)) / 8.0 for d in docs]  # dyadic: exact sums; some 0
    weights[-1] = np.full(len(docs[-1]), 0.75)
    weights[5] = weights[5] - 2.0  # negative votes too
    batch = TokenBatch.from_arrays(docs, weights)
    codes = simhash64(batch)
    for i, (d, w) in enumerate(zip(docs, weights)):
        assert int(codes[i]) == textbook_simhash(d.tolist(), np.asarray(w, np.float32).tolist()), i
    assert codes[-1] == 0
    ones, total = simhash_mod._weighted_ones(batch)
    b_ones, b_total = simhash_mod._weighted_ones_blocks(batch)
    assert np.array_equal(ones, b_ones) and np.array_equal(total, b_total)
    # A non-finite weight takes the blocks path (where inf * 0 is NaN, as by the definition).
    w_inf = [w.copy() for w in weights]
    w_inf[3][0] = np.inf
    inf_batch = TokenBatch.from_arrays(docs, w_inf)
    with np.errstate(invalid="ignore"):
        ones, total = simhash_mod._weighted_ones_blocks(inf_batch)
        want = np.packbits((2 * ones) > total[:, None], axis=1, bitorder="little").view("<u8").ravel()
        assert np.array_equal(simhash64(inf_batch), want.astype(np.uint64))
