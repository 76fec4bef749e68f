"""A stream's exact repeats answered before they are signed: a Bloom filter of the content
keys inside the window, then the original's stored values.

Content arrives repeated: a wire story republished word for word, a notice posted again.
An exact repeat's signal values are its original's, so signing it again (tokenising,
MinHash, SimHash, each signal's extraction) is work thrown away. Before a stream's batch is
signed, each loaded item's content key (a SHA-256 of its text and files, computed as it
is read) is looked up in a Bloom filter (rbloom) of the keys of the items inside the
window: most items are new, and the filter says so in memory, without a lookup. A key it
may have seen is looked up in the exact-key index (signals/exact_keys.py) and checked
against the stored full key; the earliest stored item with that content lends its stored
values, which the signals take as values extracted where the item was loaded
(`LoadedItem.extracted`), as they take a cluster worker's.

Nothing is decided here: the item is written, its exact pair found and the window
applied as for any item (pipeline/ingest.py). The filter only saves work, so what it
misses costs only that work: the keys of items other processes wrote since it was filled
are not in it (those repeats are signed, and still found exact), nor are evicted keys
taken out (a Bloom filter forgets nothing: a key that left the window costs a lookup).
It is filled again from the store once it holds more than it was sized for. Pages are
left out: their content key is known only once their main text is extracted.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Sequence

import numpy as np
from rbloom import Bloom
from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings
from ..input.items import LoadedItem
from ..signals.base import Signal
from ..signals.exact_keys import ExactKeys, key64
from ..store.items import content_keys, full_keys
from ..store.signatures import load_signatures
from .windows import horizon

FALSE_POSITIVES = 0.01  # a key never seen said to be seen: one lookup in the exact index
_LEAST = 100_000  # keys a filter is sized for at least
_EARLIEST = 8  # stored items a key's lookup reads (a 64-bit collision with one is rare)


class Repeats:
    """The stream's filter and what it found (`copied`: items whose values were lent,
    `looked_up`: keys the filter passed to the exact index)."""

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, exact: ExactKeys,
                 signals: Sequence[Signal]) -> None:
        self.sessions, self.settings, self.exact, self.signals = sessions, settings, exact, signals
        self.bloom: Bloom | None = None
        self.sized = self.held = 0
        self.copied = self.looked_up = 0

    def _fill(self, session: Session) -> None:
        """A filter of the content keys of the stored items inside the window."""
        cut = horizon(session, self.settings)
        since = datetime.fromtimestamp(cut, timezone.utc) if math.isfinite(cut) else None
        batches = list(content_keys(session, since))
        self.held = sum(map(len, batches))
        self.sized = max(_LEAST, 2 * self.held)
        self.bloom = Bloom(self.sized, FALSE_POSITIVES)
        for keys in batches:
            self.bloom.update(keys)

    def lend(self, items: Sequence[LoadedItem]) -> None:
        """Give each item that repeats a stored item's content that item's stored values,
        where the signals have them; then add every item's key to the filter."""
        plain = [li for li in items if li.page is None and li.content_key]
        if not plain:
            return
        with self.sessions() as session:
            if self.bloom is None or self.held > self.sized:
                self._fill(session)
            assert self.bloom is not None
            maybe = [li for li in plain if li.content_key in self.bloom]
            if maybe:
                self._lend(session, maybe)
        self.bloom.update(li.content_key for li in plain)
        self.held += len(plain)

    def _lend(self, session: Session, items: list[LoadedItem]) -> None:
        self.looked_up += len(items)
        keys = np.array([[key64(li.content_key)] for li in items], np.uint64)
        found = self.exact.index(session).content.query(keys, first=_EARLIEST)
        if not len(found.ids):
            return
        full = full_keys(session, np.unique(found.ids).tolist())
        original: dict[int, int] = {}  # row of `items` -> the earliest stored item with its content
        for row, pk in zip(found.query.tolist(), found.ids.tolist()):
            if full.get(pk, ("",))[0] == items[row].content_key and pk < original.get(row, pk + 1):
                original[row] = pk
        if not original:
            return
        parts = {"text"} | {a.role for row in original for a in items[row].assets}
        for signal in self.signals:
            if signal.exact_parts and not parts.intersection(signal.exact_parts):
                continue  # (a picture signal, and items without pictures)
            version = signal.version()
            if version is None:
                continue
            stored = load_signatures(session, signal.name, version, sorted(set(original.values())))
            for row, pk in original.items():
                if pk in stored:
                    items[row].extracted[signal.name] = signal.as_extracted(stored[pk])
        self.copied += len(original)
