"""The text signer's sign_tokens, bit for bit what the plain definition gives, written out
here document by document. sign_tokens finds each document's terms with a hash table (not
a sort), looks weights up once per term of the batch's vocabulary, hashes shingles by slices
and the weighted MinHash units of shared terms once, and drops words of no weight by
offsets (`_absent`, `_less`): every one of these must give exactly what the definition
gives, under every model and chunk size."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mmdedup.extract import text_sketches as textsig_mod
from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract import simhash as simhash_mod
from mmdedup.extract.minhash import EMPTY
from mmdedup.extract.hashing import hash_strings, hash_tokens
from mmdedup.extract.tokenbatch import TokenBatch, collapse_terms, lookup
from mmdedup.extract.term_weights import TfidfModel, prior_model
from mmdedup.extract.term_weights import WordWeights

from sketch_helpers import reference_expand, reference_oph, reference_shingles, textbook_simhash, zipf_docs


def reference_term_weights(signer: textsig_mod.TextSigner, hashes: np.ndarray) -> np.ndarray:
    model = signer.model
    w = lookup(model.keys, model.idf, hashes, model.default)  # binary search
    if signer.multipliers is None:
        return w
    return w * np.minimum(lookup(signer.multipliers[0], signer.multipliers[1], hashes, 1.0), 1.0)


def reference_stored(values: np.ndarray) -> np.ndarray:
    """A MinHash as a text signature keeps it: 16 bits a position, 0..0xFFFE, with an empty
    position's EMPTY kept apart."""
    return np.where(values == EMPTY, EMPTY, values % 0xFFFF).astype(np.uint32)


def reference_sketches(signer: textsig_mod.TextSigner, tokens: TokenBatch) -> textsig_mod.TextSketches:
    """TextSigner.sign_tokens by its definition, one document at a time: tokens of
    positive weight are kept; their distinct terms weigh (1 + ln tf) * weight (float32);
    a weighted SimHash and a weighted MinHash of the terms, a MinHash of the kept tokens'
    word 3-grams."""
    n = tokens.n_docs
    out = textsig_mod.TextSketches(np.zeros(n, np.uint64), np.zeros((n, 128), np.uint32),
                                   np.zeros((n, 128), np.uint32), np.zeros(n, bool))
    for i in range(n):
        doc = tokens.doc(i)
        kept = doc[reference_term_weights(signer, doc) > 0]
        terms, tf = np.unique(kept, return_counts=True)
        tf = tf.astype(np.float32)
        w = ((1 + np.log(np.maximum(tf, 1))) * reference_term_weights(signer, terms)).astype(np.float32)
        out.simhash[i] = textbook_simhash(terms.tolist(), w.astype(np.float64).tolist())
        out.wminhash[i] = reference_stored(reference_expand(terms, w, signer.wminhash))
        out.minhash[i] = reference_stored(
            reference_oph(np.array(reference_shingles(kept.tolist(), 3), np.uint64), signer.minhash))
        out.empty[i] = len(terms) == 0
    return out


def assert_same_sketches(a: textsig_mod.TextSketches, b: textsig_mod.TextSketches, label: str) -> None:
    for name in ("simhash", "wminhash", "minhash", "empty"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), (label, name, np.flatnonzero((x != y).reshape(len(x), -1).any(axis=1))[:5])


