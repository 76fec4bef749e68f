"""Passages that recur across many texts, found by winnowing their word k-grams, and
taken out of a text before it is signed.

A site template wrapped around every text of a crawl (navigation, footer, a disclaimer)
makes every two of those texts alike: 600 shared words outweigh any article. Lines and
sentences do not find it: a plain text may carry its template as one run of words with no
line break or full stop. Word k-grams do, whatever the layout:

- each text's tokens give k-gram hashes (`K` tokens), and winnowing (Schleimer, Wilkerson
  and Aiken, 2003) keeps the smallest hash of every window of `W` consecutive k-grams:
  the *anchors*. Two texts that share a passage of at least W + K - 1 tokens share the
  anchors inside it, whatever surrounds it, and inside a text no W consecutive k-grams go
  without an anchor;
- an anchor held by at least `passage_min_texts` of the last `passage_window` texts
  recurs (`RecentAnchors`); the store keeps the anchors found to recur (store/anchors.py);
- a *run* is a maximal sequence of a text's anchors that all recur, or that all do not.
  Recurring runs of at least `min_run` anchors are passages repeated across texts; the
  tokens they span (from the first anchor's k-gram to the last one's) leave the text,
  provided that the text keeps novel runs of at least twice as many anchors spanning at
  least `min_left` of its tokens.

The run lengths tell a template from a story reposted with edits: an edit breaks the
k-grams around it, so a repost edited here and there has recurring and novel anchors
interleaved in short runs, and keeps all its words; an article in a template is one long
novel run. A story reposted word for word by many outlets recurs whole: it has no novel
run and keeps its words too (those are the duplicates we look for). Between a wrapped
article and its template lie at least W + K - 1 novel k-grams as soon as the article has
W tokens (k-grams that straddle the two are novel), so an article is never taken for part
of the template around it. What runs cannot tell apart is a story reposted in many texts,
each with a long passage of its own (an outlet's introduction): that is taken for a
template around them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .shingles import SHORT_CHARS
from .tokenbatch import TokenBatch

K = 8  # tokens a k-gram
W = 24  # k-grams a window: an anchor every 12.5 tokens on average, never more than W apart
_MULT = np.uint64(0x9E3779B97F4A7C15)


def held_in(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per value: is it among `keys` (sorted)?"""
    if not len(keys):
        return np.zeros(len(values), bool)
    return keys[np.minimum(np.searchsorted(keys, values), len(keys) - 1)] == values


@dataclass(frozen=True)
class Anchors:
    """The anchors of a batch of texts: text i's are `hashes[offsets[i]:offsets[i+1]]`,
    at token positions `positions[...]` (their k-gram's first token), in text order."""

    hashes: np.ndarray
    positions: np.ndarray
    offsets: np.ndarray

    def of(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.hashes[a:b], self.positions[a:b]

    def distinct(self) -> "Anchors":
        """Each text's anchors once, sorted (positions dropped): what is counted."""
        doc = np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets))
        order = np.lexsort((self.hashes, doc))
        h, d = self.hashes[order], doc[order]
        first = np.ones(len(h), bool)
        first[1:] = (h[1:] != h[:-1]) | (d[1:] != d[:-1])
        offsets = np.zeros(len(self.offsets), np.int64)
        np.cumsum(np.bincount(d[first], minlength=len(self.offsets) - 1), out=offsets[1:])
        return Anchors(h[first], np.zeros(int(first.sum()), np.int64), offsets)

    def any_in(self, held: np.ndarray) -> np.ndarray:
        """Per text: does it hold any of these anchors (`held` sorted)?"""
        hit = held_in(held, self.hashes)
        return np.add.reduceat(np.concatenate((hit, [False])).astype(np.int64), self.offsets[:-1]) \
            .astype(bool) & (np.diff(self.offsets) > 0)

    @classmethod
    def join(cls, parts: list[np.ndarray]) -> "Anchors":
        """Texts' anchor arrays (positions unknown: as counted) as one batch."""
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        hashes = np.concatenate(parts).astype(np.uint64) if parts else np.zeros(0, np.uint64)
        return cls(hashes, np.zeros(len(hashes), np.int64), offsets)


