"""Exact Hamming range search over 64-bit codes (SimHash, frame hashes).

Multi-index hashing (Norouzi et al. 2014): a code is cut into ``nhash`` chunks of ``b``
bits and each chunk keys its own table. If two codes differ in ``d`` bits, those bits
fall into the ``nhash`` chunks, so at least one chunk differs in at most
``floor(d / nhash)`` bits (pigeonhole). Probing every table with the query chunk and all
its variants at up to ``nflip`` flipped bits therefore finds *every* code with
``d <= nhash * (nflip + 1) - 1``: the search is exact, not approximate. ``nflip`` is
derived per call as ``ceil((radius + 1) / nhash) - 1``, so one index serves every radius.

Why the defaults ``nhash=4, b=16``: the four tables cover all 64 bits and hold 65,536
keys each, so at a million codes a bucket has ~15 entries and a radius-3 query
(``nflip=0``) probes 4 buckets and verifies ~60 codes; radius 4..7 (``nflip=1``) probes
68. Past that (``plan``) the probes outnumber what an exhaustive scan costs, and the
search scans every code with FAISS's SIMD ``IndexBinaryFlat`` instead -- still exact.

Why the tables are sorted runs (index/runs.py: ``chunk << 32 | position``, 8 bytes an
entry and table) rather than FAISS's ``IndexBinaryMultiHash``: FAISS keeps its tables as
``unordered_map`` nodes that exist only in memory, so every process that opened the index
rebuilt them from the codes (a second or two per million), and an ingest rebuilt them
after each compaction. Sorted runs are written to files, opened memory-mapped (a query
touches the few pages its binary searches visit), grow by a small sorted tail and are
saved by appending a segment; the whole probe of a batch is a few vectorised
``searchsorted`` calls, and candidates are verified by a popcount of their codes. The
tables are built at the first search that probes them (an index searched only at wide
radii, pictures and frames, never builds them) and saved with the index from then on.

FAISS binary range search keeps ``dist < radius`` (strict); callers speak in
``dist <= radius``, so the flat scan is passed ``radius + 1``.

Ids and deletion: positions are dense and :class:`Slots` maps them to item ids. Removal
is a tombstone; once a quarter of the positions are dead the codes are filtered and the
tables renumbered (index/runs.py), and the flat scan's FAISS copy is dropped, to be made
again from the codes at the next scan.
"""

from __future__ import annotations

import threading
from functools import cache
from itertools import combinations
from math import comb
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .runs import PositionFiles, Runs
from .slots import Slots, distinct_pairs, unique_pairs
from .threads import threads_for

CODE_BITS = 64
FORMAT = "mmdedup.hamming/2"

# Probing wins while it touches under ~1/400 of the keys of a table: the exhaustive SIMD
# scan costs ~0.5 ns a code, a probe a binary search and its candidates a gather each.
_FLAT_WHEN_FRACTION = 1 / 400


