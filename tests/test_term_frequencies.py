"""A document's distinct terms and how often each occurs: `collapse_terms`, and the
hash-table kernels (`term_bags`, `term_ids`) held to it, slot collisions forced."""

from __future__ import annotations

import numpy as np
import pytest

from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract.hashing import hash_strings, hash_tokens
from mmdedup.extract.tokenbatch import TokenBatch, collapse_terms

from sketch_helpers import zipf_docs


def test_collapse_terms_gives_term_frequencies() -> None:
    batch = hash_tokens([["a", "b", "a", "a"], [], ["c"], ["b", "b"]])
    tf = collapse_terms(batch)
    assert tf.offsets.tolist() == [0, 2, 2, 3, 4]
    got = {
        i: dict(zip(tf.doc(i).tolist(), tf.weights[tf.offsets[i] : tf.offsets[i + 1]].tolist()))
        for i in range(4)
    }
    ha, hb, hc = hash_strings(["a", "b", "c"]).tolist()
    assert got == {0: {ha: 3.0, hb: 1.0}, 1: {}, 2: {hc: 1.0}, 3: {hb: 2.0}}
    assert all(np.all(np.diff(tf.doc(i).astype(np.float64)) > 0) for i in range(4) if len(tf.doc(i)) > 1)
    weighted = collapse_terms(batch.with_weights(np.array([0.5, 1, 0.25, 0.25, 2, 1, 1])))
    got_w = {
        i: dict(zip(weighted.doc(i).tolist(), weighted.weights[weighted.offsets[i] : weighted.offsets[i + 1]].tolist()))
        for i in range(4)
    }
    assert got_w == {0: {ha: 1.0, hb: 1.0}, 1: {}, 2: {hc: 2.0}, 3: {hb: 2.0}}
    many_empty = collapse_terms(hash_tokens([[]] * 70000 + [["b", "a", "b"], ["c"]]))
    assert many_empty.hashes.tolist() == sorted([ha, hb]) + [hc]
    assert dict(zip(many_empty.hashes.tolist(), many_empty.weights.tolist())) == {ha: 1.0, hb: 2.0, hc: 1.0}
    assert many_empty.lengths[-2:].tolist() == [2, 1]


def test_term_bags_equal_collapse_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = hash_tokens(zipf_docs(2, 30, 400, vocab_size=500) + [[], ["q"], ["q", "q"]])
    small = TokenBatch.from_arrays([np.arange(40, dtype=np.uint64) % 7, np.zeros(0, np.uint64),
                                    np.array([5, 5, 0, 2**64 - 1], np.uint64)])
    # A multiplier that puts small hashes in one slot: every round collides until the sort.
    for muls in (None, (np.uint64(1),), (np.uint64(1), np.uint64(3))):
        if muls:
            monkeypatch.setattr(minhash_mod, "_SLOT_MUL", muls)
        for group in (1 << 14, 37):
            monkeypatch.setattr(minhash_mod, "_BAG_GROUP", group)
            for b in (batch, small):
                first, tf = minhash_mod.term_bags(b)
                want = collapse_terms(b)
                assert np.all(np.diff(first) > 0)
                doc = np.searchsorted(b.offsets, first, side="right") - 1
                got = sorted(zip(doc.tolist(), b.hashes[first].tolist(), tf.tolist()))
                ref = sorted(zip(want.doc_ids().tolist(), want.hashes.tolist(), want.weights.astype(int).tolist()))
                assert got == ref, (muls, group)


def test_term_ids_name_one_hash_each(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    cases = [np.zeros(0, np.uint64), np.array([7], np.uint64), np.zeros(50, np.uint64),
             rng.integers(0, 40, 3000).astype(np.uint64), rng.integers(0, 2**64, 5000, dtype=np.uint64),
             np.arange(300, dtype=np.uint64) << np.uint64(50)]
    for muls in (None, (np.uint64(1),) * 2):
        if muls:  # small hashes all in one slot: lost rounds, then terms of their own
            monkeypatch.setattr(minhash_mod, "_SLOT_MUL", muls)
        for h in cases:
            ids, first = minhash_mod.term_ids(h)
            assert np.array_equal(h[first][ids], h) and np.all(np.diff(first) > 0)
            assert len(first) >= len(np.unique(h))
            if muls is None:
                assert len(first) == len(np.unique(h))
