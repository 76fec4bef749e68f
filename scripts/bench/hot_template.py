"""One text repeated with small edits across a crawl: what the pairs cost as copies grow.

A crawl holds thousands of near-copies of one short page ("page not found", a cookie
wall, a login form), each with a few words changed and a reference number. Every copy
is a near-duplicate of every other, and an ingest that scores each new copy against every
earlier one does n(n-1)/2 pairs of work: its time, memory and store grow with the square
of the copies. This benchmark ingests N such copies (the local engine, a process of its
own, a fresh SQLite store) and prints, once it is done, the pairs in a tier (by tier)
and the clusters they make, wall and CPU seconds, the peak memory of the process and the
store's size, and what the cap on candidates an item (`max_candidates_per_item`) cut, for
each N asked: with the cap as configured, and, up to `--uncapped-up-to` copies, with a cap
no run reaches (what every ingest did before there was one). The baseline of the same run
is datasketch's MinHashLSH (128 permutations, threshold 0.5) over the same texts' words:
the candidates it returns, one query per copy against the earlier ones, which grow with
the square of the copies.

    python scripts/bench/hot_template.py [--copies 250 500 1000 4000] [--uncapped-up-to 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from mmdedup import Platform
from mmdedup.store.runs import run_counts

sys.path.insert(0, str(Path(__file__).parent))
from timing import child_usage  # noqa: E402

WORDS = ("Sorry, the page you were looking for could not be found on this site. It may have been moved, "
         "renamed or removed by the editors. Please check the address, use the search box above, or go back "
         "to the home page to browse our latest stories, videos and photo galleries from around the world. "
         "Subscribe to our newsletter for daily updates and follow us on social media for breaking news.").split()
NO_CAP = 10 ** 9  # a max_candidates_per_item no run reaches
SWAPS = ("story", "update", "section", "archive", "gallery", "report")


def copies(n: int, seed: int = 1) -> list[str]:
    """n copies of the page, each with three words swapped and a reference number added."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = list(WORDS)
        for _ in range(3):
            words[rng.randrange(len(words))] = rng.choice(SWAPS)
        words.insert(rng.randrange(len(words)), f"ref{rng.randrange(10 ** 6)}")
        out.append(" ".join(words))
    return out


def ingest(texts: list[str], folder: Path, cap: int | None) -> dict:
    """One ingest of the copies in a process of its own; `cap`: max_candidates_per_item
    (None: as configured)."""
    manifest = folder / "copies.jsonl"
    manifest.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    home = folder / "store"
    env = {**os.environ, **({"MMDEDUP_MAX_CANDIDATES_PER_ITEM": str(cap)} if cap else {})}
    wall, cpu, peak = child_usage([sys.executable, "-m", "mmdedup", "--home", str(home), "ingest", "--no-progress",
                                   str(manifest)], env=env)
    with Platform.open(home, read_only=True) as p:
        stats = p.stats()
        with p.sessions() as session:
            (counts,) = run_counts(session)
    return {"tiers": stats["pairs"], "pairs": sum(stats["pairs"].values()), "clusters": stats["clusters"],
            "written": counts["near_pairs"], "cut": counts["capped"].get("text", {}), "wall": wall, "cpu": cpu,
            "peak_mb": peak,
            "store_mb": sum(f.stat().st_size for f in home.rglob("*") if f.is_file()) / 2 ** 20}


def datasketch_candidates(texts: list[str]) -> tuple[int, float]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    found, started = 0, time.process_time()
    for i, text in enumerate(texts):
        m = MinHash(num_perm=128)
        m.update_batch([w.lower().encode() for w in text.split()])
        found += len(lsh.query(m))
        lsh.insert(str(i), m)
    return found, time.process_time() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, nargs="+", default=[250, 500, 1000])
    ap.add_argument("--uncapped-up-to", type=int, default=1000,
                    help="also ingest without a cap up to this many copies (its cost grows with their square)")
    args = ap.parse_args()
    print("| copies | cap | pairs written | pairs in a tier (strong / medium / weak) | clusters | searches cut "
          "| candidates dropped | bucket entries not read | wall s | CPU s | peak MB | store MB "
          "| datasketch candidates | datasketch CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sorted(args.copies):
        texts = copies(n)
        base, base_cpu = datasketch_candidates(texts)
        for cap in (None, NO_CAP) if n <= args.uncapped_up_to else (None,):
            with tempfile.TemporaryDirectory() as tmp:
                got = ingest(texts, Path(tmp), cap)
            tiers = " / ".join(str(got["tiers"].get(t, 0)) for t in ("strong", "medium", "weak"))
            cut = got["cut"]
            print(f"| {n} | {'none' if cap else 'default'} | {got['written']} | {got['pairs']} ({tiers}) "
                  f"| {got['clusters']} | {cut.get('searches', 0)} | {cut.get('dropped', 0)} "
                  f"| {cut.get('passed over', 0)} | {got['wall']:.1f} | {got['cpu']:.1f} | {got['peak_mb']:.0f} "
                  f"| {got['store_mb']:.1f} | {base} | {base_cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
