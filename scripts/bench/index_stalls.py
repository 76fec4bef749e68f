"""The longest single index step of a long text ingest, against the typical one.

An ingest adds a chunk at a time to the text signal's two indexes (SimHash HammingIndex at
radius 3, BandLSH of 22 bands x 4 rows over 88 weighted-MinHash positions) and searches
the chunk in both; every so often a run ends and saves the index files (a segment, or the
main runs again after a merge or a compaction), and the next run opens them. Here the same
steps run on the indexes alone, without the store or the extraction, with random codes and
signatures, to N entries: one chunk's add + search is timed each time, as are every save
and open, and a removal of a third of the entries halfway (which compacts: positions are
renumbered). Each step is timed in wall and CPU seconds (on a busy machine the wall time
of a step includes waiting for a core). Prints the median chunk (the baseline), the slowest chunk and what it did
(a tail -> main merge, a compaction), the slowest save and open, and their ratios.

    python scripts/bench/index_stalls.py [--n 1000000] [--chunk 1000] [--run 50000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from mmdedup.index.cache import load_parts, read_stamp, save_cached
from mmdedup.index.hamming import HammingIndex
from mmdedup.index.lsh import BandLSH

LOADERS = {"simhash": HammingIndex.load, "lsh": BandLSH.load}


def timed(step: Callable[[], object]) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = step()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=1000, help="items an ingest chunk adds")
    parser.add_argument("--run", type=int, default=50_000, help="items a run adds before it saves")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    hamming, lsh = HammingIndex(), BandLSH(0.4, 88)
    chunks: list[tuple[float, float, str]] = []
    saves: list[tuple[float, float]] = []
    opens: list[tuple[float, float]] = []
    removed = False
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for start in range(0, args.n, args.chunk):
            ids = np.arange(start, min(start + args.chunk, args.n), dtype=np.int64)
            codes = rng.integers(0, 2**64, len(ids), dtype=np.uint64)
            sigs = rng.integers(0, 2**32, (len(ids), 88), dtype=np.uint32)
            what = ""
            main_before = lsh._runs.main_end, hamming._runs.main_end if hamming._runs else 0
            if not removed and start >= args.n // 2:
                gone = ids[0] - 1 - np.arange(0, start, 3)  # a third of what is stored
                removed, what = True, "removal + compaction, "
            else:
                gone = np.empty(0, np.int64)

            def step() -> None:
                hamming.remove(gone)
                lsh.remove(gone)
                hamming.add(ids, codes)
                lsh.add(ids, sigs)
                hamming.search(codes, 3)
                lsh.query(sigs)

            _, wall, cpu = timed(step)
            if (lsh._runs.main_end, hamming._runs.main_end) != main_before and not what:
                what = "tail -> main merge, "
            chunks.append((wall, cpu, what))
            if (start + len(ids)) % args.run == 0 or start + len(ids) == args.n:
                _, *took = timed(lambda: save_cached(folder, "text", {"seq": start},
                                                     {"simhash": hamming, "lsh": lsh}))
                saves.append(tuple(took))
                parts, *took = timed(lambda: load_parts(folder, read_stamp(folder, "text"), LOADERS))
                opens.append(tuple(took))
                hamming, lsh = parts["simhash"], parts["lsh"]
        size = sum(f.stat().st_size for f in folder.iterdir())
    times = np.array([c[:2] for c in chunks])
    worst = int(np.argmax(times[:, 1]))
    median = np.median(times, axis=0)
    print(f"{args.n:,} entries, chunks of {args.chunk:,}, a save and an open every {args.run:,}; "
          f"files at the end: {size / 2**20:.0f} MiB")
    print("| step | wall s | CPU s | CPU ratio to the median chunk |")
    print("|---|---|---|---|")
    print(f"| a chunk's add + search, median (baseline) | {median[0]:.4f} | {median[1]:.4f} | 1.0x |")
    print(f"| the slowest chunk by CPU ({chunks[worst][2]}chunk {worst:,}) | {times[worst, 0]:.3f} | "
          f"{times[worst, 1]:.3f} | {times[worst, 1] / median[1]:.0f}x |")
    for label, steps in (("a save (segment or main)", saves), ("an open (memory-mapped)", opens)):
        a = np.array(steps)
        k = int(np.argmax(a[:, 1]))
        print(f"| {label}, median | {np.median(a[:, 0]):.3f} | {np.median(a[:, 1]):.3f} | "
              f"{np.median(a[:, 1]) / median[1]:.1f}x |")
        print(f"| {label}, slowest by CPU | {a[k, 0]:.3f} | {a[k, 1]:.3f} | {a[k, 1] / median[1]:.1f}x |")
    print(f"| all {len(chunks):,} chunks | {times[:, 0].sum():.1f} | {times[:, 1].sum():.1f} | |")


if __name__ == "__main__":
    main()
