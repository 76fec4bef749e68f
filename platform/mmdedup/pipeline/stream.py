"""A stream: JSON Lines from standard input or a file that grows, ingested in micro-batches,
each item's decision printed as a line as soon as its batch commits.

    {"id": "n7", "status": "new" | "duplicate" | "near-duplicate" | "unchanged" | "failed",
     "of": "n2" | null, "score": 0.93 | null, "tier": "strong" | null}

`duplicate`: an exact copy of `of` (same content); `near-duplicate`: its best pair in a tier
is with `of`; `unchanged`: the store already held this id with this content (nothing was
decided again); `failed`: the record could not be ingested, with "reason" (its failure
row says more, `mmdedup failures`). A pair within one batch is said of its later item.

A batch closes at `stream_batch` records or `stream_batch_seconds` after its first one,
whichever comes first, and is one chunk of one ingest run (pipeline/ingest.py), so the
candidate indexes stay open across batches. A record whose id is already in the open
batch starts the next one (the second is an update of the first).

Following a file (`--follow`) reads what is appended as it comes; when the file is
replaced (rotated: a new file under the name) or cut shorter, the rest of the old one is
read, then the new one from its start. Where the stream got to (file, byte, line) is
written in the transaction of each batch, so a stream killed at any moment and started
again resumes after the last committed line: nothing lost, nothing ingested twice. The
decision lines of a batch are printed after its commit; with `out` (a file) the lines
through each batch are recorded with it, and a restart first completes the file, so it
holds every decision exactly once. Standard input has no position to resume from: a
producer that sends again what it sent before gets `unchanged` for what was committed.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings
from ..input.items import Entry, InputError, LoadedItem
from ..input.lines import Line, read_lines
from ..input.sources import line_entry
from ..store import streams
from ..store.queries import pks_by_id
from .ingest import Chunks, Extracted, PixelsWanted, Unchanged, extract_entries, keyed, stored_fingerprints
from .repeats import Repeats

_POLL = 0.1  # seconds between looks at a followed file that has not grown


@dataclass
class Position:
    """Where a followed file was read up to."""

    inode: int = 0
    offset: int = 0
    line: int = 0


def follow(path: Path, start: Position, limit: int, stopped: threading.Event) -> Iterator[Line | None]:
    """The lines of the file at `path` from `start`, then what is appended, across
    rotations; None while nothing new is there. When another file takes the name (or
    the file is cut shorter), the rest of the old one is read first (its writer may have
    added to it after our last look), then the new one from its start. A name missing for
    a moment (between a rotation's rename and the new file's creation) is waited for."""
    position = start
    while not stopped.is_set():
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            yield None
            time.sleep(_POLL)
            continue
        with fh:
            st = os.fstat(fh.fileno())
            if st.st_ino != position.inode or st.st_size < position.offset:
                position = Position(st.st_ino)
            fh.seek(position.offset)

            def more(offset: int, inode: int = st.st_ino) -> bool | None:
                if stopped.is_set():
                    return None
                time.sleep(_POLL)
                return not _replaced(path, inode, offset)

            for line in read_lines(fh, limit, more, position.line, st.st_ino, position.offset):
                if line is not None:
                    position = Position(st.st_ino, line.end, line.number)
                yield line
        position = Position()


def _replaced(path: Path, inode: int, offset: int) -> bool:
    """Whether another file took the name, or the file was cut shorter than `offset`."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return True
    return st.st_ino != inode or st.st_size < offset


def batches(lines: Iterator[Line | None], count: int, seconds: float, idle: float,
            stopped: threading.Event) -> Iterator[list[Line]]:
    """Lines in batches of at most `count`, each closed `seconds` after its first line at
    the latest. A reader thread keeps reading while a batch is written. Ends with the
    lines, or after `idle` seconds without one (0: never), or when `stopped` is set."""
    got: queue.Queue[Line | None | BaseException] = queue.Queue(maxsize=4 * count)
    done = object()

    def read() -> None:
        try:
            for line in lines:
                if line is not None:
                    got.put(line)
                if stopped.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - said where the batches are taken
            got.put(exc)
        got.put(done)  # type: ignore[arg-type]

    threading.Thread(target=read, daemon=True, name="stream-reader").start()
    batch: list[Line] = []
    deadline = last = time.monotonic()
    while True:
        wait = deadline - time.monotonic() if batch else _POLL
        try:
            line = got.get(timeout=max(wait, 0.0))
        except queue.Empty:
            line = None
        if isinstance(line, BaseException):
            raise line
        if line is done or stopped.is_set():
            if batch:
                yield batch
            return
        if line is not None:
            if not batch:
                deadline = time.monotonic() + seconds
            batch.append(line)
            last = time.monotonic()
        if batch and (len(batch) >= count or time.monotonic() >= deadline):
            yield batch
            batch = []
        elif not batch and idle and time.monotonic() - last >= idle:
            return


