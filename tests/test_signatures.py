"""Text features and signature kernels: tokenizer, hashing, SimHash, MinHash, weighted MinHash.

Estimates are checked against exact values computed here from the sets themselves, and
every signature is checked to be a function of its document only: the same in another
process, in another batch, in another order, and under other chunk sizes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract import simhash as simhash_mod
from mmdedup.extract import text as text_mod
from mmdedup.extract.minhash import EMPTY, MinHash, WeightedMinHash, jaccard
from mmdedup.extract.simhash import SIMHASH_VERSION, simhash64
from mmdedup.extract.text import (
    HASH_VERSION,
    TokenBatch,
    collapse_terms,
    hash_strings,
    hash_tokens,
    lookup,
    tokenize_many,
    tokenizer_version,
)

from sketch_helpers import (
    PLATFORM,
    SIGNERS,
    reference_expand,
    reference_oph,
    reference_shingles,
    textbook_simhash,
    zipf_docs,
)


def all_signatures(docs: list[list[str]]) -> dict[str, np.ndarray]:
    batch = hash_tokens(docs)
    terms = collapse_terms(batch)
    # TF-IDF-like float weights, a function of the token only (as an idf table would be).
    tfidf = collapse_terms(batch.with_weights(((batch.hashes % np.uint64(997)).astype(np.float64) + 1) / 7.3))
    out = {"hashes": batch.hashes, "simhash": simhash64(batch), "simhash_tf": simhash64(terms),
           "simhash_tfidf": simhash64(tfidf), "expand_tfidf": WeightedMinHash(128)(tfidf),
           "icws_tfidf": WeightedMinHash(128, variant="icws")(tfidf)}
    for name, signer in SIGNERS.items():
        out[name] = signer(batch)
    return out


# --- MinHash --------------------------------------------------------------------------


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


# --- invariances ----------------------------------------------------------------------


def test_signatures_ignore_word_order() -> None:
    rng = random.Random(3)
    sentences = [
        "the committee approved the budget for the new library",
        "heavy rain is expected across the northern region tonight",
        "local farmers reported a strong harvest this autumn",
        "北京市政府今天发布了新的交通管理规定",
        "研究人员发现了一种新的治疗方法",
    ]
    shuffled = sentences[:]
    while shuffled == sentences:
        rng.shuffle(shuffled)
    docs = tokenize_many([" ".join(sentences), " ".join(shuffled)])
    assert sorted(docs[0]) == sorted(docs[1]) and docs[0] != docs[1]
    sigs = all_signatures(docs)
    for name in ("simhash", "simhash_tf", "simhash_tfidf", "oph", "kperm", "expand", "icws", "0bit",
                 "expand_tfidf", "icws_tfidf"):
        assert np.array_equal(sigs[name][0], sigs[name][1]), name


def test_signature_of_a_document_does_not_depend_on_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = zipf_docs(5, 60, 700) + [[], ["lonely"], ["w"] * 5000]
    reference = all_signatures(docs)
    order = list(range(len(docs)))
    random.Random(1).shuffle(order)
    shuffled = all_signatures([docs[i] for i in order])
    for name, values in reference.items():
        if name == "hashes":
            continue
        assert np.array_equal(shuffled[name], values[order]), name
    single = all_signatures([docs[7]])
    for name in ("simhash", "simhash_tfidf", "oph", "kperm", "expand", "icws", "0bit", "expand_tfidf", "icws_tfidf"):
        assert np.array_equal(single[name][0], reference[name][7]), name
    # Tiny chunks everywhere: every "document longer than a chunk" path is taken.
    monkeypatch.setattr(text_mod, "_GROUP", 64)
    monkeypatch.setattr(simhash_mod, "_SLOTS_UNWEIGHTED", 64)
    monkeypatch.setattr(simhash_mod, "_SLOTS_WEIGHTED", 64)
    monkeypatch.setattr(minhash_mod, "_CHUNK_TOKENS", 50)
    monkeypatch.setattr(minhash_mod, "_CHUNK_CELLS", 128 * 37)
    monkeypatch.setattr(minhash_mod, "_GROUP_CHUNKS", 2)
    chunked = all_signatures(docs)
    for name, values in reference.items():
        assert np.array_equal(chunked[name], values), name


def test_empty_and_tiny_documents() -> None:
    docs = [[], ["单"], ["a", "b"], []]
    sigs = all_signatures(docs)
    assert sigs["simhash"][0] == 0 and sigs["simhash"][3] == 0
    for name in ("oph", "kperm", "expand", "icws", "0bit"):
        s = sigs[name]
        assert (s[0] == EMPTY).all() and (s[3] == EMPTY).all(), name
        assert (s[1] != EMPTY).all() and (s[2] != EMPTY).all(), name
        assert jaccard(s[0], s[3]) == 0.0  # two empty texts are not duplicates
        assert jaccard(s[1], s[1]) == 1.0
        assert jaccard(s[1], s[2]) < 0.2
    assert simhash64(hash_tokens([])).shape == (0,)
    assert MinHash(128)(hash_tokens([])).shape == (0, 128)


def test_versions_record_parameters() -> None:
    assert MinHash(64, seed=9, variant="kperm").version.startswith("minhash-kperm-p64-s9-")
    assert WeightedMinHash(32, seed=3, variant="0bit").version.startswith("wminhash-0bit-p32-s3-")
    assert MinHash(128).version != MinHash(128, seed=2).version
    assert HASH_VERSION in SIMHASH_VERSION and HASH_VERSION in MinHash(128).version
    assert WeightedMinHash(128).version.startswith("wminhash-expand-d1-c256-p128-s1-")
    assert WeightedMinHash(128, delta=0.5).version != WeightedMinHash(128).version
    seeds = [MinHash(128, seed=s)(hash_tokens([["a", "b", "c"]]))[0] for s in (1, 2)]
    assert not np.array_equal(*seeds)


# --- stability across processes -------------------------------------------------------


_DIGEST_SCRIPT = """
import hashlib, json, random, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from mmdedup.extract.minhash import MinHash, WeightedMinHash
from mmdedup.extract.simhash import simhash64
from mmdedup.extract.text import collapse_terms, hash_tokens, tokenize_many, tokenizer_version
texts = json.loads(sys.stdin.read())
batch = hash_tokens(tokenize_many(texts))
terms = collapse_terms(batch)
out = {"tokenizer": tokenizer_version(), "hashes": batch.hashes, "simhash": simhash64(batch),
       "simhash_tf": simhash64(terms), "oph": MinHash(128)(batch),
       "kperm": MinHash(128, variant="kperm")(batch), "expand": WeightedMinHash(128)(terms),
       "icws": WeightedMinHash(128, variant="icws")(terms), "0bit": WeightedMinHash(128, variant="0bit")(terms)}
