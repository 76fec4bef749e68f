"""A SQLite store's log is copied back into the database file by its engine's thread, not
by the commits (store/wal.py): what a writer commits reaches the main file without a
commit waiting for it, and the thread goes with the engine."""

from __future__ import annotations

import gc
import shutil
import sqlite3
import threading
import time
from pathlib import Path

from sqlalchemy import text

from mmdedup.store.db import make_engine
from mmdedup.store.wal import WalCheckpointer

from helpers import wait_for


def rows_in_main_file(db: Path, tmp_path: Path) -> int:
    """Rows of table t that the database file holds by itself (its log left behind)."""
    copy = tmp_path / "alone.db"
    shutil.copyfile(db, copy)
    with sqlite3.connect(copy) as conn:
        try:
            return conn.execute("SELECT count(*) FROM t").fetchone()[0]
        except sqlite3.OperationalError:  # (no table t yet)
            return -1


def checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mmdedup-wal-checkpoint"]


def test_commits_reach_the_database_file_through_the_thread(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        with engine.connect() as conn:  # no commit checkpoints: what is committed stays in the log
            assert conn.execute(text("PRAGMA wal_autocheckpoint")).scalar() == 0
        wait_for(lambda: rows_in_main_file(db, tmp_path) == 0, 30)  # (the table, checkpointed)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (:x)"), [{"x": i} for i in range(5000)])
        assert rows_in_main_file(db, tmp_path) == 0  # (just committed: in the log only)
        wait_for(lambda: rows_in_main_file(db, tmp_path) == 5000, 30)
        assert len(checkpoint_threads()) == 1
    finally:
        engine.dispose()
    assert checkpoint_threads() == []
    # A disposed engine used again checkpoints again.
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    wait_for(lambda: rows_in_main_file(db, tmp_path) == 5001, 30)
    del engine, conn
    gc.collect()  # (an engine dropped without being disposed takes its thread with it)
    assert checkpoint_threads() == []


def test_the_thread_outlives_a_busy_or_vanished_database(tmp_path: Path) -> None:
    db = tmp_path / "gone.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    checkpointer = WalCheckpointer(str(db), every=0.05)
    checkpointer.committed()
    wait_for(lambda: checkpointer.checkpoints >= 1, 30)
    db.unlink()
    checkpointer.committed()
    time.sleep(0.3)
    assert not db.exists()  # (not made anew by the thread)
    checkpointer.stop()
    assert checkpoint_threads() == []


def test_a_short_writer_leaves_its_commits_in_the_database_file(tmp_path: Path) -> None:
    """Though another connection holds the store open (a query server), so that the
    writer's closing is not the last and SQLite would not checkpoint on it."""
    db = tmp_path / "store.db"
    engine = make_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    engine.dispose()
    with sqlite3.connect(db) as reader:  # (held open meanwhile)
        reader.execute("SELECT count(*) FROM t").fetchone()
        engine = make_engine(f"sqlite:///{db}")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (:x)"), [{"x": i} for i in range(100)])
        engine.dispose()  # (at once: no periodic checkpoint came first)
        assert rows_in_main_file(db, tmp_path) == 100
