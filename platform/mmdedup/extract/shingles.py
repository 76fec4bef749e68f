"""Shingles: the order-aware feature sets of texts for MinHash.

Word 3-grams are the usual MinHash feature for documents, but a 12-character Chinese
post has five or six words and hence three or four 3-grams: one changed word and the
sets are disjoint. Short texts therefore use character n-grams (bigrams for Chinese,
where a character is already a morpheme; trigrams otherwise).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from .hashing import _encoded_ranges, _hash_ranges, _SepInToken, _segments, hash_tokens
from .normalize import clean
from .tokenbatch import TokenBatch, _offsets
from .tokens import _HAN_CHAR, tokenize, tokenize_many

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
