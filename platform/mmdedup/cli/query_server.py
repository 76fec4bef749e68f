"""`mmdedup serve`: a process that keeps a store open and answers `mmdedup query`.

A query in a process of its own pays for starting Python and importing the platform
(SQLAlchemy's ORM, numpy, the signals) and for opening the store and its indexes before
it looks anything up, which is most of its time; a crawler that asks "have we seen this?"
of every page it fetches would pay that every time. `mmdedup serve` pays it once: it
opens the store read-only and listens on a Unix socket in the store folder (`query.sock`);
`mmdedup query` on that store asks it first, with nothing but the standard library, and
prints what it would have printed itself. Before each query the server takes up what other
processes did to the store (the signatures they wrote, the models a retrain or a refresh
made active), so its answer is the one a new process would give. Where no server answers
(no socket, a socket nobody listens on, a server of another database or an older
protocol), the query runs in its own process, as before.

A query that ran in its own process then starts a server in the background (`start_server`,
unless `query_server_idle` is 0), as a build tool's client starts its daemon: the first
query pays for starting, the ones after it do not. That server stops after
`query_server_idle` seconds without a query it answered, or when its socket is gone (the
store folder deleted). One server a store folder: a server holds `query.lock` while it
runs, so two queries that both start one leave one.

One request a connection, a JSON object a line each way. The request holds the query's
arguments (paths made absolute, times in ISO form) and the database the client means; the
answer is {"matches": [...], "listed": [...]}, or {"error": "..."} (what the command says,
with status 2, when the query itself is wrong), or {"elsewhere": true} (not this store).
Queries are answered one at a time on one thread: a platform is not shared between
threads, and a query takes milliseconds.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..config import DEFAULT_HOME

if TYPE_CHECKING:
    from ..api import Platform

SOCKET_NAME = "query.sock"
LOCK_NAME = "query.lock"  # held by the server that listens on the socket
LOG_NAME = "query-server.log"  # what a server started by a query says (its stderr)
POLL_SECONDS = 5.0  # how often a server without queries looks at its idle time and its socket
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (Linux; macOS allows 103)
PROTOCOL = 1  # raised when a request or an answer changes shape
MAX_REQUEST = 1 << 20  # bytes: a query names files by path, its text is the only bulk
CLIENT_SECONDS = 300.0  # a query of a video decodes it: minutes at worst, then the client gives up


def socket_path(home: str | os.PathLike | None) -> Path:
    """Where a server of the store in `home` listens (`home` resolved as Platform.open does)."""
    return Path(home or os.environ.get("MMDEDUP_HOME") or DEFAULT_HOME) / SOCKET_NAME


def ask(home: str | None, db: str | None, request: dict[str, Any]) -> dict[str, Any] | None:
    """The server's answer to a query, or None where no server of this store answers."""
    path = socket_path(home)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CLIENT_SECONDS)
            conn.connect(str(path))
            conn.sendall(json.dumps({**request, "protocol": PROTOCOL,
                                     "db": db or os.environ.get("MMDEDUP_DATABASE_URL")}).encode() + b"\n")
            conn.shutdown(socket.SHUT_WR)
            data = b"".join(iter(lambda: conn.recv(1 << 16), b""))
        answer = json.loads(data)
    except (OSError, ValueError):  # no server, a stale socket, a server that went away
        return None
    if not isinstance(answer, dict) or answer.get("elsewhere") or not ({"matches", "error"} & answer.keys()):
        return None
    return answer


def query_request(args: Any) -> dict[str, Any]:
    """The query's arguments as a request: a server has a folder of its own, so paths are
    made absolute here; --meta is checked here, where the command would check it."""
    from . import meta_values

    meta = meta_values(args.meta)

    def path(value: str | None) -> str | None:
        return None if value is None else os.path.abspath(value)

    return {"text": args.text, "image": path(args.image), "video": path(args.video), "html": path(args.html),
            "k": args.k, "min_score": args.min_score, "meta": meta,
            "since": args.since.isoformat() if args.since else None,
            "until": args.until.isoformat() if args.until else None}


