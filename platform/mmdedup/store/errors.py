"""Why a store cannot be opened, read or written, said in one line a user can act on.

The drivers (SQLite, psycopg) and the operating system each word a failure their own way,
and a traceback names neither the store nor what to do. Here, where the drivers are
known, each failure an operator meets (server down, no such database or user, a store
that is read-only, a full disk) becomes a StoreError naming the store and the remedy.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

READ_COMMANDS = "stats, pairs, clusters, report, failures, labels, query"


class StoreError(Exception):
    """A store that cannot be opened, read or written; str() is one line: what is wrong
    and what to do."""


class NoStore(StoreError):
    """The database holds no mmdedup tables, and a reader must not create them."""


def shown_url(url: str) -> str:
    """The URL as it may be printed: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def explain(exc: BaseException, url: str) -> StoreError | None:
    """The StoreError a driver's failure on the store at `url` means, or None for one
    that is not about the store (a bug: it keeps its traceback)."""
    if isinstance(exc, StoreError):
        return exc
    if not isinstance(exc, DBAPIError):
        return None
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    low = text.lower()
    first = text.splitlines()[0] if text else type(orig).__name__
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite(parsed.database or "", low, first)
    return _server(parsed, low, first, getattr(orig, "sqlstate", None), exc)


def _sqlite(path: str, low: str, first: str) -> StoreError | None:
    if "database or disk is full" in low:
        return StoreError(f"the disk holding the store {path} is full: free some space and run "
                          "the command again (work committed so far is kept)")
    if "readonly database" in low or "unable to open database file" in low:
        return StoreError(f"cannot write the store {path}: it is read-only for this user; give "
                          f"write access, or use a command that only reads ({READ_COMMANDS})")
    if "database is locked" in low:
        return StoreError(f"the store {path} stayed locked by another process: wait for it to "
                          "finish and run the command again")
    if "not a database" in low or "malformed" in low:
        return StoreError(f"{path} is not a readable SQLite database ({first}): point --home "
                          "at an mmdedup store, or restore it from a copy")
    if "disk i/o error" in low:
        return StoreError(f"the store {path} could not be read or written (disk I/O error): "
                          "check the disk and the file system, then run the command again")
    return None  # SQL that does not fit the schema, say: a bug, with its traceback


def _server(parsed, low: str, first: str, sqlstate: str | None,  # noqa: ANN001
            exc: BaseException) -> StoreError | None:
    server = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    name = parsed.database or ""
    fix = "correct --db (or MMDEDUP_DATABASE_URL)"
    if sqlstate == "53100" or "no space left on device" in low or "could not extend file" in low:
        return StoreError(f"the disk of the database server {server} is full: free some space "
                          "there and run the command again (work committed so far is kept)")
    if sqlstate == "25006" or "read-only transaction" in low:
        return StoreError(f"the database {name} on {server} is read-only here: give the user "
                          f"write access, or use a command that only reads ({READ_COMMANDS})")
    if sqlstate == "3D000" or re.search(r'database "[^"]*" does not exist', low):
        return StoreError(f"the database {name} does not exist on {server}: create it "
                          f"(createdb {name}) or {fix}")
    if (sqlstate in ("28000", "28P01") or re.search(r'role "[^"]*" does not exist', low)
            or "authentication failed" in low or "no password supplied" in low):
        return StoreError(f"the database server {server} refused user {parsed.username or '(none)'} "
                          f"({_reason(first)}): {fix}")
    if sqlstate == "42501" or "permission denied" in low:
        return StoreError(f"user {parsed.username or '(none)'} lacks rights on the database {name} "
                          f"on {server} ({_reason(first)}): grant them, or {fix}")
    if any(s in low for s in ("connection refused", "could not connect", "connection failed",
                              "timeout expired", "could not translate host name",
                              "name or service not known", "server closed the connection",
                              "terminating connection", "can't create a connection")):
        return StoreError(f"cannot reach the database server {server} ({_reason(first)}): is "
                          f"PostgreSQL running there? Otherwise {fix}")
    if isinstance(exc, OperationalError):
        return StoreError(f"the database {shown_url(parsed.render_as_string())}: {_reason(first)}")
    return None


def _reason(line: str) -> str:
    """The driver's own reason, without its preamble (psycopg: 'connection failed:
    connection to server at "h", port p failed: FATAL:  the reason')."""
    reason = line.rsplit(" failed: ", 1)[-1]
    return re.sub(r"^(FATAL|ERROR):\s+", "", reason).strip().rstrip(".") or line


__all__ = ["NoStore", "READ_COMMANDS", "StoreError", "explain", "shown_url"]
