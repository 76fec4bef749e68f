"""A reviewer's session: one pass over the review queue, with skip, undo and resume."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Sequence

from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings
from ..store.labels import delete_label
from ..store.queue import take_claim
from ..store.schema import utcnow
from .labels import DECISIONS, PairKey, add_label
from .queue import check_tiers, claim, queue_size, release
from .view import PairView, load_pairs


@dataclass
class Done:
    """A label this session recorded (what undo takes back)."""

    label_pk: int
    key: PairKey
    ids: tuple[str, str]
    decision: str


class ReviewSession:
    """One reviewer going through the queue: `current()` is the pair to decide, then
    `decide`, `skip` or `undo`; `close()` releases what the session still holds.

    - Resume: labels are committed as they are made and a decided pair leaves the queue,
      so a later session starts at the first pair not yet decided.
    - Skip records nothing: the pair is released and comes back once at the end of this
      session; skipped again, it waits for the next session (where it is in its place in
      the queue again).
    - Undo deletes the session's last label (the row: a key pressed by mistake is not a
      decision to keep) and puts that pair back in front; the pair that was showing stays
      claimed and comes right after it.
    """

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, reviewer: str,
                 tiers: Sequence[str] | None = None) -> None:
        self.sessions = sessions
        self.settings = settings  # the screen reads files back within its limits
        self.reviewer = reviewer
        self.tiers = check_tiers(tiers or settings.review_tiers)
        self.thresholds = settings.tier_thresholds
        self.ttl = timedelta(minutes=settings.review_claim_minutes)
        self.front: list[PairKey] = []  # claimed, shown before the queue (undone pairs)
        self.skipped: list[PairKey] = []  # skipped once this session, to offer again at the end
        self.set_aside: list[PairKey] = []  # skipped twice: for the next session
        self.history: list[Done] = []
        self.counts: dict[str, int] = dict.fromkeys(DECISIONS, 0)
        self._current: PairView | None = None

    # The pair on screen; None when the queue has nothing left for this reviewer.
    def current(self) -> PairView | None:
        while self._current is None:
            key = self._next_key()
            if key is None:
                return None
            with self.sessions() as session:
                self._current = load_pairs(session, [key], self.thresholds).get(key)
            if self._current is None:  # rescored away meanwhile
                release(self.sessions, self.reviewer, [key])
        return self._current

    def _next_key(self) -> PairKey | None:
        if self.front:
            return self.front.pop(0)
        got = claim(self.sessions, self.reviewer, self.tiers, self.thresholds, self.ttl,
                    exclude=self.skipped + self.set_aside)
        if got:
            return got[0]
        while self.skipped:  # the queue is done: skipped pairs once more
            key = self.skipped.pop(0)
            self.set_aside.append(key)
            if claim(self.sessions, self.reviewer, self.tiers, self.thresholds, self.ttl, only=key):
                return key
        return None

    def decide(self, decision: str) -> PairView:
        view = self._require()
        with self.sessions.begin() as session:
            label = add_label(session, *view.key, decision, self.reviewer)
        self.history.append(Done(label.pk, view.key, (view.a["id"], view.b["id"]), decision))
        self.counts[decision] += 1
        self._current = None
        return view

    def skip(self) -> PairView:
        view = self._require()
        release(self.sessions, self.reviewer, [view.key])
        if view.key not in self.set_aside:
            self.skipped.append(view.key)
        self._current = None
        return view

    def undo(self) -> Done | None:
        """Take back the session's last label; None when there is none. The pair is shown
        next unless another reviewer took it meanwhile (possible after 'unsure' only)."""
        if not self.history:
            return None
        done = self.history.pop()
        self.counts[done.decision] -= 1
        with self.sessions.begin() as session:
            delete_label(session, done.label_pk, self.reviewer)
            taken = take_claim(session, done.key, self.reviewer, utcnow(), self.ttl)
        if taken:
            if self._current is not None:
                self.front.insert(0, self._current.key)
                self._current = None
            self.front.insert(0, done.key)
        return done

    @property
    def labelled(self) -> int:
        return len(self.history)

    def remaining(self) -> int:
        """Pairs still to show this session, the one on screen included."""
        held = self.front + ([self._current.key] if self._current else [])
        return (queue_size(self.sessions, self.reviewer, self.tiers, self.thresholds,
                           exclude=held + self.skipped + self.set_aside)
                + len(held) + len(self.skipped))

    def close(self) -> None:
        """Release every claim the session holds (the pair on screen, undone ones)."""
        held = self.front + ([self._current.key] if self._current else [])
        self.front, self._current = [], None
        release(self.sessions, self.reviewer, held)

    def _require(self) -> PairView:
        view = self.current()
        if view is None:
            raise LookupError("the review queue is empty")
        return view

    def __enter__(self) -> ReviewSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Done", "ReviewSession"]
