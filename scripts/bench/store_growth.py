"""A large ingest through the command line, watched from outside, next to datasketch.

One `mmdedup ingest` of N texts (400 words, Zipf-distributed words; one in ten an edited
copy of an earlier text, so pairs are found and written) into a fresh store, in a process
of its own. Every second the benchmark reads how many items the store holds and the
process's CPU time, so it can say:

- the rate over the first and the last 10% of the items (wall and CPU), and their ratio:
  a store that slows down as it grows shows it here;
- the longest stall: the longest time, between the first and the last commit, in which
  the store's item count did not move;
- bytes written to disk per item (the process's block writes on SQLite; on PostgreSQL the
  server's WAL and buffer writes, from its statistics);
- store bytes per item beyond the text (database, WAL and index files, less the texts);
- CPU against datasketch (MinHash-128 update_batch + MinHashLSH.insert over the same
  texts' words, in a process of its own, no storage): the baseline of the same run.

    python scripts/bench/store_growth.py --n 1000000 [--db URL] [--keep DIR] [--no-datasketch]
                                         [--together] [--timeline CSV]

`--keep DIR` keeps the manifest (and reuses it when it is there) and the store. `--together`
runs the baseline at the same time as the ingest (one core each on a two-core machine):
CPU times stay comparable, the ingest's wall time and rates then share the machine.
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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from text_quality import BODY_EXPONENT, make_vocab  # noqa: E402

WORDS = 400
COPY_EVERY = 10  # one text in ten is an edited copy of an earlier one
EDITS = 0.05  # share of a copy's words replaced
BLOCK = 10_000


def write_manifest(path: Path, n: int, seed: int = 0) -> int:
    """Write n texts as a JSON-lines manifest; returns the bytes of text (UTF-8)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocab(random.Random(seed)))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** BODY_EXPONENT
    p /= p.sum()
    text_bytes = 0
    recent = np.zeros((1000, WORDS), np.int64)  # the last 1,000 texts' words, a ring
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, n, BLOCK):
            size = min(BLOCK, n - start)
            words = rng.choice(len(vocab), size=(size, WORDS), p=p)
            for row in range(size):
                i = start + row
                if i % COPY_EVERY == COPY_EVERY - 1:
                    copy = recent[int(rng.integers(min(i, len(recent))))].copy()
                    edit = rng.random(WORDS) < EDITS
                    copy[edit] = rng.choice(len(vocab), size=int(edit.sum()), p=p)
                    words[row] = copy
                recent[i % len(recent)] = words[row]
                text = " ".join(vocab[words[row]])
                text_bytes += len(text.encode("utf-8"))
                out.write(json.dumps({"id": f"t{i}", "text": text}) + "\n")
    return text_bytes


def datasketch_run(manifest: Path) -> None:
    """The baseline, run as `--datasketch MANIFEST` in a process of its own."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    with manifest.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            m = MinHash(num_perm=128)
            m.update_batch([w.encode("utf-8") for w in record["text"].split()])
            lsh.insert(record["id"], m)


def run_baseline(manifest: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of the datasketch baseline in a process of its own."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--datasketch", str(manifest)])
    _, status, ru = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit("the datasketch baseline failed")
    return time.perf_counter() - start, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, from /proc (clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> dict[int, float]:
    """{pid: CPU seconds} of every postgres process on this machine."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    found[int(entry.name)] = cpu_seconds(int(entry.name))
            except (OSError, ValueError, IndexError):
                pass
    return found


class ServerCpu:
    """The server's share of an ingest: the CPU every postgres process used while it ran.
    Sampled every second, because the backend that served the ingest's connection exits
    with it (a look at the end alone missed it); at most the last second of an exiting
    process is lost."""

    def __init__(self) -> None:
        self.first = postgres_cpu()
        self.last = dict(self.first)

    def sample(self) -> None:
        self.last.update(postgres_cpu())

    def total(self) -> float:
        return sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())


