"""TF-IDF weights: corpus IDF semantics and the fast table lookup agreeing with binary search."""

from __future__ import annotations

import numpy as np

from mmdedup.extract.hashing import hash_strings
from mmdedup.extract.tokenbatch import TokenBatch, lookup
from mmdedup.learn.tfidf import TfidfModel, count_documents, merge_counts, prior_model


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
