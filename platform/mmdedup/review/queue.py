"""The review queue: its order, and the claims that keep two reviewers off one pair.

The review queue is the pairs of the configured tiers (`review_tiers`, medium by default)
that no reviewer has decided yet, most uncertain first: medium and weak pairs highest
score first (nearest the tier above), strong pairs lowest first. A pair a reviewer called
'unsure' stays in the queue for the others, not for them.

Claims keep two reviewers off one pair. A session takes the next pair by writing a claim
row (the pair is its primary key, with the reviewer and an expiry) and gives it up when
the reviewer decides, skips or quits; a claim whose time has passed (a session that
crashed) is free again. On PostgreSQL the pick runs `SELECT ... FOR UPDATE SKIP LOCKED`
over the pairs, so concurrent sessions pick different rows without waiting on each other;
on SQLite writes are serialised by the database. On both, the claim row's primary key is
what decides: the INSERT ... ON CONFLICT takes over an existing claim only when it has
expired or is the same reviewer's (their own earlier session), and a pick that lost the
race is simply retried. A reviewer's own claims are theirs in any session, so a reviewer
who runs two sessions at once may see one pair in both (harmless: two labels by one
person, the latest in force).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

from sqlalchemy import and_, case, delete, func, or_, select, tuple_
from sqlalchemy.orm import Session, sessionmaker

from ..config import TIERS
from ..store.db import dialect_insert
from ..store.labels import decided_among
from ..store.schema import Label, Pair, ReviewClaim, utcnow
from .labels import PairKey
from .view import load_pairs

_MAX_RACES = 100


def check_tiers(tiers: Sequence[str]) -> tuple[str, ...]:
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        raise ValueError(f"unknown tier {', '.join(map(repr, unknown)) or '(none)'}; "
                         f"expected some of {', '.join(TIERS)}")
    return tuple(dict.fromkeys(tiers))


def queue_select(reviewer: str | None, tiers: Sequence[str], now: datetime,
                 exclude: Iterable[PairKey] = (), only: PairKey | None = None):  # noqa: ANN201
    """SELECT a_pk, b_pk of the queue as `reviewer` sees it at `now`, in review order:
    undecided pairs of `tiers` (in that order; most uncertain first within one), less the
    ones the reviewer called unsure, the ones another reviewer holds, and `exclude`.
    With no reviewer, the queue as a whole: every undecided pair, claimed or not."""
    same_pair = (Label.a_pk == Pair.a_pk, Label.b_pk == Pair.b_pk)
    decided = select(Label.pk).where(*same_pair, Label.decision != "unsure").exists()
    query = select(Pair.a_pk, Pair.b_pk).where(Pair.tier.in_(list(tiers)), ~decided)
    if reviewer is not None:
        unsure = select(Label.pk).where(*same_pair, Label.decision == "unsure",
                                        Label.reviewer == reviewer).exists()
        held = select(ReviewClaim.a_pk).where(
            ReviewClaim.a_pk == Pair.a_pk, ReviewClaim.b_pk == Pair.b_pk,
            ReviewClaim.expires_at > now, ReviewClaim.reviewer != reviewer).exists()
        query = query.where(~unsure, ~held)
    exclude = list(exclude)
    if exclude:
        query = query.where(tuple_(Pair.a_pk, Pair.b_pk).not_in(exclude))
    if only is not None:
        query = query.where(Pair.a_pk == only[0], Pair.b_pk == only[1])
    rank = case({t: i for i, t in enumerate(tiers)}, value=Pair.tier, else_=len(tiers))
    nearest_first = case((Pair.tier == "strong", Pair.score), else_=-Pair.score)
    return query.order_by(rank, nearest_first, Pair.a_pk, Pair.b_pk)


def queue_size(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
               exclude: Iterable[PairKey] = ()) -> int:
    with sessions() as session:
        inner = queue_select(reviewer, tiers, utcnow(), exclude).order_by(None).subquery()
        return session.scalar(select(func.count()).select_from(inner)) or 0


def peek_queue(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
               limit: int | None = None) -> list[dict[str, Any]]:
    """The queue as `reviewer` would be offered it, without claiming anything."""
    with sessions() as session:
        query = queue_select(reviewer, tiers, utcnow())
        keys = [tuple(r) for r in session.execute(query.limit(limit) if limit else query)]
        views = load_pairs(session, keys)
    return [views[k].record() for k in keys if k in views]


def claim(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
          ttl: timedelta, *, n: int = 1, exclude: Iterable[PairKey] = (),
          only: PairKey | None = None) -> list[PairKey]:
    """Claim up to `n` pairs at the head of `reviewer`'s queue (or just `only`): claim rows
    written and committed, so no other reviewer's session is offered them until they are
    released or expire. Returns the pairs claimed, in queue order."""
    exclude = list(exclude)
    for _ in range(_MAX_RACES):
        with sessions.begin() as session:
            now = utcnow()
            query = queue_select(reviewer, tiers, now, exclude, only).limit(n)
            if session.get_bind().dialect.name == "postgresql":
                # Rows another session is picking right now are passed over, not waited on.
                query = query.with_for_update(of=Pair, skip_locked=True)
            picked = [tuple(r) for r in session.execute(query).all()]
            if not picked:
                return []
            got = [pair for pair in picked if _take(session, pair, reviewer, now, ttl)]
            decided = decided_among(session, got)  # labelled between the pick and the claim
            if decided:
                _release(session, reviewer, decided)
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
            _release(session, reviewer, pairs)


def _release(session: Session, reviewer: str, pairs: list[PairKey]) -> None:
    for start in range(0, len(pairs), 500):
        session.execute(delete(ReviewClaim).where(
            ReviewClaim.reviewer == reviewer,
            or_(*(and_(ReviewClaim.a_pk == a, ReviewClaim.b_pk == b)
                  for a, b in pairs[start:start + 500]))))


def _take(session: Session, pair: PairKey, reviewer: str, now: datetime, ttl: timedelta) -> bool:
    """INSERT the claim row, or take over one that expired or is the reviewer's own."""
    stmt = dialect_insert(session, ReviewClaim).values(
        a_pk=pair[0], b_pk=pair[1], reviewer=reviewer, claimed_at=now, expires_at=now + ttl)
    stmt = stmt.on_conflict_do_update(
        index_elements=["a_pk", "b_pk"],
        set_={"reviewer": stmt.excluded.reviewer, "claimed_at": stmt.excluded.claimed_at,
              "expires_at": stmt.excluded.expires_at},
        where=or_(ReviewClaim.expires_at <= now, ReviewClaim.reviewer == reviewer),
    ).returning(ReviewClaim.a_pk)
    return session.execute(stmt).first() is not None


__all__ = ["check_tiers", "claim", "peek_queue", "queue_select", "queue_size", "release"]
