"""A SQLite store's write-ahead log copied back into the database file by a thread of its own.

By default SQLite checkpoints in the connection that commits, once the log passes
`wal_autocheckpoint` pages: that commit then waits while the log is copied into the
database file and the file is synced. In an ingest that is 64 MiB every few chunks, and
on a disk shared with other work the copy and the sync are the longest pauses of the run
(a commit that waits seconds where the chunk itself took half of one). A writing engine's
connections turn that off, and this thread checkpoints instead, every `EVERY_SECONDS`
while commits arrive (more often writes pages back more often: more bytes), PASSIVE, so
it never waits for a writer or a reader, nor makes them wait; the sqlite3 module lets go
of the GIL for the copy and the sync, so the ingest goes on meanwhile. Its work is the
same; only who waits for it changes.
"""

from __future__ import annotations

import sqlite3
import threading
from urllib.parse import quote

EVERY_SECONDS = 4.0


class WalCheckpointer:
    """Checkpoints the database at `path` while its engine commits; `stop` when disposed."""

    def __init__(self, path: str, every: float = EVERY_SECONDS) -> None:
        self.path = path
        self.every = every
        self.checkpoints = 0  # (completed or not: a test's evidence that it runs)
        self._written = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def committed(self) -> None:
        """A commit added to the log: a checkpoint is due (the thread starts with the first,
        and again with the first after a `stop`: a disposed engine can be used again)."""
        self._written = True
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    self._stopped.clear()
                    self._thread = threading.Thread(target=self._run, name="mmdedup-wal-checkpoint",
                                                    daemon=True)
                    self._thread.start()

    def stop(self) -> None:
        """End the thread, after a last checkpoint of what was committed since its last
        one (a short command, or a store another process holds open, whose last
        connection to close would not checkpoint it)."""
        with self._start:
            thread, self._thread = self._thread, None
            self._stopped.set()
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                last = self._stopped.wait(self.every)
                if self._written:
                    self._written = False
                    try:  # (mode=rw: a database deleted meanwhile is not made anew)
                        conn = conn or sqlite3.connect(f"file:{quote(self.path)}?mode=rw", uri=True, timeout=0,
                                                       check_same_thread=False, isolation_level=None)
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                        self.checkpoints += 1
                    except sqlite3.Error:
                        self._written = True  # (busy, or gone a moment: again next time)
                if last:
                    return
        finally:
            if conn is not None:
                conn.close()