print(json.dumps({k: v if isinstance(v, str) else hashlib.sha256(v.tobytes()).hexdigest()
                  for k, v in out.items()}))
"""


_TEXTS = [
    "北京市政府今天发布了新的交通管理规定，自2024年5月1日起施行。",
    "The quick brown fox jumps over the lazy dog; the dog sleeps on.",
    "今天天气很好我们去公园玩",
    "",
    "混合 mixed 文本 text with numbers 3.14 and 1,000 条记录",
] * 3


def test_signatures_identical_in_another_process() -> None:
    digests = []
    for hash_seed in ("1", "4242"):  # Python's str hash differs; ours must not
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        run = subprocess.run(
            [sys.executable, "-c", _DIGEST_SCRIPT, str(PLATFORM)],
            input=json.dumps(_TEXTS), capture_output=True, text=True, env=env, timeout=300, check=True,
        )
        digests.append(json.loads(run.stdout.strip().splitlines()[-1]))
    assert digests[0] == digests[1]
    batch = hash_tokens(tokenize_many(_TEXTS))
    terms = collapse_terms(batch)
    here = {
        "tokenizer": tokenizer_version(),
        "hashes": batch.hashes, "simhash": simhash64(batch), "simhash_tf": simhash64(terms),
        "oph": MinHash(128)(batch), "kperm": MinHash(128, variant="kperm")(batch),
        "expand": WeightedMinHash(128)(terms), "icws": WeightedMinHash(128, variant="icws")(terms),
        "0bit": WeightedMinHash(128, variant="0bit")(terms),
    }
    here = {k: v if isinstance(v, str) else hashlib.sha256(v.tobytes()).hexdigest() for k, v in here.items()}
    assert here == digests[0]


# --- textsig's signing kernels, held to their definitions ------------------------------
# sign_tokens finds each document's terms with a hash table (not a sort), looks weights
# up once per term of the batch's vocabulary, hashes shingles by slices and the weighted
# MinHash units of shared terms once: every one of these must give exactly what the plain
# definition gives, written out here document by document.


from mmdedup import textsig as textsig_mod
from mmdedup.learn.tfidf import TfidfModel, prior_model
from mmdedup.learn.weights import WordWeights

def reference_term_weights(signer: textsig_mod.TextSigner, hashes: np.ndarray) -> np.ndarray:
    model = signer.model
    w = lookup(model.keys, model.idf, hashes, model.default)  # binary search
    if signer.multipliers is None:
        return w
    return w * np.minimum(lookup(signer.multipliers[0], signer.multipliers[1], hashes, 1.0), 1.0)


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
        out.wminhash[i] = reference_expand(terms, w, signer.wminhash)
        out.minhash[i] = reference_oph(np.array(reference_shingles(kept.tolist(), 3), np.uint64), signer.minhash)
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
    monkeypatch.setattr(minhash_mod, "_VOCAB_MIN_TERMS", 10)
    monkeypatch.setattr(textsig_mod, "_VOCAB_MIN_TERMS", 10)
    monkeypatch.setattr(simhash_mod, "_HIST_DOCS", 3)
    for label in ("fitted+words", "prior"):
        assert_same_sketches(signers[label].sign_tokens(batch), references[label], f"{label}, chunked")
    empty = hash_tokens([[]] * 4)
    sk = fitted.sign_tokens(empty)
    assert sk.empty.all() and (sk.simhash == 0).all() and (sk.wminhash == EMPTY).all() and (sk.minhash == EMPTY).all()
    assert fitted.sign_tokens(hash_tokens([])).simhash.shape == (0,)


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
    monkeypatch.setattr(minhash_mod, "_VOCAB_MIN_TERMS", 1)
    signer = WeightedMinHash(128)
    want = np.stack([reference_expand(tfidf.doc(i), tfidf.weights[tfidf.offsets[i]:tfidf.offsets[i + 1]], signer)
                     for i in range(tfidf.n_docs)])
    assert np.array_equal(signer.sign_terms(tfidf), want)


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
