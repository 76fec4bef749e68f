"""Text normalisation shared by exact hashing and the near-duplicate text signals.

Two copies of one article differ in ways no reader notices: full-width versus half-width
characters, Chinese versus Latin punctuation, case, runs of whitespace, spaces that one
editor puts between CJK characters. `normalize` folds all of that away so that such copies
hash the same and tokenise the same.
"""

from __future__ import annotations

import hashlib
import html
import logging
import os
import re
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np
import xxhash

NORMALIZER_VERSION = "norm1"

# Punctuation NFKC leaves alone (CJK full stops, curly quotes, CJK brackets) folded to one
# ASCII form, so "。" and "." or "“" and '"' are the same character after normalisation.
_PUNCT_FOLD = str.maketrans(
    {
        "。": ".", "｡": ".", "、": ",", "､": ",", "·": ".", "・": ".",
        "“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"', "〝": '"', "〞": '"',
        "‘": "'", "’": "'", "‚": "'", "‛": "'", "`": "'", "´": "'",
        "「": '"', "」": '"', "『": '"', "』": '"', "《": '"', "》": '"', "〈": '"', "〉": '"',
        "【": "[", "】": "]", "〔": "[", "〕": "]", "〖": "[", "〗": "]", "〘": "[", "〙": "]",
        "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-", "～": "~", "〜": "~",
        "…": "...", "‥": "..", "\u00a0": " ", "\u3000": " ",
        "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": "", "\u00ad": "",
    }
)

_WS = re.compile(r"\s+")
_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A space next to a CJK character carries no meaning (Chinese does not separate words), so
# "中 文" and "中文" are one text.
_SPACE_NEAR_CJK = re.compile(rf"(?<=[{_CJK}]) (?=\S)|(?<=\S) (?=[{_CJK}])")


_ANY_CJK = re.compile(f"[{_CJK}]")


def normalize(text: str) -> str:
    """Fold width, punctuation, case and whitespace so trivially different copies match.

    str.split/join collapses whitespace several times faster than a regex substitution,
    and the CJK space rule only runs on texts that have a CJK character at all: this is
    on the ingest hot path for every text.
    """
    text = " ".join(unicodedata.normalize("NFKC", text).translate(_PUNCT_FOLD).casefold().split())
    return _SPACE_NEAR_CJK.sub("", text) if _ANY_CJK.search(text) else text


def text_hash(text: str | None) -> str | None:
    """SHA-256 of the normalised text, the key of exact text duplicates; None if it is empty."""
    normalized = normalize(text) if text else ""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest() if normalized else None


# --------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------
# Copies of one post crawled from two sites differ in markup, tracking links and the contact
# address in the footer, none of which is the content a reviewer compares. Cleaning removes
# them before tokenising so that they cannot make copies look different (or unrelated posts
# that share a footer look alike).

CLEANER_VERSION = "clean1"

_HTML_BLOCK = re.compile(r"<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_HTML_COMMENT = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>", re.S)
# Only things shaped like tags: "a < b and c > d" in plain text must survive.
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>|<![A-Za-z][^<>]*>|<\?[^<>]*\?>")
# No \b before the scheme: in "看http://x" the Han character is a word character too.
_URL = re.compile(
    r"(?:(?:https?|ftp)://|(?<![A-Za-z0-9.\-])www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+",
    re.I,
)
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    r"\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"
)


def clean(text: str) -> str:
    """`normalize`, with markup, entities, URLs and e-mail addresses taken out.

    Tags become spaces (block boundaries separate words; the space is dropped again next
    to CJK by `normalize`). Entities are decoded rather than deleted so "caf&eacute;" and
    "café" stay one word. URLs are matched after normalisation so full-width ones count.
    """
    if "<" in text:
        text = _HTML_BLOCK.sub(" ", text)
        text = _HTML_COMMENT.sub(" ", text)
        text = _HTML_TAG.sub(" ", text)
    if "&" in text:
        text = html.unescape(text)
    text = normalize(text)
    if "@" in text or "/" in text or "www." in text:
        text = _EMAIL.sub(" ", _URL.sub(" ", text))
        text = normalize(text)
    return text


