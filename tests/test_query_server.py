"""`mmdedup serve` answers `mmdedup query` on its store as the command itself would, takes
up what other processes write meanwhile, and steps aside when it is gone or elsewhere."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from mmdedup import Platform
from mmdedup.cli.query_server import LOCK_NAME, LOG_NAME, ask, socket_path

from helpers import wait_for

TEXTS = {
    "budget": "The city council approved the library budget on Tuesday after a long debate about "
              "opening hours, new staff for the reading room and repairs to the roof of the old wing.",
    "storm": "A storm warning was issued for the coast on Friday; ferries stopped running and the "
             "harbour office asked boat owners to secure their moorings before the evening tide.",
}
REPOST = TEXTS["budget"].replace("Tuesday", "Wednesday") + " Reported by the city desk."
LATE = "The school board voted to extend the lunch break by ten minutes from next term, after " \
       "parents and teachers asked for more time for meals and for play in the yard."


def command(home: Path, db_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "mmdedup", "--home", str(home), "--db", db_url, *args]


def client(home: Path, db_url: str, *args: str, idle: float = 0) -> tuple[int, str, str, bool]:
    """`mmdedup ARGS` in a process of its own: (status, stdout, stderr, whether it imported
    the platform). `idle`: its `query_server_idle` (the tests' default, 0, starts no server)."""
    code = ("import sys; from mmdedup.cli import main; rc = main(sys.argv[1:]); sys.stdout.flush(); "
            "print('platform-loaded' if 'mmdedup.api' in sys.modules else '', file=sys.stderr); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, "--home", str(home), "--db", db_url, *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MMDEDUP_QUERY_SERVER_IDLE": str(idle)})
    return done.returncode, done.stdout, done.stderr.replace("platform-loaded", "").strip(), \
        "platform-loaded" in done.stderr


def start_server(home: Path, db_url: str) -> subprocess.Popen:
    server = subprocess.Popen(command(home, db_url, "serve"), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not listening(socket_path(home)):
        assert server.poll() is None, server.stderr.read()
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.1)
    return server


def listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def stop(server: subprocess.Popen) -> int:
    server.send_signal(signal.SIGTERM)
    return server.wait(timeout=60)


@pytest.fixture
def stored(home: Path, db_url: str) -> Path:
    with Platform.open(home, db_url) as p:
        p.ingest([{"id": k, "text": v} for k, v in TEXTS.items()] + [{"id": "repost", "text": REPOST}])
    return home


