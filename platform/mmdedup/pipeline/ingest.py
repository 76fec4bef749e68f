"""Batch ingest: entries -> items, assets, failures and exact-duplicate pairs, chunk by chunk.

Each chunk is one transaction, so a run killed at any moment leaves whole chunks behind
and a rerun, which skips items whose fingerprint is unchanged, completes the batch with
nothing missing or doubled. A chunk's transaction holds the store's write lock
(store/locks.py): several ingests (and a retrain) on one store write one chunk at a time,
each after catching up with the models in force and the items the others wrote, so
together they find every pair one sequential run would; they extract in parallel. Failures are keyed by (source, item id or manifest line): a
rerun closes the old failure of every record it reaches and records a new one only if the
record still fails.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
from collections import Counter, deque
from contextlib import ExitStack
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Protocol, Sequence, TypeVar

import numpy as np
from sqlalchemy.orm import Session, sessionmaker
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from ..config import Settings
from ..extract.text_sketches import tokenize_texts
from ..input.items import (Entry, InputError, LoadedItem, finish_item, input_bytes, read_item,
                           storable_id)
from ..score.pairs import candidate_pairs
from ..score.windows import class_and_time
from ..signals.base import Signal, Workers
from ..signals.exact_keys import ExactKeys
from ..signals.scorer import PairScorer, Scored, in_windows
from ..store import items as stored_items
from ..store import unsearched
from ..store.pairs import insert_exact_pairs
from ..store.locks import take_write_lock
from ..store.runs import finish_run, start_run
from ..store.schema import utcnow

@dataclass
class IngestReport:
    source: str
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    exact_pairs: int = 0
    near_pairs: int = 0
    chunks: int = 0  # transactions committed
    searched: int = 0  # items searched for pairs after their chunks were written
    expired: int = 0  # items deleted at the end, past their class's retention
    adapted: dict[str, float] = field(default_factory=dict)  # new medium tiers by pair kind (adaptive)
    # The engine that read and extracted, and what it says of its work (the ray engine:
    # blocks, records, CPUs, GPUs encoding pictures, seconds, and values extracted on the
    # workers by signal).
    engine: dict[str, object] = field(default_factory=lambda: {"name": "local"})
    # What the cap on candidates an item (`max_candidates_per_item`) cut, by signal: the
    # searches cut, the bucket entries passed over, the candidates dropped.
    capped: dict[str, Counter[str]] = field(default_factory=dict)

    def summary(self) -> str:
        text = (f"{self.source}: {self.new} new, {self.updated} updated, {self.unchanged} "
                f"unchanged, {self.failed} failed; {self.exact_pairs} exact-duplicate pairs, "
                f"{self.near_pairs} near-duplicate pairs written")
        if self.failures:
            text += " (failures: " + ", ".join(f"{r} {n}" for r, n in self.failures.most_common()) + ")"
        if self.expired:
            text += f"; {self.expired} items past their retention deleted"
        if self.adapted:
            text += "; medium tier adapted: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(self.adapted.items()))
        for name, cut in self.capped.items():
            text += (f"; {name}: {cut['searches']} searches met max_candidates_per_item "
                     f"({cut['dropped']} candidates dropped, {cut['passed over']} bucket entries not read)")
        return text

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "new": self.new, "updated": self.updated,
                "unchanged": self.unchanged, "failed": self.failed,
                "failures": dict(self.failures), "exact_pairs": self.exact_pairs,
                "near_pairs": self.near_pairs, "chunks": self.chunks, "searched": self.searched,
                "expired": self.expired, "adapted": self.adapted,
                "engine": self.engine, "capped": {name: dict(cut) for name, cut in self.capped.items()}}

    def add_capped(self, name: str, cut: Counter[str]) -> None:
        if cut:
            self.capped.setdefault(name, Counter()).update(cut)


@dataclass
class Searched:
    """A search run after writing (`Signal.search_stored`) over items `pks`, its
    `candidates` scored (`PairScorer.scored`), for this process to write."""

    pks: np.ndarray
    scored: Scored
    candidates: int
    capped: Counter[str] = field(default_factory=Counter)  # what the cap cut (`IngestReport`)


class ChunkHook(Protocol):
    """What a caller of `run_ingest` does with each chunk: in its transaction, after the
    chunk is written (`written`), and once it committed (`committed`)."""

    def written(self, session: Session, chunk: list[Entry], extracted: Extracted) -> None: ...

    def committed(self) -> None: ...


# Searches the stored items of a signal (its name, the items' pks, sorted) that a run wrote
# unsearched, a batch a result, scoring with the signals named (those on here): on an
# engine's workers, or here.
Search = Callable[[str, np.ndarray, tuple[str, ...]], Iterator[Searched]]


def run_ingest(
    factory: sessionmaker[Session],
    engine: Engine,
    *,
    source: str,
    settings: Settings,
    total: int | None = None,
    progress: bool = False,
    signals: Sequence[Signal] = (),
    scorer: PairScorer | None = None,
    follow: Callable[[], None] | None = None,
    exact: ExactKeys,
    search: Search | None = None,
    defer: bool = False,
    workers: Workers | None = None,
    hook: ChunkHook | None = None,
) -> IngestReport:
    """Each chunk the `engine` read and extracted (`local_engine`, or ray_engine.py's):
    items written, then every signal's `prepare` and `on_chunk` (its signatures stored
    and indexed), and the candidate pairs they propose scored with every signal, in the
    chunk's transaction; `exact` finds the items' exact copies. This process alone
    writes, so the results and their order are the same whoever extracted. `follow`:
    called at each chunk once the write lock is held, to take up models another process
    made active meanwhile. `defer`: the signals that allow it (`searched_after`) only
    store and index each chunk's items, and `search` finds and scores their pairs once
    every chunk is written (the ray engine's workers do); a search is written a batch a
    transaction, each taking its items off the store's unsearched list, so the items of a
    run cut short before are searched too (by `search`, which may run here). `workers`:
    the engine's, for the signals' own work between chunks (`Signal.workers`). `hook`:
    told of each chunk in its transaction and again once it committed (a stream's)."""
    report = IngestReport(source)
    with factory.begin() as session:
        run_pk = start_run(session, source)
        # Keys of this source's open failures: a chunk closes those of its records (found
        # here in memory, rather than by an UPDATE over every key of every chunk).
        open_failures = stored_items.open_failure_keys(session, source)
    bar = tqdm(total=total, unit="item", desc="ingest", disable=not progress, leave=False)
    above_bar = ExitStack()  # a signal switched off says so above the bar, not into it
    if progress:
        above_bar.enter_context(_log_above_bar())
    try:
        pixels = PixelsWanted(signals)
        told: set[str] = set()  # a wait for another writer is said once a run

        def say_once(message: str) -> None:
            if message not in told:
                told.add(message)
                bar.write(message, file=sys.stderr)

        capped_before = {signal.name: Counter(signal.capped) for signal in signals}
        for signal in signals:
            signal.defer, signal.workers = defer and signal.searched_after, workers
        # A pair two signals find, one at its chunk and one in the search after, is one
        # near-duplicate pair written, as it is when both find it at the chunk.
        counted: set[tuple[int, int]] | None = set() if defer else None
        for chunk, extracted in engine(pixels):
            with factory.begin() as session:
                take_write_lock(session, on_wait=say_once)
                if follow is not None:
                    follow()
                _write_chunk(session, run_pk, chunk, extracted, settings, report, signals, scorer,
                             open_failures, exact, counted)
                if hook is not None:
                    hook.written(session, chunk, extracted)
            if hook is not None:
                hook.committed()
            report.chunks += 1
            for signal in signals:
                signal.after_chunk()
            bar.update(len(chunk))
    finally:
        for signal in signals:
            signal.defer, signal.workers = False, None
        above_bar.close()
        bar.close()
    for signal in (exact, *signals):
        signal.finish()
    for signal in signals:  # (the chunks' searches, a refresh's; those after writing below)
        report.add_capped(signal.name, signal.capped - capped_before[signal.name])
    if search is not None and scorer is not None:
        for signal in signals:
            if signal.searched_after:
                _search_unsearched(factory, signal.name, search, scorer, report, counted,
                                   tuple(s.name for s in signals if s.version() is not None))
    with factory.begin() as session:
        finish_run(session, run_pk, report.as_dict())
    return report


def _search_unsearched(factory: sessionmaker[Session], name: str, search: Search, scorer: PairScorer,
                       report: IngestReport, counted: set[tuple[int, int]] | None, on: tuple[str, ...]) -> None:
    with factory() as session:
        pks = unsearched.listed(session, name)
    for found in search(name, pks, on) if len(pks) else ():
        with factory.begin() as session:
            take_write_lock(session)
            _count_near(report, scorer.write(session, found.scored, elsewhere=True), counted)
            unsearched.drop(session, name, found.pks)
        report.searched += len(found.pks)
        report.add_capped(name, found.capped)


def _count_near(report: IngestReport, tiered: list[tuple[int, int]], counted: set[tuple[int, int]] | None) -> None:
    if counted is not None:
        tiered = [pair for pair in tiered if pair not in counted]
        counted.update(tiered)
    report.near_pairs += len(tiered)


T = TypeVar("T")


def chunked(records: Iterable[T], size: Callable[[T], int], settings: Settings) -> Iterator[list[T]]:
    """Chunks of `ingest_chunk` records at most, closed before their items' files and
    texts (`size`) pass `ingest_chunk_bytes` (a larger item goes alone): a chunk's loaded
    items are held in memory until it commits."""
    chunk: list[T] = []
    total = 0
    for record in records:
        grows = size(record)
        if chunk and total + grows > settings.ingest_chunk_bytes:
            yield chunk
            chunk, total = [], 0
        chunk.append(record)
        total += grows
        if len(chunk) >= settings.ingest_chunk:
            yield chunk
            chunk, total = [], 0
    if chunk:
        yield chunk


def keyed(entry: Entry) -> Entry:
    """The entry with the key its failure row would hold, so a rerun finds the open
    failure of every record."""
    entry.key = stored_items.failure_key(entry.key)
    return entry


def stored_fingerprints(sessions: sessionmaker[Session], entries: list[Entry]) -> dict[str, str]:
    """{id: fingerprint} of the entries' items the store holds: what tells an unchanged
    item before it is decoded or tokenised."""
    ids = [e.item.id for e in entries if e.item is not None and storable_id(e.item.id)]
    with sessions() as session:
        return {id_: fp for id_, (_, fp) in stored_items.fingerprints(session, ids).items()}


def entry_bytes(entry: Entry, root: Path | None) -> int:
    return input_bytes(entry.item, root) if entry.item is not None else 0


@dataclass(frozen=True)
class Unchanged:
    """An entry the store already holds with the same fingerprint: nothing to decode,
    tokenise or write."""

    item_id: str


# What extraction made of each entry of a chunk, in order: the loaded item, its error, or
# that the store holds it unchanged.
Extracted = list["LoadedItem | InputError | Unchanged"]


def extract_entries(entries: list[Entry], root: Path | None, settings: Settings,
                    keep_pixels: bool = False, stored: Mapping[str, str] | None = None,
                    lend: Callable[[list[LoadedItem]], None] | None = None) -> Extracted:
    """Load every entry (in a worker process or in this one) and tokenise the texts whose
    signal text is known before the store is consulted (not pages: their main text loses
    the lines repeated across their site, which only the store knows). `stored`: the
    stored fingerprints of the entries' ids; an entry whose files and fields give the
    same one is only read and hashed (a rerun of a batch costs little more than reading it).
    `lend`: gives exact repeats their originals' values (pipeline/repeats.py) before the
    texts are tokenised: a text that has its signature is not."""
    out: Extracted = []
    for entry in entries:
        if entry.error is not None:
            out.append(entry.error)
            continue
        assert entry.item is not None
        try:
            read = read_item(entry.item, root, settings)
            if stored and stored.get(entry.item.id) == read.fingerprint:
                out.append(Unchanged(entry.item.id))
                continue
            out.append(finish_item(read, settings, keep_pixels=keep_pixels))
        except InputError as exc:
            out.append(exc)
    if lend is not None:
        lend([x for x in out if isinstance(x, LoadedItem)])
    plain = [x for x in out if isinstance(x, LoadedItem) and x.page is None and x.signal_text.strip()
             and "text" not in x.extracted]
    if plain:
        tokens = tokenize_texts([li.signal_text for li in plain])
        for i, li in enumerate(plain):
            li.tokens = tokens.doc(i)
    return out


def _log_above_bar():  # noqa: ANN202 - a context manager
    """mmdedup's messages written with tqdm.write while the bar shows: to the console
    handler the logger already has (its format kept), else in place of the bare stderr
    line Python falls back to."""
    named = logging.getLogger("mmdedup")
    return logging_redirect_tqdm([named if named.handlers else logging.root])


class PixelsWanted:
    """Whether loading keeps decoded pictures and keyframes for a signal that reads
    pixels (CLIP): asked of the signals at the first chunk with pictures or a video, so a
    text-only ingest never loads an encoder to find out; or at once (`chunk` None) by an
    engine whose chunks are read elsewhere."""

    def __init__(self, signals: Sequence[Signal]) -> None:
        self.signals = signals
        self.answer: bool | None = None

    def __call__(self, chunk: list[Entry] | None) -> bool:
        if self.answer is None:
            if chunk is not None and not any(e.item is not None and (e.item.images or e.item.video)
                                             for e in chunk):
                return False
            self.answer = any(s.wants_pixels() for s in self.signals)
        return self.answer

    def extractors(self) -> dict[str, Callable] | None:
        """{signal name: `worker_extract`} of every signal that reads pixels, for an engine
        that can run them where the items are loaded and send values instead of pixels;
        None when one of them has none (the pixels must then come here)."""
        wanted = {s.name: s.worker_extract() for s in self.signals if s.wants_pixels()}
        return wanted if wanted and all(wanted.values()) else None

    def text_extractors(self) -> dict[str, Callable]:
        """{signal name: `worker_extract`} of the signals that take what loading gives
        without pixels (text sketches), for an engine to run where the items are loaded.
        Asked again for every block: a signer that a TF-IDF refresh replaced is sent from
        then on (one that arrives late is signed again here)."""
        wanted = {s.name: s.worker_extract() for s in self.signals if not s.wants_pixels()}
        return {name: extract for name, extract in wanted.items() if extract is not None}


# An engine reads and extracts a source chunk by chunk, in order, for `run_ingest` to write:
# called with whether a chunk's pictures stay decoded (`PixelsWanted`).
Chunks = Iterator[tuple[list[Entry], Extracted]]
Engine = Callable[[PixelsWanted], Chunks]


def local_engine(entries: Iterable[Entry], root: Path | None, settings: Settings,
                 sessions: sessionmaker[Session], workers: int = 1) -> Engine:
    """This machine's engine, asking the store at `sessions` which items it holds
    unchanged. `workers`: processes in all; with more than one, workers - 1 processes
    extract (files read and checked, pages, image codes, video frames, text tokens)
    chunks ahead of this one, which writes."""
    return partial(_extracted_chunks, entries, root, settings, sessions, workers)


def _extracted_chunks(
    entries: Iterable[Entry], root: Path | None, settings: Settings,
    sessions: sessionmaker[Session], workers: int, pixels: PixelsWanted,
) -> Chunks:
    stored = partial(stored_fingerprints, sessions)
    chunks = chunked(map(keyed, entries), partial(entry_bytes, root=root), settings)
    if workers <= 1:
        for chunk in chunks:
            yield chunk, extract_entries(chunk, root, settings, pixels(chunk), stored(chunk))
        return
    # Spawned, not forked: the parent may hold threads (torch, FAISS) and open database
    # connections that a fork would copy in an undefined state. Whole chunks go to the
    # extractors in turn, one more in flight than there are extractors, so each is always
    # busy while this process writes; splitting every chunk among them instead made all
    # of them and the writer compete for the cores at once.
    extractors = workers - 1
    with ProcessPoolExecutor(extractors, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque[tuple[list[Entry], Future[Extracted]]] = deque()
        for chunk in chunks:
            pending.append((chunk, pool.submit(extract_entries, chunk, root, settings, pixels(chunk),
                                               stored(chunk))))
            if len(pending) > extractors:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def _write_chunk(
    session: Session,
    run_pk: int,
    chunk: list[Entry],
    extracted: Extracted,
    settings: Settings,
    report: IngestReport,
    signals: Sequence[Signal],
    scorer: PairScorer | None,
    open_failures: set[str],
    exact: ExactKeys,
    counted: set[tuple[int, int]] | None = None,
) -> None:
    loaded = [x for x in extracted if isinstance(x, LoadedItem)]
    failed = [(e, x) for e, x in zip(chunk, extracted) if isinstance(x, InputError)]
    report.unchanged += sum(isinstance(x, Unchanged) for x in extracted)

    now = utcnow()
    if reached := open_failures.intersection(e.key for e in chunk):
        # A record that fails again is not resolved: its open failure gives way to this
        # run's, so `failures --all` lists it once, with the latest reason.
        again = reached.intersection(e.key for e, _ in failed)
        stored_items.resolve_failures(session, report.source, sorted(reached - again), now)
        stored_items.drop_open_failures(session, report.source, sorted(again))
        open_failures -= reached
    if failed:
        open_failures.update(e.key for e, _ in failed)
        stored_items.insert_failures(session, [
            {"run_pk": run_pk, "source": report.source, "key": e.key,
             "item_id": e.item.id if e.item else None, "reason": err.reason,
             "detail": err.detail, "created_at": now}
            for e, err in failed
        ])
        report.failed += len(failed)
        report.failures.update(err.reason for _, err in failed)

    changed = _upsert_items(session, loaded, report, now, settings)
    if changed:
        _write_assets(session, changed)
        _write_exact_pairs(session, changed, settings, report, signals, exact)
        restated = sorted({pk for signal in signals for pk in (signal.prepare(session, changed) or ())})
        found = [c for signal in signals if (c := signal.on_chunk(session, changed)) is not None]
        if restated:
            pks = np.asarray(restated, np.int64)
            found += [c for signal in signals if (c := signal.restate(session, pks)) is not None]
        if scorer is not None and found:
            pairs = np.concatenate(found)
            _count_near(report, scorer.write(session, scorer.scored(session, candidate_pairs(pairs[:, 0], pairs[:, 1]))),
                        counted)


def _upsert_items(
    session: Session, loaded: list[LoadedItem], report: IngestReport, now: datetime, settings: Settings
) -> list[tuple[int, LoadedItem]]:
    """Insert new items, update changed ones (dropping what was derived from the old
    content), skip unchanged ones; returns (pk, item) for the new and changed."""
    if not loaded:
        return []
    existing = stored_items.fingerprints(session, [li.item.id for li in loaded])
    changed: list[tuple[int, LoadedItem]] = []
    fresh: list[LoadedItem] = []
    stale_pks: list[int] = []
    for li in loaded:
        old = existing.get(li.item.id)
        if old is None:
            fresh.append(li)
        elif old[1] == li.fingerprint:
            report.unchanged += 1
        else:
            stale_pks.append(old[0])
            changed.append((old[0], li))
            stored_items.update_item(session, old[0], {**_item_values(li, report.source, settings, now),
                                                       "updated_at": now})
    if stale_pks:
        stored_items.forget_derived(session, stale_pks)
        report.updated += len(stale_pks)
    if fresh:
        pks = stored_items.insert_items(session, [_item_row(li, settings, now) for li in fresh], {
            "status": "ok", "source": report.source, "created_at": now, "updated_at": now})
        changed.extend((pks[li.item.id], li) for li in fresh)
        report.new += len(fresh)
    return changed


def _item_row(li: LoadedItem, settings: Settings, now: datetime) -> tuple:
    item = li.item
    return (item.id, item.title, item.text, li.subtitles, item.meta, li.text_hash, li.content_key, li.fingerprint,
            *class_and_time(item.meta, settings.class_field, settings.time_field, now))


def _item_values(li: LoadedItem, source: str, settings: Settings, now: datetime) -> dict[str, object]:
    return {**dict(zip(stored_items.ITEM_COLUMNS[1:], _item_row(li, settings, now)[1:])), "status": "ok",
            "source": source}


def _write_assets(session: Session, changed: list[tuple[int, LoadedItem]]) -> None:
    rows = [
        {"item_pk": pk, "role": a.role, "position": a.position, "path": a.path,
         "sha256": a.sha256, "size": a.size, "media_type": a.media_type,
         "width": a.width, "height": a.height, "duration": a.duration}
        for pk, li in changed for a in li.assets
    ]
    stored_items.insert_assets(session, rows)


def exact_signals(li: LoadedItem, signals: Sequence[Signal]) -> dict[str, float]:
    """The signals an exact copy scores 1.0: those that read a part the item has (its
    text, page, pictures, video), each signal saying which parts it reads."""
    parts = (["text"] if li.text_hash else []) + [asset.role for asset in li.assets]
    return {s.name: 1.0 for part in parts for s in signals if part in s.exact_parts}


def _write_exact_pairs(
    session: Session, changed: list[tuple[int, LoadedItem]], settings: Settings,
    report: IngestReport, signals: Sequence[Signal], exact: ExactKeys,
) -> None:
    """Pair each new or changed item with the earliest items of the same content key."""
    copies = exact.copies(session, changed)
    if settings.windowed:  # (copies outside the window first: the cap counts those compared)
        found = np.array([(pk, other) for pk, others in copies.items() for other in others], np.int64).reshape(-1, 2)
        copies = {}
        for pk, other in found[in_windows(session, settings, found)].tolist():
            copies.setdefault(pk, []).append(other)
    pairs: dict[tuple[int, int], dict[str, float]] = {}
    for pk, li in changed:
        for other in copies.get(pk, [])[: settings.max_exact_pairs_per_item]:
            pairs[(min(pk, other), max(pk, other))] = exact_signals(li, signals)
    insert_exact_pairs(session, pairs)
    report.exact_pairs += len(pairs)
