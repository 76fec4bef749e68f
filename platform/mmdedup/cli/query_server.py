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

One request a connection, a JSON object a line each way. The request holds the query's
arguments (paths made absolute, times in ISO form) and the database the client means; the
answer is {"matches": [...], "listed": [...]}, or {"error": "..."} (what the command says,
with status 2, when the query itself is wrong), or {"elsewhere": true} (not this store).
Queries are answered one at a time on one thread: a platform is not shared between
threads, and a query takes milliseconds.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..config import DEFAULT_HOME

if TYPE_CHECKING:
    from ..api import Platform

SOCKET_NAME = "query.sock"
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
    meta = dict(item.split("=", 1) for item in args.meta if "=" in item)
    if len(meta) != len(args.meta):
        raise ValueError("--meta takes KEY=VALUE")

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
          ready: Callable[[Path], None] = lambda path: None) -> None:
    """Answer queries on the store's socket until the process is stopped (the socket goes
    with it). `problem`: what the command would say of an exception (None: a defect,
    which the server reports on stderr and answers as an error, and goes on)."""
    from ..signals.registry import listed_names

    path = socket_path(home)
    if _listening(path):
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
            ready(path)
            while True:
                conn, _ = listener.accept()
                with conn:
                    try:
                        conn.settimeout(30)
                        request = _read(conn)
                        if request.get("protocol") != PROTOCOL or not platform.holds(request.get("db")):
                            answer: dict[str, Any] = {"elsewhere": True}
                        else:
                            answer = _answer(platform, request, listed, problem)
                        conn.sendall(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
                    except (OSError, ValueError):
                        pass  # (a client that left, or sent what is not a request)
        finally:
            try:
                if path.stat().st_ino == mine:  # (not a socket another server made since)
                    path.unlink()
            except OSError:
                pass


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