def signing_cases() -> tuple[TokenBatch, dict[str, textsig_mod.TextSigner]]:
    """A batch with every kind of document (empty, 1 and 2 tokens, exactly 3, repeats
    only, words every document has, words at the learned floor, a 50,000-token one) and
    signers under jieba's prior, a fitted model (where the words of every document weigh
    0) and learned word weights (below 1, at the floor, above 1)."""
    docs = zipf_docs(21, 40, 500, vocab_size=2500)
    common = [w for w, _ in sorted(((w, sum(w in d for d in docs)) for d in docs[:3] for w in d),
                                   key=lambda x: -x[1])[:3]]
    rng = random.Random(4)
    long = [rng.choice(docs[0] + docs[1]) for _ in range(50_000)]
    docs = [common + d for d in docs] + [[], ["solo"], ["ab", "cd"], ["x", "y", "z"], ["rep"] * 3,
                                          common[:1], common[:2] * 2, [], long, ["a", common[0], "b"]]
    batch = hash_tokens(docs)
    vocab, df = np.unique(collapse_terms(batch).hashes, return_counts=True)
    df[np.isin(vocab, hash_strings(common))] = batch.n_docs  # words of every document: idf 0
    fitted = TfidfModel.from_counts(vocab, df, batch.n_docs)
    words = sorted({w for d in docs[:10] for w in d})
    picked = [words[i] for i in range(0, len(words), 7)]
    mult = np.array([0.05, 0.4, 0.9, 1.0, 2.5][: 5] * len(picked), np.float32)[: len(picked)]
    learned = WordWeights("ww-test", tuple(picked), mult, 0.05, 4.0)
    odd_idf = fitted.idf.copy()  # a model no corpus gives: negative and NaN weights leave too
    odd_idf[1::5], odd_idf[2::7] = -1.5, np.nan
    odd = TfidfModel("odd", fitted.n_docs, fitted.keys, odd_idf, fitted.default)
    return batch, {"prior": textsig_mod.TextSigner(prior_model()),
                   "odd": textsig_mod.TextSigner(odd),
                   "fitted": textsig_mod.TextSigner(fitted),
                   "fitted+words": textsig_mod.TextSigner(fitted, learned),
                   "prior+words": textsig_mod.TextSigner(prior_model(), learned)}


def test_sign_tokens_equals_its_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    batch, signers = signing_cases()
    fitted = signers["fitted"]
    # Token batches without texts: every document by word 3-grams (the character n-grams
    # of short texts are held to `text_shingle_hashes` in test_short_texts.py).
    words_only = lambda lengths, texts: (np.zeros(0, np.intp), hash_tokens([]))  # noqa: E731
    monkeypatch.setattr(textsig_mod, "short_char_shingles", words_only)
    dead = (reference_term_weights(fitted, batch.hashes) <= 0).mean()
    assert 0.01 < dead < 0.5  # the fitted model does drop words
    references = {}
    for label, signer in signers.items():
        assert signer.version == textsig_mod.TextSigner(signer.model, signer.words).version
        assert np.array_equal(signer.term_weights(batch.hashes), reference_term_weights(signer, batch.hashes),
                              equal_nan=True)
        references[label] = reference_sketches(signer, batch)
        assert_same_sketches(signer.sign_tokens(batch), references[label], label)
    # (docs 45 and 46 hold only words every document has; 47 is empty)
    assert references["fitted"].empty[44:].tolist() == [False, True, True, True, False, False]
    assert not references["prior"].empty[45:47].any()
    # Texts sharing most of their words: each shared term's units are hashed once, into a table.
    tables = []
    unit_table = minhash_mod.WeightedMinHash._unit_table
    monkeypatch.setattr(minhash_mod.WeightedMinHash, "_unit_table",
                        lambda self, *a: tables.append(unit_table(self, *a)) or tables[-1])
    shared = hash_tokens(zipf_docs(22, 80, 300, vocab_size=300))
    for label in ("prior", "fitted+words"):
        assert_same_sketches(signers[label].sign_tokens(shared), reference_sketches(signers[label], shared), label)
    assert tables and all(t is not None for t in tables)
    monkeypatch.undo()
    monkeypatch.setattr(textsig_mod, "short_char_shingles", words_only)
    # Each document alone (no vocabulary shared with others), and tiny chunks everywhere.
    for i in (0, 41, 42, 44, batch.n_docs - 2):
        one = TokenBatch(batch.doc(i), np.array([0, len(batch.doc(i))]))
        assert_same_sketches(fitted.sign_tokens(one), references["fitted"].take(np.array([i])), f"doc {i}")
    monkeypatch.setattr(minhash_mod, "_BAG_GROUP", 300)
    monkeypatch.setattr(textsig_mod, "_SHINGLE_CHUNK", 100)
    monkeypatch.setattr(minhash_mod, "_CHUNK_TOKENS", 500)
    monkeypatch.setattr(minhash_mod, "VOCAB_MIN_TERMS", 10)
    monkeypatch.setattr(textsig_mod, "VOCAB_MIN_TERMS", 10)
    monkeypatch.setattr(simhash_mod, "_HIST_DOCS", 3)
    for label in ("fitted+words", "prior"):
        assert_same_sketches(signers[label].sign_tokens(batch), references[label], f"{label}, chunked")
    empty = hash_tokens([[]] * 4)
    sk = fitted.sign_tokens(empty)
    assert sk.empty.all() and (sk.simhash == 0).all() and (sk.wminhash == EMPTY).all() and (sk.minhash == EMPTY).all()
    assert fitted.sign_tokens(hash_tokens([])).simhash.shape == (0,)


