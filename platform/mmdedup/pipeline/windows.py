"""Time: each item's content class and time, the comparison window of its class, retention,
and the horizon behind which items leave the candidate indexes.

News is compared with the last week's news, notices with every notice ever. An item's
class is the meta field `class_field`, its time the ISO time in `time_field`, else when
it was ingested (both stored on the item when it is written). A candidate pair is scored
only when the later item of the two (by item time, so a back-filled archive pairs as the
live stream it was) came within its class's window of the earlier one, exact copies too
(signals/scorer.py `in_windows`).

`expired` are the items older than their class's retention (`keep`), counted back from
the newest item time of the class (never later than now: one item dated in the future
must not age the rest); `Platform.expire` deletes them (pipeline/delete.py).

`evict` keeps the candidate indexes the size of the window rather than of the history.
Once every class's window is finite ("*" included), an item older than the store's clock
(its newest item time, never later than now) minus the widest window can no longer be
compared with anything that arrives in time order: its signatures are marked evicted,
every process's indexes take it out as they catch up (their arrays compact as entries
die: index/slots.py), and a rebuild leaves it out. It stays in the store, for its
retention, its pairs and queries by id. What arrives later than that (an archive loaded
newest first) is compared only with what the indexes still hold.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings
from ..score.windows import seconds_of
from ..store.items import expired_items, newest_item_time, set_state, state
from ..store.locks import take_write_lock
from ..store.signatures import evict_signatures, restore_evicted

HORIZON_STATE = "window_horizon"  # store_state: the horizon of the last eviction (unix seconds)
HORIZON_SEQ_STATE = "window_horizon_seq"  # the write that made it
SPAN_STATE = "window_span"  # the widest window it was counted with (seconds)


def expired(session: Session, settings: Settings) -> dict[int, str]:
    """{pk: id} of the items older than their class's retention ("*": of every class not
    listed, and of none)."""
    now = datetime.now(timezone.utc).timestamp()
    listed = sorted(c for c in settings.windows if c != "*")
    out: dict[int, str] = {}
    for name, window in sorted(settings.windows.items()):
        of = None if name == "*" else name
        newest = newest_item_time(session, of, listed)
        if math.isfinite(window.keep) and newest is not None:
            cut = min(seconds_of(newest), now) - window.keep
            out.update(expired_items(session, of, datetime.fromtimestamp(cut, timezone.utc), listed))
    return dict(sorted(out.items()))


def horizon(session: Session, settings: Settings) -> float:
    """Unix seconds before which no item can be compared with what arrives in time order
    (-inf: a class looks back forever, or the store is empty)."""
    newest = newest_item_time(session)
    if newest is None or not math.isfinite(settings.widest_window):
        return -math.inf
    return min(seconds_of(newest), datetime.now(timezone.utc).timestamp()) - settings.widest_window


def evict(sessions: sessionmaker[Session], settings: Settings) -> int:
    """Take the items behind the horizon out of the candidate indexes (in one write);
    returns how many items went. The first eviction, and one after the windows
    changed, looks at every item (the windows changed: every evicted signature first goes
    back); the others only at the items the horizon passed since the last one, and at
    those written since behind it."""
    span = settings.widest_window
    with sessions() as session:
        if state(session, SPAN_STATE) is None and not math.isfinite(span):
            return 0  # (nothing was ever evicted, and nothing can be)
    with sessions.begin() as session:
        take_write_lock(session)
        known = state(session, SPAN_STATE)
        if known is not None and known != _whole(span):
            restore_evicted(session)
            known = None
        cut = horizon(session, settings)
        if not math.isfinite(cut):
            set_state(session, SPAN_STATE, _whole(span))
            return 0
        last = state(session, HORIZON_STATE) if known is not None else None
        since = None if last is None else datetime.fromtimestamp(last, timezone.utc)
        if last is not None and math.floor(cut) <= last:
            cut = last  # (the horizon never moves back while the windows stay)
        gone = evict_signatures(session, datetime.fromtimestamp(math.floor(cut), timezone.utc), since,
                                state(session, HORIZON_SEQ_STATE) or 0)
        set_state(session, HORIZON_STATE, math.floor(cut))
        set_state(session, HORIZON_SEQ_STATE, session.info["write_seq"])
        set_state(session, SPAN_STATE, _whole(span))
        return gone


def _whole(seconds: float) -> int:
    """A span as store_state keeps it (-1: forever)."""
    return int(seconds) if math.isfinite(seconds) else -1
