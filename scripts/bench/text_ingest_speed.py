"""End-to-end text ingest rate next to datasketch, measured in one run on the same texts.

mmdedup: `Platform.ingest` of N texts into a fresh store (normalising, tokenising, TF-IDF
refreshes, three sketches, candidate search, scoring, and every database write included).
Baseline: datasketch's MinHash(num_perm=128).update_batch over the same texts' words plus
MinHashLSH.insert, nothing else (no tokenising beyond str.split, no storage).

    python scripts/bench/text_ingest_speed.py [--n 100000] [--db URL] [--workers N]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from text_quality import BODY_EXPONENT, make_vocab  # noqa: E402

from mmdedup import Platform  # noqa: E402


def make_texts(n: int, words: int = 400, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocab(random.Random(seed)))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** BODY_EXPONENT
    p /= p.sum()
    return [" ".join(row) for row in vocab[rng.choice(len(vocab), size=(n, words), p=p)]]


def datasketch_rate(texts: list[str]) -> float:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    start = time.perf_counter()
    for i, text in enumerate(texts):
        m = MinHash(num_perm=128)
        m.update_batch([w.encode("utf-8") for w in text.split()])
        lsh.insert(str(i), m)
    return len(texts) / (time.perf_counter() - start)


def mmdedup_rate(texts: list[str], db_url: str | None, workers: int) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as home, Platform.open(home, db_url) as platform:
        items = [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)]
        start = time.perf_counter()
        report = platform.ingest(items, workers=workers)
        elapsed = time.perf_counter() - start
        return len(texts) / elapsed, f"{report.summary()}; TF-IDF refreshes {platform.signal('text').refreshes}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--db", default=None, help="database URL (default: SQLite in a temp dir)")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes in all (default 1: everything in one process; with N > 1, "
                             "N - 1 extract chunks ahead of the one that writes)")
    args = parser.parse_args()
    texts = make_texts(args.n)
    ours, summary = mmdedup_rate(texts, args.db, args.workers)
    theirs = datasketch_rate(texts)
    print(summary)
    print(f"| what ({args.n:,} texts of 400 words) | texts/s | ratio |")
    print("|---|---|---|")
    print(f"| datasketch MinHash-128 update_batch + MinHashLSH.insert | {theirs:,.0f} | 1.0x |")
    where = "SQLite" if not args.db else args.db.split(":")[0]
    how = "one process" if args.workers <= 1 else f"{args.workers} processes"
    print(f"| mmdedup ingest end to end ({where}, {how}) "
          f"| {ours:,.0f} | {ours / theirs:.1f}x |")


if __name__ == "__main__":
    main()