# --------------------------------------------------------------------------------------
# Stop words
# --------------------------------------------------------------------------------------
# Small on purpose: function words that every text shares and that make unrelated texts
# look alike. Negations ("not", "不", "没有") are kept: "is safe" and "is not safe" are not
# duplicates for a reviewer. jieba ships only a 31-word English list (jieba.analyse), and
# no Chinese one, so both lists live here and are versioned with the tokenizer ("sw1").

STOP_WORDS_VERSION = "sw1"

STOP_WORDS_EN = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it it's its itself just me more most my myself of off on once only or
    other our ours ourselves out over own same she should so some such than that that's
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves s t
    """.split()
)

STOP_WORDS_ZH = frozenset(
    """
    的 了 和 是 在 也 就 都 而 及 与 着 或 之 其 把 被 让 给 对 从 向 但 并 很 还 又 吗 呢 吧 啊 呀
    哦 嗯 么 啦 哈 嘛 得 地 个 这 那 这个 那个 这些 那些 这样 那样 这里 那里 我 你 他 她 它 我们
    你们 他们 她们 它们 自己 什么 因为 所以 如果 虽然 但是 而且 以及 以 于 为 由 等 等等 将 已
    已经 要 会 能 可以 就是 还是 或者 一个 一些 有 有的 所 该 此 则 即 乃 却 只 才 更 最
    """.split()
)

STOP_WORDS = STOP_WORDS_EN | STOP_WORDS_ZH


# --------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------

TOKEN_REGEX_VERSION = "re1"

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
# Han runs go to jieba; numbers keep their decimal/thousands/time separators ("3.14",
# "1,000", "12:30") so they stay one token; other scripts are runs of word characters,
# with inner apostrophes ("don't"). "_" is a separator, not a letter.
_TOKEN = re.compile(
    rf"(?P<han>[{_HAN}]+)"
    rf"|(?P<num>\d+(?:[.,:]\d+)+)"
    rf"|(?P<word>[^\W_{_HAN}]+(?:'[^\W_{_HAN}]+)*)"
)
_HAN_CHAR = re.compile(rf"[{_HAN}]")

_jieba_lock = threading.Lock()
_jieba_tokenizer = None


def _jieba():
    """A private jieba.Tokenizer, built on first use.

    Private so that a user dictionary someone loads into the global jieba cannot change our
    tokens (and hence signatures) behind TOKENIZER_VERSION's back. Building it costs about
    a second (0.1 s from jieba's cache), so modules that never tokenise Chinese never pay.
    """
    global _jieba_tokenizer
    if _jieba_tokenizer is None:
        with _jieba_lock:
            if _jieba_tokenizer is None:
                import jieba

                logging.getLogger("jieba").setLevel(logging.WARNING)
                tokenizer = jieba.Tokenizer()
                tokenizer.initialize()
                _jieba_tokenizer = tokenizer
    return _jieba_tokenizer


@lru_cache(maxsize=1 << 16)
def _cut_han(run: str) -> tuple[str, ...]:
    # Near-duplicate corpora repeat the same sentences many times: cache jieba per run.
    return tuple(w for w in _jieba().cut(run, HMM=True) if w.strip())


@lru_cache(maxsize=1)
def tokenizer_version() -> str:
    """What made the tokens: jieba's version and dictionary, normaliser, cleaner, lists.

    Signatures carry it; a different value means "re-sign, do not compare". The dictionary
    hash is over the file's bytes (about 5 MB, tens of milliseconds, once per process).
    """
    import jieba

    path = os.path.join(os.path.dirname(os.path.abspath(jieba.__file__)), jieba.DEFAULT_DICT_NAME)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return (
        f"jieba-{jieba.__version__}+dict-{digest.hexdigest()[:8]}+{NORMALIZER_VERSION}"
        f"+{CLEANER_VERSION}+{STOP_WORDS_VERSION}+{TOKEN_REGEX_VERSION}"
    )


def __getattr__(name: str):
    # TOKENIZER_VERSION reads like a constant but is computed on first access (PEP 562),
    # so importing this module stays cheap.
    if name == "TOKENIZER_VERSION":
        return tokenizer_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tokenize(text: str, *, drop_stop_words: bool = True) -> list[str]:
    """Words of `clean(text)`: jieba for Han runs, a word regex for everything else.

    Mixed text ("学习machine learning的方法") splits at script changes first, so jieba
    only ever sees Chinese and English words stay whole.
    """
    tokens: list[str] = []
    for match in _TOKEN.finditer(clean(text)):
        han = match.group("han")
        if han is not None:
            tokens.extend(_cut_han(han))
        else:
            tokens.append(match.group())
    if drop_stop_words:
        tokens = [t for t in tokens if t not in STOP_WORDS]
    return tokens


def tokenize_many(texts: Iterable[str], *, drop_stop_words: bool = True) -> list[list[str]]:
    """`tokenize` over a batch (jieba is pure Python: there is no faster batch path)."""
    return [tokenize(t, drop_stop_words=drop_stop_words) for t in texts]


# --------------------------------------------------------------------------------------
# Shingles
# --------------------------------------------------------------------------------------
# Word 3-grams are the usual MinHash feature for documents, but a 12-character Chinese
# post has five or six words and hence three or four 3-grams: one changed word and the
# sets are disjoint. Short texts therefore use character n-grams (bigrams for Chinese,
# where a character is already a morpheme; trigrams otherwise).

SHINGLE_SEP = " "
SHORT_TOKENS = 8
SHORT_CHARS = 30
_NON_WORD = re.compile(r"[\W_]+")


def shingle_version(word_n: int = 3) -> str:
    """The shingling scheme, to be recorded next to MinHash signatures."""
    return f"sh1-w{word_n}-c2zh3-short{SHORT_TOKENS}t{SHORT_CHARS}c"


def shingles(tokens: Sequence[str], n: int = 3) -> list[str]:
    """Word n-grams joined by a space; a text shorter than n is one shingle of all of it."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if len(tokens) <= n:
        return [SHINGLE_SEP.join(tokens)] if tokens else []
    return [SHINGLE_SEP.join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _compact(text: str) -> str:
    return _NON_WORD.sub("", text)


def char_shingles(text: str, n: int = 3) -> list[str]:
    """Character n-grams of the text's word characters (spaces and punctuation dropped)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    chars = _compact(text)
    if len(chars) <= n:
        return [chars] if chars else []
    return [chars[i : i + n] for i in range(len(chars) - n + 1)]


def _char_n(chars: str) -> int:
    han = len(_HAN_CHAR.findall(chars))
    return 2 if han * 2 >= len(chars) else 3


def is_short(text: str, tokens: Sequence[str]) -> bool:
    """Too short for word n-grams (see the note above `SHORT_TOKENS`)."""
    return len(tokens) < SHORT_TOKENS or len(_compact(text)) < SHORT_CHARS


def text_shingles(text: str, tokens: Sequence[str] | None = None, *, word_n: int = 3) -> list[str]:
    """The MinHash feature set of one text: word n-grams, or character n-grams if short."""
    cleaned = clean(text)
    if tokens is None:
        tokens = tokenize(text)
    if is_short(cleaned, tokens):
        chars = _compact(cleaned)
        return char_shingles(chars, _char_n(chars))
    return shingles(tokens, word_n)


# --------------------------------------------------------------------------------------
# Hashing: strings -> uint64, in numpy
# --------------------------------------------------------------------------------------
# Token hashes are XXH3-64 (seed 0, the library default) of the UTF-8 bytes, so anyone can
# reproduce one with `xxhash.xxh3_64_intdigest(token.encode())`, and they never depend on
# the process (Python's hash() is salted per process). Calling xxhash once per token costs
# ~80 ns of interpreter time, and mapping tokens to uniques through a dict or np.unique
# costs as much again (np.unique sorts strings: ~400 ns/token), which alone is more than
# the whole SimHash+MinHash budget. So the batch is joined into one byte buffer and XXH3 is
# evaluated in numpy for inputs up to 128 bytes (every word, and word n-grams); only longer
# strings go to the library, one call each. Equality with the library is a unit test.

HASH_SEED = 0
HASH_VERSION = "xxh3_64-s0"

_M64 = 0xFFFFFFFFFFFFFFFF
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb"
)
_PRIME64_1 = np.uint64(0x9E3779B185EBCA87)
_PRIME64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
_PRIME64_3 = np.uint64(0x165667B19E3779F9)
_PRIME_MX1 = np.uint64(0x165667919E3779F9)
_PRIME_MX2 = np.uint64(0x9FB21C651E98DF25)
_MAX_NUMPY_LEN = 128
_U = np.uint64


def _sec64(offset: int) -> int:
    return int.from_bytes(_SECRET[offset : offset + 8], "little")


def _sec32(offset: int) -> int:
    return int.from_bytes(_SECRET[offset : offset + 4], "little")


def _shr(x: np.ndarray, k: int) -> np.ndarray:
    return np.right_shift(x, _U(k))


def _rotl(x: np.ndarray, k: int) -> np.ndarray:
    return np.left_shift(x, _U(k)) | np.right_shift(x, _U(64 - k))


def _xxh64_avalanche(h: np.ndarray) -> np.ndarray:
    h = h ^ _shr(h, 33)
    h *= _PRIME64_2
    h ^= _shr(h, 29)
    h *= _PRIME64_3
    h ^= _shr(h, 32)
    return h


def _xxh3_avalanche(h: np.ndarray) -> np.ndarray:
    h = h ^ _shr(h, 37)
    h *= _PRIME_MX1
    h ^= _shr(h, 32)
    return h


def _mul128_fold64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a*b mod 2^128) folded to 64 bits: low ^ high, with 32-bit halves (no uint128 here)."""
    lo32 = _U(0xFFFFFFFF)
    a_lo, a_hi = a & lo32, _shr(a, 32)
    b_lo, b_hi = b & lo32, _shr(b, 32)
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = _shr(lo_lo, 32) + (hi_lo & lo32) + lo_hi
    upper = _shr(hi_lo, 32) + _shr(cross, 32) + hi_hi
    lower = np.left_shift(cross, _U(32)) | (lo_lo & lo32)
    return lower ^ upper


class _Reader:
    """Little-endian 64-bit loads at arbitrary byte offsets of one buffer.

    Two aligned gathers and a funnel shift: numpy gathers from an unaligned strided view
    take a slow generic path (3-4x slower on the machines we measured).
    """

    def __init__(self, data: bytes):
        padded = data + b"\0" * (24 - len(data) % 8)
        self.words = np.frombuffer(padded, dtype="<u8").astype(np.uint64, copy=False)

    def r64(self, pos: np.ndarray) -> np.ndarray:
        q = pos >> 3
        sh = ((pos & 7) << 3).astype(np.uint64)
        w = self.words
        # numpy defines x << 64 as 0, which is what sh == 0 needs.
        return (w[q] >> sh) | (w[q + 1] << (_U(64) - sh))


def _mix16(rd: _Reader, pos: np.ndarray, sec: int, seed: int) -> np.ndarray:
    k1 = _U((_sec64(sec) + seed) & _M64)
    k2 = _U((_sec64(sec + 8) - seed) & _M64)
    return _mul128_fold64(rd.r64(pos) ^ k1, rd.r64(pos + 8) ^ k2)


_MASK32 = _U(0xFFFFFFFF)
_MASK8 = _U(0xFF)


# Length class of XXH3's short-input paths: 0, 1-3, 4-8, 9-16, 17-128 bytes.
_LEN_CLASS = np.array([0] + [1] * 3 + [2] * 5 + [3] * 8 + [4] * 112, dtype=np.uint8)


def _xxh3_ranges(rd: _Reader, starts: np.ndarray, lens: np.ndarray, seed: int) -> np.ndarray:
    """XXH3-64 of each byte range [start, start+len) with len <= 128.

    Ranges are grouped by XXH3's length class with one stable sort on a uint8 class (a
    radix sort), each class is computed on a contiguous slice, and the results are put
    back in one scatter. Ranges of up to 8 bytes are sliced out of one 64-bit load at the
    start (bytes past the end are never used), which is where most words fall.
    """
    out = np.empty(len(starts), dtype=np.uint64)
    cls = _LEN_CLASS[lens]
    order = np.argsort(cls, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(cls, minlength=5))))
    starts, lens = starts[order], lens[order]
    n_u = lens.astype(np.uint64)
    res = np.empty(len(starts), dtype=np.uint64)
    with np.errstate(over="ignore"):
        lo, hi = bounds[0], bounds[1]
        if hi > lo:
            res[lo:hi] = _xxh64_avalanche(np.full(hi - lo, (seed ^ _sec64(56) ^ _sec64(64)) & _M64, np.uint64))

        lo, hi = bounds[1], bounds[3]
        if hi > lo:
            first = rd.r64(starts[lo:hi])
        lo, hi = bounds[1], bounds[2]
        if hi > lo:
            w, n = first[: hi - lo], n_u[lo:hi]
            c1 = w & _MASK8
            c2 = (w >> ((n >> _U(1)) << _U(3))) & _MASK8
            c3 = (w >> ((n - _U(1)) << _U(3))) & _MASK8
            combined = (c1 << _U(16)) | (c2 << _U(24)) | c3 | (n << _U(8))
            combined ^= _U(((_sec32(0) ^ _sec32(4)) + seed) & _M64)
            res[lo:hi] = _xxh64_avalanche(combined)

        lo, hi = bounds[2], bounds[3]
        if hi > lo:
            w, n = first[lo - bounds[1] :], n_u[lo:hi]
            seed2 = seed ^ (int.from_bytes((seed & 0xFFFFFFFF).to_bytes(4, "little"), "big") << 32)
            h = (w >> ((n - _U(4)) << _U(3))) & _MASK32
            h += (w & _MASK32) << _U(32)
            h ^= _U(((_sec64(8) ^ _sec64(16)) - seed2) & _M64)
            h ^= _rotl(h, 49) ^ _rotl(h, 24)
            h *= _PRIME_MX2
            h ^= (h >> _U(35)) + n
            h *= _PRIME_MX2
            h ^= h >> _U(28)
            res[lo:hi] = h

        lo, hi = bounds[3], bounds[4]
        if hi > lo:
            s, n = starts[lo:hi], n_u[lo:hi]
            x = rd.r64(s) ^ _U(((_sec64(24) ^ _sec64(32)) + seed) & _M64)
            y = rd.r64(s + lens[lo:hi] - 8) ^ _U(((_sec64(40) ^ _sec64(48)) - seed) & _M64)
            acc = n + x.byteswap() + y + _mul128_fold64(x, y)
            res[lo:hi] = _xxh3_avalanche(acc)

        lo, hi = bounds[4], bounds[5]
        if hi > lo:
            s, n = starts[lo:hi], lens[lo:hi]
            acc = n.astype(np.uint64) * _PRIME64_1
            # Each band adds the 16-byte blocks at both ends, XXH3_len_17to128_64b.
            for lower, front, sec in ((96, 48, 96), (64, 32, 64), (32, 16, 32), (0, 0, 0)):
                sel = np.flatnonzero(n > lower) if lower else slice(None)
                ss, nn = s[sel], n[sel]
                acc[sel] += _mix16(rd, ss + front, sec, seed) + _mix16(rd, ss + nn - front - 16, sec + 16, seed)
            res[lo:hi] = _xxh3_avalanche(acc)
    out[order] = res
    return out


