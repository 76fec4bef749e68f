"""A text query through the command line on a large store, against starting Python.

`mmdedup --home H query --text T --format json` is what a crawler's "have we seen this?"
check runs: a process of its own that opens the store and the text signal's indexes, signs
the text, searches and scores. Timed per run (wall and CPU of the child process), best and
median of --runs, next to a bare `python -c pass` measured in the same run. The store is
one built by incremental_ingest.py (`--store DIR` keeps it as DIR/store-N) or by
store_growth.py (`--keep DIR`: DIR/store); it must have been written by the code under
test, or every query would rebuild the index from the store.

The children may write Python's bytecode caches (PYTHONDONTWRITEBYTECODE is dropped from
their environment), as an installed package has them: otherwise every run compiles the
package's own modules again, which no user's query does.

Those queries run with `query_server_idle` 0, so that none starts a server. Then the same
query with `mmdedup serve` running on the store (a process that keeps it open and answers
`mmdedup query`, cli/query_server.py): the client's wall and CPU, and the CPU the server
spent per query beside it. Last, as a user's queries run by default: the first one in a
process of its own, which then starts a server in the background, and the ones after it.

    python scripts/bench/query_cli.py --home DIR/store-1000000 [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from incremental_ingest import text_chunks  # noqa: E402
from store_growth import cpu_seconds  # noqa: E402
from timing import child_seconds  # noqa: E402


DEFAULT_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MMDEDUP_QUERY_SERVER_IDLE")}
ENV = {**DEFAULT_ENV, "MMDEDUP_QUERY_SERVER_IDLE": "0"}


def served(command: list[str], home: Path, runs: int) -> tuple[list[tuple[float, float]], float]:
    """The query's (wall, CPU) runs with a server on the store, and the server's CPU a query."""
    server = subprocess.Popen([sys.executable, "-m", "mmdedup", "--home", str(home), "serve"], env=ENV)
    try:
        while True:
            assert server.poll() is None, "the server stopped"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(home / "query.sock"))
                    break
                except OSError:
                    time.sleep(0.1)
        child_seconds(command, env=ENV)  # (the server's first query opens the indexes)
        before = cpu_seconds(server.pid)
        got = [child_seconds(command, env=ENV) for _ in range(runs)]
        return got, (cpu_seconds(server.pid) - before) / runs
    finally:
        server.terminate()
        server.wait()


def started(command: list[str], home: Path, runs: int) -> tuple[tuple[float, float], list[tuple[float, float]]]:
    """The query's first run, which starts a server (the default), and the runs after it."""
    path = home / "query.sock"
    assert not path.exists(), f"{path}: a server already runs"
    first = child_seconds(command, env=DEFAULT_ENV)
    while not path.exists():
        time.sleep(0.1)
    try:
        return first, [child_seconds(command, env=DEFAULT_ENV) for _ in range(runs)]
    finally:
        subprocess.run(["pkill", "-f", "--", f"--home {home.absolute()} serve --idle"])
        while path.exists():
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    text = next(text_chunks(1, 2))[0]
    query = [sys.executable, "-m", "mmdedup", "--home", str(args.home), "query", "--text", text,
             "--format", "json"]
    child_seconds(query, env=ENV)  # the files into the page cache, as on a machine that runs queries
    bare = [child_seconds([sys.executable, "-c", "pass"], env=ENV) for _ in range(args.runs)]
    runs = [child_seconds(query, env=ENV) for _ in range(args.runs)]
    with_server, server_cpu = served(query, args.home, args.runs)
    first, after = started(query, args.home, args.runs)
    print(f"| {args.runs} runs each | wall s, best / median | CPU s, best / median | ratio (median wall) |")
    print("|---|---|---|---|")
    for label, got in (("`python -c pass`", bare), ("`mmdedup query --text`, in its own process", runs),
                       ("`mmdedup query --text`, `mmdedup serve` running", with_server),
                       ("`mmdedup query --text` by default: the first (starts a server)", [first]),
                       ("`mmdedup query --text` by default: the ones after it", after)):
        walls, cpus = [w for w, _ in got], [c for _, c in got]
        print(f"| {label} | {min(walls):.3f} / {statistics.median(walls):.3f} | "
              f"{min(cpus):.3f} / {statistics.median(cpus):.3f} | "
              f"{statistics.median(walls) / statistics.median(w for w, _ in bare):.1f}x |")
    print(f"\nCPU of the server a query: {server_cpu * 1000:.1f} ms")


if __name__ == "__main__":
    main()