class Store:
    """The two things the watcher asks a store: its item count and its bytes on disk."""

    def __init__(self, home: Path, db_url: str | None) -> None:
        self.home, self.db_url = home, db_url
        self._conn = None

    def count(self) -> int | None:
        try:
            if self._conn is None:
                if self.db_url:
                    import psycopg

                    self._conn = psycopg.connect(self._plain_url(), autocommit=True)
                else:
                    import sqlite3

                    db = self.home / "mmdedup.db"
                    if not db.exists():
                        return None
                    self._conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            # (fetched whole and the cursor closed: a SQLite statement left open holds a
            # read snapshot, which would keep the writer's checkpoints from finishing)
            cursor = self._conn.execute("SELECT max(pk) FROM items")
            (value,), = cursor.fetchall()
            cursor.close()
            return int(value or 0)
        except Exception:  # noqa: BLE001 - not created yet, or busy: ask again next second
            self._conn = None
            return None

    def _plain_url(self) -> str:
        return self.db_url.replace("postgresql+psycopg://", "postgresql://")

    def server_writes(self) -> int:
        """PostgreSQL: WAL bytes plus buffers written by checkpoints, the background writer
        and backends (8 KiB each), since the statistics were last reset."""
        import psycopg

        with psycopg.connect(self._plain_url(), autocommit=True) as conn:
            wal = conn.execute("SELECT wal_bytes FROM pg_stat_wal").fetchone()[0]
            buffers = conn.execute("SELECT buffers_checkpoint + buffers_clean + buffers_backend "
                                   "FROM pg_stat_bgwriter").fetchone()[0]
        return int(wal) + int(buffers) * 8192

    def disk_bytes(self) -> int:
        if not self.db_url:
            # The watcher's read-only connection may have been open when the ingest closed,
            # so the ingest was not the last to leave and its WAL file stayed; the last
            # connection to close checkpoints the WAL into the database and removes it.
            import sqlite3

            last = sqlite3.connect(self.home / "mmdedup.db")
            last.execute("SELECT count(*) FROM sqlite_schema").fetchall()
            last.close()
        files = sum(f.stat().st_size for f in self.home.rglob("*") if f.is_file())
        if not self.db_url:
            return files
        import psycopg

        with psycopg.connect(self._plain_url(), autocommit=True) as conn:
            return files + int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def watch(command: list[str], store: Store) -> dict:
    """Run the ingest, sampling (wall, CPU, items) every second until it ends."""
    samples: list[tuple[float, float, int]] = []
    server = ServerCpu() if store.db_url else None
    writes_before = store.server_writes() if store.db_url else 0
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    done = threading.Event()
    usage: dict = {}

    def reap() -> None:
        _, status, rusage = os.wait4(proc.pid, 0)
        usage.update(status=status, rusage=rusage, wall=time.perf_counter() - start)
        done.set()

    cpu = 0.0
    threading.Thread(target=reap, daemon=True).start()
    while not done.wait(1.0):
        try:
            cpu = cpu_seconds(proc.pid)
        except (OSError, ValueError, IndexError):
            continue
        count = store.count()
        if count is not None:
            samples.append((time.perf_counter() - start, cpu, count))
        if server is not None:
            server.sample()
    proc.returncode = os.waitstatus_to_exitcode(usage["status"])
    if proc.returncode:
        raise SystemExit(f"mmdedup ingest failed with status {proc.returncode}")
    ru = usage["rusage"]
    final = store.count() or 0
    samples.append((usage["wall"], ru.ru_utime + ru.ru_stime, final))
    return {"samples": samples, "wall": usage["wall"], "cpu": ru.ru_utime + ru.ru_stime,
            "rss_mb": ru.ru_maxrss / 1024, "written": ru.ru_oublock * 512 if not store.db_url
            else store.server_writes() - writes_before,
            "server_cpu": server.total() if server is not None else 0.0}


def at(samples: list[tuple[float, float, int]], items: float) -> tuple[float, float]:
    """(wall, CPU) at which the store held `items`, interpolated between samples."""
    walls, cpus, counts = (np.array(col, np.float64) for col in zip(*samples))
    return float(np.interp(items, counts, walls)), float(np.interp(items, counts, cpus))


