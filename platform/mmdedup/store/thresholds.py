"""Adaptive thresholds' SQL: the scores they are computed from, and their history."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from .pairs import EXACT_VERSION, Thresholds, tier_of
from .schema import AdaptedThreshold, Item, Pair


def newest_item_pk(session: Session) -> int:
    return session.scalar(select(func.max(Item.pk))) or 0


def recent_scores(session: Session, after_pk: int, thresholds: Thresholds) -> dict[str, np.ndarray]:
    """{pair kind: scores} of the scored pairs (exact copies left out) whose later item
    came after item `after_pk`, that have a tier under `thresholds` (weak or above)."""
    rows = session.execute(select(Pair.kind, Pair.score).where(
        Pair.b_pk > after_pk, Pair.model_version != EXACT_VERSION,
        tier_of(thresholds).in_(("strong", "medium", "weak")))).all()
    out: dict[str, list[float]] = {}
    for kind, score in rows:
        out.setdefault(kind, []).append(score)
    return {kind: np.asarray(scores, np.float64) for kind, scores in out.items()}


def record(session: Session, rows: list[dict[str, Any]]) -> None:
    if rows:
        session.execute(insert(AdaptedThreshold), rows)


def in_force(session: Session) -> dict[str, float]:
    """{pair kind: cut-off} of the latest cut-off of each kind."""
    latest = select(func.max(AdaptedThreshold.id)).group_by(AdaptedThreshold.kind)
    return dict(session.execute(select(AdaptedThreshold.kind, AdaptedThreshold.cutoff)
                                .where(AdaptedThreshold.id.in_(latest))).all())


def history(session: Session) -> list[AdaptedThreshold]:
    """Every cut-off computed, oldest first."""
    return list(session.scalars(select(AdaptedThreshold).order_by(AdaptedThreshold.id)))
