"""b-bit minwise hashing (Li and Koenig, 2010): the low bits of every MinHash position, held
per item, so that a candidate pair can be ruled out without reading its signatures.

Two signatures that agree at a position agree in its low bits, so the positions whose low
bits agree are at least the positions that agree: counted over every position, they bound
the signatures' Jaccard estimate from above (`agreeing`). That bound is exact, not a
guess: a pair it rules out could not have scored more. A band LSH proposes every pair
that shares one band, and the more items it holds the more of what it proposes are
unrelated items (Jaccard about 0.1 on 400-word texts); with 4 bits their bound is about
0.1 + 0.9 / 16, far under what a stored pair needs, while reading their signatures from
the store to find that out was the cost of an ingest that grew with the store.

`BitRows` holds one packed row per item id, position-addressed like the candidate
indexes (Slots, tombstones, compaction) and saved as they are (index/runs.py: main file
plus appended segments), so it opens and saves with the index it serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .runs import PositionFiles
from .slots import Slots

FORMAT = "mmdedup.bbit/1"
BITS = 4  # two positions a byte

# Positions agreeing in a byte's two nibbles, for every XOR of two bytes.
_AGREE = np.array([((x & 0x0F) == 0) + ((x >> 4) == 0) for x in range(256)], np.uint8)


def low_bits(sigs: np.ndarray) -> np.ndarray:
    """(n, k) MinHash signatures -> (n, ceil(k / 2)) uint8: position 2j in the low nibble
    of byte j, position 2j + 1 in the high one."""
    sigs = np.asarray(sigs)
    nib = (sigs & 0x0F).astype(np.uint8)
    if nib.shape[1] % 2:
        nib = np.concatenate([nib, np.zeros((len(nib), 1), np.uint8)], axis=1)
    return nib[:, 0::2] | (nib[:, 1::2] << 4)


_NIBBLE_LOW = np.uint64(0x1111111111111111)
_BYTE_SUM = np.uint64(0x0101010101010101)
_BLOCK = 4096  # rows a pass: two 512 KB operands


def agreeing(a: np.ndarray, b: np.ndarray, parts: int = 1) -> np.ndarray:
    """Per row of two aligned (n, m) packed batches: the positions whose low bits agree,
    at least the positions where the signatures agree; with `parts` > 1, (n, parts)
    counts, one for each of `parts` equal spans of the row (several signatures a row).

    Eight bytes (16 positions) at a time where rows allow: a position differs where its
    nibble of the XOR is not zero, which folding the nibble's bits onto its lowest and
    counting those bits tells, and eight words' counts (16 at most each) add up in one
    multiplication of the eight bytes that hold them. Several times faster than looking
    every byte up in `_AGREE`: this runs on every candidate the LSH proposes."""
    n, m = a.shape
    span = m // parts
    if span * parts != m:
        raise ValueError(f"{m} bytes a row do not split into {parts} equal parts")
    if span % 64 == 0 and a.strides[1] == b.strides[1] == 1:
        agree = np.empty((n, parts), np.int64)
        for start in range(0, n, _BLOCK):  # (a block's passes stay in the cache)
            end = min(n, start + _BLOCK)
            x = np.bitwise_xor(a[start:end].view(np.uint64), b[start:end].view(np.uint64))
            t = np.right_shift(x, np.uint64(1))
            x |= t
            np.right_shift(x, np.uint64(2), out=t)
            x |= t
            x &= _NIBBLE_LOW
            counts = np.bitwise_count(x)  # (rows, m / 8) uint8, 16 at most each
            sums = (counts.view(np.uint64) * _BYTE_SUM) >> np.uint64(56)
            agree[start:end] = 2 * span - sums.reshape(end - start, parts, -1).sum(axis=2)
    else:
        agree = _AGREE[np.bitwise_xor(a, b)].reshape(n, parts, span).sum(axis=2, dtype=np.int64)
    return agree[:, 0] if parts == 1 else agree


class BitRows:
    """A packed row of fixed width per item id; a cache rebuildable from the signatures.

    The rows saved as the main file stay memory-mapped (`head`: 128 bytes a text, read as
    candidates touch them, not at every open); what came after, from segments or added
    since, is held in a buffer grown by half at a time (`tail`)."""

    def __init__(self, width: int, compact_at: float = 0.25) -> None:
        self.width = int(width)
        self.compact_at = compact_at
        self._slots = Slots()
        self._head = np.empty((0, self.width), np.uint8)  # positions [0, len(head))
        self._tail = np.empty((0, self.width), np.uint8)  # the positions after, with room
        self._files = PositionFiles()

    def __len__(self) -> int:
        return len(self._slots)

    def _take(self, pos: np.ndarray) -> np.ndarray:
        head = len(self._head)
        if len(pos) and pos.max() < head:  # (the usual case: a gather, no masks)
            return np.take(self._head, pos, axis=0)
        out = np.empty((len(pos), self.width), np.uint8)
        first = pos < head
        out[first] = self._head[pos[first]]
        out[~first] = self._tail[pos[~first] - head]
        return out

    def __getitem__(self, part: slice) -> np.ndarray:
        """Rows of a range of positions (what a save writes)."""
        return self._take(np.arange(len(self._slots.ids), dtype=np.int64)[part])

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Hold rows under ids; an id already present is replaced."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        rows = np.asarray(rows, np.uint8)
        if rows.shape != (len(ids), self.width):
            raise ValueError(f"{len(ids)} ids need ({len(ids)}, {self.width}) rows, got {rows.shape}")
        if len(ids) == 0:
            return
        start = self._slots.append(ids) - len(self._head)
        end = start + len(ids)
        if end > len(self._tail):  # (grown by half again: an add copies no more than that)
            grown = np.empty((max(end, len(self._tail) * 3 // 2), self.width), np.uint8)
            grown[:start] = self._tail[:start]
            self._tail = grown
        self._tail[start:end] = rows
        self._maybe_compact()

    def remove(self, ids: np.ndarray) -> int:
        n = self._slots.kill(self._slots.find(ids))
        self._maybe_compact()
        return n

    def rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(whether each id has a live row, the rows: zeros where not)."""
        pos = self._slots.position(ids)
        have = pos >= 0
        if have.all():
            return have, self._take(pos)
        out = np.zeros((len(pos), self.width), np.uint8)
        out[have] = self._take(pos[have])
        return have, out

    def _maybe_compact(self) -> None:
        if self._slots.dead_fraction > self.compact_at:
            keep = np.flatnonzero(self._slots.alive)
            self._tail = self._take(keep)
            self._head = self._head[:0]
            self._slots.compact()

    def save(self, folder: str | Path, prefix: str, on_disk: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write what the files on disk lack (index/runs.py); returns their manifest."""
        return self._files.save(Path(folder), prefix, {"format": FORMAT, "width": self.width},
                                self._slots, {"rows": self}, None, on_disk)

    @classmethod
    def load(cls, folder: str | Path, manifest: dict[str, Any], compact_at: float = 0.25) -> "BitRows":
        if manifest.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file set (got {manifest.get('format')!r})")
        out = cls(manifest["width"], compact_at)
        head, tail = out._files.load(Path(folder), manifest, out._slots, ("rows",), None, mapped=True)["rows"]
        for part in (head, tail):
            if part.dtype != np.uint8 or part.shape[1:] != (out.width,):
                raise ValueError("bit rows do not match their manifest")
        out._head, out._tail = head, tail
        return out
