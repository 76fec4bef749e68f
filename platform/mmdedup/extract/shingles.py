"""Shingles of short texts: when a text is too short for word n-grams, and the character
n-grams it takes instead.

Word 3-grams are the usual MinHash feature for documents (the text signal hashes them
straight from token hashes), but a 12-character Chinese post has five or six words and
hence three or four 3-grams: one changed word and the sets are disjoint. Short texts
(`is_short`) therefore use character n-grams (bigrams for Chinese, where a character is
already a morpheme; trigrams otherwise). `shingle_version` names the scheme.
"""

from __future__ import annotations

import re
from typing import Sequence

from .normalize import clean
from .tokens import _HAN_CHAR

SHORT_TOKENS = 8
SHORT_CHARS = 30
_NON_WORD = re.compile(r"[\W_]+")


def shingle_version(word_n: int = 3) -> str:
    """The shingling scheme, to be recorded next to MinHash signatures."""
    return f"sh1-w{word_n}-c2zh3-short{SHORT_TOKENS}t{SHORT_CHARS}c"


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
    """Too short for word n-grams (see the module docstring)."""
    return len(tokens) < SHORT_TOKENS or len(_compact(text)) < SHORT_CHARS


def short_text_shingles(text: str, n_tokens: int) -> list[str] | None:
    """The character n-grams of a text too short for word n-grams (`is_short`, given its
    token count), or None for a text that is not short."""
    cleaned = clean(text)
    if not is_short(cleaned, range(n_tokens)):
        return None
    chars = _compact(cleaned)
    return char_shingles(chars, _char_n(chars))
