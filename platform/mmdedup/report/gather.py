"""What the report shows, read from the store: the summary, the histogram of fused
scores per tier, the review queue and the items on the page, as plain dicts. Every tier
on the page is the one in force (`settings`, with a fitted fusion model's tiers), so
the counts, the histogram and the labels with their thresholds agree."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable

import numpy as np
from sqlalchemy.orm import Session

from ..results import Pair, UnknownItem
from ..config import TIERS, Settings
from ..input.items import text_for_signals
from ..store.pairs import stream_tier_scores
from ..store.queries import (assets_of, count_items, item_ids_of, item_rows_by_id, pairs_by_key,
                             pks_by_id)
from ..store.queue import queue_count, queue_pairs
from ..store.schema import utcnow

MAX_MEMBERS = 12  # members shown per cluster
HIST_BIN = 0.01  # histogram bin width on the fused score


def gather(session: Session, settings: Settings, clusters: list[dict[str, Any]],
           max_pairs: int, max_clusters: int) -> dict[str, Any]:
    """Everything the page shows, read in a handful of queries, as plain dicts."""
    histogram, tier_counts = score_histogram(session, settings)
    queue_total, queue = review_queue(session, settings, max_pairs)
    # Largest groups first: they are where a wrong merge costs most.
    shown = sorted(clusters, key=lambda c: -len(c["members"]))[:max_clusters]
    wanted = {m for c in shown for m in c["members"][:MAX_MEMBERS]}
    wanted |= {p[side] for p in queue for side in ("a", "b")}
    return {
        "summary": {
            "items": count_items(session),
            "pairs": tier_counts,
            "clusters": len(clusters), "clusters_shown": len(shown),
            "review_queue": queue_total, "review_shown": len(queue),
            "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
        "histogram": histogram,
        "clusters": shown,
        "queue": queue,
        "items": load_items(session, wanted),
    }


def score_histogram(session: Session, settings: Settings) -> tuple[dict[str, Any], dict[str, int]]:
    """Counts of fused scores per bin and tier, and pairs per tier. Scores are streamed
    and binned in numpy, not binned in SQL: CAST(x AS INTEGER) truncates on SQLite but
    rounds on PostgreSQL, and floor() is not in every SQLite build."""
    lo = np.floor(settings.tier_weak / HIST_BIN + 1e-9) * HIST_BIN
    bins = max(1, int(round((1.0 - lo) / HIST_BIN)))
    counts = {tier: np.zeros(bins, np.int64) for tier in TIERS}
    for part in stream_tier_scores(session, settings.tier_thresholds).partitions():
        tiers = np.array([t for t, _ in part], dtype=object)
        scores = np.array([s for _, s in part], dtype=np.float64)
        index = np.clip(np.floor((scores - lo) / HIST_BIN + 1e-9).astype(np.int64), 0, bins - 1)
        for tier in TIERS:
            counts[tier] += np.bincount(index[tiers == tier], minlength=bins)
    tier_counts = {tier: int(c.sum()) for tier, c in counts.items()}
    return {"lo": float(lo), "width": HIST_BIN,
            "counts": {t: c.tolist() for t, c in counts.items()}}, tier_counts


def review_queue(session: Session, settings: Settings, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """(how many, the first `limit`) medium pairs no reviewer has decided, most uncertain
    first: the highest scores, nearest the line where pairs merge without a reviewer.
    This is the review queue as a whole (no one reviewer's view): a pair counts as decided
    once it has a duplicate or distinct label ('unsure' leaves it in the queue), as the
    clusters read labels, and pairs a session holds are still shown."""
    now = utcnow()
    thresholds = settings.tier_thresholds
    total = queue_count(session, None, ("medium",), thresholds, now)
    rows = queue_pairs(session, None, ("medium",), thresholds, now, limit)
    ids = item_ids_of(session, {pk for p in rows for pk in (p.a_pk, p.b_pk)})
    return total, [Pair.from_row(p, ids).as_dict() for p in rows]


def gather_pair(session: Session, settings: Settings, a: str, b: str) -> dict[str, Any]:
    """One stored pair and its two items, as `gather` gives them, for a page of its own."""
    pks = pks_by_id(session, [a, b])
    missing = [i for i in (a, b) if i not in pks]
    if missing:
        raise UnknownItem(*missing)
    key = (min(pks[a], pks[b]), max(pks[a], pks[b]))
    rows = pairs_by_key(session, [key], settings.tier_thresholds)
    if not rows:
        raise KeyError(f"no pair {a!r} ~ {b!r} is stored")
    pair = Pair.from_row(rows[0], {pks[a]: a, pks[b]: b}).as_dict()
    return {"pair": pair, "items": load_items(session, [a, b])}


def load_items(session: Session, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The shown items with the text the text signal reads and their stored assets."""
    rows = item_rows_by_id(session, list(ids))
    by_pk = {r.pk: {"id": r.id, "title": r.title or "",
                    "text": text_for_signals(r.title, r.text, r.page_text),
                    "source": r.source, "assets": []} for r in rows}
    for a in assets_of(session, list(by_pk)):
        by_pk[a.item_pk]["assets"].append({"role": a.role, "path": a.path, "sha256": a.sha256})
    return {item["id"]: item for item in by_pk.values()}


__all__ = ["gather", "gather_pair", "load_items", "review_queue", "score_histogram"]
