"""The review queue: its order, and the claims that keep two reviewers off one pair.

The review queue is the pairs of the configured tiers (`review_tiers`, medium by default),
under the tiers in force when the queue is read (`Settings.tier_thresholds`: a change of
tiers moves pairs in or out of it at once), that no reviewer has decided yet, most uncertain first: medium and weak pairs highest
score first (nearest the tier above), strong pairs lowest first. A pair a reviewer called
'unsure' stays in the queue for the others, not for them.

Claims keep two reviewers off one pair. A session takes the next pair by writing a claim
row (the pair is its primary key, with the reviewer and an expiry) and gives it up when
the reviewer decides, skips or quits; a claim whose time has passed (a session that
crashed) is free again. The pick and the claim row's statements, and how they keep
concurrent sessions apart (FOR UPDATE SKIP LOCKED on PostgreSQL, INSERT ... ON CONFLICT on
the claim's primary key), are in store/queue.py; a pick that lost the race is simply
retried here. A reviewer's own claims are theirs in any session, so a reviewer who runs
two sessions at once may see one pair in both (harmless: two labels by one person, the
latest in force).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterable, Sequence

from sqlalchemy.orm import Session, sessionmaker

from ..config import TIERS
from ..store.labels import decided_among
from ..store.queue import (
    pick,
    queue_count,
    queue_keys,
    queue_select,
    release_claims,
    take_claim,
)
from ..store.pairs import Thresholds
from ..store.schema import utcnow
from .labels import PairKey
from .view import load_pairs

_MAX_RACES = 100


def check_tiers(tiers: Sequence[str]) -> tuple[str, ...]:
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        raise ValueError(f"unknown tier {', '.join(map(repr, unknown)) or '(none)'}; "
                         f"expected some of {', '.join(TIERS)}")
    return tuple(dict.fromkeys(tiers))


def queue_size(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
               thresholds: Thresholds, exclude: Iterable[PairKey] = ()) -> int:
    with sessions() as session:
        return queue_count(session, reviewer, tiers, thresholds, utcnow(), exclude)


def peek_queue(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
               thresholds: Thresholds, limit: int | None = None) -> list[dict[str, Any]]:
    """The queue as `reviewer` would be offered it, without claiming anything."""
    with sessions() as session:
        keys = queue_keys(session, reviewer, tiers, thresholds, utcnow(), limit)
        views = load_pairs(session, keys, thresholds)
    return [views[k].record() for k in keys if k in views]


def claim(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
          thresholds: Thresholds, ttl: timedelta, *, n: int = 1, exclude: Iterable[PairKey] = (),
          only: PairKey | None = None) -> list[PairKey]:
    """Claim up to `n` pairs at the head of `reviewer`'s queue (or just `only`): claim rows
    written and committed, so no other reviewer's session is offered them until they are
    released or expire. Returns the pairs claimed, in queue order."""
    exclude = list(exclude)
    for _ in range(_MAX_RACES):
        with sessions.begin() as session:
            now = utcnow()
            picked = pick(session, reviewer, tiers, thresholds, now, exclude, only, n)
            if not picked:
                return []
            got = [pair for pair in picked if take_claim(session, pair, reviewer, now, ttl)]
            decided = decided_among(session, got)  # labelled between the pick and the claim
            if decided:
                release_claims(session, reviewer, decided)
            got = [pair for pair in got if pair not in decided]
            if got:
                return got
            exclude.extend(decided)
    return []


def release(sessions: sessionmaker[Session], reviewer: str, pairs: Iterable[PairKey]) -> None:
    """Give up the reviewer's claims on these pairs."""
    pairs = list(pairs)
    if pairs:
        with sessions.begin() as session:
            release_claims(session, reviewer, pairs)


__all__ = ["check_tiers", "claim", "peek_queue", "queue_select", "queue_size", "release"]
