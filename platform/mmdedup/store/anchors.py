"""How many texts hold each winnowed word k-gram (extract/winnowing.py): what tells a
passage repeated across many texts (a site template) from the text around it."""

from __future__ import annotations

from collections import Counter

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from .db import add_counts, select_in
from .schema import TextAnchor


def count_anchors(session: Session, per_anchor: Counter) -> Counter:
    """Add these anchors' texts (anchor -> texts holding it) to the counts; the counts of
    these anchors now in force. (Anchors are unsigned 64-bit; the column is signed.)"""
    keys = np.fromiter(per_anchor, np.uint64, len(per_anchor)).view(np.int64).tolist()
    add_counts(session, TextAnchor, ("anchor",), "texts",
               [{"anchor": k, "texts": n} for k, n in zip(keys, per_anchor.values())])
    rows = select_in(session, "SELECT anchor, texts FROM text_anchors WHERE anchor IN ({values})", sorted(keys))
    held = np.asarray([a for a, _ in rows], np.int64).view(np.uint64).tolist()
    return Counter(dict(zip(held, (n for _, n in rows))))


def recurring_anchors(session: Session, min_texts: int) -> np.ndarray:
    """The anchors held by at least `min_texts` texts, sorted (uint64)."""
    rows = session.scalars(select(TextAnchor.anchor).where(TextAnchor.texts >= min_texts)).all()
    return np.unique(np.asarray(rows, np.int64).view(np.uint64))
