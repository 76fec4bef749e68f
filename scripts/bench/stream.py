"""Stream latency: each item's time from being written to its decision, at a steady rate.

N texts of 300-400 words (a tenth of them edited copies of one of the 1,000 before) are
written one JSON line at a time, at RATE lines a second, to a file that
`mmdedup ingest FILE --follow --out DECISIONS` follows; each item is a news item whose
time moves on by SPACING seconds an item, under a 7-day window. The latency of an item is
from the moment its line was written to the moment its decision line appeared in the
--out file (polled every 2 ms): the batch wait (`stream_batch_seconds`) plus the work.

The baseline, in the same run and at the same rate: datasketch's MinHashLSH (128
permutations, threshold 0.5, the words of each text) with its Redis storage on
127.0.0.1:6379, and the 7-day window kept by hand (the keys of items older than the window
removed as time moves on), one item at a time: MinHash, query, insert. Its latency is
the work alone (no batching). Both say which planted copies they found. mmdedup runs
again with its window in Redis (`window_store`, a database of the same server): the
client's CPU is counted, as datasketch's is, not the server's.

    python scripts/bench/stream.py [--items 3000] [--rate 50] [--batch-seconds 0.2 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from store_growth import write_manifest  # noqa: E402

MMDEDUP = str(Path(sys.executable).with_name("mmdedup"))
WINDOW = 7 * 86400
CONFIG = '''class_field = "class"
time_field = "published"
[windows]
news = { window = "7d" }
'''


def records(n: int, spacing: float) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.jsonl"
        write_manifest(path, n)
        out = [json.loads(line) for line in path.read_text().splitlines()]
    for i, r in enumerate(out):
        r["meta"] = {"class": "news", "published": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_767_225_600 + i * spacing))}
    return out


def percentiles(values: list[float]) -> str:
    a = np.asarray(values) * 1000
    return f"p50 {np.percentile(a, 50):.0f} ms, p99 {np.percentile(a, 99):.0f} ms, max {a.max():.0f} ms"


def run_mmdedup(items: list[dict], rate: float, batch_seconds: float, tmp: Path, window_store: str = "") -> dict:
    name = f"{batch_seconds}{'-redis' if window_store else ''}"
    home, feed, out = tmp / f"home-{name}", tmp / f"feed-{name}.jsonl", tmp / f"out-{name}.jsonl"
    home.mkdir()
    (home / "config.toml").write_text((f'window_store = "{window_store}"\n' if window_store else "") + CONFIG)
    feed.touch()
    env = {**os.environ, "MMDEDUP_STREAM_BATCH_SECONDS": str(batch_seconds)}
    proc = subprocess.Popen([MMDEDUP, "--home", str(home), "ingest", str(feed), "--follow", "--out", str(out),
                             "--idle", "3"], env=env, stderr=subprocess.PIPE, text=True)
    while not out.exists():
        time.sleep(0.01)
    time.sleep(2.0)  # (started: the interpreter, the store, the models)
    written: dict[str, float] = {}
    said: dict[str, float] = {}
    found: dict[str, str | None] = {}

    def tail() -> None:
        with out.open() as fh:
            pending = ""
            while len(said) < len(items):
                chunk = fh.read()
                if not chunk:
                    time.sleep(0.002)
                    continue
                now = time.perf_counter()
                pending += chunk
                *lines, pending = pending.split("\n")
                for line in lines:
                    d = json.loads(line)
                    said[d["id"]] = now
                    found[d["id"]] = d["of"] if d["status"] in ("duplicate", "near-duplicate") else None

    reader = threading.Thread(target=tail, daemon=True)
    reader.start()
    start = time.perf_counter()
    with feed.open("a") as fh:
        for i, r in enumerate(items):
            due = start + i / rate
            while (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            written[r["id"]] = time.perf_counter()
    reader.join(timeout=600)
    _, status, usage = os.wait4(proc.pid, 0)
    lat = [said[k] - written[k] for k in written]
    return {"latency": lat, "cpu": usage.ru_utime + usage.ru_stime, "found": found}


def run_datasketch(items: list[dict], rate: float, spacing: float) -> dict:
    import redis
    from datasketch import MinHash, MinHashLSH

    redis.Redis(host="127.0.0.1", port=6379).flushdb()
    lsh = MinHashLSH(threshold=0.5, num_perm=128, storage_config={
        "type": "redis", "basename": b"mmdedup-bench", "redis": {"host": "127.0.0.1", "port": 6379}})
    kept: dict[str, MinHash] = {}
    window: deque[tuple[float, str]] = deque()
    lat, found = [], {}
    cpu0, start = time.process_time(), time.perf_counter()
    for i, r in enumerate(items):
        due = start + i / rate
        while (wait := due - time.perf_counter()) > 0:
            time.sleep(wait)
        t0 = time.perf_counter()
        now = i * spacing
        while window and window[0][0] < now - WINDOW:
            _, old = window.popleft()
            lsh.remove(old)
            del kept[old]
        m = MinHash(num_perm=128)
        m.update_batch([w.encode("utf-8") for w in r["text"].split()])
        best = max(((m.jaccard(kept[k]), k) for k in lsh.query(m)), default=(0.0, None))
        found[r["id"]] = best[1] if best[0] >= 0.5 else None
        lsh.insert(r["id"], m)
        kept[r["id"]] = m
        window.append((now, r["id"]))
        lat.append(time.perf_counter() - t0)
    return {"latency": lat, "cpu": time.process_time() - cpu0, "found": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=50.0, help="lines a second")
    parser.add_argument("--spacing", type=float, default=600.0, help="item time between items, seconds")
    parser.add_argument("--batch-seconds", type=float, nargs="+", default=[0.2, 1.0])
    parser.add_argument("--window-store", default="redis://127.0.0.1:6379/3",
                        help="also run each batch length with the window in this Redis database "
                             "(flushed first; \"\": not)")
    args = parser.parse_args()
    items = records(args.items, args.spacing)
    copies = {r["id"] for i, r in enumerate(items) if i % 10 == 9}
    print(f"{args.items} texts at {args.rate:g} a second, item time {args.spacing:g} s apart "
          f"({args.items * args.spacing / 86400:.1f} days), 7-day window; {len(copies)} planted copies")
    rows = []
    base = run_datasketch(items, args.rate, args.spacing)
    rows.append(("datasketch MinHashLSH + Redis, by hand", base))
    with tempfile.TemporaryDirectory() as tmp:
        for seconds in args.batch_seconds:
            rows.append((f"mmdedup --follow, batches of {seconds:g} s", run_mmdedup(items, args.rate, seconds, Path(tmp))))
            if args.window_store:
                import redis

                client = redis.Redis.from_url(args.window_store)
                client.flushdb()
                run = run_mmdedup(items, args.rate, seconds, Path(tmp), args.window_store)
                rows.append((f"mmdedup --follow, batches of {seconds:g} s, window in Redis "
                             f"({client.info('memory')['used_memory'] / 2**20:.0f} MB used by the server, "
                             f"{client.dbsize()} keys)", run))
    for name, r in rows:
        hit = sum(1 for k in copies if r["found"].get(k))
        print(f"{name}: latency {percentiles(r['latency'])}; CPU {r['cpu']:.1f} s "
              f"({r['cpu'] / args.items * 1000:.2f} ms an item); planted copies found {hit}/{len(copies)}; "
              f"other items said to be copies {sum(1 for k, v in r['found'].items() if v and k not in copies)}")


if __name__ == "__main__":
    main()