def test_a_signature_read_back_is_the_one_signed_in_half_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the store keeps of a text's sketches is what was signed, bit for bit (an index
    built from stored signatures and one built as texts arrive must agree), empty texts and
    the largest 16-bit value included, in 8 + 2 x 128 x 2 bytes."""
    batch, signers = signing_cases()
    monkeypatch.setattr(textsig_mod, "short_char_shingles", lambda lengths, texts: (np.zeros(0, np.intp), hash_tokens([])))
    for label, signer in signers.items():
        sk = signer.sign_tokens(batch)
        blobs = [sk.pack(i) for i in range(batch.n_docs)]
        assert {len(b) for b in blobs} == {8 + 2 * 128 * 2}
        assert_same_sketches(textsig_mod.TextSketches.unpack(blobs), sk, label)
        assert sk.empty.any() and (sk.wminhash[~sk.empty] < 0xFFFF).all()
    values = np.array([[0, 0xFFFE, 0xFFFF, 0x1FFFD, EMPTY - 1, EMPTY]], np.uint32)
    assert textsig_mod.stored_values(values).tolist() == [[0, 0xFFFE, 0, 0xFFFE, 0xFFFE, EMPTY]]


def test_absent_and_dropped_offsets() -> None:
    rng = np.random.default_rng(14)
    keys = np.unique(rng.integers(0, 2**64, 30, dtype=np.uint64))
    clash = np.array([5, 5 + (1 << 30), 5 + (1 << 40)], np.uint64)  # one slot up to 2^30
    hashes = np.concatenate([keys, rng.integers(0, 2**64, 5000, dtype=np.uint64), clash, keys ^ np.uint64(1)])
    for k in (keys, clash, keys[:1]):
        assert np.array_equal(textsig_mod._absent(hashes, k), ~np.isin(hashes, k))
    offsets = np.array([0, 3, 3, 10, 11])
    drop = np.array([0, 2, 5, 10])
    counts = np.array([2, 1, 4, 1])
    lengths = np.array([9, 0, 20, 3])
    got = textsig_mod._less(lengths, offsets, drop, counts)
    assert got.tolist() == [0, 6, 6, 22, 24]
    assert textsig_mod._less(np.diff(offsets), offsets, drop).tolist() == [0, 1, 1, 7, 7]


def test_a_pair_estimate_moves_by_at_most_the_change_of_its_two_signatures() -> None:
    """`sketch_change` is what a TF-IDF refresh judges a new model by: the estimate of any
    pair under the new weights differs from the old by no more than the sum of its two
    texts' changes, so a small change bounds every pair's."""
    from mmdedup.extract.term_weights import TfidfModel, count_documents
    from mmdedup.extract.text_sketches import TextSigner, similarity, sketch_change, tokenize_texts

    rng = np.random.default_rng(5)
    vocab = np.array([f"v{i}" for i in range(3000)])
    p = 1 / np.arange(1, 3001) ** 0.8
    p /= p.sum()
    texts = [" ".join(rng.choice(vocab, 150, p=p)) for _ in range(400)]
    texts += [t.replace(t.split()[3], "edited", 1) for t in texts[:100]]  # near pairs too

    def model(docs: list[str]) -> TfidfModel:
        keys, df = count_documents(tokenize_texts(docs))
        return TfidfModel.from_counts(keys, df, len(docs))

    tokens = tokenize_texts(texts)
    old = TextSigner(model(texts[:60])).sign_tokens(tokens, texts)
    new = TextSigner(model(texts)).sign_tokens(tokens, texts)
    change = sketch_change(old, new)
    assert 0 < change.mean() < 1
    a, b = rng.integers(0, len(texts), (2, 3000))
    a = np.concatenate([a, np.arange(100)])
    b = np.concatenate([b, np.arange(400, 500)])
    for name, sketch in (("wjaccard", "wminhash"), ("jaccard", "minhash")):
        before = similarity(old.take(a), old.take(b))[name]
        after = similarity(new.take(a), new.take(b))[name]
        own = (getattr(old, sketch) != getattr(new, sketch)).mean(axis=1)
        assert (np.abs(after - before) <= own[a] + own[b] + 1e-9).all(), name
        assert (own <= change).all()
    assert (sketch_change(old, old) == 0).all()
