"""What a reviewer is shown of a pair: both items (title, text, files) and its scores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from ..input.items import text_for_signals
from ..store.schema import Asset, Pair
from ..store.schema import Item as ItemRow
from .labels import PairKey


@dataclass
class PairView:
    """One pair as the review screen shows it."""

    key: PairKey
    a: dict[str, Any]  # {"id", "title", "text", "assets": ["image: img/x.jpg", ...]}
    b: dict[str, Any]
    score: float
    tier: str | None
    kind: str
    signals: dict[str, Any]
    details: dict[str, Any]

    def record(self) -> dict[str, Any]:
        """As a pairs-file line."""
        return {"a": self.a["id"], "b": self.b["id"], "score": round(self.score, 4),
                "tier": self.tier, "kind": self.kind, "signals": self.signals,
                "details": self.details}


def load_pairs(session: Session, keys: Sequence[PairKey]) -> dict[PairKey, PairView]:
    """Views of these pairs (ones rescored away since are missing)."""
    if not keys:
        return {}
    pairs = session.scalars(select(Pair).where(tuple_(Pair.a_pk, Pair.b_pk).in_(list(keys)))).all()
    pks = list({pk for p in pairs for pk in (p.a_pk, p.b_pk)})
    items = {r.pk: {"id": r.id, "title": r.title or "",
                    "text": text_for_signals(r.title, r.text, r.page_text), "assets": []}
             for r in session.scalars(select(ItemRow).where(ItemRow.pk.in_(pks)))}
    for a in session.scalars(select(Asset).where(Asset.item_pk.in_(pks))
                             .order_by(Asset.item_pk, Asset.role, Asset.position)):
        items[a.item_pk]["assets"].append(f"{a.role}: {a.path}")
    return {(p.a_pk, p.b_pk): PairView((p.a_pk, p.b_pk), items[p.a_pk], items[p.b_pk], p.score,
                                       p.tier, p.kind, dict(p.signals or {}), dict(p.details or {}))
            for p in pairs}


__all__ = ["PairView", "load_pairs"]
