"""An adaptive cut-off from recent scores: the mean less k standard deviations.

Where duplicates in a stream sit at a characteristic similarity (reposts of one template
near 0.95, re-edited notices lower), the scores of the recent pairs say where the line
between them and the merely related belongs better than one fixed number for every
stream: mean - 2 sd keeps about 97% of a roughly normal population above the line. Bounds keep it honest: never under a floor (a
stream of loose matches must not drag the line down into unrelated items), never
outside the tiers around it.
"""

from __future__ import annotations

import numpy as np

# Fewer scores than this say too little about a spread: the cut-off in force stays.
MIN_SCORES = 20


def cutoff(scores: np.ndarray, sigmas: float, lowest: float, highest: float) -> tuple[float, float, float] | None:
    """(mean, standard deviation, cut-off) of these scores, the cut-off within
    [lowest, highest]; None when there are too few."""
    if len(scores) < MIN_SCORES:
        return None
    mean, std = float(np.mean(scores)), float(np.std(scores, ddof=1))
    return mean, std, float(min(max(mean - sigmas * std, lowest), highest))
