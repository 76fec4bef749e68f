"""Time: each item's content class and time, the comparison window of its class, retention.

News is compared with the last week's news, notices with every notice ever. An item's
class is the meta field `class_field`, its time the ISO time in `time_field`, else when
it was ingested (both stored on the item when it is written). A candidate pair is scored
only when the later item of the two (by item time, so a back-filled archive pairs as the
live stream it was) came within its class's window of the earlier one, exact copies too
(signals/scorer.py `in_windows`).
`expired` are the items older than their class's retention (`keep`), counted back from
the newest item time of the class (never later than now: one item dated in the future
must not age the rest); `Platform.expire` deletes them (pipeline/delete.py).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Mapping

from sqlalchemy.orm import Session

from ..config import Settings
from ..score.canonical import parse_time
from ..signals.scorer import seconds_of_time
from ..store.items import expired_items, newest_item_time


def class_and_time(meta: Mapping[str, Any] | None, settings: Settings, now: datetime) -> tuple[str | None, datetime]:
    """An item's content class (None: none) and time, from its meta."""
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get(settings.class_field) if settings.class_field else None
    name = None if name is None or isinstance(name, (dict, list)) else str(name)[:64] or None
    seconds = parse_time(meta.get(settings.time_field)) if settings.time_field else None
    return name, now if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)


def retains(settings: Settings) -> bool:
    """Whether any class keeps its items for a finite time."""
    return any(math.isfinite(w.keep) for w in settings.windows.values())


def expired(session: Session, settings: Settings) -> dict[int, str]:
    """{pk: id} of the items older than their class's retention."""
    now = datetime.now(timezone.utc).timestamp()
    out: dict[int, str] = {}
    for name, window in sorted(settings.windows.items()):
        newest = newest_item_time(session, name)
        if math.isfinite(window.keep) and newest is not None:
            cut = min(seconds_of_time(newest), now) - window.keep
            out.update(expired_items(session, name, datetime.fromtimestamp(cut, timezone.utc)))
    return dict(sorted(out.items()))


