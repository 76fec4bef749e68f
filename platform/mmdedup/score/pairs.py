"""Scoring candidate pairs with every signal both items have: pure, no store.

Candidates come from any index (text LSH and Hamming, image and video codes, embedding
neighbours); whichever found a pair, it is scored with all signals at once so the fused
score and kind never depend on which index happened to propose it. No tier is written:
a pair's tier follows from its score and the tiers in force whenever it is read. Each signal gives
its `SignalValues` for the pairs (signals/base.py reads the stored signatures), with NaN
where either item lacks that signal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .fusion import Fusion


@dataclass
class SignalValues:
    values: np.ndarray  # float, calibrated to the common scale; NaN = not available
    details: dict[str, np.ndarray] = field(default_factory=dict)  # raw figures, the "why"


def candidate_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distinct (lo, hi) rows, self pairs dropped."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    keep = a != b
    if not keep.any():
        return np.zeros((0, 2), np.int64)
    pairs = np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1)
    return np.unique(pairs, axis=0)


def scored_pairs(pairs: np.ndarray, values: dict[str, SignalValues], fusion: Fusion,
                 floor: float, skip: set[tuple[int, int]] = frozenset()) -> list[dict]:
    """Pair records (a_pk, b_pk, score, kind, signals, details) of the candidate pairs that
    score at least `floor` (the `pair_floor` setting), `skip` left out."""
    lo, hi = pairs[:, 0], pairs[:, 1]
    # No fused score exceeds the best single signal: pairs whose best is below the floor
    # (most candidates) are dropped here, in numpy, not one dict at a time.
    best = np.fmax.reduce([v.values for v in values.values()]) if values else np.full(len(pairs), np.nan)
    records = []
    for i in np.flatnonzero(best >= floor).tolist():
        a, b = int(lo[i]), int(hi[i])
        if (a, b) in skip:
            continue
        sig = signals_of(values, i)
        if not sig:
            continue
        score = fusion.fuse(sig)
        if score < floor:
            continue
        # (a figure NaN for a pair does not apply to it, and is left out)
        details = {name: {k: _plain(arr[i]) for k, arr in v.details.items() if arr[i] == arr[i]}
                   for name, v in values.items() if v.details and not np.isnan(v.values[i])}
        records.append({"a_pk": a, "b_pk": b, "score": score, "kind": fusion.kind(sig),
                        "signals": sig, "details": details or None})
    return records


def signals_of(values: dict[str, SignalValues], i: int) -> dict[str, float]:
    """Pair i's score of each signal it has, rounded as stored."""
    return {name: round(float(v.values[i]), 4) for name, v in values.items()
            if not np.isnan(v.values[i])}


def _plain(x: object) -> float | int:
    value = np.asarray(x).item()
    return round(value, 4) if isinstance(value, float) else value