def as_code_bytes(codes: np.ndarray) -> np.ndarray:
    """64-bit codes -> FAISS's (n, 8) uint8 layout, as a view whenever possible.

    Accepts uint64 or int64 (SQL BIGINT is signed; same bits) of shape (n,),
    or ready (n, 8) uint8.  A contiguous input is reinterpreted, not copied.
    Byte order does not matter: stored and query codes go through the same
    view, and Hamming distance is order-free.
    """
    a = np.asarray(codes)
    if a.dtype == np.uint8 and a.ndim == 2 and a.shape[1] == CODE_BITS // 8:
        return np.ascontiguousarray(a)
    if a.dtype not in (np.uint64, np.int64):
        raise TypeError(f"codes must be uint64/int64 (n,) or uint8 (n, 8), got {a.dtype}{a.shape}")
    a = np.ascontiguousarray(a.reshape(-1))
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a.view(np.uint8).reshape(-1, CODE_BITS // 8)


class Hits(NamedTuple):
    """Flat range-search result: row k says query ``query[k]`` matched ``ids[k]``.

    Flat arrays rather than a list per query because that is what FAISS
    returns (lims/labels/distances) and what the scoring layer consumes; use
    :meth:`per_query` for the list form.  Sorted by (query, dist, id).
    """

    query: np.ndarray  # int64, index into the query batch
    ids: np.ndarray  # int64 item ids
    dist: np.ndarray  # int32 Hamming distances, <= radius

    def per_query(self, n_queries: int) -> list[tuple[np.ndarray, np.ndarray]]:
        bounds = np.searchsorted(self.query, np.arange(1, n_queries))
        return list(zip(np.split(self.ids, bounds), np.split(self.dist, bounds)))


def as_codes(codes: np.ndarray) -> np.ndarray:
    """64-bit codes as a 1-D native uint64 array (uint64, int64 or (n, 8) uint8 in)."""
    return as_code_bytes(codes).view(np.uint64).reshape(-1)


class HammingIndex:
    """Exact radius search over 64-bit codes; a cache rebuildable from (ids, codes).

    Not safe for concurrent *writers*; concurrent searches are serialised by a lock
    (a search may build the tables or the flat scan's copy of the codes).
    """

    def __init__(self, nhash: int = 4, bits: int = 16, compact_at: float = 0.25) -> None:
        if nhash < 1 or bits < 1 or bits > 32 or nhash * bits > CODE_BITS:
            raise ValueError(f"need nhash * bits <= {CODE_BITS} and bits <= 32, got {nhash} x {bits}")
        self.nhash = nhash
        self.bits = bits
        self.compact_at = compact_at
        self._slots = Slots()
        self._codes = np.empty(0, np.uint64)  # by position
        self._runs: Runs | None = None  # the chunk tables, once a search probed them
        self._flat: Any = None  # FAISS IndexBinaryFlat over the codes, once a search scanned
        self._files = PositionFiles()
        self._lock = threading.Lock()

    @classmethod
    def from_arrays(cls, ids: np.ndarray, codes: np.ndarray, **kwargs) -> "HammingIndex":
        index = cls(**kwargs)
        index.add(ids, codes)
        return index

    # ---- size and contents -------------------------------------------------

    def __len__(self) -> int:
        return len(self._slots)

    def ids(self) -> np.ndarray:
        """Live item ids, in insertion order."""
        return self._slots.live_ids()

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Live (ids, uint64 codes): everything needed to rebuild this index."""
        keep = self._slots.alive
        return self._slots.ids[keep], self._codes[keep]

    def nbytes(self) -> int:
        """Resident bytes: codes, tables (once built), the flat scan's copy, slots."""
        n = len(self._codes)
        return (self._codes.nbytes + (self._runs.nbytes() if self._runs is not None else 0)
                + (n * 8 if self._flat is not None else 0) + self._slots.ids.nbytes + self._slots.alive.nbytes)

    def max_exact_radius(self, nflip: int) -> int:
        return self.nhash * (nflip + 1) - 1

    # ---- writes ------------------------------------------------------------

    def add(self, ids: np.ndarray, codes: np.ndarray) -> None:
        """Index codes under ids; an id already present is replaced."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        x = as_codes(codes)
        if len(ids) != len(x):
            raise ValueError(f"{len(ids)} ids but {len(x)} codes")
        if len(ids) == 0:
            return
        if len(self._slots.ids) + len(ids) > 1 << 32:
            raise OverflowError("more than 2**32 positions; compact or shard the index")
        start = self._slots.append(ids)
        self._codes = np.concatenate([self._codes, x])
        if self._runs is not None:
            self._runs.add(self._chunk_keys(x), start)
        if self._flat is not None:
            self._flat.add(as_code_bytes(x))
        self._maybe_compact()

    def remove(self, ids: np.ndarray) -> int:
        """Forget these ids (unknown ones are ignored); returns how many were live."""
        n = self._slots.kill(self._slots.find(ids))
        self._maybe_compact()
        return n

    def compact(self) -> None:
        """Drop dead positions: filter the codes, renumber the tables."""
        if self._slots.n_dead == 0:
            return
        keep = self._slots.compact()
        self._codes = self._codes[keep]
        if self._runs is not None:
            self._runs.renumber(keep)
        self._flat = None

    def _maybe_compact(self) -> None:
        if self._slots.dead_fraction > self.compact_at:
            self.compact()

    def _chunk_keys(self, codes: np.ndarray) -> np.ndarray:
        """(n, nhash) chunk values in the high half of each entry."""
        shifts = np.arange(self.nhash, dtype=np.uint64) * np.uint64(self.bits)
        mask = np.uint64((1 << self.bits) - 1)
        return ((codes[:, None] >> shifts[None, :]) & mask) << np.uint64(32)

    # ---- reads -------------------------------------------------------------

    def plan(self, radius: int) -> int | None:
        """nflip that makes ``radius`` exact, or None when a full scan is cheaper."""
        if radius < 0:
            raise ValueError("radius must be >= 0")
        nflip = -(-(radius + 1) // self.nhash) - 1
        if nflip > self.bits:
            return None
        probes = self.nhash * sum(comb(self.bits, k) for k in range(nflip + 1))
        fraction = probes / float(1 << self.bits)
        return None if fraction > _FLAT_WHEN_FRACTION else nflip

    def search(self, codes: np.ndarray, radius: int) -> Hits:
        """Every live entry within Hamming distance ``<= radius`` of each query."""
        x = as_codes(codes)
        radius = int(radius)
        if len(x) == 0 or len(self._codes) == 0:
            e = np.empty(0, np.int64)
            return Hits(e, e.copy(), np.empty(0, np.int32))
        nflip = self.plan(radius)
        with self._lock:
            if nflip is None:
                query, pos, dist = self._scan(x, radius)
            else:
                query, pos, dist = self._probe(x, radius, nflip)
        live = self._slots.alive[pos]
        query, pos, dist = query[live], pos[live], dist[live].astype(np.int32)
        ids = self._slots.ids[pos]
        order = np.lexsort((ids, dist, query))
        return Hits(query[order], ids[order], dist[order])

    def _scan(self, x: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._flat is None:
            import faiss  # only where a search scans: a probing search never needs it

            self._flat = faiss.IndexBinaryFlat(CODE_BITS)
            self._flat.add(as_code_bytes(self._codes))
        with threads_for(len(x)):
            lims, dist, pos = self._flat.range_search(as_code_bytes(x), radius + 1)
        query = np.repeat(np.arange(len(x), dtype=np.int64), np.diff(lims).astype(np.int64))
        return query, pos.astype(np.int64), dist

    def _probe(self, x: np.ndarray, radius: int, nflip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Probe each table with each query chunk and its variants at <= nflip flipped
        bits, then keep the candidates whose whole code is within the radius."""
        if self._runs is None:
            self._runs = Runs(self.nhash)
            self._runs.add(self._chunk_keys(self._codes), 0)
        runs = self._runs
        runs.flush()
        flips = flip_masks(self.bits, nflip) << np.uint64(32)
        keys = self._chunk_keys(x)
        qs, ps = [], []
        for t in range(self.nhash):
            row, pos, _ = runs.lookup(t, (keys[:, t, None] ^ flips[None, :]).ravel())
            qs.append(row // len(flips))
            ps.append(pos)
        # Verified before they are made distinct: most of what shares a chunk is far
        # (skewed codes fill some buckets), and sorting it all cost more than the check.
        query, pos = np.concatenate(qs), np.concatenate(ps)
        dist = np.bitwise_count(self._codes[pos] ^ x[query])
        near = dist <= radius
        query, pos, first = distinct_pairs(query[near], pos[near])
        return query, pos, dist[near][first].astype(np.int32)

    def pairs(self, ids: np.ndarray, codes: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidate pairs (a < b, dist) between a batch and everything indexed.

        Meant for a batch just added: pairs inside the batch appear once, self
        matches are dropped.
        """
        ids = np.asarray(ids, dtype=np.int64).ravel()
        hits = self.search(codes, radius)
        return unique_pairs(ids[hits.query], hits.ids, hits.dist)

    # ---- persistence -------------------------------------------------------

    def save(self, folder: str | Path, prefix: str, on_disk: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write what the files on disk lack (codes, ids and the tables once built, see
        index/runs.py) as files named ``prefix.*``; returns the manifest naming them.
        Plain arrays: they survive FAISS upgrades."""
        meta = {"format": FORMAT, "nhash": self.nhash, "bits": self.bits}
        return self._files.save(Path(folder), prefix, meta, self._slots, {"codes": self._codes},
                                self._runs, on_disk)

    @classmethod
    def load(cls, folder: str | Path, manifest: dict[str, Any], compact_at: float = 0.25) -> "HammingIndex":
        """Open saved files; the tables (when saved) are memory-mapped, nothing is built."""
        if manifest.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} index (got {manifest.get('format')!r})")
        index = cls(nhash=manifest["nhash"], bits=manifest["bits"], compact_at=compact_at)
        runs = Runs(index.nhash) if manifest.get("runs") else None
        columns = index._files.load(Path(folder), manifest, index._slots, ("codes",), runs)
        if columns["codes"].dtype != np.uint64:
            raise ValueError("index codes are not uint64")
        index._codes, index._runs = columns["codes"], runs
        return index


@cache
def flip_masks(bits: int, nflip: int) -> np.ndarray:
    """Every ``bits``-bit mask with at most ``nflip`` bits set (0 first)."""
    masks = [sum(1 << b for b in chosen) for k in range(nflip + 1) for chosen in combinations(range(bits), k)]
    return np.array(masks, np.uint64)
