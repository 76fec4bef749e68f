"""Raw similarity -> score on the common scale, where the tier thresholds apply.

One definition for every signal: linear interpolation between (raw, score) knots, set per
signal in its settings (`calibration`); `scripts/calibrate_signals.py` fits the knots on
labelled pairs.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

Knots = Sequence[tuple[float, float]]


def calibrate(raw: np.ndarray | float, knots: Knots) -> np.ndarray:
    xs, ys = zip(*knots)
    return np.interp(np.asarray(raw, dtype=np.float64), xs, ys)


def calibrate_at_most(raw: np.ndarray | float, knots: Knots) -> np.ndarray:
    """The highest score any raw similarity up to `raw` calibrates to (the knots' scores
    made non-decreasing): what a bound on the raw similarity bounds the score by."""
    xs, ys = zip(*knots)
    return np.interp(np.asarray(raw, dtype=np.float64), xs, np.maximum.accumulate(ys))
