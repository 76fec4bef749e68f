"""How many texts hold each winnowed word k-gram (extract/winnowing.py): what tells a
passage repeated across many texts (a site template) from the text around it."""

from __future__ import annotations

from collections import Counter

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from .db import add_counts, select_in
from .schema import TextAnchor


def _signed(h: int) -> int:
    return int(np.uint64(h).view(np.int64))


def _unsigned(h: int) -> int:
    return int(np.int64(h).view(np.uint64))


def count_anchors(session: Session, per_anchor: Counter) -> Counter:
    """Add these anchors' texts (anchor -> texts holding it) to the counts; the counts of
    these anchors now in force."""
    add_counts(session, TextAnchor, ("anchor",), "texts",
               [{"anchor": _signed(h), "texts": n} for h, n in per_anchor.items()])
    return Counter({_unsigned(a): n for a, n in select_in(
        session, "SELECT anchor, texts FROM text_anchors WHERE anchor IN ({values})",
        sorted(_signed(h) for h in per_anchor))})


def recurring_anchors(session: Session, min_texts: int) -> np.ndarray:
    """The anchors held by at least `min_texts` texts, sorted (uint64)."""
    rows = session.scalars(select(TextAnchor.anchor).where(TextAnchor.texts >= min_texts)).all()
    return np.unique(np.asarray(rows, np.int64).view(np.uint64))
