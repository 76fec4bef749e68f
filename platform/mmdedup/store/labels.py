"""Reviewers' labels: written one at a time or in bulk, deleted by an undo, read back.

Labels are never overwritten: each decision is a row of its own, and the latest
duplicate/distinct one on a pair is the decision in force (review/labels.py reads them so).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Result, delete, func, insert, or_, select, tuple_
from sqlalchemy.orm import Session

from .schema import Item, Label

_CHUNK = 5000


def insert_label(session: Session, a_pk: int, b_pk: int, decision: str, reviewer: str,
                 created_at: datetime) -> Label:
    """One label on the pair (a_pk < b_pk); flushed, so its pk is known (what undo deletes)."""
    label = Label(a_pk=a_pk, b_pk=b_pk, decision=decision, reviewer=reviewer,
                  created_at=created_at)
    session.add(label)
    session.flush()
    return label


def insert_labels(session: Session, records: list[dict]) -> None:
    """Labels as dicts of a_pk, b_pk, decision, reviewer and created_at: a bulk import."""
    if records:
        session.execute(insert(Label), records)


def delete_label(session: Session, label_pk: int, reviewer: str) -> None:
    """Delete the reviewer's label `label_pk` (the row: a key pressed by mistake is not a
    decision to keep); a label of another reviewer is left alone."""
    session.execute(delete(Label).where(Label.pk == label_pk, Label.reviewer == reviewer))


def label_decisions(session: Session) -> list[tuple[int, int, str]]:
    """(a_pk, b_pk, decision) of every label on a pair of stored items, oldest first
    (ties by pk, the order they were written), so that the last one seen of a pair is
    its latest."""
    return [tuple(r) for r in session.execute(
        select(Label.a_pk, Label.b_pk, Label.decision)
        .where(Label.a_pk.is_not(None), Label.b_pk.is_not(None)).order_by(Label.created_at, Label.pk)
    ).all()]


def deleted_decisions(session: Session) -> list[tuple[str, str, str, dict | None]]:
    """(a id, b id, decision, the pair's signal scores when it was deleted) of every
    label about a deleted item, oldest first."""
    a_id, b_id, joined = _with_ids()
    return [tuple(r) for r in session.execute(
        select(a_id, b_id, Label.decision, Label.deleted_signals).select_from(joined)
        .where(or_(Label.a_pk.is_(None), Label.b_pk.is_(None))).order_by(Label.created_at, Label.pk)
    ).all()]


def stream_labels_with_ids(session: Session) -> Result:
    """(a id, b id, decision, reviewer, created_at, a deleted, b deleted) of every label,
    oldest first, streamed 10,000 rows at a time: an export of millions of labels is
    never held at once. Iterate it while the session is open."""
    a_id, b_id, joined = _with_ids()
    query = (select(a_id, b_id, Label.decision, Label.reviewer, Label.created_at, Label.a_pk.is_(None),
                    Label.b_pk.is_(None)).select_from(joined)
             .order_by(Label.created_at, Label.pk).execution_options(yield_per=10_000))
    return session.execute(query)


def _with_ids() -> tuple[Any, Any, Any]:
    """A label's two item ids (a deleted item's: the one its labels kept) and the join
    that reads them."""
    a_item, b_item = Item.__table__.alias("a_item"), Item.__table__.alias("b_item")
    joined = (Label.__table__.outerjoin(a_item, a_item.c.pk == Label.a_pk)
              .outerjoin(b_item, b_item.c.pk == Label.b_pk))
    return (func.coalesce(a_item.c.id, Label.a_deleted_id), func.coalesce(b_item.c.id, Label.b_deleted_id),
            joined)


def labels_from(session: Session, a_pks: list[int]) -> list[tuple]:
    """(a_pk, b_pk, decision, reviewer, created_at) of the labels whose first item is one
    of these: what an import compares its rows with."""
    rows: list[tuple] = []
    for start in range(0, len(a_pks), _CHUNK):
        rows += session.execute(
            select(Label.a_pk, Label.b_pk, Label.decision, Label.reviewer, Label.created_at)
            .where(Label.a_pk.in_(a_pks[start:start + _CHUNK]))
        ).all()
    return rows


def decided_among(session: Session, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ones of these pairs with a duplicate or distinct label, sorted."""
    if not pairs:
        return []
    rows = session.execute(select(Label.a_pk, Label.b_pk).where(
        Label.decision != "unsure", tuple_(Label.a_pk, Label.b_pk).in_(pairs))).all()
    return sorted({tuple(r) for r in rows})
