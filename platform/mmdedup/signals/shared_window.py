"""A signal's candidate index kept in the shared window (`window_store`, Redis), caught up
with the store.

The index in memory (signals/base.py) is a cache of the store that each process opens from
its files and catches up with the signatures written since. In the shared window the
index is one for every process, and the store's write it has caught up with is Redis's
to keep (index/redis_window.py `WindowSlot`), so the same steps change hands:

- a writer (holding the store's write lock, so writers take turns) catches the window up
  with the writes since its state, deletions and evictions out and items written without
  a window in, or rebuilds it from the store when Redis lost it (no state), then adds
  its own items and moves the state on to its own write (`written`);
- a search of the items a writer just added is checked after it ran (`confirmed`): a
  Redis that lost the window meanwhile answered from a part of it, so the window is
  rebuilt (from the store as the writer's transaction sees it, its own items included)
  and the search run again;
- a reader (a query) searches the window as it is, unless it is lost or behind the
  store, when it takes the write lock to catch it up first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numpy as np
from sqlalchemy.orm import Session

from ..index.redis_window import SharedWindow, WindowSlot, connect
from ..store.items import new_store_id, store_id
from ..store.locks import last_write, take_write_lock

if TYPE_CHECKING:
    from .base import Signal

T = TypeVar("T")


class SharedIndex:
    """Where a signal's index in the shared window stands: its slot for each signature
    version, the index over the generation in use, and the write it holds. `kind`: the
    signatures it holds, the signal's own by default; a TF-IDF refresh's pending index
    holds the second slot's ("text:next") in the slot of its version, which the active
    index of that version takes over as it is once the refresh switches (no rebuild)."""

    def __init__(self, signal: Signal, kind: str | None = None) -> None:
        self.signal = signal
        self.kind = kind or signal.name
        self.window: SharedWindow | None = None
        self.slots: dict[str, WindowSlot] = {}
        self.current: tuple[str, Any] | None = None  # (key prefix, the index over it)
        self.version: str | None = None
        self.gen: str | None = None
        self.seq = -1

    def index(self, session: Session, version: str) -> Any:
        """The index of `version` holding every signature the store holds (a reader's:
        as the window is, unless lost or behind). The active index moved on to another
        version (a refresh switched, a retrain signed everything again): the window of
        the one it leaves goes."""
        if self.version is not None and version != self.version and self.kind == self.signal.name:
            self.slots.pop(self.version).drop()
            self.current = self.version = None
        slot = self._slot(session, version)
        if not session.info.get("write_locked"):
            state = slot.state()
            if state is not None and state[1] >= last_write(session):
                return self._over(slot, version, *state)
        return self._locked(session, lambda locked: self._keep(locked, slot, version))

    def written(self, session: Session, seq: int) -> None:
        """This transaction (write `seq`) added its items: the state moves on to it, or the
        window, lost meanwhile, is rebuilt with them."""
        self.seq = seq
        if not self.slots[self.version].advance(self.gen, seq):
            self._keep(session, self.slots[self.version], self.version)

    def confirmed(self, session: Session, search: Callable[[Any], np.ndarray]) -> np.ndarray:
        """`search(index)` run until the window it searched was still whole after it."""
        while True:
            found = search(self.current[1])
            slot = self.slots[self.version]
            if slot.state() == (self.gen, self.seq):
                return found
            self._keep(session, slot, self.version)

    def _slot(self, session: Session, version: str) -> WindowSlot:
        if version not in self.slots:
            if self.window is None:
                ident = store_id(session)
                if ident is None:
                    ident = self._locked(session, new_store_id)
                settings = self.signal.settings
                self.window = SharedWindow(connect(settings.window_store), f"mmdedup:{ident:x}",
                                           2 * settings.widest_window)
            self.slots[version] = self.window.slot(self.signal.name, self.signal.index_stamp(version))
        return self.slots[version]

    def _locked(self, session: Session, work: Callable[[Session], T]) -> T:
        """`work` under the store's write lock: in `session` where it holds it, else in a
        transaction of its own that takes it (a reader's)."""
        if session.info.get("write_locked"):
            return work(session)
        with self.signal.sessions.begin() as locked:
            take_write_lock(locked, numbered=False)
            return work(locked)

    def _over(self, slot: WindowSlot, version: str, gen: str, seq: int) -> Any:
        """The index over generation `gen` of the slot (made once a generation)."""
        keys = slot.keys(gen)
        if self.current is None or self.current[0] != keys:
            self.current = (keys, self.signal.shared_index(self.window, keys))
        self.version, self.gen, self.seq = version, gen, seq
        return self.current[1]

    def _keep(self, session: Session, slot: WindowSlot, version: str) -> Any:
        """Under the write lock: the window caught up with the store's writes since its
        state, or, lost, rebuilt from the store under a new generation."""
        signal = self.signal
        state = slot.state()
        if state is None:
            through = last_write(session)  # (this transaction's own write, where it writes)
            gen = slot.start()
            index = self._over(slot, version, gen, -1)
            signal.rebuilt_index(session, self.kind, version, index)
        else:
            gen, seq = state
            index = self._over(slot, version, gen, seq)
            through = signal.caught_up(session, index, self.kind, version, seq)
            if through == seq:
                return index
        if not slot.advance(gen, through):  # (lost again meanwhile: rebuilt again)
            return self._keep(session, slot, version)
        self.seq = through
        return index
