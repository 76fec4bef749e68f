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
from itertools import filterfalse
from typing import Callable, Iterable, Sequence

import numpy as np

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
    return _finish(_fold(text))


def _finish(text: str) -> str:
    """`normalize` of a `_fold`ed text: whitespace collapsed, the CJK space rule."""
    text = _collapse_whitespace(text)
    return _SPACE_NEAR_CJK.sub("", text) if not text.isascii() and _ANY_CJK.search(text) else text


# ASCII characters str.split() separates at, other than the space itself.
_ASCII_OTHER_SPACES = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"


def _collapse_whitespace(text: str) -> str:
    """`" ".join(text.split())`, returning an ASCII text that already is single-spaced as
    it is: splitting and joining a 400-word text costs ~35 us (a string object per word),
    checking it ~2 us, and most texts need no change."""
    if text.isascii() and "  " not in text and not text.startswith(" ") and not text.endswith(" "):
        data = text.encode("ascii")
        if len(data.translate(None, _ASCII_OTHER_SPACES)) == len(data):
            return text
    return " ".join(text.split())


# `_PUNCT_FOLD` as a regex: str.translate with a dict costs ~45 ns a character on any
# non-ASCII text (a dict lookup each), while most texts hold a handful of these characters.
_PUNCT_CHARS = re.compile("[" + "".join(re.escape(chr(c)) for c in _PUNCT_FOLD) + "]")


def _fold(text: str) -> str:
    """`normalize` less the whitespace collapse and the CJK space rule: NFKC, punctuation,
    casefold. ASCII text gets the same result faster: NFKC leaves it alone, casefold is
    lower, and the one ASCII character `_PUNCT_FOLD` maps is the backtick."""
    if text.isascii():
        return (text.replace("`", "'") if "`" in text else text).lower()
    text = unicodedata.normalize("NFKC", text)
    for char in set(_PUNCT_CHARS.findall(text)):  # the replacements hold none of the keys
        text = text.replace(char, _PUNCT_FOLD[ord(char)] or "")
    return text.lower() if text.isascii() else text.casefold()  # one less pass if ASCII now


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
    return _clean_unmarked(_unmark(text))


def _clean_unmarked(text: str) -> str:
    text = normalize(text)
    if _has_link(text):
        text = normalize(_drop_links(text))
    return text


def _unmark(text: str) -> str:
    if "<" in text:
        text = _HTML_BLOCK.sub(" ", text)
        text = _HTML_COMMENT.sub(" ", text)
        text = _HTML_TAG.sub(" ", text)
    if "&" in text:
        text = html.unescape(text)
    return text


def _has_link(text: str) -> bool:
    return "@" in text or "/" in text or "www." in text


def _drop_links(text: str) -> str:
    """URLs and e-mail addresses of a normalised (casefolded, single-spaced) text replaced
    by spaces.

    Neither regex starts with a literal, so a `sub` over a whole text is a slow scan (~50 us
    for 400 words). Neither can match across a space, and a match needs "://" or "www." (a
    URL) or "@" (an address): so each runs only on the space-delimited chunks holding one,
    with the same result (at a chunk's ends its lookarounds see a space or the end of the
    string, both outside their classes).
    """
    if "://" in text or "www." in text:
        text = _sub_chunks(_URL, text, ("://", "www."))
    if "@" in text:
        text = _sub_chunks(_EMAIL, text, ("@",))
    return text


