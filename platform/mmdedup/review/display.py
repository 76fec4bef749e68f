"""Texts cut into tokens for display: what the HTML report and the review screen mark.

Both mark words in the original, unfolded text where the text signal saw shared (the
report) or differing (the screen) words, so both need the tokenizer's tokens with their
offsets into the text as shown.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..extract.tokens import tokenize

_WORD_RUN = re.compile(r"[^\W_]+")


def display_tokens(text: str, limit: int | None = None) -> list[tuple[int, int, str]]:
    """(start, end, key) of each token of `text` (the first `limit` of them), offsets into
    the text as shown.

    The keys are the project tokenizer's tokens (folded case, width and punctuation;
    jieba words for Chinese), so two texts share a passage exactly where the text signal
    saw shared words; the offsets let the original, unfolded text be marked. The report
    and the review screen both mark texts with these."""
    tokens: list[tuple[int, int, str]] = []
    for run in _WORD_RUN.finditer(text):
        start = run.start()
        tokens.extend((start + s, start + e, key) for s, e, key in _run_tokens(run.group()))
        if limit is not None and len(tokens) >= limit:
            break
    return tokens[:limit]


@lru_cache(maxsize=1 << 16)
def _run_tokens(run: str) -> tuple[tuple[int, int, str], ...]:
    """Tokens of one run of word characters. The tokenizer only folds characters, so
    its tokens tile the run; where folding changed a length (a ligature, say), the run
    stays one token."""
    words = tokenize(run, drop_stop_words=False)
    if sum(map(len, words)) != len(run):
        return ((0, len(run), "".join(words) or run.casefold()),)
    spans, at = [], 0
    for word in words:
        spans.append((at, at + len(word), word))
        at += len(word)
    return tuple(spans)


__all__ = ["display_tokens"]
