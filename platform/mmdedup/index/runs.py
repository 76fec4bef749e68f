"""Sorted runs of ``key << 32 | position`` entries, and their files: what the band LSH and
the Hamming index's chunk tables are made of.

Why sorted ``uint64`` runs: a table is one array whose entries carry a 32-bit key in the
high half and a dense position in the low half; equal keys sit next to each other, so a
bucket is a slice found with two ``searchsorted`` calls for a whole batch of queries at
once, and the table costs 8 bytes per entry (no hash table nodes).

Why main + tail + pending: writes go to an unsorted pending list (O(batch)); the first read
sorts it into a small sorted *tail* run per table, and the tail is merged into the *main*
run (linear) once it passes 1/8 of main, so neither a stream of small batches nor a bulk
load re-sorts the whole table per batch, and the largest single merge is bounded by the
size of main (it is amortised over the 1/8 of main added since the last one). Positions
only grow, so main holds positions ``[0, main_end)`` and the tail every later one.

Why files of their own per run (``.npy``) rather than one ``.npz``: an ``.npy`` file opens
with ``np.load(mmap_mode="r")``, and a ``searchsorted`` on a memory-mapped sorted run
touches only the pages its binary search visits (a few dozen per query), so a process
that asks a handful of queries never reads the tables whole; a zip member cannot be
mapped. The same layout lets a save write only what changed: the main files of a part
are written once and never modified; each later save appends a *segment* (the positions
added since the previous save, their sorted run entries, and the positions removed so
far); segments are folded into one when there are too many, and main is written again
only when main changed in memory (the tail was merged into it, or removals renumbered it).
Every file gets a name of its own, so a file a stamp names is never rewritten: a save
killed half-way leaves files no stamp names, which the next save deletes (cache.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .slots import Slots, expand_ranges

LOW = np.uint64(0xFFFFFFFF)
HIGH = np.uint64(0xFFFFFFFF00000000)
_MIN_TAIL = 1 << 16
MAX_SEGMENTS = 8  # past this, a save writes the whole tail as one segment (it is small)


def merge(run: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Merge a sorted run with a sorted batch in linear time."""
    if len(run) == 0:
        return np.asarray(new)
    if len(new) == 0:
        return run
    return np.insert(run, np.searchsorted(run, new), new)


