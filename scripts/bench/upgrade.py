"""Time to the first query answer after an upgrade, and how right the answers are.

A store of N texts (Zipf-like words as in query_latency.py, every tenth a near copy of an
earlier one) and P pictures (crops of skimage's photographs, every tenth a re-posted copy
of an earlier one) is ingested under an "earlier release": this code with the token hash
version (part of every text signature's version) and the picture-code version renamed,
which is what a release that changes the tokenizer or the hashes looks like to a store.
The same data is ingested by this release into a second store, the reference.

Then, each on its own copy of the earlier release's store, each command a process of its
own (`mmdedup query`, as a user runs it; no query server):

    before, query at once   the behaviour before the re-sign on query (Platform.resign_stale
                            replaced by a no-op in that process): signatures of another
                            version are never compared, so the answers are empty
    before, ingest first    what a user had to do to get answers back: any ingest (an empty
                            manifest) signs the stale items again, then the query
    after                   `mmdedup query` signs the stale items again itself, before
                            answering, and writes them; then a second query (a new process)

Timed: wall and CPU seconds of the processes (timing.py), items signed again a second.
Recall: Q text and Q picture probes (near copies of stored items: 5% of the words changed,
a picture scaled to 85% and re-compressed), top 10 of each asked of each store once
signed (in this process, read-only) and compared with the reference store's top 10: the
share of the reference's answers found, and the share of probes answered identically
(ids and scores to 4 places).

    python scripts/bench/upgrade.py [--n 20000] [--pictures 500] [--queries 50]
                                    [--seed 1] [--work DIR]
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
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from query_latency import Crops, Words, repost  # noqa: E402
from timing import child_usage  # noqa: E402

from mmdedup import Platform  # noqa: E402
from mmdedup.extract import text_sketches  # noqa: E402
from mmdedup.signals.image import ImageSignal  # noqa: E402

K = 10
NO_RESIGN = ("from mmdedup.api import Platform; Platform.resign_stale = lambda self, progress=False: []; "
             "from mmdedup.cli import main; import sys; raise SystemExit(main(sys.argv[1:]))")


def write_data(folder: Path, n: int, pictures: int, seed: int) -> list[dict[str, Any]]:
    (folder / "img").mkdir(parents=True, exist_ok=True)
    words, crops = Words(seed), Crops()
    rng, prng = np.random.default_rng(seed), random.Random(seed)
    texts = words.texts(rng, n)
    for i in range(10, n, 10):
        texts[i] = words.edit(rng, texts[int(rng.integers(0, i))])
    step = max(1, n // pictures) if pictures else 0
    items, pics = [], []
    for i, text in enumerate(texts):
        item: dict[str, Any] = {"id": f"d{i}", "text": text}
        if step and i % step == 0 and i // step < pictures:
            k = i // step
            data = repost(pics[prng.randrange(len(pics))]) if k % 10 == 9 else crops.make(prng)
            pics.append(data)
            (folder / "img" / f"d{i}.jpg").write_bytes(data)
            item["images"] = [f"img/d{i}.jpg"]
        items.append(item)
    with (folder / "manifest.jsonl").open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item) + "\n")
    (folder / "empty.jsonl").write_text("")
    return items


def probes(folder: Path, items: list[dict[str, Any]], count: int, seed: int) -> list[dict[str, Any]]:
    rng, words = np.random.default_rng(seed + 7), Words(seed)
    texts = [{"text": words.edit(rng, items[int(i)]["text"])} for i in rng.choice(len(items), count, replace=False)]
    with_pic = [it for it in items if "images" in it]
    pics = []
    for j, i in enumerate(rng.choice(len(with_pic), min(count, len(with_pic)), replace=False)):
        path = folder / "probes" / f"p{j}.jpg"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(repost((folder / with_pic[int(i)]["images"][0]).read_bytes()))
        pics.append({"image": path})
    return texts + pics


def ingest(home: Path, manifest: Path, earlier: bool) -> float:
    """Ingest in this process, as the earlier release (renamed versions) or as this one."""
    saved = text_sketches.HASH_VERSION, ImageSignal.version
    if earlier:
        text_sketches.HASH_VERSION = "lanes64-an-earlier-release"
        ImageSignal.version = lambda self: "img-an-earlier-release"
    try:
        start = time.perf_counter()
        with Platform.open(home) as p:
            p.ingest(manifest)
        return time.perf_counter() - start
    finally:
        text_sketches.HASH_VERSION, ImageSignal.version = saved


def answers(home: Path, asks: list[dict[str, Any]], resign: bool = True) -> list[list[tuple[str, float]]]:
    with Platform.open(home, read_only=True) as p:
        if not resign:
            p.resign_stale = lambda progress=False: []
        return [[(m.id, round(m.score, 4)) for m in p.query(a.get("text"), image=a.get("image"), k=K)]
                for a in asks]


def recall(got: list[list], want: list[list]) -> tuple[float, float]:
    found = sum(len({i for i, _ in g} & {i for i, _ in w}) for g, w in zip(got, want))
    total = sum(len(w) for w in want)
    same = sum(g == w for g, w in zip(got, want))
    return found / max(1, total), same / max(1, len(want))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--pictures", type=int, default=500)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="mmdedup-upgrade-"))
    if work.exists():
        shutil.rmtree(work)
    data = work / "data"
    items = write_data(data, args.n, args.pictures, args.seed)
    asks = probes(data, items, args.queries, args.seed)
    old_s = ingest(work / "old", data / "manifest.jsonl", earlier=True)
    fresh_s = ingest(work / "fresh", data / "manifest.jsonl", earlier=False)
    want = answers(work / "fresh", asks)
    for name in ("before", "reingest", "after"):
        shutil.copytree(work / "old", work / name)
    stale = args.n + sum("images" in it for it in items)

    env = {**os.environ, "MMDEDUP_QUERY_SERVER_IDLE": "0"}
    probe = ["query", "--text", asks[0]["text"], "--k", str(K), "--format", "json", "--no-progress"]

    def cli(home: Path, *argv: str) -> list[str]:
        return [sys.executable, "-m", "mmdedup", "--home", str(home), *argv]

    rows = []
    w, c, _ = child_usage(cli(work / "fresh", *probe), env)
    rows.append(("no upgrade (reference store), query", w, c, None, recall(want, want)))
    w, c, _ = child_usage([sys.executable, "-c", NO_RESIGN, "--home", str(work / "before"), *probe], env)
    rows.append(("BEFORE: query at once (answers empty)", w, c, None,
                 recall(answers(work / "before", asks, resign=False), want)))
    w1, c1, _ = child_usage([sys.executable, "-c", NO_RESIGN, "--home", str(work / "reingest"), "ingest",
                             str(data / "empty.jsonl"), "--no-progress"], env)
    w2, c2, _ = child_usage([sys.executable, "-c", NO_RESIGN, "--home", str(work / "reingest"), *probe], env)
    rows.append(("BEFORE: ingest (any) then query", w1 + w2, c1 + c2, stale / w1,
                 recall(answers(work / "reingest", asks, resign=False), want)))
    w, c, _ = child_usage(cli(work / "after", *probe), env)
    got = answers(work / "after", asks)
    rows.append(("AFTER: query (signs again first)", w, c, stale / w, recall(got, want)))
    w, c, _ = child_usage(cli(work / "after", *probe), env)
    rows.append(("AFTER: the next query (a new process)", w, c, None, recall(got, want)))

    print(f"store: {args.n} texts, {stale - args.n} pictures, signed by an earlier release "
          f"(ingest {old_s:.1f} s); reference store ingested by this one in {fresh_s:.1f} s; "
          f"{len(asks)} probes ({args.queries} texts, {len(asks) - args.queries} pictures), top {K}")
    print(f"{'':44} {'wall s':>7} {'CPU s':>7} {'items/s':>8} {'recall':>7} {'same':>6}")
    for name, w, c, rate, (rec, same) in rows:
        print(f"{name:44} {w:7.2f} {c:7.2f} {'' if rate is None else f'{rate:8.0f}':>8} {rec:7.3f} {same:6.3f}")
    print(f"(work folder: {work})")


if __name__ == "__main__":
    main()
