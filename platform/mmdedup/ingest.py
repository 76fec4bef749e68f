"""Batch ingest: entries -> items, assets, failures and exact-duplicate pairs, chunk by chunk.

Each chunk is one transaction, so a run killed at any moment leaves whole chunks behind
and a rerun, which skips items whose fingerprint is unchanged, completes the batch with
nothing missing or doubled. Failures are keyed by (source, item id or manifest line): a
rerun closes the old failure of every record it reaches and records a new one only if the
record still fails.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter, defaultdict
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np
from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.orm import Session, sessionmaker
from tqdm import tqdm

from .config import Settings
from .items import Entry, InputError, LoadedItem, load_item
from .score.pairs import EXACT_VERSION, candidate_pairs
from .store.schema import Asset, Failure, IngestRun, Item, Pair, Signature, utcnow
from .textsig import tokenize_texts

# Which pair signals an exact match on each part of the content sets to 1.0.
_SIGNALS_OF_ROLE = {"text": ("text",), "html": ("text", "dom"), "image": ("image",),
                    "video": ("video",)}


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

    def summary(self) -> str:
        text = (f"{self.source}: {self.new} new, {self.updated} updated, {self.unchanged} "
                f"unchanged, {self.failed} failed; {self.exact_pairs} exact-duplicate pairs, "
                f"{self.near_pairs} near-duplicate pairs written")
        if self.failures:
            text += " (failures: " + ", ".join(f"{r} {n}" for r, n in self.failures.most_common()) + ")"
        return text

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "new": self.new, "updated": self.updated,
                "unchanged": self.unchanged, "failed": self.failed,
                "failures": dict(self.failures), "exact_pairs": self.exact_pairs,
                "near_pairs": self.near_pairs}


# Scores candidate pairs with every signal and writes them; returns how many were written.
Scorer = Callable[[Session, np.ndarray], int]


class Stage(Protocol):
    """A signal computed at ingest. `on_chunk` runs inside the chunk's transaction with the
    items that are new or changed, stores their signatures and returns candidate pairs
    (an (n, 2) array of item pks, or None), which are scored with every signal in the same
    transaction; `after_chunk` runs between transactions (model refreshes); `finish` at
    the end."""

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None: ...

    def after_chunk(self) -> None: ...

    def finish(self) -> None: ...


def run_ingest(
    factory: sessionmaker[Session],
    entries: Iterable[Entry],
    *,
    source: str,
    root: Path | None,
    settings: Settings,
    total: int | None = None,
    progress: bool = False,
    stages: Sequence[Stage] = (),
    scorer: Scorer | None = None,
    workers: int = 1,
) -> IngestReport:
    """`workers` > 1 extracts (files read and checked, pages, image codes, video frames,
    text tokens) in that many processes, one chunk ahead of the main process, which alone
    writes to the store; results and their order are the same as with one."""
    report = IngestReport(source)
    with factory.begin() as session:
        run = IngestRun(source=source)
        session.add(run)
        session.flush()
        run_pk = run.pk
    bar = tqdm(total=total, unit="item", desc="ingest", disable=not progress, leave=False)
    try:
        for chunk, extracted in _extracted_chunks(entries, root, settings, workers):
            with factory.begin() as session:
                _write_chunk(session, run_pk, chunk, extracted, settings, report, stages, scorer)
            for stage in stages:
                stage.after_chunk()
            bar.update(len(chunk))
    finally:
        bar.close()
    for stage in stages:
        stage.finish()
    with factory.begin() as session:
        session.execute(update(IngestRun).where(IngestRun.pk == run_pk).values(
            status="done", finished_at=utcnow(), counts=report.as_dict()))
    return report


def _chunks(entries: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    it = iter(entries)
    while chunk := list(islice(it, size)):
        yield chunk


# What extraction made of each entry of a chunk, in order: the loaded item or its error.
Extracted = list["LoadedItem | InputError"]


def extract_entries(entries: list[Entry], root: Path | None, settings: Settings) -> Extracted:
    """Load every entry (in a worker process or in this one) and tokenise the texts whose
    signal text is known before the store is consulted (not pages: their main text loses
    the lines repeated across their site, which only the store knows)."""
    out: Extracted = []
    for entry in entries:
        if entry.error is not None:
            out.append(entry.error)
            continue
        assert entry.item is not None
        try:
            out.append(load_item(entry.item, root, settings))
        except InputError as exc:
            out.append(exc)
    plain = [x for x in out if isinstance(x, LoadedItem) and x.page is None and x.signal_text.strip()]
    if plain:
        tokens = tokenize_texts([li.signal_text for li in plain])
        for i, li in enumerate(plain):
            li.tokens = tokens.doc(i)
    return out


def _extracted_chunks(
    entries: Iterable[Entry], root: Path | None, settings: Settings, workers: int
) -> Iterator[tuple[list[Entry], Extracted]]:
    chunks = _chunks(entries, settings.ingest_chunk)
    if workers <= 1:
        for chunk in chunks:
            yield chunk, extract_entries(chunk, root, settings)
        return
    # Spawned, not forked: the parent may hold threads (torch, FAISS) and open database
    # connections that a fork would copy in an undefined state.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:

        def submit(chunk: list[Entry]) -> list[Future[Extracted]]:
            step = -(-len(chunk) // workers)
            return [pool.submit(extract_entries, chunk[i:i + step], root, settings)
                    for i in range(0, len(chunk), step)]

        ahead = None
        for chunk in chunks:
            if ahead is not None:
                yield ahead[0], [x for f in ahead[1] for x in f.result()]
            ahead = (chunk, submit(chunk))
        if ahead is not None:
            yield ahead[0], [x for f in ahead[1] for x in f.result()]


def _write_chunk(
    session: Session,
    run_pk: int,
    chunk: list[Entry],
    extracted: Extracted,
    settings: Settings,
    report: IngestReport,
    stages: Sequence[Stage],
    scorer: Scorer | None,
) -> None:
    loaded = [x for x in extracted if isinstance(x, LoadedItem)]
    failed = [(e, x) for e, x in zip(chunk, extracted) if isinstance(x, InputError)]

    now = utcnow()
    session.execute(
        update(Failure)
        .where(Failure.source == report.source, Failure.key.in_([e.key for e in chunk]),
               Failure.resolved_at.is_(None))
        .values(resolved_at=now)
    )
    if failed:
        session.execute(insert(Failure), [
            {"run_pk": run_pk, "source": report.source, "key": e.key,
             "item_id": e.item.id if e.item else None, "reason": err.reason,
             "detail": err.detail, "created_at": now}
            for e, err in failed
        ])
        report.failed += len(failed)
        report.failures.update(err.reason for _, err in failed)

    changed = _upsert_items(session, loaded, report, now)
    if changed:
        _write_assets(session, changed)
        _write_exact_pairs(session, changed, settings, report)
        found = [c for stage in stages if (c := stage.on_chunk(session, changed)) is not None]
        if scorer is not None and found:
            pairs = np.concatenate(found)
            report.near_pairs += scorer(session, candidate_pairs(pairs[:, 0], pairs[:, 1]))


def _upsert_items(
    session: Session, loaded: list[LoadedItem], report: IngestReport, now: object
) -> list[tuple[int, LoadedItem]]:
    """Insert new items, update changed ones (dropping what was derived from the old
    content), skip unchanged ones; returns (pk, item) for the new and changed."""
    if not loaded:
        return []
    existing = {
        row.id: (row.pk, row.fingerprint)
        for row in session.execute(
            select(Item.id, Item.pk, Item.fingerprint).where(Item.id.in_([li.item.id for li in loaded]))
        )
    }
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
            session.execute(update(Item).where(Item.pk == old[0]).values(
                **_item_values(li, report.source), updated_at=now))
    if stale_pks:
        for table in (Asset, Signature):
            session.execute(delete(table).where(table.item_pk.in_(stale_pks)))
        session.execute(delete(Pair).where(or_(Pair.a_pk.in_(stale_pks), Pair.b_pk.in_(stale_pks))))
        report.updated += len(stale_pks)
    if fresh:
        # The table, not the mapped class: the ORM's bulk path costs more per row than the
        # insert itself. No RETURNING either: on SQLite an ordered RETURNING runs one
        # statement per row; one executemany and one SELECT of the new pks cost far less.
        session.execute(insert(Item.__table__), [
            {"id": li.item.id, **_item_values(li, report.source), "created_at": now, "updated_at": now}
            for li in fresh])
        pks = dict(session.execute(select(Item.id, Item.pk).where(
            Item.id.in_([li.item.id for li in fresh]))).all())
        changed.extend((pks[li.item.id], li) for li in fresh)
        report.new += len(fresh)
    return changed


def _item_values(li: LoadedItem, source: str) -> dict[str, object]:
    item = li.item
    return {"title": item.title, "text": item.text, "meta": item.meta, "status": "ok",
            "text_hash": li.text_hash, "content_key": li.content_key,
            "fingerprint": li.fingerprint, "source": source}


def _write_assets(session: Session, changed: list[tuple[int, LoadedItem]]) -> None:
    rows = [
        {"item_pk": pk, "role": a.role, "position": a.position, "path": a.path,
         "sha256": a.sha256, "size": a.size, "media_type": a.media_type}
        for pk, li in changed for a in li.assets
    ]
    if rows:
        session.execute(insert(Asset), rows)


def exact_signals(li: LoadedItem) -> dict[str, float]:
    signals = {"text": 1.0} if li.text_hash else {}
    for asset in li.assets:
        signals.update(dict.fromkeys(_SIGNALS_OF_ROLE[asset.role], 1.0))
    return signals


def _write_exact_pairs(
    session: Session, changed: list[tuple[int, LoadedItem]], settings: Settings,
    report: IngestReport,
) -> None:
    """Pair each new or changed item with the earliest items of the same content key."""
    keys = {li.content_key for _, li in changed}
    members: dict[str, list[int]] = defaultdict(list)
    for row in session.execute(
        select(Item.pk, Item.content_key).where(Item.content_key.in_(keys)).order_by(Item.pk)
    ):
        members[row.content_key].append(row.pk)
    pairs: dict[tuple[int, int], dict[str, float]] = {}
    for pk, li in changed:
        others = [m for m in members[li.content_key] if m != pk][: settings.max_exact_pairs_per_item]
        for other in others:
            pairs[(min(pk, other), max(pk, other))] = exact_signals(li)
    if pairs:
        now = utcnow()
        session.execute(insert(Pair), [
            {"a_pk": a, "b_pk": b, "score": 1.0, "tier": "strong", "kind": "same-item",
             "signals": signals, "model_version": EXACT_VERSION, "updated_at": now}
            for (a, b), signals in sorted(pairs.items())
        ])
        report.exact_pairs += len(pairs)