# Work goes in groups of whole documents of about this many tokens: every temporary of a
# group is a few hundred KiB, reused by the allocator from one group to the next. One pass
# over a whole large batch instead allocates fresh multi-MiB arrays, and page faults then
# cost more than the arithmetic (3-4x on the VMs we measured).
_GROUP = 1 << 15


def _hash_ranges(data: bytes, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    rd = _Reader(data)
    out = np.empty(len(starts), dtype=np.uint64)
    for lo in range(0, len(starts), _GROUP):
        s, n = starts[lo : lo + _GROUP], lens[lo : lo + _GROUP]
        small = n <= _MAX_NUMPY_LEN
        if n.max(initial=0) <= _MAX_NUMPY_LEN:
            out[lo : lo + _GROUP] = _xxh3_ranges(rd, s, n, HASH_SEED)
            continue
        idx = np.flatnonzero(small)
        out[lo + idx] = _xxh3_ranges(rd, s[idx], n[idx], HASH_SEED)
        view = memoryview(data)
        for i in np.flatnonzero(~small).tolist():
            b = int(s[i])
            out[lo + i] = xxhash.xxh3_64_intdigest(view[b : b + int(n[i])], HASH_SEED)
    return out


def _offsets(counts: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def _groups(offsets: np.ndarray, size: int = _GROUP):
    """(first_doc, end_doc) ranges of about `size` entries each (a longer doc alone)."""
    n = len(offsets) - 1
    d0 = 0
    while d0 < n:
        d1 = int(np.searchsorted(offsets, offsets[d0] + size, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n)
        yield d0, d1
        d0 = d1


class _SepInToken(Exception):
    pass


def _segments(docs: list, offsets: np.ndarray, sep: str):
    """Per group of documents: one UTF-8 buffer of its tokens, `sep` between them.

    Yields (d0, d1, data, starts, lens) with token byte ranges relative to `data`. Joining
    per document and then over documents keeps the per-token work inside str.join (C).
    Raises _SepInToken if a token contains `sep` (boundaries would be ambiguous).
    """
    code = ord(sep)
    for d0, d1 in _groups(offsets):
        n = int(offsets[d1] - offsets[d0])
        if n == 0:
            continue
        data = sep.join([sep.join(d) for d in docs[d0:d1] if d]).encode("utf-8")
        seps = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == code)
        if len(seps) != n - 1:
            raise _SepInToken
        starts = np.empty(n, dtype=np.int64)
        starts[0] = 0
        starts[1:] = seps + 1
        lens = np.empty(n, dtype=np.int64)
        lens[:-1] = seps - starts[:-1]
        lens[-1] = len(data) - starts[-1]
        yield d0, d1, data, starts, lens


def _slow_hashes(strings) -> np.ndarray:
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(s.encode("utf-8"), HASH_SEED) for s in strings), dtype=np.uint64
    )


