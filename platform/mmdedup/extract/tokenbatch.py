"""Hashed features of many documents in one CSR layout (`TokenBatch`), and the batch
kernels that work on it whole: grouping documents to bound temporaries (`doc_ranges`),
term frequencies (`collapse_terms`), and finding hashes in a sorted key array (`lookup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

_U = np.uint64

# Work goes in groups of whole documents of about this many tokens: every temporary of a
# group is a few hundred KiB, reused by the allocator from one group to the next. One pass
# over a whole large batch instead allocates fresh multi-MiB arrays, and page faults then
# cost more than the arithmetic (3-4x on the VMs we measured).
_GROUP = 1 << 15


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
