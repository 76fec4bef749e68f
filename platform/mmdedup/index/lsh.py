"""MinHash band LSH held in sorted numpy arrays.

Why not datasketch's ``MinHashLSH``: it keeps a Python dict of lists per band
(hundreds of bytes per document per band) and inserts one document at a time.
Here a band table is one sorted ``uint64`` array whose entries are
``band_key << 32 | position``: 8 bytes per document per band, looked up for a
whole batch with ``searchsorted``, and equal keys sit next to each other so a
bucket is a slice.  Keys are 32 bits: two different bands rows collide with
probability 2**-32, which only adds a rare candidate that scoring rejects.

Writes, reads and files are index/runs.py's: one sorted run per band (main, tail and
pending), the main runs memory-mapped from their file when opened, so a process that asks
a few queries reads a few pages of each band, and a save appends only the entries added
since the previous one.

Removal is a tombstone in :class:`~mmdedup.index.hamming.Slots`; past a
quarter dead, the runs are filtered and positions renumbered (a monotone
renumbering, so the runs stay sorted without a re-sort).

The index stores no signatures: SQL has them, and the scorer verifies each
candidate pair against them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .runs import HIGH, PositionFiles, Runs
from .slots import Slots, distinct_pairs, unique_pairs

FORMAT = "mmdedup.lsh/2"
HASH = "mulxor64-fmix-hi32/1"  # band_keys below; stored so a file never meets another hash

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
        out[s:s + len(x)] = h & HIGH
    return out


# --------------------------------------------------------------------------- #
# the index
# --------------------------------------------------------------------------- #


class Candidates(NamedTuple):
    """Flat query result: query ``query[k]`` shares a band with item ``ids[k]``.

    Deduplicated per query, sorted by query then insertion order.
    """

    query: np.ndarray  # int64, index into the query batch
    ids: np.ndarray  # int64 item ids
    # Per query: the bucket entries a capped query (`BandLSH.query(first=...)`) passed over.
    passed: np.ndarray | None = None

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
        self._runs = Runs(self.bands)
        self._files = PositionFiles()

    # ---- size and contents -------------------------------------------------

    def __len__(self) -> int:
        return len(self._slots)

    def ids(self) -> np.ndarray:
        """Live item ids, in insertion order."""
        return self._slots.live_ids()

    def nbytes(self) -> int:
        """Exact bytes held in numpy arrays (all there is: no Python objects per document)."""
        arrays = [self._slots.ids, self._slots.alive]
        if self._slots._order is not None:
            arrays += [self._slots._order, self._slots._sorted]
        return self._runs.nbytes() + sum(a.nbytes for a in arrays)

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
        self._runs.add(keys, self._slots.append(ids))
        self._maybe_compact()

    def remove(self, ids: np.ndarray) -> int:
        """Forget these ids (unknown ones are ignored); returns how many were live."""
        n = self._slots.kill(self._slots.find(ids))
        self._maybe_compact()
        return n

    def compact(self) -> None:
        """Drop dead entries and renumber positions densely."""
        if self._slots.n_dead == 0:
            return
        self._runs.renumber(self._slots.compact())

    def _maybe_compact(self) -> None:
        if self._slots.dead_fraction > self.compact_at:
            self.compact()

    # ---- reads -------------------------------------------------------------

    def query(self, sigs: np.ndarray, distinct: bool = True, first: int | None = None) -> Candidates:
        """Live items sharing at least one band with each query signature; with
        `distinct=False` an item is listed once per band it shares (for a caller that
        filters candidates before making them distinct: a sort of every band hit saved).
        `first`: each band's bucket gives at most its `first` earliest entries (of the
        main and of the tail run each; `Runs.lookup`), and `passed` says how many each
        query passed over. A bucket holds the items that agree on a whole band of rows,
        which unrelated texts almost never do: one past `first` is a page repeated
        across a crawl, whose copies need not each be compared with every other."""
        sigs = self._check_sigs(sigs)
        self._runs.flush()
        parts_q, parts_pos = [], []
        passed = np.zeros(len(sigs), np.int64)
        for s in range(0, len(sigs), _QUERY_CHUNK):
            keys = band_keys(sigs[s:s + _QUERY_CHUNK], self.bands, self.rows)
            q, pos = self._lookup(keys, first, passed[s:s + _QUERY_CHUNK])
            if not distinct:
                parts_q.append(q.astype(np.int64) + s)
                parts_pos.append(pos)
                continue
            q, pos, _ = distinct_pairs(q, pos)
            parts_q.append(q + s)
            parts_pos.append(pos)
        if not parts_q:
            e = np.empty(0, np.int64)
            return Candidates(e, e.copy(), passed)
        q, pos = np.concatenate(parts_q), np.concatenate(parts_pos)
        return Candidates(q, self._slots.ids[pos], passed)

    def _lookup(self, keys: np.ndarray, first: int | None, passed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query row, position) for every live entry in a matching bucket (at most
        `first` a bucket and run, the entries passed over added to `passed`)."""
        found = [self._runs.lookup(b, keys[:, b], first, self._slots.alive) for b in range(self.bands)]
        for f in found:
            passed += f[2]
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])

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

    def meta(self) -> dict[str, Any]:
        return {"format": FORMAT, "hash": HASH, "threshold": self.threshold, "num_perm": self.num_perm,
                "weights": list(self.weights), "bands": self.bands, "rows": self.rows}

    def save(self, folder: str | Path, prefix: str, on_disk: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write what the files on disk lack (see index/runs.py) as files named
        ``prefix.*`` in `folder`; returns the manifest that names them. `on_disk`: the
        manifest the files on disk answer to (the stamp's), None when unknown."""
        return self._files.save(Path(folder), prefix, self.meta(), self._slots, {}, self._runs, on_disk)

    @classmethod
    def load(cls, folder: str | Path, manifest: dict[str, Any], compact_at: float = 0.25) -> "BandLSH":
        """Open saved files (main runs memory-mapped: read as queries touch them)."""
        if manifest.get("format") != FORMAT or manifest.get("hash") != HASH:
            raise ValueError(f"not a {FORMAT} / {HASH} index (got {manifest.get('format')!r}, "
                             f"{manifest.get('hash')!r})")
        lsh = cls(manifest["threshold"], manifest["num_perm"], tuple(manifest["weights"]),
                  params=(manifest["bands"], manifest["rows"]), compact_at=compact_at)
        lsh._files.load(Path(folder), manifest, lsh._slots, (), lsh._runs)
        return lsh
