"""Shingles: word and character n-grams as strings, their hashes in batches, and the text
signer's hash-combined word n-grams held to their definition."""

from __future__ import annotations

import numpy as np
import pytest

from mmdedup.extract import text_sketches as textsig_mod
from mmdedup.extract.text import TokenBatch, char_shingles, hash_strings, shingle_hashes, shingles

from sketch_helpers import reference_shingles


def test_shingles_word_and_character() -> None:
    assert shingles(["a", "b", "c", "d"], 3) == ["a b c", "b c d"]
    assert shingles(["a", "b"], 3) == ["a b"]
    assert shingles([], 3) == []
    assert char_shingles("今天 天气，很好", 2) == ["今天", "天天", "天气", "气很", "很好"]
    assert char_shingles("ab", 3) == ["ab"]
    assert char_shingles(" ,", 3) == []


def test_shingle_hashes_equal_hashes_of_shingle_strings() -> None:
    docs = [["a", "bb", "ccc", "dddd", "中文"], [], ["solo"], ["x", "y"], ["with space", "b", "c", "d"]]
    for n in (1, 2, 3):
        batch = shingle_hashes(docs, n)
        for i, d in enumerate(docs):
            assert batch.doc(i).tolist() == hash_strings(shingles(d, n)).tolist()


def test_shingles_equal_their_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    docs = [rng.integers(0, 2**64, size=k, dtype=np.uint64) for k in (0, 1, 2, 3, 4, 0, 7, 1, 2, 50, 0)]
    docs.append(np.array([0, 2**64 - 1, 0], np.uint64))
    for cut in (None, 5):
        if cut:
            monkeypatch.setattr(textsig_mod, "_SHINGLE_CHUNK", cut)
        for n in (1, 2, 3):
            for sample in (docs, docs[1:3], docs[:1], docs[6:7], [docs[3]], [docs[1], docs[2]]):
                batch = TokenBatch.from_arrays(sample)
                got = textsig_mod._shingles(batch, n)
                want = [reference_shingles(d.tolist(), n) for d in sample]
                assert got.lengths.tolist() == [len(w) for w in want], (n, cut)
                assert got.hashes.tolist() == [h for w in want for h in w], (n, cut)
    assert textsig_mod._shingles(TokenBatch.from_arrays([]), 3).n_docs == 0
