"""Shingles: character n-grams of short texts, and the text signer's hash-combined word
n-grams held to their definition."""

from __future__ import annotations

import numpy as np
import pytest

from mmdedup.extract import text_sketches as textsig_mod
from mmdedup.extract.shingles import char_shingles
from mmdedup.extract.tokenbatch import TokenBatch

from sketch_helpers import reference_shingles


def test_character_shingles() -> None:
    assert char_shingles("今天 天气，很好", 2) == ["今天", "天天", "天气", "气很", "很好"]
    assert char_shingles("ab", 3) == ["ab"]
    assert char_shingles(" ,", 3) == []


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
                got = textsig_mod.word_shingles(batch, n)
                want = [reference_shingles(d.tolist(), n) for d in sample]
                assert got.lengths.tolist() == [len(w) for w in want], (n, cut)
                assert got.hashes.tolist() == [h for w in want for h in w], (n, cut)
    assert textsig_mod.word_shingles(TokenBatch.from_arrays([]), 3).n_docs == 0