def _sub_chunks(pattern: re.Pattern, text: str, needles: tuple[str, ...]) -> str:
    spans = set()
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            end = text.find(" ", at)
            end = len(text) if end < 0 else end
            spans.add((text.rfind(" ", 0, at) + 1, end))
            at = text.find(needle, end)
    pieces, done = [], 0
    for start, end in sorted(spans):
        pieces.append(text[done:start])
        pieces.append(pattern.sub(" ", text[start:end]))
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


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
# `_TOKEN` defines the tokens (what `finditer` over it yields on `clean(text)`), but its
# per-match Python (`match.group`, a branch) costs more than the matching, and the
# matching itself, ~150 ns a token, more than all the rest of tokenising. So `tokenize`:
# - text with CJK: cuts the text at Han runs (no other alternative can match a Han
#   character, so each piece tokenises alone): jieba for those, one `findall` of the two
#   other alternatives (`_WORD`, no groups) for the rest;
# - other text (`_plain_words`), in numpy over the code points: a character that is not
#   alphanumeric ([^\W_]) can only be inside a token if it is one of . , : ' between two
#   alphanumerics; every other one becomes a space, and str.split gives the tokens. Only
#   the few chunks holding one of the four ("1,000", "it's", "e.g") go through `_WORD`.
# A test holds both paths to `_TOKEN` on random texts.
_HAN_RUN = re.compile(rf"([{_HAN}]+)")
_WORD = re.compile(r"\d+(?:[.,:]\d+)+|[^\W_]+(?:'[^\W_]+)*")
# Character classes: 0 other, 1 alphanumeric, 2 one of . , : ' (ASCII; bytes.translate).
_ASCII_CLASS = bytes(1 if chr(c).isalnum() else 2 if chr(c) in ".,:'" else 0 for c in range(128)) + bytes(128)
_ASCII_CLASS_NP = np.frombuffer(_ASCII_CLASS[:128], dtype=np.uint8)
_ASCII_SPACES = bytes(c if _ASCII_CLASS[c] else 32 for c in range(256))  # non-word -> space
_CJK_RANGES = ((0x2E80, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0x20000, 0x2EBEF))  # _CJK, _HAN

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
    only ever sees Chinese and English words stay whole. (How, fast: see `_HAN_RUN`.)
    """
    # Whitespace is not collapsed (`normalize` would) where no CJK rule applies: no token
    # holds any.
    folded = _fold(_unmark(text))
    if folded.isascii():  # `_fold` of ASCII is ASCII, and does not change it again
        if "://" in folded or "www." in folded or "@" in folded:
            folded = _drop_links(" ".join(folded.split()))
        data = folded.encode("ascii")
        classes = data.translate(_ASCII_CLASS)
        if b"\x02" in classes:
            tokens = _plain_words(np.frombuffer(data, np.uint8), np.frombuffer(classes, np.uint8))
        else:  # none of . , : ' at all: every other character is a separator
            tokens = data.translate(_ASCII_SPACES).decode("ascii").split()
    else:
        points = _code_points(folded)
        top = int(points.max(initial=0))
        if top >= _CJK_RANGES[0][0] and any(
            np.any((points >= lo) & (points <= hi)) for lo, hi in _CJK_RANGES if top >= lo
        ):  # the CJK space rule may apply: all of `clean`
            cleaned = _finish(folded)
            if _has_link(cleaned):
                cleaned = normalize(_drop_links(cleaned))
            tokens = []
            for i, part in enumerate(_HAN_RUN.split(cleaned)):
                if i & 1:  # [other, han, other, han, ..., other]
                    tokens.extend(_cut_han(part))
                elif part:
                    tokens.extend(_WORD.findall(part))
        else:
            if _has_link(folded):  # as `clean` does, `_fold` again (NFKC after casefold)
                points = _code_points(_fold(_drop_links(" ".join(folded.split()))))
            table = _bmp_classes()
            classes = table[np.minimum(points, 0xFFFF)]
            astral = np.flatnonzero(points > 0xFFFF)  # emoji and the like: one by one
            classes[astral] = [chr(c).isalnum() for c in points[astral].tolist()]
            tokens = _plain_words(points, classes)
    if drop_stop_words:
        tokens = list(filterfalse(STOP_WORDS.__contains__, tokens))
    return tokens


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


@lru_cache(maxsize=1)
def _bmp_classes() -> np.ndarray:
    """`_ASCII_CLASS` for the whole Basic Multilingual Plane (64 KiB, ~10 ms once)."""
    table = np.frombuffer(bytes(map(str.isalnum, map(chr, range(0x10000)))), dtype=np.uint8).copy()
    table[:128] = _ASCII_CLASS_NP
    return table


def _plain_words(points: np.ndarray, classes: np.ndarray) -> list[str]:
    """`_WORD.findall` of a text without Han characters, given as its code points (uint8
    for ASCII, uint32 otherwise) and their classes (see `_ASCII_CLASS`); see the note
    above `_HAN_RUN`."""
    n = len(points)
    if n == 0:
        return []
    word = classes == 1
    inner = classes == 2
    inner[0] = inner[-1] = False
    inner[1:-1] &= word[:-2] & word[2:]
    keep = word | inner
    spaced = np.where(keep, points, points.dtype.type(32)).tobytes()
    text = spaced.decode("ascii") if points.dtype == np.uint8 else spaced.decode("utf-32-le", "surrogatepass")
    marks = np.flatnonzero(inner)
    if len(marks) == 0:
        return text.split()
    # The chunks (runs of kept characters, spaces around) holding one of the four: `_WORD`
    # splits them.
    pieces: list[str] = []
    end = 0
    for pos in marks.tolist():
        if pos < end:
            continue  # in the chunk just done
        start = text.rfind(" ", 0, pos) + 1
        pieces.append(text[end:start])
        end = text.find(" ", pos)
        if end < 0:
            end = n
        pieces.append(" ".join(_WORD.findall(text, start, end)))
    pieces.append(text[end:])
    return " ".join(pieces).split()


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
    if tokens is None:
        tokens = tokenize(text)
    chars = short_text_shingles(text, len(tokens))
    return chars if chars is not None else shingles(tokens, word_n)


def short_text_shingles(text: str, n_tokens: int) -> list[str] | None:
    """The character n-grams of a text too short for word n-grams (`is_short`, given its
    token count), or None for a text that is not short."""
    cleaned = clean(text)
    if not is_short(cleaned, range(n_tokens)):
        return None
    chars = _compact(cleaned)
    return char_shingles(chars, _char_n(chars))


# --------------------------------------------------------------------------------------
# Hashing: strings -> uint64, in numpy
# --------------------------------------------------------------------------------------
# Why not a library hash: calling one per token (xxhash, ~80 ns of interpreter time) and
# mapping tokens to uniques (a dict, or np.unique, which sorts strings) each cost more than
# the whole SimHash + MinHash budget of ~15 ns a token. So the batch is joined into one byte
# buffer and every token is hashed at once in numpy. We used to evaluate XXH3-64 that way,
# but XXH3 is built on 64x64->128-bit products, which numpy lacks: emulating them with
# 32-bit halves, and branching over XXH3's five length classes, made hashing most of the
# signing time (~20 us of ~40 for a 400-token document).
#
# "lanes64" is designed for numpy instead, with only native uint64 arithmetic (mod 2^64):
#
#     acc = KEY ^ seed ^ n * (2^56 + 1) ^ L0            n = the length in bytes, L0 its
#                                                       first 8 bytes (little-endian,
#                                                       zero-padded if n < 8)
#     for each further lane i = 1 .. ceil(n / 8) - 1, the 8 bytes at min(8 i, n - 8)
#     (so the last lane is the token's last 8 bytes), Li:
#         acc ^= fmix64(Li ^ i * LANE_KEY)
#     h = fmix64(acc)                                   fmix64: MurmurHash3's finaliser
#
# - Stable: a function of the UTF-8 bytes alone (no per-process salt, no CPU-dependent
#   path), the same on every machine and in every process; `lanes64` below is the
#   reference in plain Python, and tests hold the numpy kernel to it and pin values.
# - Good avalanche: fmix64 is a bijection in which every input bit flips every output bit
#   with probability ~1/2; every byte reaches the final fmix64 either directly (the first
#   lane) or through its own lane's fmix64, keyed by the lane's position, so equal or
#   swapped lanes do not cancel (a test checks the bit balance and the avalanche).
# - Collision-free where it matters most: for one length, a one-lane token (<= 8 bytes,
#   most words) maps bijectively; tokens of different lengths <= 7 bytes differ in the top
#   byte before the mix (n * 2^56), so words of up to 7 bytes never collide at all.
#   Otherwise collisions are as for a random 64-bit function (not a cryptographic hash:
#   someone can construct colliding tokens on purpose, as with XXH3).
# - Fast: a lane is one gather from an unaligned strided view of the buffer; only the
#   first lane of a token under 8 bytes is masked (a 9-entry table). The further lanes
#   are independent of one another (XXH3's long-input layout, in small), so the lanes of
#   all longer tokens of a batch go through one gather, one fmix64 and one xor-reduceat,
#   however long the tokens (web page lines are hundreds of bytes).
# Hashing 400 tokens takes ~5 us (2-core VM), where the XXH3 port took ~20; joining them
# into the buffer (str.join, ~13 ns a token) and finding the separators take ~7 more.

HASH_SEED = 0
HASH_VERSION = "lanes64-fmix-s0"

_M64 = 0xFFFFFFFFFFFFFFFF
_U = np.uint64
_LANES_KEY = 0x243F6A8885A308D3  # the first hex digits of pi: any fixed constant would do
_LEN_MUL = (1 << 56) + 1
_LANE_KEY = 0x9E3779B97F4A7C15  # 2^64 / golden ratio, odd: lane i is keyed with i times it
_FMIX1 = 0xFF51AFD7ED558CCD
_FMIX2 = 0xC4CEB9FE1A85EC53
_LANE_MASK = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=np.uint64)  # r valid bytes


def _fmix64_int(h: int) -> int:
    h ^= h >> 33
    h = (h * _FMIX1) & _M64
    h ^= h >> 33
    h = (h * _FMIX2) & _M64
    return h ^ (h >> 33)


def lanes64(data: bytes, seed: int = HASH_SEED) -> int:
    """The token hash of some bytes, in plain Python: the definition `hash_tokens` follows."""
    data = bytes(data)
    n = len(data)
    acc = (_LANES_KEY ^ seed ^ (n * _LEN_MUL) ^ int.from_bytes(data[:8], "little")) & _M64
    for i in range(1, -(-n // 8)):
        at = min(8 * i, n - 8)
        acc ^= _fmix64_int(int.from_bytes(data[at : at + 8], "little") ^ ((i * _LANE_KEY) & _M64))
    return _fmix64_int(acc)


def _fmix64(h: np.ndarray, tmp: np.ndarray) -> None:
    """fmix64 in place (tmp: scratch of the same shape)."""
    np.right_shift(h, _U(33), out=tmp)
    h ^= tmp
    h *= _U(_FMIX1)
    np.right_shift(h, _U(33), out=tmp)
    h ^= tmp
    h *= _U(_FMIX2)
    np.right_shift(h, _U(33), out=tmp)
    h ^= tmp


def _lanes64_ranges(lanes: np.ndarray, starts: np.ndarray, lens: np.ndarray, seed: int) -> np.ndarray:
    """lanes64 of each byte range [start, start + len) of a buffer.

    `lanes` is the buffer seen as a uint64 at every byte offset (strides of 1), with at
    least 8 bytes of padding after the last range. Gathers index it (`lanes[starts]`):
    np.take first copies a non-contiguous source whole, 8 bytes per byte of the buffer.
    """
    acc = lens.astype(np.uint64)
    acc *= _U(_LEN_MUL)
    acc ^= _U((_LANES_KEY ^ seed) & _M64)
    tmp = lanes[starts]
    tmp &= _LANE_MASK[np.minimum(lens, 8)]
    acc ^= tmp
    idx = np.flatnonzero(lens > 8)
    if len(idx):  # the further lanes of the longer tokens, all at once
        s, n = starts[idx], lens[idx]
        if n.max() <= 16:  # 9 to 16 bytes, the usual case: one more lane, the last 8 bytes
            s += n
            s -= 8
            part = lanes[s]
            part ^= _U(_LANE_KEY)
            _fmix64(part, s.view(np.uint64))
        else:
            extra = ((n + 7) >> 3) - 1  # lanes after the first, >= 1
            first = np.cumsum(extra) - extra
            lane = np.arange(1, int(extra.sum()) + 1, dtype=np.int64) - np.repeat(first, extra)
            pos = np.minimum(8 * lane, np.repeat(n - 8, extra))
            pos += np.repeat(s, extra)
            lane_keys = lane.astype(np.uint64)
            lane_keys *= _U(_LANE_KEY)
            part = lanes[pos]
            part ^= lane_keys
            _fmix64(part, lane_keys)
            part = np.bitwise_xor.reduceat(part, first)
        acc[idx] ^= part
    _fmix64(acc, tmp)
    return acc


# Work goes in groups of whole documents of about this many tokens: every temporary of a
# group is a few hundred KiB, reused by the allocator from one group to the next. One pass
# over a whole large batch instead allocates fresh multi-MiB arrays, and page faults then
# cost more than the arithmetic (3-4x on the VMs we measured).
_GROUP = 1 << 15


def _hash_ranges(data: bytes, starts: np.ndarray, lens: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return _hash_padded(data + bytes(16), starts, lens, out)


def _hash_padded(padded, starts: np.ndarray, lens: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`_hash_ranges` of a buffer (bytes, or a uint8 array) that ends with 16 zero bytes."""
    lanes = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    out = np.empty(len(starts), dtype=np.uint64) if out is None else out
    with np.errstate(over="ignore"):
        for lo in range(0, len(starts), _GROUP):
            out[lo : lo + _GROUP] = _lanes64_ranges(lanes, starts[lo : lo + _GROUP], lens[lo : lo + _GROUP], HASH_SEED)
    return out


