"""The review queue and its claims: the SELECT that orders the queue, the claim rows.

Claims keep two reviewers off one pair: a claim row's primary key is the pair. On
PostgreSQL the pick runs `SELECT ... FOR UPDATE SKIP LOCKED` over the pairs, so concurrent
sessions pick different rows without waiting on each other; on SQLite writes are
serialised by the database. On both, the claim row's primary key is what decides: the
INSERT ... ON CONFLICT takes over an existing claim only when it has expired or is the
same reviewer's (their own earlier session), and the caller retries a pick that lost the
race (review/queue.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

from sqlalchemy import and_, case, delete, func, or_, select, tuple_
from sqlalchemy.orm import Session

from .db import dialect_insert
from .pairs import Thresholds, in_tiers, pair_columns, tier_of
from .schema import Label, Pair, ReviewClaim

PairKey = tuple[int, int]


def queue_select(reviewer: str | None, tiers: Sequence[str], thresholds: Thresholds,
                 now: datetime, exclude: Iterable[PairKey] = (),
                 only: PairKey | None = None):  # noqa: ANN201
    """SELECT a_pk, b_pk of the queue as `reviewer` sees it at `now`, in review order:
    undecided pairs of `tiers` under the tiers in force (`thresholds`; in the order of
    `tiers`, most uncertain first within one), less the ones the reviewer called unsure,
    the ones another reviewer holds, and `exclude`. With no reviewer, the queue as a
    whole: every undecided pair, claimed or not."""
    same_pair = (Label.a_pk == Pair.a_pk, Label.b_pk == Pair.b_pk)
    decided = select(Label.pk).where(*same_pair, Label.decision != "unsure").exists()
    query = select(Pair.a_pk, Pair.b_pk).where(in_tiers(thresholds, tiers), ~decided)
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
    tier = tier_of(thresholds)
    rank = case({t: i for i, t in enumerate(tiers)}, value=tier, else_=len(tiers))
    nearest_first = case((tier == "strong", Pair.score), else_=-Pair.score)
    return query.order_by(rank, nearest_first, Pair.a_pk, Pair.b_pk)


def queue_count(session: Session, reviewer: str | None, tiers: Sequence[str],
                thresholds: Thresholds, now: datetime, exclude: Iterable[PairKey] = ()) -> int:
    """How many pairs the queue holds as `reviewer` sees it (None: the whole queue)."""
    inner = queue_select(reviewer, tiers, thresholds, now, exclude).order_by(None).subquery()
    return session.scalar(select(func.count()).select_from(inner)) or 0


def queue_keys(session: Session, reviewer: str, tiers: Sequence[str], thresholds: Thresholds,
               now: datetime, limit: int | None = None) -> list[PairKey]:
    """The head of the queue as `reviewer` sees it (all of it with no limit), claiming nothing."""
    query = queue_select(reviewer, tiers, thresholds, now)
    return [tuple(r) for r in session.execute(query.limit(limit) if limit else query)]


def queue_pairs(session: Session, reviewer: str | None, tiers: Sequence[str],
                thresholds: Thresholds, now: datetime, limit: int) -> list[Any]:
    """The first `limit` pairs of the queue in review order, as rows of `pair_columns`."""
    query = queue_select(reviewer, tiers, thresholds, now)
    return list(session.execute(query.with_only_columns(*pair_columns(thresholds)).limit(limit)))


def pick(session: Session, reviewer: str, tiers: Sequence[str], thresholds: Thresholds,
         now: datetime, exclude: Iterable[PairKey], only: PairKey | None, n: int) -> list[PairKey]:
    """Up to `n` pairs at the head of `reviewer`'s queue (or just `only`), to claim in the
    same transaction."""
    query = queue_select(reviewer, tiers, thresholds, now, exclude, only).limit(n)
    if session.get_bind().dialect.name == "postgresql":
        # Rows another session is picking right now are passed over, not waited on.
        query = query.with_for_update(of=Pair, skip_locked=True)
    return [tuple(r) for r in session.execute(query).all()]


def take_claim(session: Session, pair: PairKey, reviewer: str, now: datetime,
               ttl: timedelta) -> bool:
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


def release_claims(session: Session, reviewer: str, pairs: list[PairKey]) -> None:
    """Delete the reviewer's claims on these pairs (another reviewer's are left alone)."""
    for start in range(0, len(pairs), 500):
        session.execute(delete(ReviewClaim).where(
            ReviewClaim.reviewer == reviewer,
            or_(*(and_(ReviewClaim.a_pk == a, ReviewClaim.b_pk == b)
                  for a, b in pairs[start:start + 500]))))


def release_claim(session: Session, lo: int, hi: int, reviewer: str) -> None:
    """Delete the reviewer's claim on the pair (lo, hi), if they hold one."""
    session.execute(delete(ReviewClaim).where(ReviewClaim.a_pk == lo, ReviewClaim.b_pk == hi,
                                              ReviewClaim.reviewer == reviewer))

