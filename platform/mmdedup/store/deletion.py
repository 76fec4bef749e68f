"""Deleting items: every row derived from them goes, their labels stay, the indexes learn it.

Indexes are caches kept in other processes' memory and in files (index/cache.py), so a
deletion does not touch them: it logs each signature it deletes with the write that
deleted it (`deletions`). An index caught up to an earlier write takes those items out
when it catches up (`deleted_since`), and files saved before stay usable, since what
they counted is what is still stored plus what the log says went (`deleted_through`).
The log is small (a row per deleted signature) and is kept: a file saved at any earlier
write can still be brought up to date.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterator, Sequence

import numpy as np
from sqlalchemy import BigInteger, bindparam, delete, func, insert, literal, or_, select
from sqlalchemy.orm import Session

from .db import select_in
from .items import forget_derived
from .schema import Deletion, Item, Label, Pair, ReviewClaim, Signature
from .signatures import version_id

_BATCH = 5000  # pks an IN list holds (SQLite binds at most 32,766 values a statement)


# --- choosing what goes ----------------------------------------------------------------


def scan_items(session: Session, pks: Sequence[int] | None = None, before: datetime | None = None,
               batch: int = _BATCH) -> Iterator[list[tuple[int, str, dict[str, Any]]]]:
    """(pk, id, meta) of these items (every item if None), or of those whose time is
    before `before`, in pk order, a batch at a time: what a deletion by meta tests in
    Python, the same way on every database (a meta value may be a string, a number, a
    list)."""
    def rows(query: Any) -> list[tuple[int, str, dict[str, Any]]]:
        if before is not None:
            query = query.where(Item.item_time < before)
        return [tuple(r) for r in session.execute(query.order_by(Item.pk)).all()]

    columns = (Item.pk, Item.id, Item.meta)
    if pks is not None:
        for start in range(0, len(pks), batch):
            yield rows(select(*columns).where(Item.pk.in_(list(pks[start:start + batch]))))
        return
    after = 0
    while found := rows(select(*columns).where(Item.pk > after).limit(batch)):
        yield found
        after = found[-1][0]


def touching(session: Session, pks: Sequence[int]) -> tuple[int, int]:
    """(pairs, labels) that name any of these items: what their deletion removes, and
    what it keeps marked."""
    pairs = labels = 0
    for start in range(0, len(pks), _BATCH):
        part = list(pks[start:start + _BATCH])
        pairs += session.scalar(select(func.count()).select_from(Pair).where(
            or_(Pair.a_pk.in_(part), Pair.b_pk.in_(part)))) or 0
        labels += session.scalar(select(func.count()).select_from(Label).where(
            or_(Label.a_pk.in_(part), Label.b_pk.in_(part)))) or 0
    return pairs, labels


def labelled_pairs(session: Session, pks: Sequence[int]) -> np.ndarray:
    """The distinct pairs (a_pk, b_pk) of stored items with a label that name any of these."""
    found: set[tuple[int, int]] = set()
    for start in range(0, len(pks), _BATCH):
        part = list(pks[start:start + _BATCH])
        found.update(tuple(r) for r in session.execute(select(Label.a_pk, Label.b_pk).where(
            or_(Label.a_pk.in_(part), Label.b_pk.in_(part)), Label.a_pk.is_not(None),
            Label.b_pk.is_not(None))).all())
    return np.array(sorted(found), np.int64).reshape(-1, 2)


# --- deleting --------------------------------------------------------------------------


def delete_items(session: Session, ids: dict[int, str], seq: int,
                 signals: dict[tuple[int, int], dict[str, float]]) -> tuple[int, int]:
    """Delete the items `ids` ({pk: id}) in this transaction, the write numbered `seq`
    (held under the write lock): their signatures logged, then gone with their assets,
    pairs, claims and searches still to run; their labels kept, each deleted side's pk
    set to NULL and its id kept, with `signals` (each labelled pair's signal scores, read
    before) beside them. Returns (pairs deleted, labels kept)."""
    pks = sorted(ids)
    pairs_gone = labels_kept = 0
    for start in range(0, len(pks), _BATCH):
        part = pks[start:start + _BATCH]
        session.execute(insert(Deletion).from_select(
            ["seq", "item_pk", "kind", "version_id", "signed_seq", "evicted_seq"],
            select(literal(seq, BigInteger), Signature.item_pk, Signature.kind,
                   Signature.version_id, Signature.seq, Signature.evicted_seq).where(Signature.item_pk.in_(part))))
        labelled = session.execute(select(
            Label.pk, Label.a_pk, Label.b_pk, Label.a_deleted_id, Label.b_deleted_id, Label.deleted_signals
        ).where(or_(Label.a_pk.in_(part), Label.b_pk.in_(part)))).all()
        if labelled:
            table = Label.__table__
            session.execute(table.update().where(table.c.pk == bindparam("label")).values(
                a_pk=bindparam("a"), b_pk=bindparam("b"), a_deleted_id=bindparam("a_id"),
                b_deleted_id=bindparam("b_id"), deleted_signals=bindparam("signals")),
                [_label_row(row, set(part), ids, signals) for row in labelled])
            labels_kept += len(labelled)
        pairs_gone += forget_derived(session, part)
        session.execute(delete(ReviewClaim).where(or_(ReviewClaim.a_pk.in_(part), ReviewClaim.b_pk.in_(part))))
        session.execute(delete(Item).where(Item.pk.in_(part)))
    return pairs_gone, labels_kept


def _label_row(row: Any, going: set[int], ids: dict[int, str],
               signals: dict[tuple[int, int], dict[str, float]]) -> dict[str, Any]:
    """A label's new values: a side deleted now loses its pk and keeps its id, a side
    deleted before keeps what it kept then; the pair's signal scores are those of the
    first deletion that broke it."""
    label, a, b, a_id, b_id, kept = row
    return {"label": label, "a": None if a in going else a, "b": None if b in going else b,
            "a_id": ids[a] if a in going else a_id, "b_id": ids[b] if b in going else b_id,
            "signals": kept if kept is not None else signals.get((a, b))}


# --- what indexes catch up with ---------------------------------------------------------


def deleted_since(session: Session, kind: str, version: str, seq: int) -> np.ndarray:
    """The items whose signature of `kind` and `version` a deletion after write `seq` took."""
    vid = version_id(session, kind, version)
    if vid is None:
        return np.zeros(0, np.int64)
    rows = session.scalars(select(Deletion.item_pk).where(Deletion.version_id == vid, Deletion.seq > seq,
                                                          Deletion.kind == kind)).all()
    return np.unique(np.asarray(rows, np.int64))


def deleted_through(session: Session, kind: str, version: str, seq: int) -> int:
    """How many signatures of `kind` and `version` written up to write `seq`, and not
    evicted by then, a deletion after it took: with those still stored, what an index
    saved at `seq` counted."""
    vid = version_id(session, kind, version)
    if vid is None:
        return 0
    return session.scalar(select(func.count()).select_from(Deletion).where(
        Deletion.version_id == vid, Deletion.kind == kind, Deletion.seq > seq,
        Deletion.signed_seq <= seq, or_(Deletion.evicted_seq.is_(None), Deletion.evicted_seq > seq))) or 0


def present(session: Session, pks: Sequence[int]) -> set[int]:
    """The ones of these item pks the store still holds."""
    return {pk for (pk,) in select_in(session, "SELECT pk FROM items WHERE pk IN ({values})",
                                      sorted(set(pks)))}
