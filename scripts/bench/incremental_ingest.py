"""1,000 new texts into a store that holds N against the same 1,000 into an empty store.

A store grows by small ingests (a crawler's batch an hour): their cost should not grow with
the store. Both stores are built with the same settings; each timed ingest runs in a
process of its own through the command line, so opening the store and its indexes counts.
Prints wall and CPU seconds of both and their ratio.

A store of a million texts takes a long while to build; `--store DIR` keeps it (and the
manifests) in DIR and later runs with the same --n reuse it: each timed ingest runs on a
copy, so the kept store never changes under the figures. Before the copy, one text (a new
one each run) is ingested untimed into the kept store, so its index files are the ones the
running code writes (a store built by an older release is rebuilt once there, not in the
timed run).

    python scripts/bench/incremental_ingest.py [--n 100000] [--new 1000] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from text_quality import BODY_EXPONENT, make_vocab  # noqa: E402
from timing import child_seconds  # noqa: E402

_CHUNK = 20_000  # texts drawn at a time: a million at once would take ~20 GB


def text_chunks(n: int, seed: int, words: int = 400) -> Iterator[list[str]]:
    """n texts of `words` Zipf-like words (text_ingest_speed.make_texts's distribution),
    drawn a chunk at a time."""
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocab(random.Random(0)))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** BODY_EXPONENT
    p /= p.sum()
    for start in range(0, n, _CHUNK):
        rows = vocab[rng.choice(len(vocab), size=(min(_CHUNK, n - start), words), p=p)]
        yield [" ".join(row) for row in rows]


def write(path: Path, n: int, seed: int, prefix: str) -> Path:
    if path.exists():
        return path
    temp = path.with_name(path.name + ".tmp")
    with temp.open("w", encoding="utf-8") as out:
        i = 0
        for chunk in text_chunks(n, seed):
            out.write("".join(json.dumps({"id": f"{prefix}{i + k}", "text": t}) + "\n"
                              for k, t in enumerate(chunk)))
            i += len(chunk)
    temp.replace(path)
    return path


def ingest(home: Path, manifest: Path) -> tuple[float, float]:
    return child_seconds([sys.executable, "-m", "mmdedup", "--home", str(home), "ingest",
                          "--no-progress", str(manifest)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the built store and manifests here and reuse them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        kept = args.store if args.store is not None else work
        kept.mkdir(parents=True, exist_ok=True)
        new = write(kept / f"new-{args.new}.jsonl", args.new, 1, "new")
        built = kept / f"store-{args.n}"
        if not (built / "done").exists():
            shutil.rmtree(built, ignore_errors=True)
            base = write(kept / f"base-{args.n}.jsonl", args.n, 0, "old")
            wall, cpu = ingest(built, base)
            (built / "done").write_text(f"built in {wall:.0f} s wall, {cpu:.0f} s CPU\n")
        elif args.store is not None:
            warm = work / "warm.jsonl"
            warm.write_text(json.dumps({"id": f"warm{time.time_ns()}",
                                        "text": next(text_chunks(1, time.time_ns()))[0]}) + "\n")
            ingest(built, warm)
        full = work / "full"
        shutil.copytree(built, full) if args.store is not None else built.rename(full)
        # The copy's pages written out before the clock starts: the ingest's first fsync
        # of the database file would otherwise wait for gigabytes it never wrote.
        os.sync()
        grown = ingest(full, new)
        empty = ingest(work / "empty", new)
    print(f"| {args.new:,} new texts of 400 words into | wall s | CPU s |")
    print("|---|---|---|")
    print(f"| an empty store | {empty[0]:.2f} | {empty[1]:.2f} |")
    print(f"| a store of {args.n:,} | {grown[0]:.2f} | {grown[1]:.2f} |")
    print(f"| ratio | {grown[0] / empty[0]:.2f}x | {grown[1] / empty[1]:.2f}x |")


if __name__ == "__main__":
    main()