def run_query(platform: Platform, request: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's query on a platform: what the server and the command itself run."""
    since, until = (datetime.fromisoformat(request[k]) if request.get(k) else None for k in ("since", "until"))
    return [m.as_dict() for m in platform.query(
        request.get("text"), image=request.get("image"), video=request.get("video"), html=request.get("html"),
        k=int(request.get("k", 10)), min_score=float(request.get("min_score", 0.0)), meta=request.get("meta") or {},
        since=since, until=until)]


def serve(platform: Platform, home: str | None, problem: Callable[[BaseException], str | None],
          idle: float = 0.0, ready: Callable[[Path], None] = lambda path: None) -> None:
    """Answer queries on the store's socket until the process is stopped (the socket goes
    with it), `idle` seconds pass without a query answered (0: never), or the socket is
    no longer this server's. `problem`: what the command would say of an exception (None:
    a defect, which the server reports on stderr and answers as an error, and goes on)."""
    from ..signals.registry import listed_names

    path = socket_path(home)
    lock = _lock_file(path)
    try:
        if not _take(lock) or _listening(path):
            raise ValueError(f"a server already answers queries on {path}")
        path.unlink(missing_ok=True)  # (left by a server that was killed)
        listed = list(listed_names())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            try:
                listener.bind(str(path))
            except OSError as exc:
                raise OSError(exc.errno, f"cannot listen on {path}: {exc.strerror or exc}") from None
            mine = path.stat().st_ino
            try:
                listener.listen(64)
                listener.settimeout(POLL_SECONDS if not idle else min(POLL_SECONDS, idle))
                ready(path)
                last = time.monotonic()
                while True:
                    try:
                        conn, _ = listener.accept()
                    except TimeoutError:
                        if not _is(path, mine) or (idle and time.monotonic() - last >= idle):
                            return
                        continue
                    with conn:
                        if _reply(conn, platform, listed, problem):
                            last = time.monotonic()
            finally:
                if _is(path, mine):  # (not a socket another server made since)
                    path.unlink(missing_ok=True)
    finally:
        os.close(lock)  # (the lock goes with it)


def start_server(home: str | None, db: str | None, idle: float) -> None:
    """Start a server of the store in the background, stopping after `idle` seconds
    without a query, unless `idle` is 0, a server holds the store's lock (it runs, or is
    starting), or none could listen (a folder this process may not write, a path too long
    for a socket). It outlives this process, in a session of its own, and writes what it
    has to say to `query-server.log` in the store folder."""
    path = socket_path(home)
    if idle <= 0 or len(os.fsencode(path.absolute())) > MAX_SOCKET_PATH or not os.access(path.parent, os.W_OK):
        return
    try:
        lock = _lock_file(path)
    except OSError:
        return
    try:
        if not _take(lock):
            return
    finally:
        os.close(lock)
    command = [sys.executable, "-m", "mmdedup", "--home", str(path.parent.absolute()), "serve",
               "--idle", repr(float(idle))]
    # The database goes in the environment, not the command line that `ps` shows to every
    # user of the machine for as long as the server runs (a URL may hold a password).
    env = {**os.environ, "MMDEDUP_DATABASE_URL": db} if db else None
    try:
        with open(path.with_name(LOG_NAME), "ab") as log:
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                             env=env, start_new_session=True, close_fds=True)
    except OSError:
        pass  # (the query was answered; the next one runs in its own process again)


def _reply(conn: socket.socket, platform: Platform, listed: list[str],
           problem: Callable[[BaseException], str | None]) -> bool:
    """Answer one connection; True if it was a query of this store."""
    try:
        conn.settimeout(30)
        request = _read(conn)
        ours = request.get("protocol") == PROTOCOL and platform.holds(request.get("db"))
        answer = _answer(platform, request, listed, problem) if ours else {"elsewhere": True}
        conn.sendall(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
        return ours
    except (OSError, ValueError):
        return False  # (a client that left, or sent what is not a request)


def _lock_file(path: Path) -> int:
    """The open lock file beside the socket at `path` (made if missing)."""
    return os.open(path.with_name(LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)


def _take(fd: int) -> bool:
    """Take the store's server lock without waiting; False if another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _is(path: Path, inode: int) -> bool:
    """Whether the socket at `path` is still the one this server made."""
    try:
        return path.stat().st_ino == inode
    except OSError:
        return False


def _answer(platform: Platform, request: dict[str, Any], listed: list[str],
            problem: Callable[[BaseException], str | None]) -> dict[str, Any]:
    try:
        return {"matches": run_query(platform, request), "listed": listed}
    except Exception as exc:  # noqa: BLE001  (a server outlives any one query)
        said = problem(exc)
        if said is None:
            import traceback

            traceback.print_exc(file=sys.stderr)
            said = f"the query failed: {type(exc).__name__}: {exc} (the server's log has the trace)"
        return {"error": said}


def _read(conn: socket.socket) -> dict[str, Any]:
    data = bytearray()
    while b"\n" not in data:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("request too long")
    request = json.loads(bytes(data))
    if not isinstance(request, dict):
        raise ValueError("not a request")
    return request


def _listening(path: Path) -> bool:
    """Whether anything (another server, of any protocol) accepts on the socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)
            probe.connect(str(path))
        return True
    except OSError:
        return False