def hash_strings(strings: Sequence[str]) -> np.ndarray:
    """XXH3-64 (seed 0) of each string's UTF-8 bytes, as uint64; vectorized."""
    strings = list(strings)
    parts = [strings[i : i + _GROUP] for i in range(0, len(strings), _GROUP)]
    return hash_tokens(parts).hashes


@dataclass(frozen=True)
class TokenBatch:
    """Hashed features of many documents in CSR layout: doc i is hashes[offsets[i]:offsets[i+1]].

    Flat arrays instead of a list of arrays so every kernel downstream is a handful of numpy
    calls over the whole batch. `weights`, if present, lines up with `hashes`.
    """

    hashes: np.ndarray
    offsets: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self):
        hashes = np.ascontiguousarray(self.hashes, dtype=np.uint64)
        offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(hashes):
            raise ValueError("offsets must run from 0 to len(hashes)")
        if np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must not decrease")
        object.__setattr__(self, "hashes", hashes)
        object.__setattr__(self, "offsets", offsets)
        if self.weights is not None:
            weights = np.ascontiguousarray(self.weights, dtype=np.float32)
            if weights.shape != hashes.shape:
                raise ValueError("weights must line up with hashes")
            object.__setattr__(self, "weights", weights)

    @property
    def n_docs(self) -> int:
        return len(self.offsets) - 1

    def __len__(self) -> int:
        return self.n_docs

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def doc_ids(self) -> np.ndarray:
        """The document index of every flat entry."""
        return np.repeat(np.arange(self.n_docs, dtype=np.int64), self.lengths)

    def doc(self, i: int) -> np.ndarray:
        return self.hashes[self.offsets[i] : self.offsets[i + 1]]

    def with_weights(self, weights: np.ndarray | None) -> "TokenBatch":
        return TokenBatch(self.hashes, self.offsets, weights)

    @classmethod
    def from_arrays(cls, docs: Sequence[np.ndarray], weights: Sequence[np.ndarray] | None = None) -> "TokenBatch":
        """From per-document hash arrays (tests, callers holding stored hashes)."""
        counts = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        hashes = np.concatenate([np.asarray(d, np.uint64) for d in docs]) if docs else np.zeros(0, np.uint64)
        w = None
        if weights is not None:
            w = np.concatenate([np.asarray(x, np.float32) for x in weights]) if docs else np.zeros(0, np.float32)
        return cls(hashes, _offsets(counts), w)