def _kgrams(hashes: np.ndarray) -> np.ndarray:
    """The k-gram hash at every position of one flat token array (a polynomial in the token
    hashes, then mixed, so nearby k-grams do not share their low bits)."""
    n = len(hashes) - K + 1
    if n <= 0:
        return np.zeros(0, np.uint64)
    acc = np.zeros(n, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(K):
            acc = acc * _MULT + hashes[j:j + n]
        acc ^= acc >> np.uint64(31)
        acc *= _MULT
        acc ^= acc >> np.uint64(29)
    return acc


def _sliding(x: np.ndarray, op: np.ufunc) -> np.ndarray:
    """op (np.minimum or np.maximum) of every W consecutive values, the window starting at
    each index (the last W - 1 run past the end, over what is left): van Herk and
    Gil-Werman's two passes over blocks of W, O(n) whatever W."""
    n = len(x)
    blocks = -(-n // W) + 1  # a block past the end: every window ends inside the padding
    pad = np.full(blocks * W, x.max() if op is np.minimum else 0, x.dtype)
    pad[:n] = x
    pad = pad.reshape(blocks, W)
    ahead = op.accumulate(pad, axis=1).ravel()  # from its block's start to each index
    behind = op.accumulate(pad[:, ::-1], axis=1)[:, ::-1].ravel()  # from each index to its block's end
    return op(behind[:n], ahead[W - 1:n + W - 1])


def anchors(tokens: TokenBatch) -> Anchors:
    """Each text's winnowed k-grams. A text of fewer than K tokens has none; one with at
    most W k-grams one window (its smallest k-gram). Each text's anchors depend on its own
    tokens only, never on the other texts of the batch.

    Over the whole batch at once (texts a few hundred tokens long make a loop over them
    cost more than the arithmetic): k-grams of the flat token array, every window of W of
    them, and only the windows inside one text kept."""
    lengths = tokens.lengths
    n = len(tokens.hashes) - K + 1
    empty = Anchors(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(tokens.n_docs + 1, np.int64))
    if n <= 0:
        return empty
    grams = _kgrams(tokens.hashes)
    doc = np.repeat(np.arange(tokens.n_docs), lengths)[:n]
    end = tokens.offsets[doc + 1]  # one past the last token of each position's text
    at = np.arange(n)
    long_doc = (lengths - K + 1 > W)[doc]
    picked = []
    if n >= W:
        # Window j holds k-grams j..j+W-1: inside its text when the last one's k-gram is.
        inside = long_doc[: n - W + 1] & (at[: n - W + 1] + W - 1 + K - 1 < end[: n - W + 1])
        least = np.where(inside, _sliding(grams, np.minimum)[: n - W + 1], 0)
        # A k-gram is an anchor when it is the smallest of a window inside its text that
        # holds it: the largest of those windows' minima equals it (of equal k-grams in a
        # window, every one is kept, where winnowing keeps the rightmost).
        most = _sliding(np.concatenate((np.zeros(W - 1, np.uint64), least)), np.maximum)[:n]
        picked.append(np.flatnonzero(long_doc & (most == grams) & (at + K - 1 < end)))
    short = np.flatnonzero(~long_doc & (at + K - 1 < end))
    if len(short):
        order = np.lexsort((-short, grams[short], doc[short]))
        first = np.concatenate(([True], doc[short][order][1:] != doc[short][order][:-1]))
        picked.append(short[order][first])
    if not picked:
        return empty
    flat = np.unique(np.concatenate(picked))
    owner = doc[flat]
    offsets = np.zeros(tokens.n_docs + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=tokens.n_docs), out=offsets[1:])
    return Anchors(grams[flat], flat - tokens.offsets[owner], offsets)


def _runs(flags: np.ndarray) -> list[tuple[int, int, bool]]:
    """(first, end, flag) of each maximal run of equal flags."""
    cuts = np.flatnonzero(np.diff(flags.astype(np.int8))) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(flags)]))
    return [(int(a), int(b), bool(flags[a])) for a, b in zip(starts, ends)]


