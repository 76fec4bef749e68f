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

from sqlalchemy.orm import Session

from ..config import Settings
from ..score.windows import seconds_of
from ..store.items import expired_items, newest_item_time


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
            cut = min(seconds_of(newest), now) - window.keep
            out.update(expired_items(session, name, datetime.fromtimestamp(cut, timezone.utc)))
    return dict(sorted(out.items()))


