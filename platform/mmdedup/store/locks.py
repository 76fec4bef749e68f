"""Locks that belong to a live process: the store's write lock and named job locks.

Several processes may ingest into one store, and a retrain may run beside them. Every
transaction that writes items, signatures or pairs takes the store's *write lock* first,
so those transactions run one at a time and each sees everything committed before it (the
candidate indexes catch up with the signatures others wrote, signals/base.py). On
PostgreSQL it is a transaction-level advisory lock; on SQLite `BEGIN IMMEDIATE`, the
database's own write lock. Either is released when the transaction ends, and by the
server or the operating system when the process dies: a killed writer never leaves a lock
behind. Extraction (reading files, decoding media, tokenising) happens outside it.

The write lock also numbers the writes: the transaction holding it takes the next value of
the store's write counter (`store_state`), and the signatures it writes carry that number
(`signatures.seq`), which is how an index knows what it has not seen yet.

A *job lock* keeps two runs of a job (a retrain) from overlapping, for the whole run: a
session-level advisory lock on PostgreSQL, held by a connection of its own; on SQLite an
exclusive `flock` on a file beside the database. Both die with the process that holds
them; there is no expiry to wait for.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from sqlalchemy import Engine, insert, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from .schema import StoreState

WRITE_COUNTER = "writes"
# Advisory lock keys are 64-bit integers, and a database's: they are derived from the
# lock's name and the store's schema, so that two stores in one database (two schemas)
# never wait for each other, nor for another application's locks.
_WRITE = "write"
# Looks again for a job lock whose holder was gone when it was looked up, before LockBusy.
_RETRIES = 20
# How long a writer waits on SQLite before saying that it waits (then it waits on).
_QUIET_WAIT_MS = 500


class LockBusy(Exception):
    """Another live process holds the job lock."""


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def take_write_lock(session: Session, on_wait: Callable[[str], None] | None = None, *,
                    numbered: bool = True) -> int:
    """Hold the store's write lock until the session's transaction ends, and return this
    write's number. Call it first in a transaction that writes items, signatures or
    pairs; `on_wait` is told once, in words, when another writer makes it wait.
    `numbered=False`: the lock alone, for a transaction that writes none of them (index
    files saved beside the store), which leaves the write counter where it was (returns
    0): an index saved then is stamped with the store's last write, and the next process
    that opens it need not count signatures to trust it."""
    if "write_seq" in session.info:
        return session.info["write_seq"]
    conn = session.connection()
    if not session.info.get("write_locked"):
        if conn.dialect.name == "postgresql":
            key = _advisory_key(conn, _WRITE)
            if not conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": key}).scalar():
                _say(on_wait)
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        else:
            _begin_immediate(conn, on_wait)
        session.info["write_locked"] = True
    if not numbered:
        return 0
    seq = conn.execute(update(StoreState).where(StoreState.name == WRITE_COUNTER)
                       .values(value=StoreState.value + 1).returning(StoreState.value)).scalar()
    if seq is None:  # (tables made by create_all rather than the migrations)
        seq = 1
        conn.execute(insert(StoreState).values(name=WRITE_COUNTER, value=seq))
    session.info["write_seq"] = int(seq)
    return int(seq)


def last_write(session: Session) -> int:
    """The number of the last committed write (0 on a store nobody wrote to since the
    counter existed)."""
    return int(session.scalar(select(StoreState.value).where(StoreState.name == WRITE_COUNTER)) or 0)


def _advisory_key(conn, name: str) -> int:  # noqa: ANN001
    """The key of lock `name` of the store this connection's schema holds (a signed
    64-bit integer: the schema's checksum above the name's)."""
    schema = conn.execute(text("SELECT current_schema()")).scalar() or ""
    key = (zlib.crc32(schema.encode()) << 32) | zlib.crc32(f"mmdedup:{name}".encode())
    return key - (1 << 64) if key >= 1 << 63 else key


def _say(on_wait: Callable[[str], None] | None) -> None:
    if on_wait is not None:
        on_wait("waiting for another process writing to this store (an ingest or a retrain)...")


def _begin_immediate(conn, on_wait: Callable[[str], None] | None) -> None:  # noqa: ANN001
    """SQLite's write lock, taken at the start of the transaction rather than at its
    first write, so that what the transaction reads is what it writes against. The
    driver begins a transaction only before a write; an explicit BEGIN IMMEDIATE is the
    one it then continues. A first short try lets a wait be reported; then it waits as
    long as the holder, which is alive (the OS releases a dead process's lock), writes."""
    raw = conn.connection.dbapi_connection
    if raw.in_transaction:
        raise RuntimeError("take the write lock before the transaction's first statement")
    raw.execute(f"PRAGMA busy_timeout = {_QUIET_WAIT_MS}")
    said = False
    try:
        while True:
            try:
                raw.execute("BEGIN IMMEDIATE")
                return
            except Exception as exc:  # sqlite3.OperationalError: database is locked
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if not said:
                    _say(on_wait)
                    said = True
                raw.execute("PRAGMA busy_timeout = 60000")
    finally:
        raw.execute("PRAGMA busy_timeout = 60000")


@contextmanager
def job_lock(engine: Engine, name: str, wait_seconds: float = 0.0, poll: float = 1.0) -> Iterator[None]:
    """Hold the job lock `name` for the block, waiting up to `wait_seconds` for a run
    that holds it; `LockBusy` (saying who holds it) after that."""
    hold = _file_lock if engine.dialect.name == "sqlite" else _advisory_lock
    with hold(engine, name, wait_seconds, poll):
        yield


@contextmanager
def _advisory_lock(engine: Engine, name: str, wait_seconds: float, poll: float) -> Iterator[None]:
    prefix = f"mmdedup {name} "
    tag = f"{prefix}{holder_name()}"[:63]
    deadline = time.monotonic() + wait_seconds
    with engine.connect() as conn:
        key = _advisory_key(conn, f"job:{name}")
        conn.execute(text("SELECT set_config('application_name', :tag, false)"), {"tag": tag})
        conn.commit()
        let_go = 0  # times the holder was gone by the time it was looked up
        while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            conn.commit()
            if time.monotonic() >= deadline:
                who = conn.execute(text(
                    "SELECT a.application_name, a.backend_start FROM pg_locks l "
                    "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                    "AND l.granted AND l.classid::bigint = :hi AND l.objid::bigint = :lo "
                    "AND l.database = (SELECT oid FROM pg_database WHERE datname = "
                    "current_database())"),
                    {"hi": (key >> 32) & 0xFFFFFFFF, "lo": key & 0xFFFFFFFF}).first()
                if who is None and let_go < _RETRIES:
                    # Released between the two statements (a holder that just ended: the
                    # server ends a killed client's session a moment after the kill).
                    let_go += 1
                    time.sleep(0.05)
                    continue
                raise LockBusy(_busy(name, f"{who[0].removeprefix(prefix)} since {who[1]:%Y-%m-%d %H:%M:%S}"
                                     if who else None))
            time.sleep(poll)
        conn.commit()
        try:
            yield
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
            except OperationalError:
                pass  # the connection is gone, and the lock with it


@contextmanager
def _file_lock(engine: Engine, name: str, wait_seconds: float, poll: float) -> Iterator[None]:
    database = engine.url.database
    if not database or database == ":memory:":
        yield  # a private in-memory store has no other process to keep out
        return
    path = Path(f"{database}.{name}.lock")
    deadline = time.monotonic() + wait_seconds
    with open(path, "a+") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    fh.seek(0)
                    raise LockBusy(_busy(name, fh.read().strip() or None)) from None
                time.sleep(poll)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{holder_name()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


def _busy(name: str, who: str | None) -> str:
    return (f"another {name} is running ({who or 'another process'}); it holds the lock while "
            f"it lives: try again later or pass --wait SECONDS")
