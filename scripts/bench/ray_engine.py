"""The ray engine against the local engine, on one machine: pictures and texts.

Each source is ingested into a fresh SQLite store three times, side by side in one run:
by the local engine (one process), and by the ray engine on a local Ray cluster of one
and of two worker nodes (`ray start --head --num-cpus 1`, then `ray start --address ...
--num-cpus 1`), started before the run and stopped after it. Reported per run: wall
seconds, items a second, the CPU of the process that writes (the `mmdedup` command), and
the CPU of the whole machine over the run (every process: the writer, Ray's workers and
its own processes), per item. This machine has two cores, which the writer shares with
the workers, so CPU per item is the figure to compare; wall time says what a second
worker bought here.

Pictures: N distinct 1200x900 JPEGs (smooth random scenes with a grain of noise, so a
decode costs what a photo's does), every tenth a re-compressed, scaled copy of the one
before: decoded and hashed where the engine extracts, and about as many pairs as a real
folder has (a folder of crops of a few photos pairs everything with everything, and the
writer's scoring, not the workers, is then the work). Texts: N texts of 300-400 words
with 10% near copies (store_growth.py's manifest).

    python scripts/bench/ray_engine.py [--pictures 2000] [--texts 20000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

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


def timed_ingest(source: Path, home: Path, *engine: str) -> tuple[float, float, float]:
    """(wall s, the writer's CPU s, the machine's CPU s) of one ingest."""
    cmd = [sys.executable, "-m", "mmdedup", "--home", str(home), "ingest", "--no-progress",
           str(source), *engine]
    machine, start = machine_cpu(), time.perf_counter()
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall, machine = time.perf_counter() - start, machine_cpu() - machine
    if status:
        raise SystemExit(f"{' '.join(cmd)} failed")
    return wall, usage.ru_utime + usage.ru_stime, machine


def compare(name: str, source: Path, n: int, tmp: Path) -> None:
    rows = [("local engine, 1 process", timed_ingest(source, tmp / f"{name}-local"))]
    for nodes in (1, 2):
        address = start_cluster(nodes)
        try:
            rows.append((f"ray engine, {nodes} worker node{'s' if nodes > 1 else ''}",
                         timed_ingest(source, tmp / f"{name}-ray{nodes}", "--engine", "ray",
                                      "--ray-address", address)))
        finally:
            stop_cluster()
    local_wall, _, local_machine = rows[0][1]
    one_node = rows[1][1][0]
    print(f"\n{n} {name}")
    print("| engine | wall s | items/s | writer CPU s | machine CPU s | machine CPU ms/item "
          "| CPU/item vs local | wall vs 1 node |")
    print("|---|---|---|---|---|---|---|---|")
    for label, (wall, writer, machine) in rows:
        print(f"| {label} | {wall:.1f} | {n / wall:.0f} | {writer:.1f} | {machine:.1f} | "
              f"{1000 * machine / n:.2f} | {machine / local_machine:.2f}x | "
              f"{one_node / wall:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pictures", type=int, default=2000)
    parser.add_argument("--texts", type=int, default=20000)
    args = parser.parse_args()
    stop_cluster()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.pictures:
            photos = tmp / "photos"
            photos.mkdir()
            make_pictures(photos, args.pictures)
            compare("pictures", photos, args.pictures, tmp)
        if args.texts:
            manifest = tmp / "texts.jsonl"
            write_manifest(manifest, args.texts)
            compare("texts", manifest, args.texts, tmp)


if __name__ == "__main__":
    main()
