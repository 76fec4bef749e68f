"""How much of two texts lies on shared word runs in the same order: the exact check of
text re-use that a pair's sketches cannot make.

A pair's MinHash figures count shared terms and shared word 3-grams wherever they sit.
Sections of one long contract share its party names and defined terms, and also its
stock phrases ("any claim relating to the", "on or before the"): a quarter of their
3-grams can be shared while no passage of one is in the other. Re-use keeps passages:
the shared 3-grams of a copy follow one another at nearly one offset between the two
texts (a replaced word skips a few, a word put in or left out moves the offset by one),
while stock phrases shared by chance sit at unrelated offsets. `aligned_share` counts
the tokens of the shorter text covered by such chains of at least `ALIGN_SPAN` tokens.

numpy throughout: each text's n-grams (the shingles of its signature) are sorted once
(`Grams`); a pair is then one binary search and a few passes over its matches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALIGN_N = 3  # word n-grams matched (the order-aware MinHash's shingles)
ALIGN_GAP = 8  # n-gram positions a chain may skip (replaced words)
# how far a chain's offset may move from one run to the next: one word put in or left out
# (two joined the stock phrases of one contract's sections into chains)
ALIGN_DRIFT = 1
ALIGN_SPAN = 10  # tokens a chain must span to count as a shared passage (half a shorter text)
ALIGN_REPEAT = 4  # an n-gram more often than this in the other text is not matched
ALIGN_VERSION = f"align{ALIGN_N}g{ALIGN_GAP}d{ALIGN_DRIFT}s{ALIGN_SPAN}r{ALIGN_REPEAT}"

@dataclass(frozen=True)
class Grams:
    """One text's n-grams in order and sorted, made once for all the pairs it is in."""

    tokens: int  # the text's length in tokens
    grams: np.ndarray  # n-gram hashes in text order
    order: np.ndarray  # positions of `grams` in sorted order
    sorted: np.ndarray  # grams[order]
    run_end: np.ndarray  # for each sorted position, the end of its run of equal hashes

    @classmethod
    def of(cls, grams: np.ndarray, tokens: int) -> "Grams":
        """From a text's word `ALIGN_N`-gram hashes in order (text_sketches.word_shingles)
        and its length in tokens."""
        order = np.argsort(grams, kind="stable")
        ordered = grams[order]
        return cls(tokens, grams, order, ordered, np.searchsorted(ordered, ordered, "right"))


def aligned_share(a: Grams, b: Grams, *, n: int = ALIGN_N, gap: int = ALIGN_GAP,
                  drift: int = ALIGN_DRIFT, span: int = ALIGN_SPAN, repeat: int = ALIGN_REPEAT) -> float:
    """The share of the shorter text's tokens that lie on chains of shared n-grams
    spanning at least `span` tokens (half the shorter text, if less) in both texts
    (`Grams.of` their tokens)."""
    shorter = min(a.tokens, b.tokens)
    if not len(a.grams) or not len(b.grams) or not shorter:
        return 0.0
    lo = np.minimum(np.searchsorted(b.sorted, a.grams), len(b.sorted) - 1)
    count = np.where(b.sorted[lo] == a.grams, b.run_end[lo] - lo, 0)
    keep = (count > 0) & (count <= repeat)
    if not keep.any():
        return 0.0
    per = count[keep]
    first = np.repeat(lo[keep], per)
    within = np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)
    i = np.repeat(np.flatnonzero(keep), per)
    j = b.order[first + within]
    d = j - i
    # runs: matches at one offset, each within `gap` positions of the one before (a
    # replaced word breaks no run) ...
    at = np.lexsort((i, d))
    d, i = d[at], i[at]
    start = np.ones(len(i), bool)
    start[1:] = (d[1:] != d[:-1]) | (i[1:] - i[:-1] > gap)
    heads = np.flatnonzero(start)
    lo, hi, d = i[heads], np.maximum.reduceat(i, heads) + n, d[heads]
    # ... then chains: runs in text a's order, each starting within `gap` of the end of the
    # one before at an offset within `drift` of its (a word put in or left out)
    at = np.lexsort((d, lo))
    lo, hi, d = lo[at], hi[at], d[at]
    start = np.ones(len(lo), bool)
    start[1:] = (lo[1:] > hi[:-1] + gap) | (np.abs(d[1:] - d[:-1]) > drift)
    heads = np.flatnonzero(start)
    lo, hi = lo[heads], np.maximum.reduceat(hi, heads)
    long = hi - lo >= min(span, max(shorter // 2, n + 1))
    if not long.any():
        return 0.0
    edge = np.zeros(a.tokens + n + 1, np.int64)
    np.add.at(edge, lo[long], 1)
    np.add.at(edge, hi[long], -1)
    return min(int((np.cumsum(edge)[: a.tokens] > 0).sum()) / shorter, 1.0)
