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
from pathlib import Path

import numpy as np
import pytest

from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract import simhash as simhash_mod
from mmdedup.extract import hashing as hashing_mod
from mmdedup.extract import normalize as normalize_mod
from mmdedup.extract import tokens as tokens_mod
from mmdedup.extract.minhash import EMPTY, MinHash, WeightedMinHash, jaccard
from mmdedup.extract.simhash import SIMHASH_VERSION, hamming, simhash64
from mmdedup.extract.hashing import HASH_VERSION, hash_strings, hash_tokens, lanes64
from mmdedup.extract.normalize import clean
from mmdedup.extract.shingles import char_shingles, short_text_shingles
from mmdedup.extract.tokenbatch import TokenBatch, collapse_terms, lookup
from mmdedup.extract.tokens import tokenize, tokenize_many, tokenizer_version

PLATFORM = Path(__file__).resolve().parents[1] / "platform"
SIGNERS = {
    "oph": MinHash(128),
    "kperm": MinHash(128, variant="kperm"),
    "expand": WeightedMinHash(128),
    "icws": WeightedMinHash(128, variant="icws"),
    "0bit": WeightedMinHash(128, variant="0bit"),
}


def random_words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 12))) for _ in range(n)]


def zipf_docs(seed: int, n_docs: int, length: int, vocab_size: int = 3000) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    vocab = random_words(random.Random(seed), vocab_size)
    p = 1.0 / np.arange(1, vocab_size + 1)
    p /= p.sum()
    lengths = rng.integers(0, length + 1, n_docs)
    return [[vocab[i] for i in rng.choice(vocab_size, int(k), p=p)] for k in lengths]


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


# --- tokenizer ------------------------------------------------------------------------


def test_clean_removes_urls_emails_markup_and_decodes_entities() -> None:
    raw = (
        "<html><head><style>p {color: red}</style><script>var x = 1;</script></head>"
        "<body><p>Caf&eacute; &amp; Bar</p> see https://example.com/a?b=1&c=2 or "
        "www.example.org/x, mail <a href='mailto:x@y.com'>Boss@Example.COM</a>.<br/>"
        "看这里http://t.cn/abc中文 and a < b > c</body></html>"
    )
    out = clean(raw)
    for gone in ("http", "example", "www", "@", "<", "color", "var x", "&amp;", "href", "t.cn"):
        assert gone not in out.replace("a < b > c", ""), gone
    assert "café & bar" in out
    assert "看这里中文" in out
    assert "a < b > c" in out  # comparison signs in text are not tags


def test_tokenize_mixed_chinese_english_numbers_and_stop_words() -> None:
    tokens = tokenize("我在北京大学学习Machine Learning和深度学习，准确率达到98.5%，共1,000人。It's the best!")
    for expected in ("北京大学", "machine", "learning", "深度", "学习", "98.5", "1,000", "best"):
        assert expected in tokens, (expected, tokens)
    for stop in ("在", "和", "the", "it's", "，", "%", " "):
        assert stop not in tokens, (stop, tokens)
    assert tokenize("2024年5月3日") == ["2024", "年", "5", "月", "3", "日"]
    kept = tokenize("it is the best", drop_stop_words=False)
    assert kept == ["it", "is", "the", "best"]
    assert tokenize_many(["北京大学", ""]) == [["北京大学"], []]


def reference_tokenize(text: str, drop_stop_words: bool = True) -> list[str]:
    """The definition: `_TOKEN` over `clean(text)`, jieba for Han runs (the old loop)."""
    tokens: list[str] = []
    for match in tokens_mod._TOKEN.finditer(clean(text)):
        han = match.group("han")
        tokens.extend(tokens_mod._cut_han(han) if han is not None else [match.group()])
    return [t for t in tokens if t not in tokens_mod.STOP_WORDS] if drop_stop_words else tokens


def test_tokenize_fast_paths_equal_the_definition() -> None:
    rng = random.Random(12)
    pieces = list("abcXYZ019 ..,,::''`\t\n-_!?\"()<>&;/@") + [
        "it's", "1,000", "3.14", "12:30", "don't", "u.s.", "...", " www.x.com ", "a@b.co", "http://x.y/z",
        "ＷＷＷ.x.com", "ｈｔｔｐ：／／a.b", "&amp;", "&eacute;", "<p>", "</p>", "é", "中文", "北京大学", "，", "。",
        "Ａ", "ｉ", "’", "“", "\u00a0", "\u3000", "\u2028", "\x1c", "٣", "²", "ß", "\u0301", "İ", "ſ", "K",
        "Ω", "😀", "\U00020001", "the", "is", "not",
    ]
    ascii_pieces = list("ab1 2.,:'' \t") + ["it's", "1,000", "3.14", "e.g."]
    for i in range(6000):
        pool = ascii_pieces if i % 3 == 0 else pieces
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 30)))
        for drop in (True, False):
            assert tokenize(text, drop_stop_words=drop) == reference_tokenize(text, drop), repr(text)
    english = " ".join(["The committee's budget (1,000 items) was approved on 12:30, i.e. at noon;",
                        "it's the \u201cbest\u201d plan \u2014 costs fell 3.5% to $2.10!"] * 20)
    assert tokenize(english) == reference_tokenize(english)


