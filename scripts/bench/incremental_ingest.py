"""1,000 new texts into a store that holds N against the same 1,000 into an empty store.

A store grows by small ingests (a crawler's batch an hour): their cost should not grow with
the store. Both stores are built with the same settings; each timed ingest runs in a
process of its own through the command line, so opening the store and its indexes counts.
Prints wall and CPU seconds of both and their ratio.

    python scripts/bench/incremental_ingest.py [--n 100000] [--new 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from text_ingest_speed import make_texts  # noqa: E402
from timing import child_seconds  # noqa: E402


def write(path: Path, texts: list[str], prefix: str) -> Path:
    path.write_text("".join(json.dumps({"id": f"{prefix}{i}", "text": t}) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    return path


def ingest(home: Path, manifest: Path) -> tuple[float, float]:
    return child_seconds([sys.executable, "-m", "mmdedup", "--home", str(home), "ingest",
                          "--no-progress", str(manifest)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=1000)
    args = parser.parse_args()
    texts = make_texts(args.n + args.new)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = write(folder / "base.jsonl", texts[: args.n], "old")
        new = write(folder / "new.jsonl", texts[args.n:], "new")
        ingest(folder / "full", base)
        full = ingest(folder / "full", new)
        empty = ingest(folder / "empty", new)
    print(f"| {args.new:,} new texts of 400 words into | wall s | CPU s |")
    print("|---|---|---|")
    print(f"| an empty store | {empty[0]:.2f} | {empty[1]:.2f} |")
    print(f"| a store of {args.n:,} | {full[0]:.2f} | {full[1]:.2f} |")
    print(f"| ratio | {full[0] / empty[0]:.2f}x | {full[1] / empty[1]:.2f}x |")


if __name__ == "__main__":
    main()
