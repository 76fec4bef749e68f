"""Token hashing. The hash of a token is lanes64 of its UTF-8 bytes (pinned values, balanced
and avalanching bits, the same in every process), and `hash_texts` is
`hash_tokens(tokenize_many(texts))` without the token strings: held to it bit for bit, on
random and hand-written texts, in batches of every grouping."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from mmdedup.extract import ascii_tokens
from mmdedup.extract.ascii_tokens import _ASCII_FOLD, hash_texts
from mmdedup.extract.hashing import HASH_VERSION, hash_strings, hash_tokens, lanes64
from mmdedup.extract.normalize import _fold
from mmdedup.extract.tokens import _WORD, STOP_WORDS, tokenize_many

from sketch_helpers import PLATFORM


def reference(texts: list[str]):
    return hash_tokens(tokenize_many(texts))


def assert_same(texts: list[str]) -> None:
    want, got = reference(texts), hash_texts(texts)
    assert np.array_equal(got.offsets, want.offsets), [t for t, a, b in zip(texts, got.lengths, want.lengths) if a != b][:3]
    assert np.array_equal(got.hashes, want.hashes), texts
    assert got.hashes.dtype == np.uint64 and got.offsets.dtype == np.int64


WORDS = ["alpha", "beta", "gamma", "delta", "x", "Word", "UPPER", "quite-long-word", "abcdefghijklmnop", "_id", "a_b"]
PIECES = (
    WORDS
    + sorted(w for w in STOP_WORDS if w.isascii())[:40]
    + ["it's", "don't", "IT'S", "that's", "rock'n'roll", "o'clock", "1,000", "3.14", "12:30", "1.5a", "a1.5", "1.2.3",
       "1'2.3", "1.5's", "a'1.5", "1.a", "2.", ".5", "e.g.", "i.e.", "u.s.", "os.path.join", "v1.2.3rc1", "10,000,000",
       "1:2:3", "0.5'", "'quoted'", "''", "...", "--", "__", "a--b", "x_y", "ab'cd'ef", "1'a", "12'34", "3,a", "a,3"]
    + list(".,:'-_!?\"()[];/\\@#$%^&*+=~|{}") + ["`", "``", "`tick`"]
    + ["<p>", "</p>", "<br/>", "<a href='http://x.y'>", "</a>", "<script>var a = 1;</script>", "<!-- note -->",
       "&amp;", "&lt;", "&gt;", "&eacute;", "&#39;", "&rsquo;", "&nbsp;", "a < b", "c > d"]
    + ["http://example.com/a?b=c", "https://Www.Example.org/x.html", "www.site.net", "ftp://h/x", "mail@example.com",
       "First.Last@Sub.Example.co.uk", "a@b", "@handle", "://", "www.", "x://y", "WWW.UPPER.COM", "a.www.b", "1@2.cc"]
    + ["\u2019", "\u2018", "\u201c", "\u201d", "\u2014", "\u2013", "\u2026", "\u00a0", "\u200b", "\ufeff", "\u00ad",
       "\u00b7", "\u00ab", "\u00bb", "\u3000", "\u3002", "\uff0c", "\uff61", "\u2025", "\u2212", "\uff5e", "\u00b4"]
    + ["Ａｐｐｌｅ", "ｉＰｈｏｎｅ", "１２３", "ＷＷＷ.ｘ.ｃｏｍ", "ｈｔｔｐ：／／a.b", "Ａ", "ｚ", "！", "＇", "．"]
    + ["我在北京大学学习", "深度学习", "的", "了", "，准确率达到98.5%。", "中 文", "한국어", "日本語です"]
    + ["é", "café", "naïve", "ß", "İ", "ſ", "\u212a", "Ω", "\u0301", "e\u0301", "٣", "²", "½", "ﬁ", "°"]
    + ["😀", "👍🏽", "\U00020001", "\U0001d400", "\ud800"[:0], "\x00", "a\x00b", "\x1c", "\x1f", "\u2028", "\x0b"]
)
SEPARATORS = [" ", " ", " ", "", "\n", "\t", "  ", ", ", ". ", "'", "-", "\x00", "\u3000", "\u00a0"]


def random_text(rng: random.Random, ascii_only: bool = False) -> str:
    pool = [p for p in PIECES if p.isascii()] if ascii_only else PIECES
    parts = []
    for _ in range(rng.randint(0, 40)):
        piece = rng.choice(pool)
        if rng.random() < 0.1:
            piece = piece.upper()
        parts.append(piece)
        parts.append(rng.choice(SEPARATORS) if not ascii_only else rng.choice(SEPARATORS[:10]))
    return "".join(parts)


def random_corpus(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = [random_text(rng, ascii_only=rng.random() < 0.5) for _ in range(n)]
    texts[::17] = [""] * len(texts[::17])
    texts[5::23] = [" \t\n "] * len(texts[5::23])
    return texts


@pytest.mark.parametrize("seed", range(4))
def test_hash_texts_equals_hash_tokens_of_tokenize_on_random_texts(seed: int) -> None:
    assert_same(random_corpus(seed, 600))


def test_hash_texts_of_a_text_does_not_depend_on_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = random_corpus(7, 300)
    want = reference(texts)
    for group in (1, 64, 1000, 1 << 18):  # bytes of text per group: one text to all of them
        monkeypatch.setattr(ascii_tokens, "_TEXT_GROUP", group)
        got = hash_texts(texts)
        assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.hashes, want.hashes)
    rng = random.Random(3)
    at = 0
    while at < len(texts):
        size = rng.randint(1, 40)
        batch = hash_texts(texts[at : at + size])
        for j in range(batch.n_docs):
            assert np.array_equal(batch.doc(j), want.doc(at + j)), texts[at + j]
        at += size
    assert hash_texts([]).n_docs == 0 and len(hash_texts([]).hashes) == 0
    assert np.array_equal(hash_texts(iter(texts[:5])).hashes, reference(texts[:5]).hashes)


EDGE_CASES = [
    "", " ", "\n\t ", "the", "The it's THAT'S a an", "it's", "It’s", "don't", "don’t stop",
    "1,000 3.14 12:30 1.5 1.5a a1.5 1.2.3 1'2.3 1.5's a'1.5 1'2'3 1.2'3.4'5 5.6'7 12a.5 1.a.2 a.1.2",
    "0.5.a 1,a 1:b 9'z z'9 9'9 9.9.9.9 1..2 1.,2 1',2 '1' .1. ,1, :1: 1.5'a 1.5a'b 1.a'b ab'1.5",
    "a.b.c e.g. i.e. U.S.A. os.path 3.x py3.11 v2.0.1 2.0.1rc2 10:30:45pm",
    "x" * 40, "9" * 40 + ".5", "a" * 9 + "'" + "b" * 9, "yourselves themselves ourselves yourself", "YOURSELVES",
    "<p>Hello&nbsp;world</p><script>x = '1.5'</script>", "a<b and c>d", "caf&eacute; &amp; co",
    "see https://example.com/a.b?c=1,2 and www.x.org or me@x.com.", "mail:me@x.com,you@y.org", "http://",
    "“Quoted” — dashes – and… ellipsis’s", "\u2018single\u2019 \u00a0nbsp\u200bzero\ufeffbom", "``back`ticks``",
    "ＡＢＣ　ｄｅｆ．１２３", "full，width：ｓ’", "中文和English混合，1,000人。", "北京", "😀 emoji 👍🏽 text",
    "naïve café ß", "\x00", "a\x00b\x00c", "\x1cx\x1dy\x1ez\x1f", "line\u2028sep", "\ud800 lone", "tab\tsep\x0bvt",
]


def test_hash_texts_on_edge_cases() -> None:
    assert_same(EDGE_CASES)
    for text in EDGE_CASES:
        assert_same([text])


def test_token_ranges_follow_the_word_regex_on_every_short_string() -> None:
    """The numpy scan of . , : ' (`_ascii_token_ranges`) against `_WORD` itself, on every
    string of up to 7 characters over letters, digits, marks and a space."""
    strings = ["".join(p) for k in range(1, 8) for p in itertools.product("a1.:'", repeat=k)]
    strings += ["".join(p) for p in itertools.product("a1.,' ", repeat=6)]
    group = [s.encode("ascii") for s in strings]
    data, codes = ascii_tokens._group_bytes(group)
    data_np, codes_np = np.frombuffer(data, np.uint8), np.frombuffer(codes, np.uint8)
    starts, lens, merged = ascii_tokens._ascii_token_ranges(data_np, codes_np, np.flatnonzero(codes_np >= 2))
    kept = np.setdiff1d(np.arange(len(starts)), merged if merged is not None else [])
    got = list(zip(starts[kept].tolist(), (starts + lens)[kept].tolist()))
    assert got == [m.span() for m in _WORD.finditer(data.decode("ascii"))]


def test_ascii_fold_characters_fold_alone() -> None:
    """`_ASCII_FOLD` folds a character without looking at its neighbours, as `_fold`
    (NFKC) does when it has nothing to reorder (no combining marks) and nothing to compose:
    no character of a text of ASCII and these is the second of a canonical pair."""
    second = set()
    for code in range(0x110000):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<") and len(decomposition.split()) == 2:
            second.add(chr(int(decomposition.split()[1], 16)))
    assert not second & set(map(chr, range(128)))
    for char, ascii in _ASCII_FOLD.items():
        assert ascii.isascii() and _fold(char) == ascii
        decomposed = unicodedata.normalize("NFKD", char)
        assert not second & set(decomposed) and not any(map(unicodedata.combining, decomposed)), char
    assert "\u2019" in _ASCII_FOLD and "Ａ" in _ASCII_FOLD and "\u00b4" not in _ASCII_FOLD
    rng = random.Random(5)
    chars = list(_ASCII_FOLD) + list("aZ1 .'`\u0301\u0338")
    for _ in range(3000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 12)))
        folded = _fold(text)
        if folded.isascii():  # what `hash_texts` takes the fast way
            assert ascii_tokens._unmarked_ascii(text).lower().replace(b"`", b"'") == folded.encode("ascii")
        else:
            assert ascii_tokens._unmarked_ascii(text) is None


def test_stop_words_are_dropped_by_hash_exactly() -> None:
    words = sorted(w for w in STOP_WORDS if w.isascii())
    texts = [" ".join(words), " ".join(w + "x" for w in words), " ".join("x" + w for w in words), "yourselvez themselvex"]
    assert_same(texts)
    assert hash_texts([" ".join(words)]).n_docs == 1 and len(hash_texts([" ".join(words)]).hashes) == 0


def test_hash_texts_on_prose() -> None:
    english = " ".join(["The committee's budget (1,000 items) was approved on 12:30, i.e. at noon;",
                        "it\u2019s the \u201cbest\u201d plan \u2014 costs fell 3.5% to $2.10! See www.x.org/a."] * 40)
    assert_same([english, english.upper(), english[:1000], english.replace(" ", "\n")])


def test_links_among_any_whitespace() -> None:
    """`hash_texts` takes links out without collapsing whitespace first, as `tokenize`
    does: the same tokens, whatever whitespace surrounds a link."""
    rng = random.Random(11)
    pieces = ["http://a.b/c", "HTTPS://X.Y/z?q=1,2&r=it's", "ftp://f", "www.site.org", "WWW.Up.Com", "me@mail.com",
              "First.Last@Sub.Example.co.uk", "x@y", "@", "://", "www.", "a.www.b", "(www.x.com)", "<www.y.com>",
              "mail:me@x.com,you@y.org", "word", "it's", "1.5", "a.b", "x", "e.g.", "3.14a", "\u2019", "ｗｗｗ.ｘ.ｃｏｍ"]
    spaces = [" ", "", "", "\n", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "  ", "\u00a0", "\u3000",
              "\u2028", "\x85", "\x00", ",", ".", "'", ":", "/"]
    texts = ["".join(rng.choice(pieces) + rng.choice(spaces) for _ in range(rng.randint(1, 12))) for _ in range(2000)]
    assert_same(texts)


# --- the token hash -------------------------------------------------------------------


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
