"""MinHash band LSH held in sorted numpy arrays.

Why not datasketch's ``MinHashLSH``: it keeps a Python dict of lists per band
(hundreds of bytes per document per band) and inserts one document at a time.
Here a band table is one sorted ``uint64`` array whose entries are
``band_key << 32 | position``: 8 bytes per document per band, looked up for a
whole batch with ``searchsorted``, and equal keys sit next to each other so a
bucket is a slice.  Keys are 32 bits: two different bands rows collide with
probability 2**-32, which only adds a rare candidate that scoring rejects.

Writes go to an unsorted pending list (O(batch)); the first read sorts it into
a small sorted *tail* run per band, and the tail is merged into the *main* run
(a linear ``np.insert``) once it passes 1/8 of main -- so neither a stream of
small ingest batches nor a bulk load re-sorts a million entries per batch.

Removal is a tombstone in :class:`~mmdedup.index.hamming.Slots`; past a
quarter dead, the runs are filtered and positions renumbered (a monotone
renumbering, so the runs stay sorted without a re-sort).

The index stores no signatures: SQL has them, and the scorer verifies each
candidate pair against them.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import numpy as np

from .slots import Slots, atomic_savez, expand_ranges, unique_pairs

FORMAT = "mmdedup.lsh/1"
HASH = "mulxor64-fmix-hi32/1"  # band_keys below; stored so a file never meets another hash

_LOW = np.uint64(0xFFFFFFFF)
_HIGH = np.uint64(0xFFFFFFFF00000000)
_MIN_TAIL = 1 << 16
_QUERY_CHUNK = 4096  # bounds candidate memory when buckets are huge (exact duplicates)
_HASH_CHUNK = 1 << 16  # keeps band hashing temporaries cache-sized


# --------------------------------------------------------------------------- #
# parameters
# --------------------------------------------------------------------------- #


def optimal_params(threshold: float, num_perm: int, fp_weight: float = 0.5,
                   fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + negative areas.

    Same objective and tie-breaking (first minimum over b, then r) as
    datasketch's ``_optimal_param``, but all ~700 (b, r) pairs at once.  The
    integrands ``1 - (1 - s**r)**b`` are polynomials of degree ``r*b <=
    num_perm``, so Gauss-Legendre with ``num_perm // 2 + 1`` nodes integrates
    them exactly (to rounding) -- no adaptive quadrature needed.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError("threshold must be in (0, 1)")
    b = np.concatenate([np.full(num_perm // k, k) for k in range(1, num_perm + 1)]).astype(np.float64)
    r = np.concatenate([np.arange(1, num_perm // k + 1) for k in range(1, num_perm + 1)]).astype(np.float64)
    x, w = np.polynomial.legendre.leggauss(max(32, num_perm // 2 + 2))

    def area(lo: float, hi: float, miss: bool) -> np.ndarray:
        s = lo + (hi - lo) * (x + 1) / 2
        p = 1 - (1 - s[None, :] ** r[:, None]) ** b[:, None]  # P(candidate | similarity s)
        return ((1 - p) if miss else p) @ (w * (hi - lo) / 2)

    error = fp_weight * area(0.0, threshold, False) + fn_weight * area(threshold, 1.0, True)
    k = int(np.argmin(error))
    return int(b[k]), int(r[k])


# --------------------------------------------------------------------------- #
# band hashing
# --------------------------------------------------------------------------- #

_MUL = np.uint64(0x9E3779B97F4A7C15)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)


def band_keys(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n, num_perm) signatures -> (n, bands) uint64 with a 32-bit band key in
    the high half and zeros below, ready to OR a position into.

    A multiply-xorshift chain over the rows of each band, vectorised over all
    documents and bands, then murmur3's fmix64 so the kept high 32 bits are
    well mixed.  Each band gets its own seed so equal row values in different
    bands do not look alike.
    """
    sigs = np.asarray(sigs)
    n = len(sigs)
    out = np.empty((n, bands), np.uint64)
    seeds = (np.arange(1, bands + 1, dtype=np.uint64) * _MUL)[None, :]
    for s in range(0, n, _HASH_CHUNK):
        x = sigs[s:s + _HASH_CHUNK, :bands * rows].reshape(-1, bands, rows)
        h = np.repeat(seeds, len(x), axis=0)
        for j in range(rows):
            h ^= x[:, :, j].astype(np.uint64)
            h *= _MUL
            h ^= h >> np.uint64(29)
        h ^= h >> np.uint64(33)
        h *= _F1
        h ^= h >> np.uint64(33)
        h *= _F2
        h ^= h >> np.uint64(33)
        out[s:s + len(x)] = h & _HIGH
    return out


