"""Scoring candidate pairs with every signal both items have, and writing the results.

Candidates come from any index (text LSH and Hamming, image and video codes, embedding
neighbours); whichever found a pair, it is scored with all signals at once so the fused
score, tier and kind never depend on which index happened to propose it. Each signal is a
function (session, a_pks, b_pks) -> SignalValues reading the stored signatures, with NaN
where either item lacks that signal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sqlalchemy import delete, insert, or_, select, tuple_
from sqlalchemy.orm import Session

from ..config import Settings
from ..store.db import select_in
from ..store.schema import Pair, utcnow
from .fusion import fuse, match_kind

EXACT_VERSION = "exact"  # exact pairs are written by ingest and never re-scored here


@dataclass
class SignalValues:
    values: np.ndarray  # float, calibrated to the common scale; NaN = not available
    details: dict[str, np.ndarray] = field(default_factory=dict)  # raw figures, the "why"


SignalFn = Callable[[Session, np.ndarray, np.ndarray], SignalValues]


def candidate_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distinct (lo, hi) rows, self pairs dropped."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    keep = a != b
    if not keep.any():
        return np.zeros((0, 2), np.int64)
    pairs = np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1)
    return np.unique(pairs, axis=0)


def existing_pairs(session: Session, pks: list[int]) -> np.ndarray:
    """Scored (not exact) pairs touching these items: re-scored when a model changes."""
    rows = []
    for start in range(0, len(pks), 5000):
        chunk = pks[start:start + 5000]
        rows += session.execute(select(Pair.a_pk, Pair.b_pk).where(
            Pair.model_version != EXACT_VERSION,
            or_(Pair.a_pk.in_(chunk), Pair.b_pk.in_(chunk)))).all()
    return np.asarray(rows, np.int64).reshape(-1, 2)


def score_pairs(session: Session, pairs: np.ndarray, signals: dict[str, SignalFn],
                settings: Settings, version: str) -> int:
    """Score candidate pairs and make the pairs table agree: pairs at or above the weak
    tier are (re)written, scored pairs that fell below it are removed, exact pairs are
    left alone. Returns the number of pairs written."""
    if len(pairs) == 0:
        return 0
    lo, hi = pairs[:, 0], pairs[:, 1]
    exact, stale = _stored(session, pairs)
    for start in range(0, len(stale), 2000):
        session.execute(delete(Pair).where(tuple_(Pair.a_pk, Pair.b_pk).in_(stale[start:start + 2000])))
    values = {name: fn(session, lo, hi) for name, fn in signals.items()}
    now = utcnow()
    # No fused score exceeds the best single signal: pairs whose best is below the weak
    # tier (most candidates) are dropped here, in numpy, not one dict at a time.
    best = np.fmax.reduce([v.values for v in values.values()]) if values else np.full(len(pairs), np.nan)
    records = []
    for i in np.flatnonzero(best >= settings.tier_weak).tolist():
        a, b = int(lo[i]), int(hi[i])
        if (a, b) in exact:
            continue
        sig = _signals_of(values, i)
        if not sig:
            continue
        score = fuse(sig, settings.fusion_weights)
        tier = settings.tier(score)
        if tier is None:
            continue
        details = {name: {k: _plain(arr[i]) for k, arr in v.details.items()}
                   for name, v in values.items() if v.details and not np.isnan(v.values[i])}
        records.append({"a_pk": a, "b_pk": b, "score": score, "tier": tier,
                        "kind": match_kind(sig, settings.tier_medium), "signals": sig,
                        "details": details or None, "model_version": version[-64:],
                        "updated_at": now})
    if records:
        session.execute(insert(Pair), records)
    return len(records)


def _stored(session: Session, pairs: np.ndarray) -> tuple[set[tuple[int, int]], list[tuple[int, int]]]:
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


def pair_signals(session: Session, pairs: np.ndarray, signals: dict[str, SignalFn]
                 ) -> list[dict[str, float]]:
    """Every signal's score of each pair (absent signals left out), without writing: what
    a retrain fits fusion weights on."""
    if len(pairs) == 0:
        return []
    values = {name: fn(session, pairs[:, 0], pairs[:, 1]) for name, fn in signals.items()}
    return [_signals_of(values, i) for i in range(len(pairs))]


def _signals_of(values: dict[str, SignalValues], i: int) -> dict[str, float]:
    return {name: round(float(v.values[i]), 4) for name, v in values.items()
            if not np.isnan(v.values[i])}


def _plain(x: object) -> float | int:
    value = np.asarray(x).item()
    return round(value, 4) if isinstance(value, float) else value

