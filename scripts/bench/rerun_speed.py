"""A rerun of an unchanged batch against its first ingest and against merely reading it.

mmdedup: a manifest of N texts ingested into a fresh store, then ingested again unchanged
(what a scheduled re-crawl of a source mostly is). Baseline, in the same run: reading the
manifest (json.loads of every line) and taking a SHA-256 of each record, the least any
rerun must do to know nothing changed. Prints wall and CPU seconds of each.

    python scripts/bench/rerun_speed.py [--n 30000] [--db URL]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from text_ingest_speed import make_texts  # noqa: E402

from mmdedup import Platform  # noqa: E402


def timed(work) -> tuple[float, float, object]:  # noqa: ANN001
    wall, cpu = time.perf_counter(), time.process_time()
    out = work()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def read_and_hash(path: Path) -> int:
    n = 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000)
    parser.add_argument("--db", default=None, help="database URL (default: SQLite in a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "manifest.jsonl"
        manifest.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                                    for i, t in enumerate(make_texts(args.n))), encoding="utf-8")
        with Platform.open(Path(tmp) / "home", args.db) as platform:
            first = timed(lambda: platform.ingest(manifest))
            again = timed(lambda: platform.ingest(manifest))
        floor = timed(lambda: read_and_hash(manifest))
    print(f"rerun: {again[2].summary()}")
    print(f"| what ({args.n:,} texts of 400 words) | wall s | CPU s | CPU against the rerun |")
    print("|---|---|---|---|")
    for name, (wall, cpu, _) in (("first ingest", first), ("rerun, nothing changed", again),
                                 ("baseline: json.loads + SHA-256 of every line", floor)):
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / again[1]:.2f}x |")


if __name__ == "__main__":
    main()
