"""What the results read: items by key, pairs by tier, failures and the store's counts;
and the items, assets and pairs the review screen and the report show."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import numpy as np
from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session, aliased

from .db import select_in
from .pairs import Thresholds, in_tiers, pair_columns, tier_of, tiered
from .schema import Asset, Failure, IngestRun, Item, Label, Pair
from .signatures import signatures_by_kind


def items_by_pk(session: Session, pks: list[int]) -> dict[int, Any]:
    """{pk: row with id, meta, created_at} of these items."""
    rows: dict[int, Any] = {}
    for start in range(0, len(pks), 5000):
        rows.update({r.pk: r for r in session.execute(select(
            Item.pk, Item.id, Item.meta, Item.created_at).where(Item.pk.in_(pks[start:start + 5000])))})
    return rows


def member_rows(session: Session, pks: Sequence[int]) -> Iterator[Any]:
    """pk, meta, page date, title, text and page text of these items, read 5,000 at a
    time (what a cluster's canonical member is chosen by), so texts are never all held."""
    for start in range(0, len(pks), 5000):
        yield from session.execute(select(
            Item.pk, Item.meta, Item.page_date, Item.title, Item.text, Item.page_text)
            .where(Item.pk.in_(pks[start:start + 5000])))


def media_sizes(session: Session, pks: Sequence[int]) -> dict[int, tuple[int, float]]:
    """{pk: (picture pixels in all, video seconds)} of these items; a size not recorded
    counts as 0."""
    out: dict[int, tuple[int, float]] = {}
    for start in range(0, len(pks), 5000):
        for pk, role, width, height, duration in session.execute(select(
                Asset.item_pk, Asset.role, Asset.width, Asset.height, Asset.duration)
                .where(Asset.item_pk.in_(pks[start:start + 5000]), Asset.role.in_(("image", "video")))):
            pixels, seconds = out.get(pk, (0, 0.0))
            if role == "image":
                pixels += (width or 0) * (height or 0)
            else:
                seconds += duration or 0.0
            out[pk] = (pixels, seconds)
    return out


def pks_by_id(session: Session, ids: Sequence[str]) -> dict[str, int]:
    """{id: pk} of the ones of these item ids that exist."""
    found: dict[str, int] = {}
    for start in range(0, len(ids), 5000):
        found.update(session.execute(select(Item.id, Item.pk).where(
            Item.id.in_(ids[start:start + 5000]))).all())
    return found


def item_ids_of(session: Session, pks: Iterable[int]) -> dict[int, str]:
    """{pk: id} of these items."""
    return dict(select_in(session, "SELECT pk, id FROM items WHERE pk IN ({values})", list(pks)))


def item_rows_by_pk(session: Session, pks: Sequence[int]) -> list[Item]:
    """The whole rows of these items (title, text, page text: what is shown of them)."""
    return list(session.scalars(select(Item).where(Item.pk.in_(pks))))


def item_rows_by_id(session: Session, ids: Sequence[str]) -> list[Item]:
    """The whole rows of the items with these ids (ones that do not exist are missing)."""
    return list(session.scalars(select(Item).where(Item.id.in_(ids))))


def assets_of(session: Session, pks: Sequence[int]) -> list[Asset]:
    """The assets of these items, by item, role and position: the order they are listed in."""
    return list(session.scalars(select(Asset).where(Asset.item_pk.in_(pks))
                                .order_by(Asset.item_pk, Asset.role, Asset.position)))


def pairs_by_key(session: Session, keys: Sequence[tuple[int, int]], thresholds: Thresholds) -> list[Any]:
    """The stored pairs among these (a_pk, b_pk) keys (ones rescored away are missing), as
    rows of `pair_columns`."""
    return list(session.execute(select(*pair_columns(thresholds))
                                .where(tuple_(Pair.a_pk, Pair.b_pk).in_(keys))))


def pairs_in_tiers(session: Session, tiers: Sequence[str], thresholds: Thresholds,
                   batch: int = 20_000) -> Iterator[Sequence[Any]]:
    """Stored pairs of these tiers under the tiers in force, best first, as rows of
    `pair_columns` and the two items' ids (a_id, b_id), `batch` at a time: a store's
    pairs can outnumber what one process should hold, and so can its ids."""
    a, b = aliased(Item), aliased(Item)
    query = (select(*pair_columns(thresholds), a.id.label("a_id"), b.id.label("b_id"))
             .join_from(Pair, a, a.pk == Pair.a_pk).join(b, b.pk == Pair.b_pk)
             .where(in_tiers(thresholds, tiers)).order_by(Pair.score.desc(), Pair.a_pk, Pair.b_pk))
    yield from session.execute(query.execution_options(yield_per=batch)).partitions()


def strong_edges(session: Session, thresholds: Thresholds, disagree_below: float,
                 content: Sequence[str], batch: int = 200_000) -> Iterator[np.ndarray]:
    """(a, b) of the pairs that may join a cluster (score/cluster.py `accepted_edges`):
    strong pairs whose content signals, where both items have one, all reach
    `disagree_below`. Tested here, where the signals are stored: a million pairs' JSON read
    into Python would be most of the time `clusters` takes. Streamed `batch` rows at a
    time as (k, 2) arrays, so that no process holds every pair."""
    agree = [func.coalesce(Pair.signals[name].as_float(), disagree_below) >= disagree_below for name in content]
    # SQLite, which keeps no statistics here, would walk the score index and fetch each row
    # it leads to: with a quarter of the pairs strong, five times the CPU of reading the
    # table through. A score plus 0 is not the indexed column.
    score = Pair.score + 0 if session.get_bind().dialect.name == "sqlite" else Pair.score
    query = select(Pair.a_pk, Pair.b_pk).where(score >= thresholds[0][1], *agree)
    for rows in session.connection().execute(query.execution_options(yield_per=batch)).partitions():
        yield np.array([(a, b) for a, b in rows], np.int64).reshape(-1, 2)  # (numpy reads a Row slowly)


def tier_counts(session: Session, thresholds: Thresholds) -> dict[str, int]:
    """Pairs per tier under the tiers in force, strongest first (tiers with none left out).
    Grouped over a subquery: PostgreSQL would not match a CASE repeated in GROUP BY with its
    own bound thresholds to the one in the select list."""
    tiers = select(tier_of(thresholds).label("tier")).where(tiered(thresholds)).subquery()
    found = dict(session.execute(select(tiers.c.tier, func.count()).group_by(tiers.c.tier)).all())
    return {name: found[name] for name, _ in thresholds if name in found}


def failures(session: Session, include_resolved: bool) -> list[Failure]:
    query = select(Failure).order_by(Failure.pk)
    if not include_resolved:
        query = query.where(Failure.resolved_at.is_(None))
    return list(session.scalars(query))


def count_items(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Item)) or 0


def counts(session: Session, thresholds: Thresholds) -> dict[str, Any]:
    """Items, and counts by kind of assets, signatures, labels, open failures, runs, and of
    pairs by their tier under the tiers in force."""
    def by(column: Any, *where: Any) -> dict[str, int]:
        query = select(column, func.count()).group_by(column)
        for clause in where:
            query = query.where(clause)
        return {str(k): v for k, v in session.execute(query).all()}

    return {"items": count_items(session),
            "assets": by(Asset.role), "signatures": signatures_by_kind(session),
            "pairs": tier_counts(session, thresholds),
            "labels": by(Label.decision),
            "open_failures": by(Failure.reason, Failure.resolved_at.is_(None)),
            "ingest_runs": by(IngestRun.status)}


def stored_files(session: Session, pks: Sequence[int], role: str) -> list[Any]:
    """(item_pk, id, source, position, path, sha256) of these items' assets of one role,
    by item and position: what re-reading their files needs."""
    return list(session.execute(
        select(Asset.item_pk, Item.id, Item.source, Asset.position, Asset.path, Asset.sha256)
        .join(Item, Item.pk == Asset.item_pk)
        .where(Asset.item_pk.in_(pks), Asset.role == role)
        .order_by(Asset.item_pk, Asset.position)))