class Runs:
    """``tables`` sorted runs over the same dense positions (one entry per position and
    table), with main, tail and pending as above. The owner keeps the ids (Slots)."""

    def __init__(self, tables: int) -> None:
        self.tables = tables
        self.main: np.ndarray = np.empty((tables, 0), np.uint64)  # may be a read-only memmap
        self.tail = [np.empty(0, np.uint64) for _ in range(tables)]
        self.pending: list[np.ndarray] = []
        self.main_changed = True  # main differs from the main files last written or read

    @property
    def main_end(self) -> int:
        return self.main.shape[1]

    def nbytes(self) -> int:
        return self.main.nbytes + sum(t.nbytes for t in self.tail) + sum(p.nbytes for p in self.pending)

    def add(self, keys: np.ndarray, start: int) -> None:
        """Entries for positions start.. (keys: (n, tables) with the key in the high half)."""
        keys = keys | np.arange(start, start + len(keys), dtype=np.uint64)[:, None]
        self.pending.append(keys)

    def flush(self) -> None:
        """Sort pending entries into the tail; fold the tail into main when it is big."""
        if self.pending:
            batch = np.concatenate(self.pending) if len(self.pending) > 1 else self.pending[0]
            self.pending = []
            for t in range(self.tables):
                self.tail[t] = merge(self.tail[t], np.sort(batch[:, t]))
        if len(self.tail[0]) > max(_MIN_TAIL, self.main_end // 8):
            merged = np.empty((self.tables, self.main_end + len(self.tail[0])), np.uint64)
            for t in range(self.tables):
                merged[t] = merge(self.main[t], self.tail[t])
                self.tail[t] = np.empty(0, np.uint64)
            self.main = merged
            self.main_changed = True

    def lookup(self, table: int, lo_key: np.ndarray, first: int | None = None,
               alive: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query row, int64 position) of every entry of `table` whose key is a query's
        (keys in the high half, low half zero), and for each query the entries it passed
        over: with `first`, a bucket gives at most its `first` earliest positions of each
        run (main, tail), so a key that thousands of items share costs a query a bounded
        slice, not the whole bucket. `alive` (by position): only live positions count
        towards `first` and come back, so entries of items since changed or removed (kept
        until a compaction) do not take a bucket's first places from live ones. Call
        `flush` first."""
        # The keys searched in ascending order: numpy's binary search starts each key from
        # where the last one ended, so a batch over a run larger than the caches takes far
        # fewer misses (about half the time at a million entries); the bounds go back to
        # the queries' order, so the result is the same.
        order = np.argsort(lo_key)
        lo_sorted = lo_key[order]
        hi_sorted = lo_sorted | LOW
        qs, ps = [], []
        lo, hi = np.empty(len(lo_key), np.intp), np.empty(len(lo_key), np.intp)
        passed = np.zeros(len(lo_key), np.int64)
        for run in (self.main[table], self.tail[table]):
            if len(run) == 0:
                continue
            lo[order] = np.searchsorted(run, lo_sorted, side="left")
            hi[order] = np.searchsorted(run, hi_sorted, side="right")
            start, wanted = lo.copy(), np.full(len(lo_key), first or 0, np.intp)
            while True:  # more than one round only where dead entries took a window's places
                end = hi.copy() if first is None else np.minimum(hi, start + wanted)
                q, k = expand_ranges(start, end)
                pos = (run[k] & LOW).astype(np.int64)
                if alive is not None:
                    live = alive[pos]
                    q, pos = q[live], pos[live]
                qs.append(q)
                ps.append(pos)
                wanted -= np.bincount(q, minlength=len(lo_key)) if alive is not None else end - start
                start = end
                if alive is None or first is None or not ((wanted > 0) & (start < hi)).any():
                    break
            passed += hi - start
        if not qs:
            return np.empty(0, np.int64), np.empty(0, np.int64), passed
        return np.concatenate(qs), np.concatenate(ps), passed

    def renumber(self, keep: np.ndarray) -> None:
        """Drop the positions not in `keep` and number the rest densely (a monotone
        renumbering: the runs stay sorted without a re-sort)."""
        self.flush()
        remap = (np.cumsum(keep) - 1).astype(np.uint64)

        def renumber(run: np.ndarray) -> np.ndarray:
            pos = (run & LOW).astype(np.int64)
            live = keep[pos]
            return (run[live] & HIGH) | remap[pos[live]]

        self.main = np.stack([renumber(r) for r in self.main]) if self.main_end else \
            np.empty((self.tables, 0), np.uint64)
        self.tail = [renumber(r) for r in self.tail]
        self.main_changed = True

    def tail_from(self, start: int) -> np.ndarray:
        """(tables, m) sorted entries of the positions >= start (all in the tail)."""
        if start <= self.main_end:
            rows = self.tail
        else:
            rows = [r[(r & LOW) >= np.uint64(start)] for r in self.tail]
        return np.stack(rows) if rows else np.empty((0, 0), np.uint64)


# --------------------------------------------------------------------------- #
# files
# --------------------------------------------------------------------------- #


def save_array(folder: Path, name: str, array: np.ndarray) -> str:
    """Write an .npy whole (temp file renamed into place), return its file name."""
    path = folder / name
    tmp = folder / f"{name}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(array), allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return name


def load_array(folder: Path, name: str, mmap: bool = False) -> np.ndarray:
    """An .npy written by `save_array`; memory-mapped read-only with `mmap`."""
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise ValueError(f"not an index file name: {name!r}")
    return np.load(folder / name, mmap_mode="r" if mmap else None, allow_pickle=False)


def new_token() -> str:
    """A name part no earlier save used (files are never rewritten in place)."""
    return f"{time.time_ns():x}{os.getpid():x}"


class PositionFiles:
    """Saving and opening what every position-addressed index has: its ids (Slots),
    optional per-position columns (Hamming codes) and optional Runs, as main files plus
    segments, with the dead positions. The manifest (a dict) names the files; it is what
    the stamp stores for the part, and what `save` compares with the manifest the stamp
    on disk holds to know whether it may append."""

    def __init__(self) -> None:
        self.disk: dict[str, Any] | None = None  # the manifest last written or read

    def save(self, folder: Path, prefix: str, meta: dict[str, Any], slots: Slots,
             columns: dict[str, np.ndarray], runs: Runs | None,
             on_disk: dict[str, Any] | None) -> dict[str, Any]:
        """Write what the files on disk lack; return the new manifest. Appends a segment
        when `on_disk` is the manifest this index was read from or last wrote and main is
        unchanged since; else writes main again."""
        token = new_token()
        n = len(slots.ids)
        main_end = n
        if runs is not None:
            runs.flush()
            main_end = runs.main_end
        old = self.disk
        fresh = (old is None or on_disk != old or (runs is not None and runs.main_changed)
                 or old.get("runs") != (runs is not None) or slots.renumbered)
        if fresh:
            main = {"end": main_end, "ids": save_array(folder, f"{prefix}.{token}.ids.npy", slots.ids[:main_end])}
            for col, values in columns.items():
                main[col] = save_array(folder, f"{prefix}.{token}.{col}.npy", values[:main_end])
            if runs is not None:
                main["runs"] = save_array(folder, f"{prefix}.{token}.runs.npy", runs.main)
            segments: list[dict[str, Any]] = []
            start = main_end
        else:
            main = old["main"]
            segments = list(old["segments"])
            start = old["n"]
            if len(segments) >= MAX_SEGMENTS:
                segments, start = [], main["end"]
        if start < n:
            seg = {"start": start, "end": n,
                   "ids": save_array(folder, f"{prefix}.{token}.seg-ids.npy", slots.ids[start:n])}
            for col, values in columns.items():
                seg[col] = save_array(folder, f"{prefix}.{token}.seg-{col}.npy", values[start:n])
            if runs is not None:
                seg["runs"] = save_array(folder, f"{prefix}.{token}.seg-runs.npy", runs.tail_from(start))
            segments.append(seg)
        dead = None
        if slots.n_dead:
            dead = save_array(folder, f"{prefix}.{token}.dead.npy", np.flatnonzero(~slots.alive))
        manifest = {**meta, "n": n, "ascending": bool(slots.ascending), "runs": runs is not None,
                    "main": main, "segments": segments, "dead": dead}
        self.disk = manifest
        slots.renumbered = False
        if runs is not None:
            runs.main_changed = False
        return manifest

    def load(self, folder: Path, manifest: dict[str, Any], slots: Slots, columns: tuple[str, ...],
             runs: Runs | None, mapped: bool = False) -> dict[str, Any]:
        """Fill `slots` and `runs` from the files; return the columns. Main runs are
        memory-mapped; ids, columns and segments are read (8 bytes a position). `mapped`:
        each column as (its main part memory-mapped, its segments read and joined), for
        columns wider than the ids (index/bbit.py)."""
        main, segments = manifest["main"], manifest["segments"]
        ends = [main["end"]] + [s["end"] for s in segments]
        starts = [0] + [s["start"] for s in segments]
        if starts[1:] != ends[:-1] or ends[-1] != manifest["n"]:
            raise ValueError("index segments do not follow each other")
        parts = [main] + segments
        ids = np.concatenate([load_array(folder, p["ids"]) for p in parts])
        if len(ids) != manifest["n"] or ids.dtype != np.int64:
            raise ValueError("index ids do not match their manifest")
        out: dict[str, Any] = {}
        for col in columns:
            if mapped:
                head = load_array(folder, main[col], mmap=True)
                rest = [load_array(folder, p[col]) for p in segments]
                out[col] = (head, np.concatenate(rest) if rest else head[:0].copy())
                size = len(head) + len(out[col][1])
            else:
                out[col] = np.concatenate([load_array(folder, p[col]) for p in parts])
                size = len(out[col])
            if size != len(ids):
                raise ValueError(f"index {col} do not match their ids")
        slots.restore(ids, bool(manifest["ascending"]))
        if manifest["dead"] is not None:
            slots.kill(load_array(folder, manifest["dead"]))
        if runs is not None:
            if not manifest["runs"]:
                raise ValueError("index files hold no runs")
            runs.main = load_array(folder, main["runs"], mmap=True)
            if runs.main.shape != (runs.tables, main["end"]) or runs.main.dtype != np.uint64:
                raise ValueError("index runs do not match their manifest")
            for s in segments:
                seg = load_array(folder, s["runs"])
                if seg.shape != (runs.tables, s["end"] - s["start"]):
                    raise ValueError("index segment runs do not match their manifest")
                runs.tail = [merge(t, r) for t, r in zip(runs.tail, seg)]
            runs.main_changed = False
        self.disk = manifest
        slots.renumbered = False
        return out

    @staticmethod
    def files(manifest: dict[str, Any]) -> list[str]:
        """Every file a manifest names."""
        names = []
        for part in [manifest["main"], *manifest["segments"]]:
            names += [v for k, v in part.items() if k not in ("start", "end")]
        return names + ([manifest["dead"]] if manifest.get("dead") else [])
