"""The ray engine against the local engine, on one machine: pictures and texts.

Each source is ingested into a fresh store three times, side by side in one run: by the
local engine (one process), and by the ray engine on a local Ray cluster of one and of
two worker nodes (`ray start --head --num-cpus 1`, then `ray start --address ...
--num-cpus 1`), started before the run and stopped after it. The stores are SQLite, or
with `--postgres URL` databases of their own on that server (created and dropped here).
Reported per run: wall seconds, items a second, items per CPU second of the whole machine
(every process: the writer, Ray's workers and its own processes, the database server),
the writer's CPU (the `mmdedup` command), peak memory of the writer and of the largest
Ray worker, and the store's bytes per item. With `--more N`, N new texts are then
ingested on top of each store by the same engine: the incremental cost. This machine has
two cores, which the writer shares with the workers, so CPU per item is the figure to
compare; wall time says what a second worker bought here.

Pictures: N distinct 1200x900 JPEGs (smooth random scenes with a grain of noise, so a
decode costs what a photo's does), every tenth a re-compressed, scaled copy of the one
before: decoded and hashed where the engine extracts, and about as many pairs as a real
folder has (a folder of crops of a few photos pairs everything with everything, and the
writer's scoring, not the workers, is then the work). Texts: N texts of 300-400 words
with 10% near copies (store_growth.py's manifest).

    python scripts/bench/ray_engine.py [--pictures 2000] [--texts 20000] [--more 0]
        [--postgres postgresql+psycopg://USER@HOST/DB]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from sqlalchemy import create_engine, text

from mmdedup import Platform  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from store_growth import write_manifest  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def make_pictures(folder: Path, n: int, seed: int = 0) -> None:
    """The pictures, written by a process per core (a tenth of them copies)."""
    with multiprocessing.Pool() as pool:
        pool.starmap(_write_pictures, [(folder, range(i, min(i + 500, n)), seed) for i in range(0, n, 500)])


def _write_pictures(folder: Path, numbers: range, seed: int) -> None:
    rng = np.random.default_rng([seed, numbers.start])
    grain = rng.normal(0, 12, (1000, 1300, 3)).astype(np.float32)  # windows of it, at random
    for i in numbers:
        if i % 10 == 9:
            continue  # (written with the one before)
        scene = np.asarray(Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8))
                           .resize((1200, 900), Image.BICUBIC), np.float32)
        y, x = rng.integers(0, 100), rng.integers(0, 100)
        picture = Image.fromarray(np.clip(scene + grain[y:y + 900, x:x + 1200], 0, 255).astype(np.uint8))
        picture.save(folder / f"p{i:05d}.jpg", quality=85)
        if i % 10 == 8 and i + 1 < numbers.stop:  # the next one: this one re-compressed and scaled
            picture.resize((1000, 750)).save(folder / f"p{i + 1:05d}.jpg", quality=70)


def machine_cpu() -> float:
    """CPU seconds every process of the machine has used (user + system, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system = fields[0], fields[1], fields[2]
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(nodes: int) -> str:
    port = free_port()
    address = f"127.0.0.1:{port}"
    subprocess.run([RAY, "start", "--head", "--port", str(port), "--num-cpus", "1",
                    "--include-dashboard=false", "--disable-usage-stats"],
                   env=ENV, check=True, capture_output=True)
    for _ in range(nodes - 1):
        subprocess.run([RAY, "start", "--address", address, "--num-cpus", "1"],
                       env=ENV, check=True, capture_output=True)
    time.sleep(2)  # (the nodes settle: their start-up is not the run's)
    return address


def stop_cluster() -> None:
    subprocess.run([RAY, "stop", "--force"], env=ENV, capture_output=True)


class PeakMemory:
    """Peak resident memory (MB) of Ray's worker processes ("ray::..." titles) seen while
    a run lasts: read from /proc every half second, each process's own high-water mark."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
                        continue
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            self.peak = max(self.peak, int(line.split()[1]) / 1024)
                except OSError:
                    continue


@dataclass
class Run:
    wall: float  # s
    writer: float  # the mmdedup command's CPU s
    machine: float  # every process's CPU s
    writer_peak: float  # MB
    worker_peak: float  # MB, the largest Ray worker


def timed_ingest(source: Path, home: Path, url: str | None, *args: str) -> Run:
    cmd = [sys.executable, "-m", "mmdedup", "--home", str(home), *(["--db", url] if url else []),
           "ingest", "--no-progress", str(source), *args]
    machine, start = machine_cpu(), time.perf_counter()
    with PeakMemory() as workers:
        proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    wall, machine = time.perf_counter() - start, machine_cpu() - machine
    if status:
        raise SystemExit(f"{' '.join(cmd)} failed")
    return Run(wall, usage.ru_utime + usage.ru_stime, machine, usage.ru_maxrss / 1024, workers.peak)


class Store:
    """A fresh store for one run: SQLite in its home, or a database of its own on the
    PostgreSQL server at `server` (dropped afterwards); `size()` in bytes."""

    def __init__(self, home: Path, server: str | None) -> None:
        self.home, self.server, self.url = home, server, None
        if server is not None:
            self.name = f"bench_{home.name.replace('-', '_')}"
            self._admin(f"DROP DATABASE IF EXISTS {self.name}", f"CREATE DATABASE {self.name}")
            self.url = f"{server.rsplit('/', 1)[0]}/{self.name}"
        Platform.open(home, self.url).close()  # (the schema, made before the clock)
        self.empty = self.size()

    def _admin(self, *statements: str) -> None:
        engine = create_engine(self.server, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
        engine.dispose()

    def size(self) -> int:
        if self.url is None:
            # (the write-ahead log copied back and emptied first: a log that readers kept
            # from a checkpoint holds pages the database file will hold once)
            for db in self.home.glob("*.db"):
                with sqlite3.connect(db) as conn:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return sum(f.stat().st_size for f in self.home.glob("*.db*"))
        engine = create_engine(self.url)
        with engine.connect() as conn:
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        engine.dispose()
        return int(size)

    def drop(self) -> None:
        if self.url is not None:
            self._admin(f"DROP DATABASE IF EXISTS {self.name}")


def compare(name: str, source: Path, n: int, tmp: Path, server: str | None,
            more: tuple[Path, int] | None) -> None:
    """Each engine into a fresh store; then `more` (a manifest of new items) on top."""
    runs: list[tuple[str, Run, float, Run | None]] = []
    for nodes in (0, 1, 2):
        label = "local engine, 1 process" if not nodes else \
            f"ray engine, {nodes} worker node{'s' if nodes > 1 else ''}"
        address = start_cluster(nodes) if nodes else None
        engine = ["--engine", "ray", "--ray-address", address] if address else []
        store = Store(tmp / f"{name}-{nodes}", server)
        try:
            run = timed_ingest(source, store.home, store.url, *engine)
            per_item = (store.size() - store.empty) / n
            added = timed_ingest(more[0], store.home, store.url, "--id-prefix", "more-", *engine) \
                if more else None
        finally:
            store.drop()
            if address:
                stop_cluster()
        runs.append((label, run, per_item, added))
    local, one_node = runs[0][1], runs[1][1]
    print(f"\n{n} {name} ({'PostgreSQL' if server else 'SQLite'})")
    print("| engine | wall s | items/s | items per machine CPU s | writer CPU s | machine CPU s "
          "| CPU/item vs local | wall vs 1 node | writer peak MB | worker peak MB | store bytes/item |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, run, per_item, _ in runs:
        print(f"| {label} | {run.wall:.1f} | {n / run.wall:.0f} | {n / run.machine:.0f} | "
              f"{run.writer:.1f} | {run.machine:.1f} | {run.machine / local.machine:.2f}x | "
              f"{one_node.wall / run.wall:.2f}x | {run.writer_peak:.0f} | "
              f"{run.worker_peak:.0f} | {per_item:.0f} |")
    if more:
        m = more[1]
        print(f"\n{m} new {name} on top of the {n}")
        print("| engine | wall s | items/s | machine CPU ms/item | vs the first run's ms/item |")
        print("|---|---|---|---|---|")
        for label, run, _, added in runs:
            print(f"| {label} | {added.wall:.1f} | {m / added.wall:.0f} | {1000 * added.machine / m:.2f} | "
                  f"{(added.machine / m) / (run.machine / n):.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pictures", type=int, default=2000)
    parser.add_argument("--texts", type=int, default=20000)
    parser.add_argument("--more", type=int, default=0, help="new texts ingested on top of the texts")
    parser.add_argument("--postgres", metavar="URL",
                        help="a PostgreSQL server's URL (any database): each run gets a database of its own")
    args = parser.parse_args()
    stop_cluster()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.pictures:
            photos = tmp / "photos"
            photos.mkdir()
            make_pictures(photos, args.pictures)
            compare("pictures", photos, args.pictures, tmp, args.postgres, None)
        if args.texts:
            manifest, more = tmp / "texts.jsonl", tmp / "more.jsonl"
            write_manifest(manifest, args.texts)
            if args.more:
                write_manifest(more, args.more, seed=1)
            compare("texts", manifest, args.texts, tmp, args.postgres,
                    (more, args.more) if args.more else None)


if __name__ == "__main__":
    main()
