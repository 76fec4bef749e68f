"""Deleting items, chosen by id, meta value or time; a dry run says what would go.

An item's row, assets, signatures, pairs, review claims and pending searches go; its
labels stay, about a deleted item (store/deletion.py), because they are what the learning
keeps: a retrain still fits fusion on the pair's signal scores from before the deletion.
Clusters are read from the pairs, so they no longer hold the item. The candidate indexes
of every process learn it from the store when they next catch up, and their files stay
usable (store/deletion.py). A deletion is a batch of items a transaction under the
store's write lock, like an ingest's chunk: a run killed midway leaves whole batches
deleted and the rest as they were, and running it again finishes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from sqlalchemy.orm import Session, sessionmaker
from tqdm import tqdm

from ..score.windows import as_utc
from ..signals.scorer import PairScorer
from ..store import deletion
from ..store.locks import take_write_lock
from ..store.queries import pks_by_id

BATCH = 2000  # items a transaction


@dataclass(frozen=True)
class Selection:
    """Which items go: those named by `ids` (all items when none is named), narrowed to
    those whose meta holds every `meta` value and whose time (pipeline/windows.py) is
    before `before`.
    An empty selection is refused: a deletion never takes the whole store by default."""

    ids: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    before: datetime | None = None

    def __post_init__(self) -> None:
        if not (self.ids or self.meta or self.before is not None):
            raise ValueError("delete needs item ids, --file, --meta KEY=VALUE or --before TIME")


@dataclass
class DeleteReport:
    dry_run: bool
    ids: list[str] = field(default_factory=list)  # of the items deleted (or that would be)
    missing: list[str] = field(default_factory=list)  # ids named that the store does not hold
    pairs: int = 0  # pairs deleted with them
    labels: int = 0  # labels kept, now about a deleted item
    # (expire) items taken out of the candidate indexes, behind every window (pipeline/windows.py)
    evicted: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "items": len(self.ids), "ids": self.ids,
                "missing": self.missing, "pairs": self.pairs, "labels": self.labels, "evicted": self.evicted}

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        line = (f"{verb} {len(self.ids)} item{'s' if len(self.ids) != 1 else ''} and "
                f"{self.pairs} pair{'s' if self.pairs != 1 else ''}; {self.labels} "
                f"label{'s' if self.labels != 1 else ''} {'would stay' if self.dry_run else 'kept'}, "
                "marked as about a deleted item")
        if self.missing:
            shown = ", ".join(self.missing[:5]) + (", ..." if len(self.missing) > 5 else "")
            line += f"; {len(self.missing)} id{'s' if len(self.missing) != 1 else ''} not in the store: {shown}"
        if self.evicted:
            line += (f"; {self.evicted} item{'s' if self.evicted != 1 else ''} behind every window "
                     "taken out of the candidate indexes")
        return line


def meta_matches(meta: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether `meta` holds every wanted value: equal, or written as the wanted text (a
    command line's "5" and "true" match the numbers and booleans a manifest stored)."""
    meta = meta if isinstance(meta, Mapping) else {}
    return all(key in meta and (meta[key] == value or (
        isinstance(value, str) and not isinstance(meta[key], str) and json.dumps(meta[key]) == value))
        for key, value in wanted.items())


def chosen(session: Session, selection: Selection) -> tuple[dict[int, str], list[str]]:
    """({pk: id} of the items the selection takes, in pk order; the ids it names that the
    store does not hold)."""
    missing: list[str] = []
    pks = None
    if selection.ids:
        found = pks_by_id(session, list(dict.fromkeys(selection.ids)))
        missing = [i for i in dict.fromkeys(selection.ids) if i not in found]
        pks = sorted(found.values())
    before = as_utc(selection.before) if selection.before is not None else None
    out = {pk: id_ for rows in deletion.scan_items(session, pks, before) for pk, id_, meta in rows
           if not selection.meta or meta_matches(meta, selection.meta)}
    return dict(sorted(out.items())), missing


def delete_items(sessions: sessionmaker[Session], scorer: PairScorer, selection: Selection, *,
                 dry_run: bool = False, progress: bool = False) -> DeleteReport:
    with sessions() as session:
        ids, missing = chosen(session, selection)
    return delete_chosen(sessions, scorer, ids, missing, dry_run=dry_run, progress=progress)


def delete_chosen(sessions: sessionmaker[Session], scorer: PairScorer, ids: dict[int, str], missing: list[str], *,
                  dry_run: bool = False, progress: bool = False) -> DeleteReport:
    """Delete the items `ids` ({pk: id}), a batch a transaction; `missing`: ids asked for
    that the store does not hold, for the report."""
    report = DeleteReport(dry_run, list(ids.values()), missing)
    if dry_run:
        with sessions() as session:
            report.pairs, report.labels = deletion.touching(session, list(ids))
        return report
    pks = list(ids)
    with tqdm(total=len(pks), unit="item", desc="delete", disable=not progress or not pks) as bar:
        for start in range(0, len(pks), BATCH):
            part = {pk: ids[pk] for pk in pks[start:start + BATCH]}
            with sessions.begin() as session:
                seq = take_write_lock(session)
                pairs, labels = deletion.delete_items(session, part, seq, _labelled_scores(session, scorer, part))
            report.pairs += pairs
            report.labels += labels
            bar.update(len(part))
    return report


def _labelled_scores(session: Session, scorer: PairScorer, going: Iterable[int]
                     ) -> dict[tuple[int, int], dict[str, float]]:
    """{(a_pk, b_pk): signal scores} of the labelled pairs of stored items among these,
    read before their signatures go."""
    pairs = deletion.labelled_pairs(session, list(going))
    return {(int(a), int(b)): v for (a, b), v in zip(pairs.tolist(), scorer.signals_of(session, pairs)) if v}



