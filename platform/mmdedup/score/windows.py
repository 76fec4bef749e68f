"""Which items are compared, by content class and time: pure functions over arrays.

An item's class is a meta field, its time an ISO time in another (else when it was
ingested). A pair is compared when the later item (by item time) came within its class's
window of the earlier one: the later item is the one that arrived, and its class says
how far back it looks. pipeline/windows.py and signals/scorer.py apply these to the store.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Mapping

import numpy as np

from .canonical import parse_time


def class_and_time(meta: Mapping[str, Any] | None, class_field: str, time_field: str,
                   ingested: datetime) -> tuple[str | None, datetime]:
    """An item's content class (None: none) and time, from its meta; `ingested` where the
    meta gives no readable time."""
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get(class_field) if class_field else None
    name = None if name is None or isinstance(name, (dict, list)) else str(name)[:64] or None
    seconds = parse_time(meta.get(time_field)) if time_field else None
    return name, ingested if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)


def compared(time_a: np.ndarray, time_b: np.ndarray, window_a: np.ndarray, window_b: np.ndarray) -> np.ndarray:
    """Which pairs are compared: item times in seconds (NaN: none, always compared) and
    each item's class window in seconds (inf: forever)."""
    later_window = np.where(time_a >= time_b, window_a, window_b)
    return ~(np.abs(time_a - time_b) > later_window)


def seconds_of(moment: datetime | None) -> float:
    """Unix seconds of a stored time (SQLite gives it back without its zone: UTC)."""
    if moment is None:
        return math.nan
    return as_utc(moment).timestamp()


def as_utc(moment: datetime) -> datetime:
    """A time as aware UTC: SQLite hands stored times back without their zone (they are
    UTC), and a time given without one is read the same way."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
