"""The pairs table: scored and exact pairs, written and read, and their tiers.

A scored pair is (re)written whenever its items or the models change; an exact pair
(`EXACT_VERSION`, written by ingest from content keys, score 1) is never re-scored.
A pair's tier is not stored: `tier_of` derives it from the stored score and the tiers in
force each time pairs are read, so pairs always follow the tiers configured now (or
fitted), and pairs stored below the weak tier (down to `pair_floor`) come back as soon
as the weak tier is lowered to them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Sequence

import numpy as np
from sqlalchemy import ColumnElement, Result, and_, case, delete, false, insert, null, or_, select, tuple_
from sqlalchemy.orm import Session

from .db import select_in
from .schema import Pair, utcnow

EXACT_VERSION = "exact"

# The tiers in force, strongest first, each with the lowest score it takes
# (`Settings.tier_thresholds`): a score, or {pair kind: score, "*": the other kinds'}.
Thresholds = Sequence[tuple[str, float | Mapping[str, float]]]


def tier_of(thresholds: Thresholds) -> ColumnElement[Any]:
    """A stored pair's tier as SQL: the first tier whose threshold its score reaches, NULL
    below the weak one (`Settings.tier` is the same rule on one score)."""
    return case(*((Pair.score >= _bound(lowest), name) for name, lowest in thresholds), else_=null())


def _bound(lowest: float | Mapping[str, float]) -> Any:
    """A tier's lowest score as SQL: a number, or one by the pair's kind."""
    if not isinstance(lowest, Mapping):
        return lowest
    by_kind = [(Pair.kind == kind, value) for kind, value in sorted(lowest.items()) if kind != "*"]
    return case(*by_kind, else_=lowest["*"]) if by_kind else lowest["*"]


def _least(lowest: float | Mapping[str, float]) -> float:
    return min(lowest.values()) if isinstance(lowest, Mapping) else lowest


def in_tiers(thresholds: Thresholds, tiers: Sequence[str]) -> ColumnElement[bool]:
    """Pairs in these tiers. The bound on the score alone lets the index on it narrow the
    scan; the tier test keeps out the tiers between the ones asked for."""
    lowest = min((_least(t) for name, t in thresholds if name in tiers), default=None)
    if lowest is None:
        return false()
    return and_(Pair.score >= lowest, tier_of(thresholds).in_(list(tiers)))


def tiered(thresholds: Thresholds) -> ColumnElement[bool]:
    """Pairs that have a tier: the ones stored between `pair_floor` and the weak tier do
    not, and are shown nowhere as pairs."""
    return Pair.score >= min(_least(lowest) for _, lowest in thresholds)


def pair_columns(thresholds: Thresholds) -> tuple[Any, ...]:
    """A pair as results and the review screen read it: its stored columns with the tier
    in force as `tier`."""
    return (Pair.a_pk, Pair.b_pk, Pair.score, tier_of(thresholds).label("tier"), Pair.kind,
            Pair.signals, Pair.details)


def stored_pairs(session: Session, pairs: np.ndarray) -> tuple[set[tuple[int, int]], list[tuple[int, int]]]:
    """Which candidate pairs are stored already: (exact ones, scored ones). Looked up by
    their first item and filtered here: an IN over (a, b) tuples made SQLAlchemy compile
    two bind parameters a candidate, which cost more than the scoring."""
    wanted = set(map(tuple, pairs.tolist()))
    exact: set[tuple[int, int]] = set()
    scored: list[tuple[int, int]] = []
    firsts = np.unique(pairs[:, 0]).tolist()
    for a, b, version in select_in(session, "SELECT a_pk, b_pk, model_version FROM pairs "
                                            "WHERE a_pk IN ({values})", firsts):
        if (a, b) not in wanted:
            continue
        if version == EXACT_VERSION:
            exact.add((a, b))
        else:
            scored.append((a, b))
    return exact, scored


def delete_pairs(session: Session, keys: list[tuple[int, int]]) -> None:
    for start in range(0, len(keys), 2000):
        session.execute(delete(Pair).where(tuple_(Pair.a_pk, Pair.b_pk).in_(keys[start:start + 2000])))


def insert_pairs(session: Session, records: list[dict], version: str, now: datetime | None = None) -> None:
    """Pair records as `score.pairs.scored_pairs` makes them, stamped with the model version."""
    if records:
        now = now or utcnow()
        session.execute(insert(Pair), [{**r, "model_version": version[-64:], "updated_at": now}
                                       for r in records])


def insert_exact_pairs(session: Session, pairs: dict[tuple[int, int], dict[str, float]]) -> None:
    """Same-content pairs (score 1, so strong under any tiers; kind same-item) with their
    signals."""
    if pairs:
        now = utcnow()
        session.execute(insert(Pair), [
            {"a_pk": a, "b_pk": b, "score": 1.0, "kind": "same-item",
             "signals": signals, "model_version": EXACT_VERSION, "updated_at": now}
            for (a, b), signals in sorted(pairs.items())
        ])


def pairs_touching(session: Session, pks: list[int]) -> np.ndarray:
    """Scored (not exact) pairs touching these items: re-scored when a model changes."""
    rows = []
    for start in range(0, len(pks), 5000):
        chunk = pks[start:start + 5000]
        rows += session.execute(select(Pair.a_pk, Pair.b_pk).where(
            Pair.model_version != EXACT_VERSION,
            or_(Pair.a_pk.in_(chunk), Pair.b_pk.in_(chunk)))).all()
    return np.asarray(rows, np.int64).reshape(-1, 2)


def stale_pairs(session: Session, version: str, after: tuple[int, int], limit: int) -> np.ndarray:
    """The next `limit` scored pairs after the key `after`, in key order, that were scored
    by other models than `version`: what a retrain re-scores (and finishes re-scoring after
    one that was cut short), walking the primary key once."""
    return np.array(session.execute(select(Pair.a_pk, Pair.b_pk).where(
        tuple_(Pair.a_pk, Pair.b_pk) > tuple_(*after),
        Pair.model_version.not_in([EXACT_VERSION, version[-64:]]))
        .order_by(Pair.a_pk, Pair.b_pk).limit(limit)).all(), np.int64).reshape(-1, 2)


def pairs_after(session: Session, after: tuple[int, int], limit: int) -> np.ndarray:
    """The next `limit` stored pairs (exact ones too) after the key `after`, in key order."""
    return np.array(session.execute(select(Pair.a_pk, Pair.b_pk).where(
        tuple_(Pair.a_pk, Pair.b_pk) > tuple_(*after)).order_by(Pair.a_pk, Pair.b_pk).limit(limit)).all(),
        np.int64).reshape(-1, 2)


def pair_tiers(session: Session, thresholds: Thresholds) -> dict[tuple[int, int], str]:
    """The tier in force of every pair that has one."""
    tier = tier_of(thresholds)
    return {(a, b): t for a, b, t in session.execute(
        select(Pair.a_pk, Pair.b_pk, tier).where(tiered(thresholds)))}


def stream_tier_scores(session: Session, thresholds: Thresholds) -> Result:
    """(tier, score) of every pair that has a tier, streamed: iterate `.partitions()` for
    batches of 50,000 rows rather than holding every pair's row at once."""
    return session.execute(select(tier_of(thresholds), Pair.score)
                           .where(tiered(thresholds))
                           .execution_options(yield_per=50_000))
