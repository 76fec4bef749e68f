"""Typed results: what `Platform` returns and what every output format writes.

`as_dict()` is exactly the documented line (a pairs line, a clusters line, a query match);
the CLI's jsonl and csv, the report and the review screen all go through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class UnknownItem(KeyError):
    """Item ids the store does not hold (a KeyError, so `except KeyError` still catches it)."""

    def __init__(self, *item_ids: str) -> None:
        super().__init__(f"no item with id {', '.join(map(repr, item_ids))}")
        self.item_ids = item_ids

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class Pair:
    """Two items and how alike they are: the fused score, its tier and kind, each signal's
    calibrated score (None where either item lacks it) and the raw figures behind them."""

    a: str
    b: str
    score: float
    tier: str | None
    kind: str
    signals: dict[str, float | None]
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {"a": self.a, "b": self.b, "score": round(self.score, 4), "tier": self.tier,
               "kind": self.kind, "signals": dict(self.signals)}
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class Cluster:
    """A duplicate group; `canonical` is its earliest ingested member."""

    canonical: str
    members: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"canonical": self.canonical, "members": list(self.members)}


@dataclass(frozen=True)
class Match:
    """A stored item near a query, with the per-signal scores and raw figures."""

    id: str
    score: float
    signals: dict[str, float]
    details: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 4),
                "signals": {k: round(v, 4) for k, v in self.signals.items()},
                "details": {k: round(v, 4) for k, v in self.details.items()}}
