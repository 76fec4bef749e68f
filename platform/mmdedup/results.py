"""Typed results: what `Platform` returns and what every output format writes.

`as_dict()` is exactly the documented line (a pairs line, a clusters line, a query match);
the CLI's jsonl and csv, the report and the review screen all go through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


class UnknownItem(KeyError):
    """Item ids the store does not hold (a KeyError, so `except KeyError` still catches it)."""

    def __init__(self, *item_ids: str) -> None:
        super().__init__(f"no item with id {', '.join(map(repr, item_ids))}")
        self.item_ids = item_ids

    def __str__(self) -> str:
        return self.args[0]


class _Line:
    """Read like the documented line too (`pair["a"]`, `dict(pair)`), for scripts written
    against the dicts earlier releases returned."""

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def keys(self) -> Any:
        return self.as_dict().keys()

    def __iter__(self) -> Any:
        return iter(self.as_dict())

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (dict, _Line)):
            return self.as_dict() == (other if isinstance(other, dict) else other.as_dict())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (equal to a dict, so not hashable)


@dataclass(frozen=True, eq=False)
class Pair(_Line):
    """Two items and how alike they are: the fused score, its tier and kind, each signal's
    calibrated score (None where either item lacks it) and the raw figures behind them."""

    a: str
    b: str
    score: float
    tier: str | None
    kind: str
    signals: dict[str, float | None]
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Any, ids: dict[int, str], listed: Sequence[str] = ()) -> Pair:
        """A stored pair (a row with a_pk, b_pk, score, tier, kind, signals, details) as a
        result: the `listed` signals always (None where absent), then the others it has."""
        stored = row.signals or {}
        signals = {name: stored.get(name) for name in listed}
        signals.update({k: v for k, v in stored.items() if k not in signals})
        return cls(ids[row.a_pk], ids[row.b_pk], row.score, row.tier, row.kind, signals,
                   dict(row.details or {}))

    def as_dict(self) -> dict[str, Any]:
        out = {"a": self.a, "b": self.b, "score": round(self.score, 4), "tier": self.tier,
               "kind": self.kind, "signals": dict(self.signals)}
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True, eq=False)
class Cluster(_Line):
    """A duplicate group; `canonical` is its original by the canonical rule."""

    canonical: str
    members: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"canonical": self.canonical, "members": list(self.members)}


@dataclass(frozen=True, eq=False)
class Match(_Line):
    """A stored item near a query, with the per-signal scores and raw figures."""

    id: str
    score: float
    signals: dict[str, float]
    details: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 4),
                "signals": {k: round(v, 4) for k, v in self.signals.items()},
                "details": {k: round(v, 4) for k, v in self.details.items()}}
