"""What the results read: items by key, pairs by tier, failures and the store's counts."""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .schema import Asset, Failure, IngestRun, Item, Label, Pair, Signature


def item_ids(session: Session) -> dict[int, str]:
    return dict(session.execute(select(Item.pk, Item.id)).all())


def items_by_pk(session: Session, pks: list[int]) -> dict[int, Any]:
    """{pk: row with id, meta, created_at} of these items."""
    rows: dict[int, Any] = {}
    for start in range(0, len(pks), 5000):
        rows.update({r.pk: r for r in session.execute(select(
            Item.pk, Item.id, Item.meta, Item.created_at).where(Item.pk.in_(pks[start:start + 5000])))})
    return rows


def pairs_in_tiers(session: Session, tiers: Sequence[str]) -> list[Pair]:
    """Stored pairs of these tiers, best first."""
    return list(session.scalars(select(Pair).where(Pair.tier.in_(tiers))
                                .order_by(Pair.score.desc(), Pair.a_pk, Pair.b_pk)))


def pair_edges(session: Session) -> list[tuple[int, int, str | None, dict | None]]:
    """(a, b, tier, signals) of every pair: what clusters are made from."""
    return [tuple(r) for r in session.execute(select(Pair.a_pk, Pair.b_pk, Pair.tier, Pair.signals))]


def failures(session: Session, include_resolved: bool) -> list[Failure]:
    query = select(Failure).order_by(Failure.pk)
    if not include_resolved:
        query = query.where(Failure.resolved_at.is_(None))
    return list(session.scalars(query))


def counts(session: Session) -> dict[str, Any]:
    """Items, and counts by kind of assets, signatures, pairs, labels, open failures, runs."""
    def by(column: Any, *where: Any) -> dict[str, int]:
        query = select(column, func.count()).group_by(column)
        for clause in where:
            query = query.where(clause)
        return {str(k): v for k, v in session.execute(query).all()}

    return {"items": session.scalar(select(func.count()).select_from(Item)) or 0,
            "assets": by(Asset.role), "signatures": by(Signature.kind), "pairs": by(Pair.tier),
            "labels": by(Label.decision),
            "open_failures": by(Failure.reason, Failure.resolved_at.is_(None)),
            "ingest_runs": by(IngestRun.status)}