class StreamEngine:
    """The engine (pipeline/ingest.py `Engine`) over a stream's batches: each batch one
    chunk, cut where an id comes again; `position` is where the chunk last yielded ends."""

    def __init__(self, batches: Iterator[list[Line]], root: Path | None, settings: Settings,
                 sessions: sessionmaker[Session], id_prefix: str = "", repeats: Repeats | None = None) -> None:
        self.batches, self.root, self.settings, self.sessions = batches, root, settings, sessions
        self.id_prefix, self.repeats = id_prefix, repeats
        self.position = Position()

    def __call__(self, pixels: PixelsWanted) -> Chunks:
        for batch in self.batches:
            chunk: list[tuple[Entry, Line]] = []
            ids: set[str] = set()
            for line in batch:
                entry = line_entry(line.number, line.raw, line.size, self.settings, self.id_prefix)
                if entry is None:  # (a blank line: only the position moves)
                    self.position = Position(line.inode, line.end, line.number)
                    continue
                if entry.item is not None and entry.item.id in ids:
                    yield self._extracted(chunk, pixels)
                    chunk, ids = [], set()
                chunk.append((keyed(entry), line))
                if entry.item is not None:
                    ids.add(entry.item.id)
            if chunk:
                yield self._extracted(chunk, pixels)

    def _extracted(self, chunk: list[tuple[Entry, Line]], pixels: PixelsWanted) -> tuple[list[Entry], Extracted]:
        entries = [e for e, _ in chunk]
        last = chunk[-1][1]
        self.position = Position(last.inode, last.end, last.number)
        return entries, extract_entries(entries, self.root, self.settings, pixels(entries),
                                        stored_fingerprints(self.sessions, entries),
                                        self.repeats.lend if self.repeats is not None else None)


class Decisions:
    """The chunk hook (pipeline/ingest.py `ChunkHook`) of a stream: each item's decision
    worked out in its batch's transaction, with the position the batch reached (a
    followed file's), and printed once it committed."""

    def __init__(self, engine: StreamEngine, settings: Settings, write: Callable[[str], None],
                 source: str | None, out_bytes: int = 0, after: Callable[[], None] = lambda: None) -> None:
        self.engine, self.settings, self.write, self.source = engine, settings, write, source
        self.out_bytes, self.after = out_bytes, after
        self.text = ""
        self.counts: dict[str, int] = {}

    def written(self, session: Session, chunk: list[Entry], extracted: Extracted) -> None:
        records = decisions(session, self.settings, chunk, extracted)
        self.text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        for r in records:
            self.counts[r["status"]] = self.counts.get(r["status"], 0) + 1
        if self.source is not None:
            p = self.engine.position
            self.out_bytes += len(self.text.encode("utf-8"))
            streams.save_cursor(session, self.source, p.inode, p.offset, p.line, self.out_bytes, self.text)

    def committed(self) -> None:
        self.write(self.text)
        self.after()


def decisions(session: Session, settings: Settings, chunk: list[Entry], extracted: Extracted) -> list[dict[str, Any]]:
    """Each record's decision line, in the chunk's order."""
    loaded = [x.item.id for x in extracted if isinstance(x, LoadedItem)]
    pks = pks_by_id(session, loaded)
    found = streams.partners(session, list(pks.values()))
    batch = set(pks.values())
    out = []
    for entry, x in zip(chunk, extracted):
        line: dict[str, Any] = {"id": entry.key, "status": "new", "of": None, "score": None, "tier": None}
        if isinstance(x, InputError):
            line.update(status="failed", reason=x.reason)
        elif isinstance(x, Unchanged):
            line.update(id=x.item_id, status="unchanged")
        else:
            pk = pks[x.item.id]
            # A pair of two items of this batch is said of the later one.
            mine = [p for p in found.get(pk, []) if not (p[0] in batch and p[0] > pk)]
            exact = [p for p in mine if p[3]]
            near = [p for p in mine if settings.tier(p[2], p[4]) is not None]
            if exact:
                best = min(exact, key=lambda p: p[0])
                line.update(status="duplicate", of=best[1], score=1.0, tier=settings.tier(1.0))
            elif near:
                best = max(near, key=lambda p: (p[2], -p[0]))
                line.update(status="near-duplicate", of=best[1], score=round(best[2], 4),
                            tier=settings.tier(best[2], best[4]))
        out.append(line)
    return out


def complete_out(path: Path, cursor: Any) -> int:
    """Make the --out file hold exactly the decision lines through the last committed
    batch: a kill may have come before that batch's lines reached it, or while they were
    being written. Returns its size, which the next batch's lines are counted from. A
    file that does not end where the cursor's count says (another file, or one the
    cursor did not count: an earlier run printed to standard output) is left as it is."""
    if cursor is None or not path.exists():
        path.touch()
        return path.stat().st_size
    last = cursor.last_lines.encode("utf-8")
    with path.open("r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if cursor.out_bytes - len(last) <= size < cursor.out_bytes:
            fh.truncate(cursor.out_bytes - len(last))
            fh.seek(0, os.SEEK_END)
            fh.write(last)
            fh.flush()
            os.fsync(fh.fileno())
        return fh.seek(0, os.SEEK_END)
