"""What a reviewer is shown of a pair: both items (title, text, files) and its scores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sqlalchemy.orm import Session

from ..input.items import text_for_signals
from ..results import Pair
from ..store.pairs import Thresholds
from ..store.queries import assets_of, item_rows_by_pk, pairs_by_key
from .labels import PairKey


@dataclass
class PairView:
    """One pair as the review screen shows it."""

    key: PairKey
    # {"id", "title", "text", "source", "assets": ["image: img/x.jpg (640x480)", ...],
    #  "media": [{"role", "path", "sha256"}, ...]}: the files as listed, and as read back
    a: dict[str, Any]
    b: dict[str, Any]
    score: float
    tier: str | None
    kind: str
    signals: dict[str, Any]
    details: dict[str, Any]

    def record(self) -> dict[str, Any]:
        """As a pairs-file line."""
        return Pair(self.a["id"], self.b["id"], self.score, self.tier, self.kind, self.signals,
                    self.details).as_dict()


def load_pairs(session: Session, keys: Sequence[PairKey],
               thresholds: Thresholds) -> dict[PairKey, PairView]:
    """Views of these pairs with their tiers under `thresholds` (ones rescored away since
    are missing)."""
    if not keys:
        return {}
    pairs = pairs_by_key(session, list(keys), thresholds)
    pks = list({pk for p in pairs for pk in (p.a_pk, p.b_pk)})
    items = {r.pk: {"id": r.id, "title": r.title or "",
                    "text": text_for_signals(r.title, r.text, r.page_text), "source": r.source,
                    "assets": [], "media": []}
             for r in item_rows_by_pk(session, pks)}
    for a in assets_of(session, pks):
        items[a.item_pk]["assets"].append(f"{a.role}: {a.path}{_size(a.width, a.height, a.duration)}")
        items[a.item_pk]["media"].append({"role": a.role, "path": a.path, "sha256": a.sha256})
    return {(p.a_pk, p.b_pk): PairView((p.a_pk, p.b_pk), items[p.a_pk], items[p.b_pk], p.score,
                                       p.tier, p.kind, dict(p.signals or {}), dict(p.details or {}))
            for p in pairs}


def _size(width: int | None, height: int | None, duration: float | None) -> str:
    """The " (640x480, 12.0 s)" after a file's name: what a reviewer compares first
    between two copies."""
    parts = ([f"{width}x{height}"] if width and height else []) + (
        [f"{duration:.1f} s"] if duration else [])
    return f" ({', '.join(parts)})" if parts else ""


__all__ = ["PairView", "load_pairs"]
