"""TF-IDF weights: corpus IDF semantics, and weights looked up by term hash: `lookup` over
sorted keys and the model's direct-mapped table, each agreeing with a binary search."""

from __future__ import annotations

import numpy as np

from mmdedup.extract.hashing import hash_strings
from mmdedup.extract.term_weights import TfidfModel, count_documents, merge_counts, prior_model
from mmdedup.extract.tokenbatch import TokenBatch, lookup


def test_words_on_every_page_weigh_nothing_and_unseen_words_most() -> None:
    docs = [hash_strings(["home", "news", f"story{i}", f"word{i % 3}"]) for i in range(10)]
    keys, df = count_documents(TokenBatch.from_arrays(docs))
    model = TfidfModel.from_counts(keys, df, 10)
    home, story, word, unseen = model.weights(hash_strings(["home", "story3", "word1", "never"]))
    assert home == 0.0
    assert story > word > 0.0
    assert unseen == np.float32(model.default) and unseen > story


def test_table_lookup_equals_binary_search() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 1000, 200_000):
        keys = rng.integers(0, 2**64, n, dtype=np.uint64)
        model = TfidfModel.from_counts(keys, rng.integers(1, 50, n), 100)
        queries = np.concatenate([keys[rng.integers(0, n, 5000)],
                                  rng.integers(0, 2**64, 5000, dtype=np.uint64), np.zeros(2, np.uint64)])
        assert np.array_equal(model.weights(queries), lookup(model.keys, model.idf, queries, model.default))


def test_prior_is_jiebas_idf_table() -> None:
    prior = prior_model()
    known, unknown = prior.weights(hash_strings(["中国", "zzzqqq"]))
    assert 0 < known < prior.default * 2 and unknown == np.float32(prior.default)


def test_merge_counts_adds_per_term() -> None:
    a = (np.array([1, 5], np.uint64), np.array([2, 1]))
    b = (np.array([5, 7], np.uint64), np.array([4, 1]))
    keys, counts = merge_counts(a, b)
    assert keys.tolist() == [1, 5, 7] and counts.tolist() == [2, 5, 1]


def test_document_frequency_counts_each_document_once() -> None:
    """A word repeated within a text is one document; empty texts count nothing."""
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 40, rng.integers(0, 30)).astype(np.uint64) for _ in range(300)]
    keys, df = count_documents(TokenBatch.from_arrays(docs))
    expected = {}
    for d in docs:
        for term in set(d.tolist()):
            expected[term] = expected.get(term, 0) + 1
    assert dict(zip(keys.tolist(), df.tolist())) == expected


def test_lookup_finds_hashes_in_small_and_large_key_sets() -> None:
    rng = np.random.default_rng(9)
    for size in (0, 3, 5000, 200_000):
        keys = np.unique(rng.integers(0, 2**64 - 1, size, dtype=np.uint64))
        values = rng.random(len(keys)).astype(np.float32)
        known = keys[rng.integers(0, len(keys), 3000)] if len(keys) else np.zeros(0, np.uint64)
        query = np.concatenate([known, rng.integers(0, 2**64 - 1, 3000, dtype=np.uint64),
                                np.array([0, 2**64 - 1], np.uint64)])
        pos = np.minimum(np.searchsorted(keys, query), max(len(keys) - 1, 0))
        found = (keys[pos] == query) if len(keys) else np.zeros(len(query), bool)
        want = np.where(found, values[pos] if len(keys) else 0, np.float32(0.25)).astype(np.float32)
        assert np.array_equal(lookup(keys, values, query, 0.25), want), size
        assert lookup(keys, values, query.reshape(2, -1), 0.25).shape == (2, len(query) // 2)


def test_tfidf_direct_table_equals_binary_search() -> None:
    rng = np.random.default_rng(10)
    for n_keys in (0, 1, 9, 4000, 70000):
        keys = np.unique(np.concatenate([rng.integers(0, 2**64, n_keys, dtype=np.uint64),
                                         np.array([0, 1, 1 << 16, 1 << 17], np.uint64)[: min(n_keys, 4)]]))
        idf = rng.random(len(keys)).astype(np.float32)
        query = np.concatenate([keys, rng.integers(0, 2**64, 20000, dtype=np.uint64),
                                np.array([0, 1, 2, 1 << 16, 2**64 - 1], np.uint64), keys ^ np.uint64(1 << 40)])
        for values in (idf, np.where(np.arange(len(idf)) % 5 == 0, np.float32(np.nan), idf)):
            model = TfidfModel("t", 3, keys, values, 2.5)
            got = model.weights(query)
            assert got.dtype == np.float32
            assert np.array_equal(got, lookup(keys, values, query, 2.5), equal_nan=True), n_keys