WeightsFn = Callable[[list[str]], "np.ndarray | Sequence[float]"]


def hash_tokens(docs: Sequence[Sequence[str]], weights_fn: WeightsFn | None = None) -> TokenBatch:
    """Hash every token of every document into one TokenBatch.

    `weights_fn` gets the batch's distinct tokens once (a list of str) and returns one
    weight per token (learned word weights, idf...); each occurrence gets its token's weight.
    """
    docs = docs if isinstance(docs, list) else list(docs)
    counts = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    offsets = _offsets(counts)
    hashes = np.empty(int(offsets[-1]), dtype=np.uint64)
    try:
        for d0, d1, data, starts, lens in _segments(docs, offsets, "\0"):
            hashes[offsets[d0] : offsets[d1]] = _hash_ranges(data, starts, lens)
    except _SepInToken:  # a token with a NUL inside: rare, do it the slow way
        hashes = _slow_hashes(t for d in docs for t in d)
    weights = None
    if weights_fn is not None:
        uniq, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        doc_of = np.searchsorted(offsets, first, side="right") - 1
        names = [docs[d][i] for d, i in zip(doc_of.tolist(), (first - offsets[doc_of]).tolist())]
        w = np.asarray(weights_fn(names), dtype=np.float32)
        if w.shape != (len(uniq),):
            raise ValueError(f"weights_fn returned shape {w.shape}, expected ({len(uniq)},)")
        weights = w[inverse.reshape(-1)]
    return TokenBatch(hashes, offsets, weights)