def kept_tokens(length: int, positions: np.ndarray, recurring: np.ndarray, min_run: int,
                min_left: float) -> np.ndarray | None:
    """The token mask of one text of `length` tokens without its recurring passages, given
    its anchors' positions and whether each recurs; None where it keeps every token: no
    recurring run of `min_run` anchors, or too little novel text beside them (runs of
    2 x min_run anchors that do not recur, over less than `min_left` of its tokens)."""
    if not recurring.any():
        return None
    runs = _runs(recurring)
    novel = sum(int(positions[b - 1]) + K - int(positions[a]) for a, b, r in runs if not r and b - a >= 2 * min_run)
    passages = [(int(positions[a]), int(positions[b - 1]) + K) for a, b, r in runs if r and b - a >= min_run]
    if not passages or novel < min_left * length:
        return None
    keep = np.ones(length, bool)
    for start, end in passages:
        keep[start:end] = False
    # A text left shorter than that would be signed by its characters, the passages with them.
    return keep if keep.sum() >= SHORT_CHARS else None


def strip(tokens: TokenBatch, found: Anchors, recurs: np.ndarray, min_run: int,
          min_left: float) -> tuple[TokenBatch, np.ndarray]:
    """The batch without each text's recurring passages (`kept_tokens`), given whether each
    of `found`'s anchors recurs; and which texts lost any."""
    keep = np.ones(len(tokens.hashes), bool)
    changed = np.zeros(tokens.n_docs, bool)
    lengths = tokens.lengths
    for i in np.unique(np.searchsorted(found.offsets, np.flatnonzero(recurs), side="right") - 1).tolist():
        a, b = found.offsets[i], found.offsets[i + 1]
        mask = kept_tokens(int(lengths[i]), found.positions[a:b], recurs[a:b], min_run, min_left)
        if mask is not None:
            keep[tokens.offsets[i]:tokens.offsets[i + 1]] = mask
            changed[i] = True
    return (tokens.select(keep) if changed.any() else tokens), changed


@dataclass
class Passages:
    """The anchors known to recur (`recurring`, sorted) and the rule that takes their
    passages out of a text (`min_run`, `min_left`): what every signing of a text applies
    (extract/text_sketches.py `TextSigner`), so that a text is signed alike wherever it
    is signed (ingest, a refresh, a retrain, a query). `RecentAnchors` finds which
    anchors recur; signals/text.py keeps this up to date and stores them."""

    min_run: int = 4
    min_left: float = 0.1
    recurring: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    def add(self, hashes: np.ndarray) -> None:
        self.recurring = np.union1d(self.recurring, np.asarray(hashes, np.uint64))

    def recurs(self, hashes: np.ndarray) -> np.ndarray:
        return held_in(self.recurring, hashes)

    def strip(self, tokens: TokenBatch, found: Anchors | None = None) -> TokenBatch:
        """`tokens` without each text's recurring passages (the batch itself where none
        recurs, at the cost of one check while no anchor does). `found`: `anchors(tokens)`,
        where the caller has them already."""
        if not len(self.recurring) or not tokens.n_docs:
            return tokens
        found = anchors(tokens) if found is None else found
        return strip(tokens, found, self.recurs(found.hashes), self.min_run, self.min_left)[0]


class RecentAnchors:
    """How many of the last `window` texts (at least; whole chunks leave) hold each anchor,
    in memory.

    A template recurs among the texts of one crawl, which arrive together; counting every
    anchor of every text in the store (some 33 a text, nearly all of them never seen
    again) made a table that grew with the store and cost more than signing the texts.
    Only the anchors found to recur are stored (store/anchors.py). Counted a chunk at a
    time: one sort of the window's anchors, not a dictionary update an anchor."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.blocks: deque[tuple[np.ndarray, int]] = deque()  # (each text's anchors once, texts)
        self.texts = 0

    def add(self, distinct: Anchors, min_texts: int) -> np.ndarray:
        """Count these texts (`Anchors.distinct`); their anchors now held by at least
        `min_texts` of the texts counted, sorted."""
        n = len(distinct.offsets) - 1
        self.blocks.append((distinct.hashes, n))
        self.texts += n
        while len(self.blocks) > 1 and self.texts - self.blocks[0][1] >= self.window:
            self.texts -= self.blocks.popleft()[1]
        held, counts = np.unique(np.concatenate([h for h, _ in self.blocks]), return_counts=True)
        many = held[counts >= min_texts]
        return many[np.isin(many, distinct.hashes)]
