"""Scoring candidate pairs with every signal and keeping the pairs table in agreement.

Whichever index proposed a pair, it is scored with all signals at once, so the fused
score and kind never depend on which index happened to find it. Pairs are kept down to
`pair_floor`, below the weak tier, and stored without a tier (store/pairs.py derives it
when they are read), so a change of tiers never needs pairs scored again.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sqlalchemy.orm import Session

from ..config import Settings
from ..score.fusion import Fusion
from ..score.pairs import SignalValues, scored_pairs, signals_of
from ..score.windows import compared, seconds_of
from ..store.deletion import present
from ..store.items import class_times
from ..store.pairs import delete_pairs, insert_pairs, stored_pairs
from .base import Signal


def fusion_of(signals: Sequence[Signal], settings: Settings) -> Fusion:
    """Weights from each signal's settings; content signals and their kinds from the
    signals themselves."""
    return Fusion(weights={s.name: settings.signal(s.name, s.settings_type).weight for s in signals},
                  media={s.name: s.medium for s in signals if s.medium},
                  kinds={s.name: s.kind for s in signals if s.kind})


@dataclass
class Scored:
    """Pair records at or above the floor, and the stored pairs they replace (those that
    fell below it go)."""

    records: list[dict]
    stale: list[tuple[int, int]]


@dataclass
class PairScorer:
    signals: Sequence[Signal]
    settings: Settings  # with the fitted fusion weights and tiers where a fit exists

    @property
    def fusion(self) -> Fusion:
        return fusion_of(self.signals, self.settings)

    def values(self, session: Session, pairs: np.ndarray) -> dict[str, SignalValues]:
        return {s.name: s.pair_values(session, pairs[:, 0], pairs[:, 1]) for s in self.signals}

    def __call__(self, session: Session, pairs: np.ndarray) -> int:
        """Score candidate pairs and make the pairs table agree: pairs at or above the
        floor are (re)written, scored pairs that fell below it are removed, exact pairs are
        left alone. Returns the number of pairs written that reach a tier now (the
        near-duplicate pairs a user is shown)."""
        if len(pairs) == 0:
            return 0
        return len(self.write(session, self.scored(session, pairs)))

    def scored(self, session: Session, pairs: np.ndarray) -> Scored:
        """What `__call__` writes, read and scored only (where the pairs were found: an
        engine's worker, which cannot write)."""
        if len(pairs) == 0:
            return Scored([], [])
        exact, stale = stored_pairs(session, pairs)
        # A stored pair the windows no longer let be compared (they changed) is not
        # scored again, and goes with the stale.
        pairs = pairs[in_windows(session, self.settings, pairs)]
        if len(pairs) == 0:
            return Scored([], stale)
        return Scored(scored_pairs(pairs, self.values(session, pairs), self.fusion,
                                   self.settings.pair_floor, skip=exact), stale)

    def write(self, session: Session, scored: Scored, elsewhere: bool = False) -> list[tuple[int, int]]:
        """Write what `scored` gave; returns the pairs written that reach a tier.
        `elsewhere`: scored in another transaction (on an engine's worker), so another
        process may have written some of these pairs since: their rows are looked up
        again here, under the write lock, and replaced (an exact pair stays); a pair of
        an item deleted since is not written."""
        stale, records = scored.stale, scored.records
        if elsewhere and records:
            exact, there = stored_pairs(session, np.array([(r["a_pk"], r["b_pk"]) for r in records], np.int64))
            stale = sorted({*stale, *there})
            held = present(session, [pk for r in records for pk in (r["a_pk"], r["b_pk"])])
            records = [r for r in records if (r["a_pk"], r["b_pk"]) not in exact
                       and r["a_pk"] in held and r["b_pk"] in held]
        delete_pairs(session, stale)
        insert_pairs(session, records, self.version())
        return [(r["a_pk"], r["b_pk"]) for r in records if self.settings.tier(r["score"], r["kind"]) is not None]

    def signals_of(self, session: Session, pairs: np.ndarray) -> list[dict[str, float]]:
        """Every signal's score of each pair (absent signals left out), without writing:
        what a retrain fits fusion weights on."""
        if len(pairs) == 0:
            return []
        values = self.values(session, pairs)
        return [signals_of(values, i) for i in range(len(pairs))]

    def version(self) -> str:
        """What scored a pair: the versions of the signals that are on and the fusion
        weights. A pair of another version was scored by models no longer in force (a
        retrain cut short, a changed weight): a retrain re-scores it."""
        made = "|".join(f"{s.name}={v}" for s in self.signals if (v := s.scoring_version()) is not None)
        weights = ",".join(f"{k}={w!r}" for k, w in sorted(self.fusion.weights.items()))
        return hashlib.sha256(f"{made}|{weights}".encode()).hexdigest()[:16]


def in_windows(session: Session, settings: Settings, pairs: np.ndarray) -> np.ndarray:
    """Which candidate pairs (n, 2) of stored items their classes' windows let be compared."""
    if not len(pairs) or not settings.windowed:
        return np.ones(len(pairs), bool)
    stored = class_times(session, np.unique(pairs).tolist())
    seconds = {pk: seconds_of(t) for pk, (_, t) in stored.items()}
    window = {pk: settings.window_of(c).window for pk, (c, _) in stored.items()}
    a, b = pairs[:, 0].tolist(), pairs[:, 1].tolist()

    def column(values: dict[int, float], pks: list[int], missing: float) -> np.ndarray:
        return np.array([values.get(pk, missing) for pk in pks])

    return compared(column(seconds, a, math.nan), column(seconds, b, math.nan),
                    column(window, a, math.inf), column(window, b, math.inf))
