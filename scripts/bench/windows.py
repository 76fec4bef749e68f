"""Thirty days of news under a 7-day window: does ingest keep its pace as history grows?

Each simulated day brings PER_DAY texts of 300-400 words, dated across the day. A tenth
of them are edited copies: half of a text from the last three days (inside the window:
they must pair), half of a text from 10 to 20 days before (outside it: they must not).
Each day is ingested by `mmdedup ingest` in a process of its own into one SQLite store,
configured with `class_field`, `time_field`, `news = { window = "7d", keep = "90d" }` and
`"*" = { window = "7d" }` (every class's window finite: items behind it leave the
candidate indexes). Per day: items a second, CPU ms an item, the process's peak memory,
the items the text index holds at the end of the day, and the planted copies paired
inside and outside the window.

The baseline, in the same run: datasketch's MinHashLSH (128 permutations, threshold 0.5,
the words of each text) in memory, with the 7-day window kept by hand (keys older than
the window removed as the days go by), one item at a time.

With `--window-store redis://...` the window lives in that Redis database (flushed
first) instead of each process's memory, and each day also says the server's memory.

    python scripts/bench/windows.py [--days 30] [--per-day 3000] [--window-store URL]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from text_quality import BODY_EXPONENT, make_vocab  # noqa: E402
from timing import child_usage  # noqa: E402

MMDEDUP = str(Path(sys.executable).with_name("mmdedup"))
DAY = 86400
CONFIG = '''class_field = "class"
time_field = "published"
[windows]
news = { window = "7d", keep = "90d" }
"*" = { window = "7d" }
'''


def make_days(days: int, per_day: int, seed: int = 0) -> Iterator[list[dict]]:
    """Each day's records, a day at a time; a copy's meta says which text it copies and
    whether that one is inside the window. (Every text's words are kept, as 16-bit
    indices, for the copies: two bytes a word.)"""
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocab(random.Random(seed)))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** BODY_EXPONENT
    p /= p.sum()
    words: list[np.ndarray] = []
    for day in range(days):
        records = []
        for i in range(per_day):
            n = len(words)
            start = 1_767_225_600 + day * DAY
            meta = {"class": "news", "published": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime(start + i * DAY // per_day))}
            recent = (day - 3) * per_day
            old_lo, old_hi = (day - 20) * per_day, (day - 10) * per_day
            if i % 10 == 9 and day >= 1 and (i % 20 == 9 or old_hi <= 0):
                src = int(rng.integers(max(recent, 0), n))
                meta["copy_of"], meta["inside"] = f"d{src}", True
            elif i % 10 == 9 and old_hi > 0:
                src = int(rng.integers(max(old_lo, 0), old_hi))
                meta["copy_of"], meta["inside"] = f"d{src}", False
            else:
                src = -1
            if src >= 0:
                row = words[src].copy()
                edit = rng.random(len(row)) < 0.05
                row[edit] = rng.choice(len(vocab), size=int(edit.sum()), p=p)
            else:
                row = rng.choice(len(vocab), size=int(rng.integers(300, 401)), p=p).astype(np.uint16)
            words.append(row)
            records.append({"id": f"d{n}", "text": " ".join(vocab[row]), "meta": meta})
        yield records


def paired(db: Path, records: list[dict]) -> tuple[int, int, int]:
    """(planted copies inside the window paired with their source, outside it paired,
    texts the candidate index holds)."""
    con = sqlite3.connect(db)
    ids = {r["id"]: r["meta"] for r in records if "copy_of" in r["meta"]}
    found = set()
    rows = con.execute("SELECT a.id, b.id FROM pairs JOIN items a ON a.pk = pairs.a_pk "
                       "JOIN items b ON b.pk = pairs.b_pk WHERE pairs.score >= 0.7").fetchall()
    for a, b in rows:
        found.add((a, b))
        found.add((b, a))
    held = con.execute("SELECT count(*) FROM signatures WHERE kind = 'text' AND evicted_seq IS NULL").fetchone()[0]
    con.close()
    inside = sum(1 for k, m in ids.items() if m["inside"] and (k, m["copy_of"]) in found)
    outside = sum(1 for k, m in ids.items() if not m["inside"] and (k, m["copy_of"]) in found)
    return inside, outside, held


def datasketch_days(folder: Path, days: int) -> list[tuple[float, float]]:
    """(items a second, CPU ms an item) of each day through MinHashLSH, window by hand."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    window: deque[tuple[int, str]] = deque()
    out = []
    for day in range(days):
        records = [json.loads(line) for line in (folder / f"day{day}.jsonl").read_text().splitlines()]
        wall, cpu = time.perf_counter(), time.process_time()
        for r in records:
            while window and window[0][0] < day - 7:
                lsh.remove(window.popleft()[1])
            m = MinHash(num_perm=128)
            m.update_batch([w.encode("utf-8") for w in r["text"].split()])
            lsh.query(m)
            lsh.insert(r["id"], m)
            window.append((day, r["id"]))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out.append((len(records) / wall, cpu / len(records) * 1000))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--per-day", type=int, default=3000)
    parser.add_argument("--window-store", default="", help="the window in this Redis database (flushed first)")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # (the children's work)
    parser.add_argument("--datasketch", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        for day, records in enumerate(make_days(args.days, args.per_day)):
            (args.write / f"day{day}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return
    if args.datasketch:
        print(json.dumps(datasketch_days(args.datasketch, args.days)))
        return
    # The records are made, and the baseline runs, in processes of their own: a process
    # started from one holding them would count that one's memory in its peak.
    with tempfile.TemporaryDirectory() as tmp:
        folder, home = Path(tmp), Path(tmp) / "home"
        here = [sys.executable, __file__, "--days", str(args.days), "--per-day", str(args.per_day)]
        subprocess.run([*here, "--write", str(folder)], check=True)
        base = json.loads(subprocess.run([*here, "--datasketch", str(folder)], check=True,
                                         capture_output=True, text=True).stdout)
        print(f"{args.days} days of {args.per_day} texts, 7-day window; per day: mmdedup items/s, CPU ms/item, "
              f"peak MB, texts indexed, copies inside the window paired / planted, outside paired / planted; "
              f"datasketch items/s, CPU ms/item")
        home.mkdir()
        (home / "config.toml").write_text((f'window_store = "{args.window_store}"\n' if args.window_store else "")
                                          + CONFIG)
        server = None
        if args.window_store:
            import redis

            server = redis.Redis.from_url(args.window_store)
            server.flushdb()
        rates = []
        for day in range(args.days):
            manifest = folder / f"day{day}.jsonl"
            records = [json.loads(line) for line in manifest.read_text().splitlines()]
            planted_in = sum(1 for r in records if r["meta"].get("inside") is True)
            planted_out = sum(1 for r in records if r["meta"].get("inside") is False)
            wall, cpu, peak = child_usage([MMDEDUP, "--home", str(home), "ingest", str(manifest), "--no-progress"],
                                          {**os.environ, "MMDEDUP_QUERY_SERVER_IDLE": "0"})
            inside, outside, held = paired(home / "mmdedup.db", records)
            rates.append(len(records) / wall)
            print(f"day {day + 1:2d}: {len(records) / wall:6.0f} items/s, {cpu / len(records) * 1000:5.2f} ms, "
                  f"{peak:5.0f} MB, {held:7d} indexed, inside {inside}/{planted_in}, outside {outside}/{planted_out}; "
                  f"datasketch {base[day][0]:5.0f} items/s, {base[day][1]:5.2f} ms"
                  + (f"; Redis {server.info('memory')['used_memory'] / 2**20:.0f} MB, {server.dbsize()} keys"
                     if server is not None else ""))
        print(f"day {args.days} against day 1: mmdedup {rates[-1] / rates[0]:.2f}x, "
              f"datasketch {base[-1][0] / base[0][0]:.2f}x (items a second)")


if __name__ == "__main__":
    main()