def test_tokenize_ignores_width_case_markup_and_links() -> None:
    a = tokenize("Ａｐｐｌｅ发布了新款ｉＰｈｏｎｅ，详情见 https://apple.com/cn?utm=1")
    b = tokenize("<p>apple 发布了 新款 iPhone,</p> 详情见 http://apple.com.cn/x")
    assert a == b
    assert "iphone" in a


def test_tokenizer_version_is_stable_and_names_its_parts() -> None:
    import jieba

    v = tokenizer_version()
    assert v == tokenizer_version() == tokens_mod.TOKENIZER_VERSION
    assert v.startswith(f"jieba-{jieba.__version__}+dict-")
    dict_hash = v.split("+dict-")[1].split("+")[0]
    assert len(dict_hash) == 8 and int(dict_hash, 16) >= 0
    for part in (normalize_mod.NORMALIZER_VERSION, normalize_mod.CLEANER_VERSION, tokens_mod.STOP_WORDS_VERSION):
        assert part in v


def test_character_shingles() -> None:
    assert char_shingles("今天 天气，很好", 2) == ["今天", "天天", "天气", "气很", "很好"]
    assert char_shingles("ab", 3) == ["ab"]
    assert char_shingles(" ,", 3) == []


def test_short_chinese_post_uses_character_bigrams() -> None:
    post = "今天天气很好我们去公园玩"  # 12 characters
    assert len(post) == 12
    features = lambda text: short_text_shingles(text, len(tokenize(text)))  # noqa: E731
    sh = features(post)
    assert sh == char_shingles(post, 2) and len(sh) == 11
    near = features("今天天气真好我们去公园玩")
    other = features("股市大跌投资者损失惨重啊")
    j = lambda x, y: len(set(x) & set(y)) / len(set(x) | set(y))  # noqa: E731
    assert j(sh, near) > 0.6
    assert j(sh, other) == 0.0
    assert features("Storm closes schools") == char_shingles("stormclosesschools", 3)  # not Chinese: trigrams
    # A long text is not short: it keeps its word 3-grams (textsig signs those from token hashes).
    long_text = "The quick brown fox jumps over the lazy dog near the river bank every single morning"
    assert features(long_text) is None


# --- hashing --------------------------------------------------------------------------


def test_token_hashes_follow_the_reference_lanes64() -> None:
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 中文字符éü😀-'"
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    strings += ["x" * k for k in range(300)] + ["", "a\0b", "y" * 5000]  # every lane count, long, a NUL
    got = hash_strings(strings)
    want = np.array([lanes64(s.encode("utf-8")) for s in strings], dtype=np.uint64)
    assert got.dtype == np.uint64
    assert np.array_equal(got, want)
    docs = [strings[:10], [], strings[10:25]]
    assert np.array_equal(hash_tokens(docs).hashes, want[:25])
    # Pinned values: the definition must not drift (a change needs a new HASH_VERSION).
    assert HASH_VERSION == "lanes64-fmix-s0"
    pinned = {"": 0x7ACDBB98B1344213, "a": 0x40AE22231F427968, "北京大学": 0x3ADD4B862A329344,
              "abcdefghijklmnopq": 0x18746AB00B5288CA}
    assert {w: lanes64(w.encode()) for w in pinned} == pinned
    assert hash_strings(list(pinned)).tolist() == list(pinned.values())


