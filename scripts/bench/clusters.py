"""Duplicate groups of a large store: `mmdedup clusters` as pairs grow, against networkx.

A store of N items and M pairs is written straight into SQLite (items are rows only:
what `clusters` reads is the pairs, the labels and the members' rows). A tenth of the
items are copies in groups of 2 to a few thousand (sizes drawn from a power law, as a
crawl's are: many pairs of two, a few pages repeated everywhere); a group's strong pairs
are a random tree over it and more random pairs within it, up to M pairs in all with
the rest medium or weak pairs across groups (which join nothing), a few strong pairs
whose other medium disagrees (which join nothing either) and some reviewer labels.

Timed, each in a process of its own (wall s, CPU s, peak MB): `mmdedup clusters
--format jsonl`, and the baseline: networkx's `connected_components` over every strong
pair read from the store into one graph, the way a Python user would do it by hand. Both
must find the same groups, which this script checks.

    python scripts/bench/clusters.py [--items 1000000] [--pairs 1000000 4000000]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from timing import child_usage  # noqa: E402

MMDEDUP = str(Path(sys.executable).with_name("mmdedup"))
NOW = "2026-12-01 00:00:00.000000"


def write_store(home: Path, n_items: int, n_pairs: int, seed: int = 0) -> None:
    """The store: items 1..N, then the pairs and labels described above. Run in a process
    of its own (`--write`): a child forked from a process that held these arrays would
    report that process's peak memory as its own."""
    import numpy as np

    from mmdedup import Platform

    with Platform.open(home) as p:
        strong, medium = p.settings.tier_strong, p.settings.tier_medium
    rng = np.random.default_rng(seed)
    db = sqlite3.connect(home / "mmdedup.db")
    db.executemany(
        "INSERT INTO items (pk, id, meta, content_key, fingerprint, status, created_at, updated_at) "
        "VALUES (?, ?, '{}', ?, ?, 'ok', ?, ?)",
        ((pk, f"item-{pk}", f"{pk:064x}", f"{pk:064x}", NOW, NOW) for pk in range(1, n_items + 1)))
    copies = rng.permutation(np.arange(1, n_items + 1))[: n_items // 10]
    sizes = np.minimum(1 + rng.zipf(2.0, size=len(copies)), 5000)
    ends = np.cumsum(sizes)
    groups = np.split(copies, ends[ends < len(copies)])
    edges = []
    for g in groups:
        if len(g) > 1:  # a random tree, then as many again at random
            edges.append(np.stack([g[1:], g[rng.integers(0, np.arange(1, len(g)))]], 1))
    tree = np.concatenate(edges)
    more = max(0, (n_pairs - len(tree)) // 2)
    at = rng.integers(0, len(copies), more)  # copies holds the groups one after the other
    group = np.searchsorted(ends, at, side="right")
    starts = np.concatenate([[0], ends])[group]
    size = np.minimum(ends[np.minimum(group, len(ends) - 1)], len(copies)) - starts
    a, b = copies[at], copies[starts + rng.integers(0, size)]
    within = np.stack([a, b], 1)[a != b]
    across = rng.integers(1, n_items + 1, size=(n_pairs - len(tree) - len(within), 2))
    across = across[across[:, 0] != across[:, 1]]

    def rows(pairs: Any, score: tuple[float, float], signals: str) -> list[tuple]:
        lo, hi = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
        return [(int(x), int(y), float(s), signals, NOW)
                for x, y, s in zip(lo, hi, rng.uniform(*score, len(pairs)))]

    disagree = across[: len(across) // 100]
    insert = ("INSERT OR IGNORE INTO pairs (a_pk, b_pk, score, kind, signals, updated_at) "
              "VALUES (?, ?, ?, 'text-reuse', ?, ?)")
    db.executemany(insert, rows(np.concatenate([tree, within]), (strong, 1.0), '{"text": 0.97}'))
    db.executemany(insert, rows(disagree, (strong, 1.0), '{"text": 0.97, "image": 0.1}'))
    db.executemany(insert, rows(across[len(disagree):], (medium - 0.15, strong - 0.001), '{"text": 0.8}'))
    labelled = within[: 1000]
    db.executemany("INSERT INTO labels (a_pk, b_pk, decision, reviewer, created_at) VALUES (?, ?, ?, 'bench', ?)",
                   [(int(min(x, y)), int(max(x, y)), "distinct", NOW) for x, y in labelled[:500]]
                   + [(int(min(x, y)), int(max(x, y)), "duplicate", NOW) for x, y in across[-500:]])
    db.commit()
    db.close()
    print(strong)


BASELINE = r"""
import json, sqlite3, sys
import networkx as nx
strong, out = float(sys.argv[2]), sys.argv[3]
db = sqlite3.connect(sys.argv[1])
latest = {}
for a, b, d in db.execute("SELECT a_pk, b_pk, decision FROM labels WHERE decision != 'unsure' ORDER BY pk"):
    latest[(a, b)] = d
g = nx.Graph()
for a, b, signals in db.execute("SELECT a_pk, b_pk, signals FROM pairs WHERE score >= ?", (strong,)):
    s = json.loads(signals)
    if all(v is None or v >= 0.7 for k, v in s.items() if k in ("text", "semantic", "image", "video")):
        g.add_edge(a, b)
for (a, b), d in latest.items():
    if d == "duplicate":
        g.add_edge(a, b)
    elif g.has_edge(a, b):
        g.remove_edge(a, b)
ids = dict(db.execute("SELECT pk, id FROM items"))
groups = sorted(sorted(ids[pk] for pk in c) for c in nx.connected_components(g) if len(c) > 1)
json.dump(groups, open(out, "w"))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, nargs="+", default=[1_000_000, 4_000_000])
    parser.add_argument("--write", metavar="HOME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        return write_store(Path(args.write), args.items, args.pairs[0])
    print(f"{args.items:,} items; `mmdedup clusters --format jsonl` against networkx over every strong pair")
    print("| pairs | strong pairs | groups | mmdedup wall s | CPU s | peak MB | networkx wall s | CPU s | peak MB "
          "| CPU ratio | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n_pairs in args.pairs:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            strong = float(subprocess.run([sys.executable, __file__, "--write", str(home), "--items", str(args.items),
                                           "--pairs", str(n_pairs)], check=True, capture_output=True,
                                          text=True).stdout)
            with sqlite3.connect(home / "mmdedup.db") as db:
                n_strong = db.execute("SELECT count(*) FROM pairs WHERE score >= ?", (strong,)).fetchone()[0]
            out = Path(tmp) / "clusters.jsonl"
            env = {**os.environ, "MMDEDUP_HOME": str(home)}
            ours = child_usage(["sh", "-c", f'"{MMDEDUP}" clusters --format jsonl > "{out}"'], env)
            theirs = child_usage([sys.executable, "-c", BASELINE, str(home / "mmdedup.db"), str(strong),
                                  str(Path(tmp) / "baseline.json")])
            found = sorted(sorted(json.loads(line)["members"]) for line in out.read_text().splitlines())
            if found != json.loads((Path(tmp) / "baseline.json").read_text()):
                raise SystemExit(f"{n_pairs:,} pairs: mmdedup's groups differ from networkx's")
            print(f"| {n_pairs:,} | {n_strong:,} | {len(found):,} | {ours[0]:.1f} | {ours[1]:.1f} | {ours[2]:,.0f} "
                  f"| {theirs[0]:.1f} | {theirs[1]:.1f} | {theirs[2]:,.0f} | {ours[1] / theirs[1]:.2f}x "
                  f"| {ours[2] / theirs[2]:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