def longest_stall(samples: list[tuple[float, float, int]]) -> tuple[float, int]:
    """Longest wall time between the first and last commit in which the count stood
    still, and the count it stood at."""
    moved = [(t, c) for (t, _, c), (_, _, prev) in zip(samples[1:], samples[:-1]) if c != prev]
    return max(((b - a, count) for (a, count), (b, _) in zip(moved, moved[1:])), default=(0.0, 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--db", default=None, help="PostgreSQL URL of an empty database (default: SQLite)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the manifest and store here")
    parser.add_argument("--no-datasketch", action="store_true", help="skip the baseline")
    parser.add_argument("--together", action="store_true", help="run the baseline alongside the ingest")
    parser.add_argument("--timeline", type=Path, default=None,
                        help="write the samples (wall s, CPU s, items) here as CSV")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="store-growth-"))
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / f"texts-{args.n}.jsonl"
    meta = folder / f"texts-{args.n}.json"
    if not (manifest.exists() and meta.exists()):
        print(f"writing {args.n:,} texts to {manifest}", file=sys.stderr)
        meta.write_text(json.dumps({"text_bytes": write_manifest(manifest, args.n)}))
    text_bytes = json.loads(meta.read_text())["text_bytes"]
    home = folder / "store"
    shutil.rmtree(home, ignore_errors=True)
    store = Store(home, args.db)
    command = [sys.executable, "-m", "mmdedup", "--home", str(home)]
    if args.db:
        command += ["--db", args.db]
    baseline = None
    if args.together and not args.no_datasketch:
        baseline = ThreadPoolExecutor(1).submit(run_baseline, manifest)
    run = watch(command + ["ingest", "--no-progress", str(manifest)], store)
    store.close()
    disk = store.disk_bytes()
    if args.timeline is not None:
        args.timeline.write_text("wall_s,cpu_s,items\n" + "".join(
            f"{w:.2f},{c:.2f},{i}\n" for w, c, i in run["samples"]))

    n = args.n
    w0, c0 = at(run["samples"], 0)
    w10, c10 = at(run["samples"], 0.1 * n)
    w90, c90 = at(run["samples"], 0.9 * n)
    first_wall, last_wall = 0.1 * n / (w10 - w0), 0.1 * n / (run["wall"] - w90)
    first_cpu, last_cpu = 0.1 * n / (c10 - c0), 0.1 * n / (run["cpu"] - c90)
    where = "PostgreSQL" if args.db else "SQLite"
    print(f"| {n:,} texts through `mmdedup ingest` ({where}) | value |")
    print("|---|---|")
    print(f"| wall / CPU (client) | {run['wall']:.0f} s / {run['cpu']:.0f} s |")
    if args.db:
        print(f"| CPU of the PostgreSQL server | {run['server_cpu']:.0f} s |")
    print(f"| texts/s, first 10% of the items (wall / CPU) | {first_wall:,.0f} / {first_cpu:,.0f} |")
    print(f"| texts/s, last 10% (wall / CPU) | {last_wall:,.0f} / {last_cpu:,.0f} |")
    print(f"| last / first (wall / CPU) | {last_wall / first_wall:.2f} / {last_cpu / first_cpu:.2f} |")
    stall, stalled_at = longest_stall(run["samples"])
    print(f"| longest stall (no item committed) | {stall:.1f} s (at {stalled_at:,} items) |")
    print(f"| bytes written to disk per item | {run['written'] / n:,.0f} |")
    print(f"| store bytes per item (all files) / beyond the text | {disk / n:,.0f} / {(disk - text_bytes) / n:,.0f} |")
    print(f"| text bytes per item | {text_bytes / n:,.0f} |")
    print(f"| peak memory (RSS) | {run['rss_mb']:,.0f} MB |")
    if not args.no_datasketch:
        wall, cpu, rss = baseline.result() if baseline is not None else run_baseline(manifest)
        ours = run["cpu"] + run["server_cpu"]
        print(f"| datasketch MinHash-128 + MinHashLSH.insert, wall / CPU | {wall:.0f} s / {cpu:.0f} s |")
        print(f"| datasketch peak memory (RSS) | {rss:,.0f} MB |")
        print(f"| mmdedup against datasketch, CPU{' (client + server)' if args.db else ''} "
              f"| **{cpu / ours:.2f}x** |")
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--datasketch":
        datasketch_run(Path(sys.argv[2]))
    else:
        main()