def test_token_hash_bits_are_balanced_and_avalanche() -> None:
    rng = np.random.default_rng(3)
    # Realistic tokens: short lowercase words and numbers, each bit ~1/2 set.
    words = ["".join(chr(97 + c) for c in rng.integers(0, 26, rng.integers(1, 14))) for _ in range(20000)]
    words += [str(i) for i in range(20000)]
    h = hash_strings(words)
    assert len(np.unique(h)) == len(set(words))
    bits = np.unpackbits(h.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    share = bits.mean(axis=0)
    assert np.all(np.abs(share - 0.5) < 0.02), share  # 4 sigma is ~0.01
    # Avalanche: flipping any one input bit flips each output bit with probability ~1/2.
    base = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in rng.integers(1, 40, 3000)]
    flips = []
    for data in base:
        i = int(rng.integers(0, 8 * len(data)))
        flipped = bytearray(data)
        flipped[i // 8] ^= 1 << (i % 8)
        flips.append(lanes64(data) ^ lanes64(bytes(flipped)))
    diff = np.unpackbits(np.array(flips, "<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    assert np.all(np.abs(diff.mean(axis=0) - 0.5) < 0.06)  # per output bit, over 3,000 flips
    assert abs(diff.sum(axis=1).mean() - 32) < 0.5
    # Tokens of up to 7 bytes never collide (length in the top byte, a bijective mix).
    short = hash_strings(["", "a", "a\0", "b", "ab", "ba", "abc", "\0", "\0\0", "zzzzzzz"])
    assert len(np.unique(short)) == 10


def test_token_hashes_identical_in_another_process() -> None:
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1]);"
        "from mmdedup.extract.hashing import hash_strings;"
        "print(json.dumps(hash_strings(json.loads(sys.stdin.read())).tolist()))"
    )
    words = ["", "a", "word", "北京大学", "don't", "x" * 200, "naïve"] + [f"w{i}" for i in range(100)]
    outs = []
    for hash_seed in ("0", "99"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        run = subprocess.run([sys.executable, "-c", script, str(PLATFORM)], input=json.dumps(words),
                             capture_output=True, text=True, env=env, timeout=120, check=True)
        outs.append(json.loads(run.stdout))
    assert outs[0] == outs[1] == hash_strings(words).tolist()


def test_hash_tokens_weights_fn_sees_distinct_tokens_once() -> None:
    calls = []

    def weights(names):
        calls.append(list(names))
        return [len(s) for s in names]

    batch = hash_tokens([["aa", "b", "aa"], ["ccc", "b"]], weights)
    assert len(calls) == 1 and sorted(calls[0]) == ["aa", "b", "ccc"]
    assert batch.weights.tolist() == [2, 1, 2, 3, 1]
    assert batch.offsets.tolist() == [0, 3, 5]


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


# --- SimHash --------------------------------------------------------------------------


def textbook_simhash(hashes: list[int], weights: list[float] | None = None) -> int:
    votes = [0.0] * 64
    for k, h in enumerate(hashes):
        w = 1.0 if weights is None else weights[k]
        for i in range(64):
            votes[i] += w if (h >> i) & 1 else -w
    return sum(1 << i for i in range(64) if votes[i] > 0)


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
    monkeypatch.setattr(hashing_mod, "_GROUP", 64)
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
from mmdedup.extract.hashing import hash_tokens
from mmdedup.extract.tokenbatch import collapse_terms
from mmdedup.extract.tokens import tokenize_many, tokenizer_version
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

_M64 = (1 << 64) - 1


def reference_shingles(tokens: list[int], n: int) -> list[int]:
    """_shingles of one document by its definition: n consecutive tokens from each start
    (a document shorter than n: one shingle, the missing tokens 0), in Python ints."""
    k = [int(x) for x in textsig_mod._K]
    starts = range(len(tokens) - n + 1) if len(tokens) >= n else ([0] if tokens else [])
    out = []
    for s in starts:
        h = 0
        for j in range(n):
            part = tokens[s + j] if s + j < len(tokens) else 0
            h = ((h ^ ((part * k[j]) & _M64)) * k[(j + 1) % n]) & _M64
            h ^= h >> 29
        out.append(h)
    return out


def reference_densify(bins: np.ndarray, signer: MinHash) -> np.ndarray:
    """Optimal densification by its definition: an empty bin j takes the first non-empty
    bin among probe(j, 1), probe(j, 2), ...; an empty document stays empty."""
    out = bins.copy()
    if (bins == EMPTY).all():
        return out
    probes = signer._probe_table(4096)
    for j in np.flatnonzero(bins == EMPTY):
        hits = bins[probes[j]] != EMPTY
        out[j] = bins[probes[j][hits.argmax()]]
    return out


def reference_oph(hashes: np.ndarray, signer: MinHash) -> np.ndarray:
    k = signer.num_perm
    bins = np.full(k, EMPTY, np.uint32)
    if len(hashes):
        x = (np.asarray(hashes, np.uint64) ^ signer._bin_key) * signer._bin_mul
        np.minimum.at(bins, minhash_mod._fastrange(x, k).astype(np.intp),
                      np.minimum(x.astype(np.uint32), np.uint32(0xFFFFFFFE)))
    return reference_densify(bins, signer)


def reference_expand(hashes: np.ndarray, weights: np.ndarray, signer: WeightedMinHash) -> np.ndarray:
    """Weighted MinHash "expand" of one document's distinct terms (weights > 0) by the
    module docstring: floor(w / delta + u) units a term (at most cap; one a term if none
    at all), unit j of term x = mix64(x ^ key + j * gamma), then one-permutation hashing."""
    k, mix = signer.num_perm, minhash_mod._mix64
    bins = np.full(k, EMPTY, np.uint32)
    if len(hashes):
        hashes = np.asarray(hashes, np.uint64)
        u = (mix(hashes ^ signer._round_key) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        c = np.minimum(np.floor(np.asarray(weights, np.float32).astype(np.float64) / signer.delta + u),
                       signer.cap).astype(np.int64)
        if c.sum() == 0:
            c[:] = 1
        term = np.repeat(np.arange(len(hashes)), c)
        j = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c) + 1
        with np.errstate(over="ignore"):
            x = mix((hashes[term] ^ signer._unit_key) + j.astype(np.uint64) * np.uint64(minhash_mod._GAMMA))
        np.minimum.at(bins, minhash_mod._fastrange(x, k).astype(np.intp),
                      np.minimum(x.astype(np.uint32), np.uint32(0xFFFFFFFE)))
    return reference_densify(bins, signer._oph)


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
    # of short texts are held to `short_text_shingles` in test_short_texts.py).
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
