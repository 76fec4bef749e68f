"""Adaptive thresholds: each content signal's medium tier follows the stream.

Under `thresholds = "adaptive"`, once `adaptive_every` items have arrived since the last
computation, each pair kind (a content signal's: text re-use, image re-use...) gets a new
medium tier from the scores of its pairs whose later item is among them and that have a
tier (score/adaptive.py): never under `adaptive_floor` or the weak tier, never over the
strong one. The sample is every pair shown as a pair, not only those the medium tier in
force let through: a sample cut at the cut-off could only ever push it up, so when the
duplicates of a stream grow looser (heavier re-edits) the line could not follow them down
(scripts/bench/thresholds.py measured exactly that). Each cut-off is a row of the store's history
(store/thresholds.py); the latest of each kind is in force in every process that reads
the store (`Settings.adapted`). The strong tier never moves: what merges without review
stays a person's decision.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings
from ..score.adaptive import cutoff
from ..store import thresholds
from ..store.items import set_state, state
from ..store.locks import take_write_lock

THROUGH_STATE = "adapted_through"  # store_state: the newest item pk of the last computation


def adapt(sessions: sessionmaker[Session], settings: Settings) -> list[dict[str, Any]]:
    """Compute new cut-offs when enough items arrived since the last; returns the rows
    recorded (none: not due, or too few pairs of any kind)."""
    if settings.thresholds != "adaptive":
        return []
    with sessions() as session:
        newest, through = thresholds.newest_item_pk(session), state(session, THROUGH_STATE) or 0
    if newest - through < settings.adaptive_every:
        return []
    with sessions.begin() as session:
        take_write_lock(session, numbered=False)  # (one computation at a time; no signature moves)
        through = state(session, THROUGH_STATE) or 0
        newest = thresholds.newest_item_pk(session)
        if newest - through < settings.adaptive_every:
            return []  # (another process computed them meanwhile)
        lowest = max(settings.adaptive_floor, settings.tier_weak)
        rows = []
        for kind, scores in sorted(thresholds.recent_scores(session, through, settings.tier_thresholds).items()):
            made = cutoff(scores, settings.adaptive_sigmas, lowest, settings.tier_strong)
            if made is not None:
                mean, std, cut = made
                rows.append({"kind": kind, "through_pk": newest, "pairs": len(scores), "mean": mean,
                             "std": std, "cutoff": cut})
        thresholds.record(session, rows)
        set_state(session, THROUGH_STATE, newest)
    return rows


def in_force(sessions: sessionmaker[Session], settings: Settings) -> dict[str, float]:
    """{pair kind: medium tier} in force (none under fixed thresholds)."""
    if settings.thresholds != "adaptive":
        return {}
    with sessions() as session:
        return thresholds.in_force(session)
