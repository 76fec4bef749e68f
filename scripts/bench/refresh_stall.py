"""Chunk times of a text ingest across TF-IDF refreshes: refreshes in bounded steps
against the whole refresh after the chunk that reached the point, in one run.

Each mode ingests the same N texts (400 Zipf words, text_ingest_speed.py's corpus) into
a fresh SQLite store with `Platform.ingest`, in chunks of `ingest_chunk` (default 2,000),
in a process of its own, and records when each chunk's work (the refresh step after it
included) ended: the longest chunk, the distribution of chunk times, the rate over the
first and last 10% of the texts, wall and CPU seconds, and the store's bytes per text
(the database file over the texts, and beyond the texts' own bytes).
Baseline: `tfidf_refresh_at_once` above N, i.e. every refresh whole between two chunks.

    python scripts/bench/refresh_stall.py [--n 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def child(n: int, at_once: int, home: str) -> None:
    from text_ingest_speed import make_texts

    from mmdedup import Platform

    texts = make_texts(n)
    with Platform.open(home) as p:
        text = p.signal("text")
        ends: list[tuple[float, float]] = []
        step = text.after_chunk

        def timed() -> None:
            step()
            ends.append((time.perf_counter(), time.process_time()))

        text.after_chunk = timed
        start = (time.perf_counter(), time.process_time())
        p.ingest([{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
        done = (time.perf_counter(), time.process_time())
        refreshes = text.refreshes
    db = Path(home) / "mmdedup.db"
    size = sum(f.stat().st_size for f in db.parent.glob("mmdedup.db*"))
    text_bytes = sum(len(t.encode()) for t in texts)
    marks = [start] + ends
    print(json.dumps({"wall": done[0] - start[0], "cpu": done[1] - start[1],
                      "chunks": [b[0] - a[0] for a, b in zip(marks, marks[1:])],
                      "chunk_cpu": [b[1] - a[1] for a, b in zip(marks, marks[1:])],
                      "refreshes": refreshes, "bytes": size, "text_bytes": text_bytes}))


def run(n: int, at_once: int, chunk: int) -> dict:
    with tempfile.TemporaryDirectory() as home:
        Path(home, "config.toml").write_text(f"tfidf_refresh_at_once = {at_once}\ningest_chunk = {chunk}\n")
        out = subprocess.run([sys.executable, __file__, "--child", home, "--n", str(n)],
                             capture_output=True, text=True, env=os.environ)
        if out.returncode:
            raise SystemExit(out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1])


def summary(r: dict, n: int, chunk: int) -> dict:
    t = np.array(r["chunks"])
    tenth = max(1, len(t) // 10)
    return {"longest chunk s": t.max(), "median": np.median(t), "p90": np.percentile(t, 90),
            "p99": np.percentile(t, 99), "longest chunk CPU s": max(r["chunk_cpu"]),
            "texts/s first 10%": tenth * chunk / t[:tenth].sum(),
            "texts/s last 10%": tenth * chunk / t[-tenth:].sum(),
            "wall s": r["wall"], "CPU s": r["cpu"], "refreshes": r["refreshes"],
            "bytes/text": r["bytes"] / n, "beyond the text": (r["bytes"] - r["text_bytes"]) / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=2000)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from mmdedup.config import load_settings  # noqa: F401  (the child's own settings)

        child(args.n, 0, args.child)
        return
    whole = summary(run(args.n, 10 * args.n, args.chunk), args.n, args.chunk)
    steps = summary(run(args.n, 0, args.chunk), args.n, args.chunk)
    print(f"{args.n:,} texts of 400 words, chunks of {args.chunk:,}")
    print("| figure | whole refresh (baseline) | in steps | ratio |")
    print("|---|---|---|---|")
    for key in whole:
        a, b = whole[key], steps[key]
        print(f"| {key} | {a:,.3f} | {b:,.3f} | {b / a if a else float('nan'):.2f}x |")


if __name__ == "__main__":
    main()
