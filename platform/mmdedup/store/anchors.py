"""The winnowed word k-grams (extract/winnowing.py) found to recur across many texts: the
passages (a site template) that leave the texts' signatures, kept for every process."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from .db import dialect_insert
from .schema import TextAnchor


def add_recurring(session: Session, anchors: np.ndarray, texts: int) -> None:
    """Anchors found in `texts` texts (the count that made them recur)."""
    if len(anchors):
        stmt = dialect_insert(session, TextAnchor).on_conflict_do_nothing(index_elements=["anchor"])
        session.execute(stmt, [{"anchor": a, "texts": texts}
                               for a in np.asarray(anchors, np.uint64).view(np.int64).tolist()])  # (signed column)


def recurring_anchors(session: Session, min_texts: int) -> np.ndarray:
    """The anchors found in at least `min_texts` texts, sorted (uint64)."""
    rows = session.scalars(select(TextAnchor.anchor).where(TextAnchor.texts >= min_texts)).all()
    return np.unique(np.asarray(rows, np.int64).view(np.uint64))