def test_a_server_answers_as_the_command_would_and_takes_up_new_items(stored: Path, db_url: str,
                                                                     tmp_path: Path) -> None:
    home = stored
    asked = [("query", "--text", REPOST, "--format", "json"), ("query", "--text", REPOST),
             ("query", "--text", TEXTS["storm"], "--k", "1", "--min-score", "0.5", "--format", "json"),
             ("query", "--text", REPOST, "--since", "2000-01-01T00:00:00", "--format", "json")]
    alone = [client(home, db_url, *args) for args in asked]
    assert all(rc == 0 and loaded for rc, _, _, loaded in alone)
    assert [m["id"] for m in json.loads(alone[0][1])][:2] in (["repost", "budget"], ["budget", "repost"])
    missing = client(home, db_url, "query", "--image", str(tmp_path / "missing.jpg"))
    assert missing[0] == 2 and missing[2].startswith("mmdedup: error:")
    assert not socket_path(home).exists()  # (query_server_idle = 0: no server started)

    server = start_server(home, db_url)
    try:
        served = [client(home, db_url, *args) for args in asked]
        assert [(rc, out, err) for rc, out, err, _ in served] == [(rc, out, err) for rc, out, err, _ in alone]
        assert not any(loaded for *_, loaded in served)  # answered without the platform's imports
        assert client(home, db_url, "query", "--image", str(tmp_path / "missing.jpg")) == (*missing[:3], False)
        # Written by another process after the server opened the store: found.
        with Platform.open(home, db_url) as p:
            p.ingest([{"id": "late", "text": LATE}])
        rc, out, _, loaded = client(home, db_url, "query", "--text", LATE, "--format", "json")
        assert rc == 0 and not loaded and json.loads(out)[0]["id"] == "late"
        # A server of this folder's store does not answer for another database.
        request = {"text": LATE, "k": 10, "min_score": 0.0, "meta": {}}
        assert ask(str(home), db_url, request)["matches"][0]["id"] == "late"
        assert ask(str(home), f"sqlite:///{tmp_path / 'other.db'}", request) is None
        # One server a store.
        second = subprocess.run(command(home, db_url, "serve"), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2 and "a server already answers queries" in second.stderr
    finally:
        assert stop(server) == 0
    assert not socket_path(home).exists()


def test_a_socket_left_by_a_killed_server_is_passed_over_and_replaced(stored: Path, db_url: str) -> None:
    home = stored
    server = start_server(home, db_url)
    os.kill(server.pid, signal.SIGKILL)
    server.wait(timeout=60)
    assert socket_path(home).exists()
    rc, out, _, loaded = client(home, db_url, "query", "--text", REPOST, "--format", "json")
    assert rc == 0 and loaded and {m["id"] for m in json.loads(out)} >= {"repost", "budget"}
    server = start_server(home, db_url)
    try:
        rc, out2, _, loaded = client(home, db_url, "query", "--text", REPOST, "--format", "json")
        assert (rc, out2, loaded) == (0, out, False)
    finally:
        assert stop(server) == 0


def server_running(home: Path) -> bool:
    """Whether a server holds the store folder's lock (it runs, or is starting)."""
    fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@pytest.fixture
def started(stored: Path) -> Iterator[Path]:
    """The store, and no server that its queries start left running after the test."""
    yield stored
    for pid in servers(stored):
        os.kill(pid, signal.SIGTERM)


def servers(home: Path) -> list[int]:
    """The servers queries started on the store in `home`."""
    found = subprocess.run(["pgrep", "-f", "--", f"--home {home} .*serve --idle"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def test_a_query_starts_a_server_for_the_next_ones_which_stops_when_idle(started: Path, db_url: str) -> None:
    home = started
    rc, out, _, loaded = client(home, db_url, "query", "--text", REPOST, "--format", "json", idle=4)
    assert rc == 0 and loaded
    wait_for(lambda: listening(socket_path(home)))
    # The next queries are the server's, answered as the first was; they start no other server.
    for _ in range(2):
        assert client(home, db_url, "query", "--text", REPOST, "--format", "json", idle=4) == (0, out, "", False)
    # Four seconds without a query: it stops, and takes its socket with it.
    wait_for(lambda: not server_running(home), 60)
    assert not socket_path(home).exists()
    assert b"error" not in (home / LOG_NAME).read_bytes()
    # A server whose socket was deleted (its store folder removed, say) stops too.
    assert client(home, db_url, "query", "--text", REPOST, idle=600)[3]
    wait_for(lambda: listening(socket_path(home)))
    socket_path(home).unlink()
    wait_for(lambda: not server_running(home), 60)


def test_queries_at_once_leave_one_server(started: Path, db_url: str) -> None:
    home = started
    procs = [subprocess.Popen(command(home, db_url, "query", "--text", REPOST), stdout=subprocess.DEVNULL,
                              env={**os.environ, "MMDEDUP_QUERY_SERVER_IDLE": "600"}) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    wait_for(lambda: listening(socket_path(home)))
    # Any other server started meanwhile gives up once it has loaded.
    wait_for(lambda: len(servers(home)) == 1, 60)
    (pid,) = servers(home)
    # It was told its database in its environment, not on a command line all users see.
    assert db_url not in Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not server_running(home), 60)
    assert not socket_path(home).exists()