def _merge(run: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Merge a sorted run with a sorted batch in linear time."""
    if len(run) == 0:
        return new
    return np.insert(run, np.searchsorted(run, new), new)


# --------------------------------------------------------------------------- #
# the index
# --------------------------------------------------------------------------- #


class Candidates(NamedTuple):
    """Flat query result: query ``query[k]`` shares a band with item ``ids[k]``.

    Deduplicated per query, sorted by query then insertion order.
    """

    query: np.ndarray  # int64, index into the query batch
    ids: np.ndarray  # int64 item ids

    def per_query(self, n_queries: int) -> list[np.ndarray]:
        return np.split(self.ids, np.searchsorted(self.query, np.arange(1, n_queries)))


class BandLSH:
    """Banded MinHash LSH for Jaccard >= ``threshold``; a cache rebuildable from (ids, signatures)."""

    def __init__(self, threshold: float, num_perm: int = 128, weights: tuple[float, float] = (0.5, 0.5),
                 params: tuple[int, int] | None = None, compact_at: float = 0.25) -> None:
        self.threshold = float(threshold)
        self.num_perm = int(num_perm)
        self.weights = tuple(weights)
        self.bands, self.rows = params if params else optimal_params(threshold, num_perm, *weights)
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows = {self.bands * self.rows} > num_perm = {num_perm}")
        self.compact_at = compact_at
        self._slots = Slots()
        self._main = [np.empty(0, np.uint64) for _ in range(self.bands)]
        self._tail = [np.empty(0, np.uint64) for _ in range(self.bands)]
        self._pending: list[np.ndarray] = []

    # ---- size and contents -------------------------------------------------

    def __len__(self) -> int:
        return len(self._slots)

    def ids(self) -> np.ndarray:
        """Live item ids, in insertion order."""
        return self._slots.live_ids()

    def nbytes(self) -> int:
        """Exact bytes held in numpy arrays (all there is: no Python objects per document)."""
        arrays = self._main + self._tail + self._pending + [self._slots.ids, self._slots.alive]
        if self._slots._order is not None:
            arrays.append(self._slots._order)
        return sum(a.nbytes for a in arrays)

    # ---- writes ------------------------------------------------------------

    def add(self, ids: np.ndarray, sigs: np.ndarray) -> None:
        """Index signatures under ids; an id already present is replaced."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        sigs = self._check_sigs(sigs)
        if len(ids) != len(sigs):
            raise ValueError(f"{len(ids)} ids but {len(sigs)} signatures")
        if len(ids) == 0:
            return
        if len(self._slots.ids) + len(ids) > 1 << 32:
            raise OverflowError("more than 2**32 positions; compact or shard the index")
        keys = band_keys(sigs, self.bands, self.rows)
        start = self._slots.append(ids)
        keys |= np.arange(start, start + len(ids), dtype=np.uint64)[:, None]
        self._pending.append(keys)
        self._maybe_compact()

    def remove(self, ids: np.ndarray) -> int:
        """Forget these ids (unknown ones are ignored); returns how many were live."""
        n = self._slots.kill(self._slots.find(ids))
        self._maybe_compact()
        return n

    def compact(self) -> None:
        """Drop dead entries and renumber positions densely."""
        self._flush()
        if self._slots.n_dead == 0:
            return
        keep = self._slots.compact()
        remap = (np.cumsum(keep) - 1).astype(np.uint64)

        def renumber(run: np.ndarray) -> np.ndarray:
            pos = (run & _LOW).astype(np.int64)
            live = keep[pos]
            return (run[live] & _HIGH) | remap[pos[live]]

        self._main = [renumber(r) for r in self._main]
        self._tail = [renumber(r) for r in self._tail]

    def _maybe_compact(self) -> None:
        if self._slots.dead_fraction > self.compact_at:
            self.compact()

    def _flush(self, merge_all: bool = False) -> None:
        """Sort pending entries into the tail; fold the tail into main when it is big."""
        if self._pending:
            batch = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
            self._pending = []
            for b in range(self.bands):
                self._tail[b] = _merge(self._tail[b], np.sort(batch[:, b]))
        if len(self._tail[0]) and (merge_all or len(self._tail[0]) > max(_MIN_TAIL, len(self._main[0]) // 8)):
            for b in range(self.bands):
                self._main[b] = _merge(self._main[b], self._tail[b])
                self._tail[b] = np.empty(0, np.uint64)

    # ---- reads -------------------------------------------------------------

    def query(self, sigs: np.ndarray) -> Candidates:
        """Live items sharing at least one band with each query signature."""
        sigs = self._check_sigs(sigs)
        self._flush()
        parts_q, parts_pos = [], []
        for s in range(0, len(sigs), _QUERY_CHUNK):
            keys = band_keys(sigs[s:s + _QUERY_CHUNK], self.bands, self.rows)
            q, pos = self._lookup(keys)
            pair = np.unique((q.astype(np.uint64) << np.uint64(32)) | pos)
            parts_q.append((pair >> np.uint64(32)).astype(np.int64) + s)
            parts_pos.append((pair & _LOW).astype(np.int64))
        if not parts_q:
            e = np.empty(0, np.int64)
            return Candidates(e, e.copy())
        q, pos = np.concatenate(parts_q), np.concatenate(parts_pos)
        return Candidates(q, self._slots.ids[pos])

    def _lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query row, uint64 position) for every live entry in a matching bucket."""
        qs, ps = [], []
        for b in range(self.bands):
            lo_key = keys[:, b]
            hi_key = lo_key | _LOW
            for run in (self._main[b], self._tail[b]):
                if len(run) == 0:
                    continue
                lo = np.searchsorted(run, lo_key, side="left")
                hi = np.searchsorted(run, hi_key, side="right")
                q, k = expand_ranges(lo, hi)
                qs.append(q)
                ps.append(run[k] & _LOW)
        if not qs:
            return np.empty(0, np.int64), np.empty(0, np.uint64)
        q, pos = np.concatenate(qs), np.concatenate(ps)
        live = self._slots.alive[pos.astype(np.int64)]
        return q[live], pos[live]

    def pairs(self, ids: np.ndarray, sigs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Candidate pairs (a < b) between a batch and everything indexed.

        Meant for a batch just added (the self-join of new items against the
        corpus, new ones included): each unordered pair once, no self pairs.
        """
        ids = np.asarray(ids, dtype=np.int64).ravel()
        c = self.query(sigs)
        return unique_pairs(ids[c.query], c.ids)

    def _check_sigs(self, sigs: np.ndarray) -> np.ndarray:
        sigs = np.asarray(sigs)
        if sigs.ndim != 2 or sigs.shape[1] != self.num_perm or sigs.dtype.kind not in "ui":
            raise ValueError(f"signatures must be integer (n, {self.num_perm}), got {sigs.dtype}{sigs.shape}")
        return sigs

    # ---- persistence -------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write ids and the merged band runs (signatures are not kept here)."""
        self._flush(merge_all=True)
        if self._slots.n_dead:
            self.compact()
        meta = {"format": FORMAT, "hash": HASH, "threshold": self.threshold, "num_perm": self.num_perm,
                "weights": list(self.weights), "bands": self.bands, "rows": self.rows}
        runs = {f"band_{b}": run for b, run in enumerate(self._main)}
        atomic_savez(path, meta=np.array(json.dumps(meta)), ids=self._slots.ids, **runs)

    @classmethod
    def load(cls, path: str | os.PathLike, compact_at: float = 0.25) -> "BandLSH":
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            if meta.get("format") != FORMAT or meta.get("hash") != HASH:
                raise ValueError(f"{path}: not a {FORMAT} / {HASH} file (got {meta.get('format')!r}, "
                                 f"{meta.get('hash')!r})")
            lsh = cls(meta["threshold"], meta["num_perm"], tuple(meta["weights"]),
                      params=(meta["bands"], meta["rows"]), compact_at=compact_at)
            lsh._slots.append(f["ids"])
            lsh._main = [f[f"band_{b}"] for b in range(lsh.bands)]
        return lsh
