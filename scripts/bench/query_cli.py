"""A text query through the command line on a large store, against starting Python.

`mmdedup --home H query --text T --format json` is what a crawler's "have we seen this?"
check runs: a process of its own that opens the store and the text signal's indexes, signs
the text, searches and scores. Timed per run (wall and CPU of the child process), best and
median of --runs, next to a bare `python -c pass` measured in the same run. The store is
one built by incremental_ingest.py (`--store DIR` keeps it as DIR/store-N); it must have
been written by the code under test (that script's untimed warm-up ingest does it), or
every query would rebuild the index from the store.

    python scripts/bench/query_cli.py --home DIR/store-1000000 [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from incremental_ingest import text_chunks  # noqa: E402
from timing import child_seconds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    text = next(text_chunks(1, 2))[0]
    query = [sys.executable, "-m", "mmdedup", "--home", str(args.home), "query", "--text", text,
             "--format", "json"]
    child_seconds(query)  # the files into the page cache, as on a machine that runs queries
    bare = [child_seconds([sys.executable, "-c", "pass"]) for _ in range(args.runs)]
    runs = [child_seconds(query) for _ in range(args.runs)]
    print(f"| {args.runs} runs each | wall s, best / median | CPU s, best / median | ratio (median wall) |")
    print("|---|---|---|---|")
    for label, got in (("`python -c pass`", bare), ("`mmdedup query --text`", runs)):
        walls, cpus = [w for w, _ in got], [c for _, c in got]
        print(f"| {label} | {min(walls):.3f} / {statistics.median(walls):.3f} | "
              f"{min(cpus):.3f} / {statistics.median(cpus):.3f} | "
              f"{statistics.median(walls) / statistics.median(w for w, _ in bare):.1f}x |")


if __name__ == "__main__":
    main()
