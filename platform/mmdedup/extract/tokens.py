"""Words of a text: the stop-word lists and the tokenizer (jieba for Han runs, a word
regex for everything else), and the version string signatures carry for them.

Tokens are what every text sketch is made of, so anything that can change them (jieba's
version and dictionary, the normaliser, the cleaner, the stop words, the word regex) is
named in `tokenizer_version()`: a different value means "re-sign, do not compare".
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from functools import lru_cache
from itertools import filterfalse
from typing import Iterable

import numpy as np

from .normalize import CLEANER_VERSION, NORMALIZER_VERSION, _drop_links, _finish, _fold, _has_link, _unmark, normalize


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