def _offsets(counts: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def doc_ranges(offsets: np.ndarray, size: int = _GROUP):
    """(first_doc, end_doc) ranges of about `size` entries each (a longer doc alone): how
    every kernel here bounds its temporaries on a big batch."""
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
    for d0, d1 in doc_ranges(offsets):
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


def _encoded_ranges(strings: list[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The strings' UTF-8 bytes back to back, and their byte ranges (no separator: for
    strings that may hold any character; a Python step per string)."""
    encoded = [s.encode("utf-8") for s in strings]
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return b"".join(encoded), _offsets(lens)[:-1], lens


def hash_strings(strings: Sequence[str]) -> np.ndarray:
    """`lanes64` of each string's UTF-8 bytes, as uint64; vectorized."""
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

    def select(self, keep: np.ndarray) -> "TokenBatch":
        """The entries where `keep` is true, every document kept in place (maybe emptied)."""
        at = np.flatnonzero(keep)
        weights = self.weights[at] if self.weights is not None else None
        # A document now starts after the kept entries before its old start.
        return TokenBatch(self.hashes[at], np.searchsorted(at, self.offsets), weights)

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
            _hash_ranges(data, starts, lens, hashes[offsets[d0] : offsets[d1]])
    except _SepInToken:  # a token with a NUL inside: rare, do it the slow way
        hashes = _hash_ranges(*_encoded_ranges([t for d in docs for t in d]))
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


# --------------------------------------------------------------------------------------
# Texts -> token hashes, without token strings
# --------------------------------------------------------------------------------------
# `hash_tokens(tokenize_many(texts))` makes a Python string of every token (str.split, the
# stop-word filter) only for `hash_tokens` to join them into one buffer again, and
# `tokenize` looks for links with a substring search per needle per text: most of the cost
# of ingesting a text. `hash_texts` gets the same hashes from the folded texts' bytes: the
# texts of a group back to back in one buffer, lowercased, links looked for, token byte
# ranges found and hashed, stop words dropped by hash, each a few numpy calls over the
# whole group. Texts that do not fold to ASCII (CJK needs jieba, other scripts Unicode's
# classes) go through `tokenize`, and their hashes are spliced in. A test holds
# `hash_texts` to `hash_tokens(tokenize_many(texts))`.

# Characters `_fold` maps to ASCII whatever surrounds them: what NFKC makes of each is
# ASCII or punctuation, with no combining mark, and neither that nor any ASCII character
# is the second of a canonical composition pair, so in a text of ASCII and these NFKC has
# nothing to reorder or compose across characters (a test checks this against all of
# Unicode). Curly quotes and dashes are in most English prose: with this table such a text
# folds to ASCII with a str.replace per distinct character, where `_fold` (NFKC, a regex
# scan and a casefold of the whole str) costs ~40 us for 400 words.
_ASCII_FOLD = {
    char: _fold(char)
    for char in map(chr, sorted(set(_PUNCT_FOLD) | set(range(0xFF01, 0xFF5F))))
    if _fold(char).isascii() and not any(map(unicodedata.combining, unicodedata.normalize("NFKD", char)))
}
# The usual ones first: `in` costs ~0.3 us a text, finding which ones a text holds ~5.
_COMMON_FOLDS = [(c, _ASCII_FOLD[c]) for c in "\u2019\u201c\u201d\u2018\u2014\u2013\u2026\u00a0"]
_ASCII_BYTES = bytes(range(128))


def _unmarked_ascii(text: str) -> bytes | None:
    """`_unmark(text)`, folded as `_fold` does but for case and backticks (the group does
    those), as ASCII bytes; None if it does not fold to ASCII."""
    text = _unmark(text)
    if text.isascii():
        return text.encode("ascii")
    for char, ascii in _COMMON_FOLDS:
        if char in text:
            text = text.replace(char, ascii)
    if text.isascii():
        return text.encode("ascii")
    # The distinct other non-ASCII characters: the UTF-8 bytes less the ASCII ones, decoded.
    others = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES)
    for char in set(others.decode("utf-8", "surrogatepass")):
        ascii = _ASCII_FOLD.get(char)
        if ascii is None:
            return None
        text = text.replace(char, ascii)
    return text.encode("ascii")


# Byte codes of folded ASCII text: 1 alphanumeric, 2 one of . , : ' (in a token between two
# alphanumerics), 3 "/" or "@" (links), 0 the rest, which only separates tokens. One
# bytes.translate gives them; the few bytes coded 2 or 3 are then looked at one by one.
_BYTE_CODES = bytes(_ASCII_CLASS[c] or 3 * (chr(c) in "/@") for c in range(256))


def _group_bytes(group: list[bytes]) -> tuple[bytes, bytes]:
    """The texts lowercased and backticks made apostrophes (`_fold` of ASCII), a space
    before and after each, then 16 zero bytes (`_hash_padded`); and their byte codes."""
    data = b" ".join([b"", *group, bytes(16)]).lower()
    if b"`" in data:
        data = data.replace(b"`", b"'")
    return data, data.translate(_BYTE_CODES)


def _linked_texts(data: np.ndarray, special: np.ndarray, text_starts: np.ndarray) -> list[int]:
    """The texts holding "://", "www." or "@" (those `tokenize` takes links out of), from
    the positions of the buffer's . , : ' / @: a handful of bytes per text, where a search
    for each needle in each text reads all of it (~3 us for 400 words, a needle). (A
    position 1 or 2 looks back into the zero padding at the end: not a "w".)"""
    char = data[special]
    slash = (char == ord("/")) & (data[special - 1] == ord(":")) & (data[special + 1] == ord("/"))
    dot = (char == ord(".")) & (data[special - 1] == ord("w")) & (data[special - 2] == ord("w"))
    dot &= data[special - 3] == ord("w")
    found = special[(char == ord("@")) | slash | dot]
    if len(found) == 0:
        return []
    return np.unique(np.searchsorted(text_starts, found, side="right") - 1).tolist()


_IS_DIGIT = np.zeros(256, bool)
_IS_DIGIT[ord("0") : ord("9") + 1] = True


def _ascii_token_ranges(data: np.ndarray, codes: np.ndarray, special: np.ndarray):
    """The matches of `_WORD` in a `_group_bytes` buffer, in numpy: (starts, lens, merged),
    where the runs numbered `merged` are parts of the token before them, to be dropped.

    Tokens are runs of alphanumerics, glued by the marks (one of . , : ' between two
    alphanumerics) that `_WORD`'s left-to-right scan takes in. An apostrophe after a letter
    always is ("it's"), and a . , or : without a digit on both sides never is ("e.g"):
    those are settled before the runs are found. The rest, next to digits, need the runs
    around them (`_number_marks`).
    """
    alnum = codes == 1
    at = special[(codes[special] == 2) & alnum[special - 1] & alnum[special + 1]]
    if len(at):
        apostrophe = data[at] == ord("'")
        left_digit = _IS_DIGIT[data[at - 1]]
        alnum[at[apostrophe & ~left_digit]] = True
        at = at[left_digit & (apostrophe | _IS_DIGIT[data[at + 1]])]
    edges = np.flatnonzero(alnum[1:] != alnum[:-1])
    edges += 1
    starts = edges[0::2].copy()  # runs [start, start + len)
    lens = edges[1::2] - starts
    merged = _number_marks(data, edges, starts, lens, at) if len(at) else None
    return starts, lens, merged


def _number_marks(data: np.ndarray, edges: np.ndarray, starts: np.ndarray, lens: np.ndarray, at: np.ndarray):
    """Glues the runs (`edges`: [start, end, ...]) around the marks `at` as `_WORD` does,
    where a digit precedes each mark (and follows it, for . , :): the first run of a token
    gets the token's length, in place; returns the runs it took in.

    The scan is in `\\d+([.,:]\\d+)+` (a number) or in a word. A . , or : joins when the run
    before it is all digits and the run after starts with one, unless that run before ends
    a word joined by an apostrophe ("1'2.3" -> "1'2", "3"). An apostrophe joins unless the
    run before it is all digits and ends a number ("1.5's" -> "1.5", "s"). A number ends
    with its last digit ("1.5a" -> "1.5", "a"): a cut inside a run, which then starts
    there. The two "unless" make a mark depend on the one before, settled by iterating to
    the fixed point (the chains are short). A run may hold apostrophes glued already: then
    it is not all digits, which is what the scan makes of it too ("a'1.5" -> "a'1", "5").
    Lengths and starts change in place, so no array of every run is copied for a few marks.
    """
    apostrophe = data[at] == ord("'")
    i = np.searchsorted(edges, at)  # edges[i] == at ends the run before the mark
    left_digits, left_size = _digit_prefixes(data, edges[i - 1], at)
    right_digits, right_size = _digit_prefixes(data, at + 1, edges[i + 2])
    all_left = left_digits == left_size
    joins = apostrophe | (all_left & (right_digits > 0))
    block = np.zeros(len(at), dtype=bool)
    block[1:] = (i[1:] == i[:-1] + 2) & (apostrophe[1:] != apostrophe[:-1]) & (~apostrophe[1:] | all_left[1:])
    if block.any():
        candidate = joins
        while True:
            new = candidate.copy()
            new[1:] &= ~(block[1:] & joins[:-1])
            if np.array_equal(new, joins):
                break
            joins = new
    cut = joins & ~apostrophe & (right_digits < right_size)
    left = i // 2  # the run before each mark
    linked = left[joins & ~cut]  # runs glued to the next one, ascending
    heads = tails = linked
    if len(linked):  # chains of glued runs: the first takes the length of all
        step = np.flatnonzero(np.diff(linked) != 1)
        heads = linked[np.concatenate(([0], step + 1))]
        tails = linked[np.concatenate((step, [len(linked) - 1]))] + 1
        lens[heads] = starts[tails] + lens[tails] - starts[heads]
    if cut.any():  # the token holding the run before ends at the cut, the run after starts there
        before, after, point = left[cut], left[cut] + 1, at[cut] + 1 + right_digits[cut]
        head = before.copy()
        if len(tails):
            chain = np.minimum(np.searchsorted(tails, before), len(tails) - 1)
            ends_chain = tails[chain] == before
            head[ends_chain] = heads[chain[ends_chain]]
        end = starts[after] + lens[after]
        lens[head] = point - starts[head]
        starts[after] = point
        lens[after] = end - point
    return linked + 1


def _digit_prefixes(data: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How many digits each range [begin, end) of data starts with, and its length."""
    size = end - begin
    first = np.cumsum(size) - size
    local = np.arange(int(size.sum()), dtype=np.int64) - np.repeat(first, size)
    non_digit = ~_IS_DIGIT[data[np.repeat(begin, size) + local]]
    return np.minimum.reduceat(np.where(non_digit, local, np.repeat(size, size)), first), size


@lru_cache(maxsize=1)
def _stop_word_table():
    """The ASCII STOP_WORDS' hashes in a table indexed by some bits of the hash, no two in
    one slot.

    A hash then is a stop word's iff its slot's entry equals it: a gather and a compare
    per token, where np.isin sorts and a binary search takes ~7 steps. Empty slots hold a
    stop word's hash of another slot, which no hash of theirs can equal.
    """
    words = sorted(w.encode("ascii") for w in STOP_WORDS if w.isascii())
    hashes = np.array([lanes64(w) for w in words], dtype=np.uint64)
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    for bits in range(max(len(words) - 1, 1).bit_length(), 21):
        mask = _U((1 << bits) - 1)
        for shift in range(64 - bits + 1):
            slot = ((hashes >> _U(shift)) & mask).astype(np.intp)
            if len(np.unique(slot)) == len(slot):
                table = np.full(1 << bits, hashes[0], dtype=np.uint64)
                table[slot] = hashes
                table_lengths = np.full(1 << bits, lengths[0], dtype=np.uint8)
                table_lengths[slot] = lengths
                return _U(shift), mask, table, table_lengths, frozenset(words)
    raise AssertionError("no collision-free slot bits for the stop words")


def _stop_words(data: np.ndarray, starts: np.ndarray, lens: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Which tokens are stop words, exactly: the same hash and length as one is the same
    bytes up to 8 bytes (`lanes64` is a bijection there); longer ones are compared."""
    shift, mask, table, table_lengths, words = _stop_word_table()
    slot = (hashes >> shift) & mask
    slot = slot.astype(np.intp)
    stop = table[slot] == hashes
    stop &= table_lengths[slot] == lens
    for i in np.flatnonzero(stop & (lens > 8)).tolist():
        stop[i] = data[starts[i] : starts[i] + lens[i]].tobytes() in words
    return stop


# Bytes of text per group: temporaries of up to about a MiB (see `_GROUP`); smaller groups
# pay numpy's per-call cost (~100 calls a group) more often.
_TEXT_GROUP = 1 << 18


def hash_texts(texts: Sequence[str]) -> TokenBatch:
    """`hash_tokens(tokenize_many(texts))`, bit for bit, without token strings for texts
    that fold to ASCII (see the note above `_ASCII_FOLD`)."""
    texts = texts if isinstance(texts, list) else list(texts)
    counts = np.zeros(len(texts), dtype=np.int64)
    fast: list[np.ndarray] = []
    slow_ids: list[int] = []
    slow_tokens: list[list[str]] = []
    group: list[bytes] = []
    ids: list[int] = []
    size = 0
    for i, text in enumerate(texts):
        data = _unmarked_ascii(text)
        if data is None:
            slow_ids.append(i)
            slow_tokens.append(tokenize(text))
            continue
        group.append(data)
        ids.append(i)
        size += len(data) + 1
        if size >= _TEXT_GROUP:
            fast.append(_hash_ascii_group(group, ids, counts))
            group, ids, size = [], [], 0
    if group:
        fast.append(_hash_ascii_group(group, ids, counts))
    hashes = np.concatenate(fast) if fast else np.zeros(0, dtype=np.uint64)
    if slow_ids:
        slow = hash_tokens(slow_tokens)
        counts[slow_ids] = slow.lengths
        at_slow = np.zeros(len(texts), dtype=bool)
        at_slow[slow_ids] = True
        at_slow = np.repeat(at_slow, counts)
        spliced = np.empty(len(at_slow), dtype=np.uint64)
        spliced[~at_slow] = hashes
        spliced[at_slow] = slow.hashes
        hashes = spliced
    return TokenBatch(hashes, _offsets(counts))


def _hash_ascii_group(group: list[bytes], ids: list[int], counts: np.ndarray) -> np.ndarray:
    """Token hashes of `_unmarked_ascii` texts, stop words out, in order; counts[ids] set."""
    sizes = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
    text_starts = np.cumsum(sizes + 1) - sizes
    data, codes = _group_bytes(group)
    special = np.flatnonzero(np.frombuffer(codes, dtype=np.uint8) >= 2)
    linked = _linked_texts(np.frombuffer(data, dtype=np.uint8), special, text_starts)
    if linked:  # `_drop_links`, the new texts spliced in
        data_parts, code_parts, done = [], [], 0
        for j in linked:
            start, end = int(text_starts[j]), int(text_starts[j] + sizes[j])
            # `tokenize` collapses whitespace first (~40 us for 400 words), which changes no
            # token: no link pattern matches or looks behind/ahead for whitespace.
            text = _drop_links(data[start:end].decode("ascii")).encode("ascii")
            data_parts += [data[done:start], text]
            code_parts += [codes[done:start], text.translate(_BYTE_CODES)]
            sizes[j] = len(text)
            done = end
        data = b"".join([*data_parts, data[done:]])
        codes = b"".join([*code_parts, codes[done:]])
        text_starts = np.cumsum(sizes + 1) - sizes
        special = np.flatnonzero(np.frombuffer(codes, dtype=np.uint8) >= 2)
    data_np = np.frombuffer(data, dtype=np.uint8)
    starts, lens, merged = _ascii_token_ranges(data_np, np.frombuffer(codes, dtype=np.uint8), special)
    hashes = _hash_padded(data, starts, lens)
    drop = _stop_words(data_np, starts, lens, hashes)
    if merged is not None:
        drop[merged] = True
    # np.flatnonzero and a gather: indexing with a mask this random costs 3x as much.
    kept = np.flatnonzero(~drop)
    first = np.searchsorted(kept, np.searchsorted(starts, text_starts))  # of each text
    counts[ids] = np.diff(np.append(first, len(kept)))
    return hashes[kept]


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
        hashes = _hash_ranges(*_encoded_ranges([s for d in docs for s in shingles(d, n)]))
    return TokenBatch(hashes, sh_off)


def text_shingle_hashes(
    texts: Sequence[str], tokens: Sequence[Sequence[str]] | None = None, *, word_n: int = 3
) -> TokenBatch:
    """Hashed `text_shingles` of a batch: word n-grams, character n-grams for short texts."""
    texts = list(texts)
    if tokens is None:
        tokens = tokenize_many(texts)
    tokens = list(tokens)
    char_sets = [short_text_shingles(text, len(t)) for text, t in zip(texts, tokens)]
    long_batch = shingle_hashes([t if c is None else [] for t, c in zip(tokens, char_sets)], word_n)
    if all(c is None for c in char_sets):
        return long_batch
    short_batch = hash_tokens([c or [] for c in char_sets])
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
    for d0, d1 in doc_ranges(batch.offsets):
        t0, t1 = int(batch.offsets[d0]), int(batch.offsets[d1])
        if t0 == t1:
            continue
        h = batch.hashes[t0:t1]
        doc = np.repeat(np.arange(d1 - d0, dtype=np.int64), lengths[d0:d1])
        # One sort on (doc, top 48 bits of the hash); exact unless two different hashes of
        # one document share those 48 bits, or the group has more than 2^16 documents (many
        # empty ones): then a lexsort settles it. Counting does not care how equal keys
        # end up ordered, so it takes numpy's default sort (introsort, ~25% faster here);
        # summing weights does (float order), so it keeps the stable one.
        key = (doc.astype(np.uint64) << _U(48)) | (h >> _U(16))
        order = np.argsort(key, kind="stable" if batch.weights is not None else None)
        key, h, doc = key[order], h[order], doc[order]
        same_key = key[1:] == key[:-1]
        if d1 - d0 > 1 << 16 or np.any(same_key & (h[1:] != h[:-1])):
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


# `lookup` finds hashes in a sorted key array (TF-IDF models: ~350,000 keys) for every
# token of a batch. np.searchsorted is a binary search per query, ~150 ns each once the
# keys outgrow the cache. The keys are hashes, spread evenly over the 64-bit range, so an
# index of where each value of their top bits starts puts a query within about one key of
# its place: one or two gathers. Indexes are kept for the last few key arrays seen.
_BUCKET_INDEXES: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}


def _bucket_index(keys: np.ndarray) -> tuple[np.ndarray, int]:
    cached = _BUCKET_INDEXES.get(id(keys))
    if cached is not None and cached[0] is keys:
        return cached[1], cached[2]
    bits = max(int(len(keys) - 1).bit_length(), 1)
    counts = np.bincount((keys >> _U(64 - bits)).astype(np.int64), minlength=1 << bits)
    start = np.zeros((1 << bits) + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    if len(_BUCKET_INDEXES) >= 4:
        _BUCKET_INDEXES.pop(next(iter(_BUCKET_INDEXES)))
    _BUCKET_INDEXES[id(keys)] = (keys, start, bits)  # holds `keys`: the id stays its own
    return start, bits


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray, default: float = 0.0) -> np.ndarray:
    """values[k] for each query hash found in sorted `keys`, else `default` (e.g. idf by hash)."""
    keys = np.asarray(keys, np.uint64)
    values = np.asarray(values)
    query = np.asarray(query, np.uint64)
    if len(keys) == 0:
        return np.full(query.shape, default, dtype=values.dtype if values.size else np.float32)
    if len(keys) < 4096 or query.size < 1024:
        pos = np.searchsorted(keys, query)
        pos_c = np.minimum(pos, len(keys) - 1)
        found = keys[pos_c] == query
        return np.where(found, values[pos_c], default).astype(values.dtype, copy=False)
    start, bits = _bucket_index(keys)
    flat = query.reshape(-1)
    bucket = (flat >> _U(64 - bits)).astype(np.int64)
    pos, end = start[bucket], start[bucket + 1]
    out = np.full(flat.shape, default, dtype=values.dtype)
    todo = np.flatnonzero(pos < end)
    while len(todo):  # a bucket holds ~1 key: one round settles almost every query
        at = pos[todo]
        hit = keys[at] == flat[todo]
        out[todo[hit]] = values[at[hit]]
        at += 1
        more = ~hit & (at < end[todo])
        todo = todo[more]
        pos[todo] = at[more]
    return out.reshape(query.shape)
