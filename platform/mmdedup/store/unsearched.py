"""Items whose candidate search was left until after their chunk (schema.Unsearched)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from .db import dialect_insert, insert_rows
from .schema import Unsearched


def add(session: Session, signal: str, pks: np.ndarray) -> None:
    """(New items, or changed ones whose old row `items.forget_derived` dropped.)"""
    insert_rows(session, Unsearched, ("item_pk",), [(pk,) for pk in pks.tolist()], {"signal": signal})


def add_again(session: Session, signal: str, pks: np.ndarray) -> None:
    """Stored items signed again (recurring passages or side matter found since), which
    may still be listed from their own chunk."""
    if len(pks):
        stmt = dialect_insert(session, Unsearched).on_conflict_do_nothing(index_elements=["signal", "item_pk"])
        session.execute(stmt, [{"signal": signal, "item_pk": pk} for pk in pks.tolist()])


def listed(session: Session, signal: str) -> np.ndarray:
    """Every item left unsearched by `signal`, sorted."""
    pks = session.scalars(select(Unsearched.item_pk).where(Unsearched.signal == signal)
                          .order_by(Unsearched.item_pk)).all()
    return np.asarray(pks, np.int64)


def drop(session: Session, signal: str, pks: np.ndarray) -> None:
    """The rows of searched items (a search task's few thousand)."""
    if len(pks):
        session.execute(delete(Unsearched).where(Unsearched.signal == signal,
                                                 Unsearched.item_pk.in_(pks.tolist())))