def shingle_hashes(docs: Sequence[Sequence[str]], n: int = 3) -> TokenBatch:
    """Hashes of `shingles(tokens, n)` for every document, without building the strings.

    Tokens are joined with the shingle separator, so an n-gram is a contiguous byte range
    of the buffer and its hash equals hash_strings(shingles(tokens, n)) exactly.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    docs = docs if isinstance(docs, list) else list(docs)
    counts = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    tok_off = _offsets(counts)
    # A doc with more than n tokens has len - n + 1 shingles; a shorter one has one (all of it).
    sh_off = _offsets(np.where(counts > n, counts - n + 1, np.minimum(counts, 1)))
    hashes = np.empty(int(sh_off[-1]), dtype=np.uint64)
    try:
        for d0, d1, data, starts, lens in _segments(docs, tok_off, SHINGLE_SEP):
            local_tok = tok_off[d0 : d1 + 1] - tok_off[d0]
            local_sh = sh_off[d0 : d1 + 1] - sh_off[d0]
            doc = np.repeat(np.arange(d1 - d0, dtype=np.int64), np.diff(local_sh))
            first = local_tok[doc] + (np.arange(local_sh[-1], dtype=np.int64) - local_sh[doc])
            last = np.minimum(first + (n - 1), local_tok[doc + 1] - 1)
            begin = starts[first]
            hashes[sh_off[d0] : sh_off[d1]] = _hash_ranges(data, begin, starts[last] + lens[last] - begin)
    except _SepInToken:  # a token with a space inside: fall back to the strings
        hashes = _slow_hashes(s for d in docs for s in shingles(d, n))
    return TokenBatch(hashes, sh_off)


def text_shingle_hashes(
    texts: Sequence[str], tokens: Sequence[Sequence[str]] | None = None, *, word_n: int = 3
) -> TokenBatch:
    """Hashed `text_shingles` of a batch: word n-grams, character n-grams for short texts."""
    texts = list(texts)
    if tokens is None:
        tokens = tokenize_many(texts)
    tokens = list(tokens)
    cleaned = [clean(t) for t in texts]
    short = [is_short(c, t) for c, t in zip(cleaned, tokens)]
    long_batch = shingle_hashes([t if not s else [] for t, s in zip(tokens, short)], word_n)
    if not any(short):
        return long_batch
    char_sets = []
    for c, s in zip(cleaned, short):
        if s:
            chars = _compact(c)
            char_sets.append(char_shingles(chars, _char_n(chars)))
        else:
            char_sets.append([])
    short_batch = hash_tokens(char_sets)
    # Each doc has features in exactly one of the two batches (empty in the other): splice
    # them by a stable sort on the document index.
    docs = np.concatenate([long_batch.doc_ids(), short_batch.doc_ids()])
    order = np.argsort(docs, kind="stable")
    hashes = np.concatenate([long_batch.hashes, short_batch.hashes])[order]
    return TokenBatch(hashes, _offsets(long_batch.lengths + short_batch.lengths))


def collapse_terms(batch: TokenBatch) -> TokenBatch:
    """Each document's distinct hashes, with their term frequency as the weight.

    With weights, the weights of repeats are summed (tf of a weighted bag); without, they are
    counted. Within a document the terms come out sorted by hash. The caller turns tf into
    tf-idf (e.g. (1 + log tf) * idf * learned multiplier) over these unique terms.
    """
    n = batch.n_docs
    lengths = batch.lengths
    counts = np.zeros(n, dtype=np.int64)
    parts_h: list[np.ndarray] = []
    parts_w: list[np.ndarray] = []
    for d0, d1 in _groups(batch.offsets):
        t0, t1 = int(batch.offsets[d0]), int(batch.offsets[d1])
        if t0 == t1:
            continue
        h = batch.hashes[t0:t1]
        doc = np.repeat(np.arange(d1 - d0, dtype=np.int64), lengths[d0:d1])
        # One stable sort on (doc, top 48 bits of the hash); exact unless two different
        # hashes of one document share those 48 bits (then a lexsort settles it).
        key = (doc.astype(np.uint64) << _U(48)) | (h >> _U(16))
        order = np.argsort(key, kind="stable")
        key, h, doc = key[order], h[order], doc[order]
        same_key = key[1:] == key[:-1]
        if np.any(same_key & (h[1:] != h[:-1])):
            order = order[np.lexsort((h, doc))]
            h, doc = batch.hashes[t0:t1][order], np.repeat(np.arange(d1 - d0), lengths[d0:d1])[order]
            same_key = (h[1:] == h[:-1]) & (doc[1:] == doc[:-1])
        first = np.flatnonzero(np.concatenate(([True], ~same_key)))
        if batch.weights is not None:
            tf = np.add.reduceat(batch.weights[t0:t1][order].astype(np.float64), first)
        else:
            tf = np.diff(np.append(first, len(h)))
        parts_h.append(h[first])
        parts_w.append(tf.astype(np.float32))
        counts[d0:d1] = np.bincount(doc[first], minlength=d1 - d0)
    hashes = np.concatenate(parts_h) if parts_h else np.zeros(0, np.uint64)
    weights = np.concatenate(parts_w) if parts_w else np.zeros(0, np.float32)
    return TokenBatch(hashes, _offsets(counts), weights)


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray, default: float = 0.0) -> np.ndarray:
    """values[k] for each query hash found in sorted `keys`, else `default` (e.g. idf by hash)."""
    keys = np.asarray(keys, np.uint64)
    values = np.asarray(values)
    query = np.asarray(query, np.uint64)
    if len(keys) == 0:
        return np.full(query.shape, default, dtype=values.dtype if values.size else np.float32)
    pos = np.searchsorted(keys, query)
    pos_c = np.minimum(pos, len(keys) - 1)
    found = keys[pos_c] == query
    return np.where(found, values[pos_c], default).astype(values.dtype, copy=False)
