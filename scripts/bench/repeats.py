"""A stream with exact repeats: what the Bloom filter in front of them saves.

N texts of 300-400 words (store_growth.py's: a tenth edited copies; with --zh, Chinese
news-like texts from text_quality.py, which jieba tokenises) are followed by
`mmdedup ingest FILE --follow` in batches of 100, a fraction REPEATS of them replaced by
an exact repost of an earlier text (a wire story republished word for word). The whole
file is there when the stream starts, so the figures are throughput, not latency. The
baseline, in the same run: the same stream with `stream_repeats = false`, which signs
every repeat again and finds it exact through the exact-key index. Both must give the
same decision lines.

    python scripts/bench/repeats.py [--items 20000] [--repeats 0.3] [--zh]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from store_growth import write_manifest  # noqa: E402
from text_quality import zh_docs  # noqa: E402
from timing import child_usage  # noqa: E402

MMDEDUP = str(Path(sys.executable).with_name("mmdedup"))


def feed(path: Path, n: int, repeats: float, zh: bool = False, seed: int = 0) -> None:
    rng = random.Random(seed)
    if zh:
        records = [{"id": f"t{i}", "text": "".join(doc)} for i, doc in enumerate(zh_docs(rng, n, topics=max(12, n // 10)))]
    else:
        write_manifest(path, n, seed)
        records = [json.loads(line) for line in path.read_text().splitlines()]
    for i in range(1, n):
        if rng.random() < repeats:
            records[i]["text"] = records[rng.randrange(max(0, i - 5000), i)]["text"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--repeats", type=float, default=0.3)
    parser.add_argument("--zh", action="store_true", help="Chinese texts (text_quality.py's), tokenised by jieba")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "feed.jsonl"
        feed(source, args.items, args.repeats, args.zh)
        said = {}
        print(f"{args.items} {'Chinese' if args.zh else 'English'} texts, {args.repeats:.0%} of them exact "
              f"repeats of one of the 5,000 before")
        for name, on in (("without the filter (baseline)", "false"), ("with the filter", "true")):
            home, out = Path(tmp) / on, Path(tmp) / f"out-{on}.jsonl"
            home.mkdir()
            (home / "config.toml").write_text(f"stream_batch = 100\nstream_repeats = {on}\n")
            wall, cpu, peak = child_usage([MMDEDUP, "--home", str(home), "ingest", str(source), "--follow",
                                           "--out", str(out), "--idle", "1"],
                                          {**os.environ, "MMDEDUP_QUERY_SERVER_IDLE": "0"})
            said[on] = out.read_text()
            statuses = [json.loads(line)["status"] for line in said[on].splitlines()]
            print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU ({cpu / args.items * 1000:.2f} ms an item, "
                  f"{args.items / wall:.0f} items/s), peak {peak:.0f} MB; "
                  f"{statuses.count('duplicate')} duplicate, {statuses.count('near-duplicate')} near-duplicate")
            said[on + "cpu"] = cpu
        print(f"same decision lines: {said['true'] == said['false']}; CPU with the filter "
              f"{said['truecpu'] / said['falsecpu']:.2f}x the baseline's (the 1 s idle wait included in wall)")


if __name__ == "__main__":
    main()
