"""Id bookkeeping shared by the candidate indexes: dense positions, tombstones, pairs, saving.

FAISS and the band arrays address entries by dense position; these helpers map positions
to item ids and back and delete by tombstone.
"""

from __future__ import annotations

import numpy as np


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flatten half-open ranges ``[lo[i], hi[i])`` into (owner i, index) arrays.

    Lets searchsorted bucket lookups for a whole batch stay in numpy instead of
    a Python loop over queries.
    """
    counts = (hi - lo).astype(np.int64)
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    starts = np.cumsum(counts) - counts
    index = np.arange(total, dtype=np.int64) - np.repeat(starts - lo, counts)
    return owner, index


_LOW32 = np.uint64(0xFFFFFFFF)


def distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each (a[i], b[i]) once, in (a, b) order (int64), and the index of its first
    occurrence. Both packed in one 64-bit key where they fit in 32 bits (query rows,
    positions, item pks of most stores): a sort of numbers, several times cheaper than
    the sort of rows it falls back to."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if len(a) == 0:
        return a, b, np.zeros(0, np.intp)
    if min(a.min(), b.min()) >= 0 and max(a.max(), b.max()) <= 0xFFFFFFFF:
        key, first = np.unique((a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64), return_index=True)
        return (key >> np.uint64(32)).astype(np.int64), (key & _LOW32).astype(np.int64), first
    rows, first = np.unique(np.stack([a, b], axis=1), axis=0, return_index=True)
    return rows[:, 0], rows[:, 1], first


def unique_pairs(a: np.ndarray, b: np.ndarray, *extra: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each unordered pair once as (lo, hi), self pairs dropped, sorted by (lo, hi).

    `extra` columns ride along; a repeated pair keeps the values of its first occurrence.
    """
    keep = a != b
    lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    order = np.lexsort((hi, lo))
    lo, hi = lo[order], hi[order]
    first = np.ones(len(lo), np.bool_)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    return (lo[first], hi[first], *(e[keep][order][first] for e in extra))


