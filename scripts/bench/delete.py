"""Deleting items from a large store, and the first query after it.

A store of N texts (300-400 words, a tenth edited copies: store_growth.py's manifest) is
ingested; then a tenth of its items, chosen at random, are deleted with `mmdedup delete
--file IDS`. Timed, each in a process of its own (wall s, CPU s, peak MB): the deletion,
and the first `mmdedup query` after it, which opens the index files saved before the
deletion and takes the deleted items out as it catches up (the deletion log). The
baseline, in the same run: the same query after the index files are removed, which is
what every process would pay if a deletion made the files stale (the indexes rebuilt
from every stored signature). Both queries must give the same answer.

    python scripts/bench/delete.py [--items 100000] [--share 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from store_growth import write_manifest  # noqa: E402
from timing import child_usage  # noqa: E402

MMDEDUP = str(Path(sys.executable).with_name("mmdedup"))
ENV = {**os.environ, "MMDEDUP_QUERY_SERVER_IDLE": "0"}  # (each query in its own process)


def query(home: Path, text: str) -> str:
    return subprocess.run([MMDEDUP, "--home", str(home), "query", "--text", text, "--k", "20", "--format", "json"],
                          env=ENV, capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        manifest, home = tmp_path / "m.jsonl", tmp_path / "home"
        write_manifest(manifest, args.items)
        wall, cpu, peak = child_usage([MMDEDUP, "--home", str(home), "ingest", str(manifest), "--no-progress"], ENV)
        print(f"ingest {args.items} texts: {wall:.1f} s wall, {cpu:.1f} s CPU, {peak:.0f} MB")
        # (only ids and one text held: a child forked from this process starts with its
        # memory, which its peak would count)
        with manifest.open() as fh:
            probe = next(json.loads(line)["text"] for i, line in enumerate(fh) if i == 9)  # (a copy: a pair)
        gone = random.Random(0).sample([f"t{i}" for i in range(args.items)], int(args.items * args.share))
        ids = tmp_path / "ids.txt"
        ids.write_text("\n".join(gone) + "\n")
        wall, cpu, peak = child_usage([MMDEDUP, "--home", str(home), "delete", "--file", str(ids),
                                       "--no-progress"], ENV)
        print(f"delete {len(gone)} items: {wall:.1f} s wall, {cpu:.1f} s CPU, {peak:.0f} MB "
              f"({cpu / len(gone) * 1000:.2f} ms CPU an item)")
        before = query(home, probe)  # the answer, and the index files as the deletion left them
        saved = tmp_path / "index-saved"
        shutil.copytree(home / "index", saved)
        rows = []
        for name, fresh in (("files saved before the deletion, caught up", False),
                            ("baseline: index files removed, rebuilt", True)):
            shutil.rmtree(home / "index")
            if not fresh:
                shutil.copytree(saved, home / "index")
            wall, cpu, peak = child_usage([MMDEDUP, "--home", str(home), "query", "--text", probe, "--k", "20",
                                           "--format", "json"], ENV)
            rows.append((name, wall, cpu, peak))
            assert query(home, probe) == before
        for name, wall, cpu, peak in rows:
            print(f"first query after it, {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, {peak:.0f} MB "
                  f"({rows[1][2] / cpu:.1f}x less CPU than the rebuild)" if not name.startswith("baseline")
                  else f"first query after it, {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, {peak:.0f} MB")


if __name__ == "__main__":
    main()