class Slots:
    """Dense positions <-> item ids, with tombstones.

    Both candidate indexes address entries by dense position (FAISS labels,
    the low 32 bits of band entries) because positions need no hash table;
    ``ids[pos]`` recovers the item id.  Removal flips ``alive[pos]`` because
    neither FAISS's multi-hash tables nor sorted band arrays delete in place
    cheaply; the owner compacts when ``dead_fraction`` grows.

    id -> position costs no extra memory in the usual case: mmdedup ids are
    database keys handed out in increasing order, so ``ids`` stays sorted and
    ``searchsorted`` works on it directly.  Once an add breaks the order (a TF-IDF
    refresh signs old texts again into an index that new texts join too), the ids
    are also kept sorted, with their positions (16 B per entry, only then), and each
    add merges its ids in: a lookup through an argsort (`sorter`) reads the ids in
    random order, several times slower at a million than a plain binary search.
    """

    def __init__(self) -> None:
        self.ids = np.empty(0, np.int64)
        self.alive = np.empty(0, np.bool_)
        self.n_dead = 0
        self._ascending = True
        self._order: np.ndarray | None = None  # positions in id order (ids not ascending)
        self._sorted: np.ndarray | None = None  # the ids in that order
        self.renumbered = False  # positions changed since the index files were last written

    @property
    def ascending(self) -> bool:
        return self._ascending

    def restore(self, ids: np.ndarray, ascending: bool) -> None:
        """Take saved ids back, all live (the caller kills the saved dead ones); whether
        they ascend is saved with them, so that opening never scans them."""
        self.ids = ids
        self.alive = np.ones(len(ids), np.bool_)
        self.n_dead = 0
        self._ascending = ascending
        self._order = self._sorted = None

    def __len__(self) -> int:
        return len(self.ids) - self.n_dead

    @property
    def dead_fraction(self) -> float:
        return self.n_dead / len(self.ids) if len(self.ids) else 0.0

    def live_ids(self) -> np.ndarray:
        return self.ids[self.alive]

    def find(self, ids: np.ndarray) -> np.ndarray:
        """Positions of the live entries carrying these ids (unknown ids are skipped)."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        if len(ids) == 0 or len(self.ids) == 0:
            return np.empty(0, np.int64)
        keys, order = self._by_id()
        lo = np.searchsorted(keys, ids, side="left")
        hi = np.searchsorted(keys, ids, side="right")
        _, k = expand_ranges(lo, hi)  # a removed-then-re-added id has several slots
        pos = k if order is None else order[k]
        return pos[self.alive[pos]]

    def _by_id(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(the ids in ascending order, their positions; None: the ids themselves)."""
        if self._ascending:
            return self.ids, None
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
            self._sorted = self.ids[self._order]
        return self._sorted, self._order

    def position(self, ids: np.ndarray) -> np.ndarray:
        """The live position of each id, aligned with `ids`; -1 where it has none (an id
        has at most one live slot: `append` kills the old one)."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        out = np.full(len(ids), -1, np.int64)
        if len(ids) == 0 or len(self.ids) == 0:
            return out
        keys, order = self._by_id()
        # (the ids looked up in ascending order: a binary search that walks the keys
        # forward stays in cache; a batch of candidates arrives in random order, unless
        # the caller sorted it to read what the positions address in order too)
        asked = None if (ids[1:] >= ids[:-1]).all() else np.argsort(ids)
        k = np.maximum(np.searchsorted(keys, ids if asked is None else ids[asked], side="right") - 1, 0)
        if asked is not None:  # (the newest slot of each, back in the order asked)
            k[asked] = k.copy()
        pos = k if order is None else order[k]
        found = (self.ids[pos] == ids) & self.alive[pos]
        out[found] = pos[found]
        return out

    def append(self, ids: np.ndarray) -> int:
        """Give ``ids`` new slots; a live id already present is replaced (upsert).

        Returns the first new position. Upsert rather than error because
        re-signing an item after retraining is an ordinary update.
        """
        ids = np.asarray(ids, dtype=np.int64).ravel()
        if len(np.unique(ids)) != len(ids):
            raise ValueError("duplicate ids within one batch")
        start = len(self.ids)
        if len(ids) == 0:
            return start
        if start and ids.min() <= self._by_id()[0][-1]:
            self.kill(self.find(ids))
        ascending = bool(np.all(ids[1:] >= ids[:-1]))
        was_ascending = self._ascending
        self._ascending = self._ascending and ascending and (start == 0 or ids[0] >= self.ids[-1])
        self.ids = np.concatenate([self.ids, ids])
        self.alive = np.concatenate([self.alive, np.ones(len(ids), np.bool_)])
        if not was_ascending and self._order is not None:
            # The new ids merged into the sorted view, after equal ones (the newest slot of
            # an id is the last of its run).
            new = np.argsort(ids, kind="stable")
            at = np.searchsorted(self._sorted, ids[new], side="right")
            self._sorted = np.insert(self._sorted, at, ids[new])
            self._order = np.insert(self._order, at, start + new)
        return start

    def kill(self, pos: np.ndarray) -> int:
        """Tombstone these positions (repeats and dead ones allowed); returns how many
        were live. Counted over the flags, not by making the positions distinct: opening
        an index with a quarter of a million dead positions sorted them all."""
        pos = np.asarray(pos, dtype=np.int64)
        if len(pos) == 0:
            return 0
        before = self.n_dead
        self.alive[pos] = False
        self.n_dead = len(self.alive) - int(np.count_nonzero(self.alive))
        return self.n_dead - before

    def compact(self) -> np.ndarray:
        """Drop dead slots; return the keep mask so owners can renumber alike."""
        keep = self.alive.copy()
        self.ids = self.ids[keep]
        self.alive = np.ones(len(self.ids), np.bool_)
        self.n_dead = 0
        self._ascending = bool(np.all(self.ids[1:] >= self.ids[:-1]))
        self._order = self._sorted = None
        self.renumbered = True
        return keep


def entry_ids(pks: int | list[int] | np.ndarray, per_item: int, n: int | None = None) -> np.ndarray:
    """Index ids of an item's entries (its pictures, frames, vectors): pk * per_item + k.

    With `n`, the first min(n, per_item) entries of one item; without, every id the items
    can own (for removal). `ids // per_item` gives the item back.
    """
    pks = np.atleast_1d(np.asarray(pks, np.int64))
    count = per_item if n is None else min(n, per_item)
    return (pks[:, None] * per_item + np.arange(count, dtype=np.int64)).ravel()
