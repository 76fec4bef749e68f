"""Reviewer labels: recording them, importing and exporting them, and the review queue.

A label is one reviewer's decision on one pair (duplicate, distinct or unsure) with the
reviewer's name and the time; labels are never overwritten, the latest duplicate/distinct
label on a pair is the decision in force ('unsure' decides nothing), as the clusters read
them.

The review queue is the pairs of the configured tiers (`review_tiers`, medium by default)
that no reviewer has decided yet, most uncertain first: medium and weak pairs highest
score first (nearest the tier above), strong pairs lowest first. A pair a reviewer called
'unsure' stays in the queue for the others, not for them.

Claims keep two reviewers off one pair. A session takes the next pair by writing a claim
row (the pair is its primary key, with the reviewer and an expiry) and gives it up when
the reviewer decides, skips or quits; a claim whose time has passed (a session that
crashed) is free again. On PostgreSQL the pick runs `SELECT ... FOR UPDATE SKIP LOCKED`
over the pairs, so concurrent sessions pick different rows without waiting on each other;
on SQLite writes are serialised by the database. On both, the claim row's primary key is
what decides: the INSERT ... ON CONFLICT takes over an existing claim only when it has
expired or is the same reviewer's (their own earlier session), and a pick that lost the
race is simply retried. A reviewer's own claims are theirs in any session, so a reviewer
who runs two sessions at once may see one pair in both (harmless: two labels by one
person, the latest in force).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, TextIO

from sqlalchemy import and_, case, delete, func, insert, or_, select, tuple_
from sqlalchemy.orm import Session, sessionmaker

from ..config import TIERS, Settings
from ..input.items import text_for_signals
from ..results import UnknownItem
from ..store.db import dialect_insert
from ..store.schema import Asset, Label, Pair, ReviewClaim, utcnow
from ..store.schema import Item as ItemRow

DECISIONS = ("duplicate", "distinct", "unsure")
EXPORT_FIELDS = ("a", "b", "decision", "reviewer", "created_at")
EXPORT_FORMATS = ("jsonl", "csv")
# Import row errors, each with the line number and a detail.
IMPORT_REASONS = ("malformed_line", "bad_decision", "unknown_item", "same_item", "bad_time")
_CHUNK = 5000
_MAX_RACES = 100

PairKey = tuple[int, int]


# --- recording -------------------------------------------------------------------------


def check_decision(decision: str) -> str:
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}; expected one of {', '.join(DECISIONS)}")
    return decision


def _find_pks(session: Session, ids: Iterable[str]) -> dict[str, int]:
    """{id: pk} of the ones of these item ids that exist."""
    found: dict[str, int] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _CHUNK):
        found.update(session.execute(select(ItemRow.id, ItemRow.pk).where(
            ItemRow.id.in_(unique[start:start + _CHUNK]))).all())
    return found


def item_pks(session: Session, ids: Sequence[str]) -> dict[str, int]:
    """{id: pk} of these item ids; `UnknownItem` naming the ones that do not exist."""
    found = _find_pks(session, ids)
    missing = [i for i in dict.fromkeys(ids) if i not in found]
    if missing:
        raise UnknownItem(*missing)
    return found


def add_label(session: Session, a_pk: int, b_pk: int, decision: str, reviewer: str,
              created_at: datetime | None = None) -> Label:
    """Add one label (the pair stored as a_pk < b_pk) and release any claim the reviewer
    holds on the pair; flushed, so its pk is known."""
    if a_pk == b_pk:
        raise ValueError("a pair needs two different items")
    lo, hi = sorted((a_pk, b_pk))
    label = Label(a_pk=lo, b_pk=hi, decision=check_decision(decision), reviewer=reviewer,
                  created_at=created_at or utcnow())
    session.add(label)
    session.execute(delete(ReviewClaim).where(ReviewClaim.a_pk == lo, ReviewClaim.b_pk == hi,
                                              ReviewClaim.reviewer == reviewer))
    session.flush()
    return label


def label_pair(sessions: sessionmaker[Session], a: str, b: str, decision: str,
               reviewer: str) -> None:
    """Record a reviewer's decision on the pair of items with ids a and b."""
    check_decision(decision)
    if a == b:
        raise ValueError("a pair needs two different items")
    with sessions.begin() as session:
        pks = item_pks(session, [a, b])
        add_label(session, pks[a], pks[b], decision, reviewer)


def decisions_in_force(session: Session) -> dict[PairKey, str]:
    """The decision in force per pair: the latest label, ignoring 'unsure'."""
    latest: dict[PairKey, str] = {}
    for a, b, decision in session.execute(
        select(Label.a_pk, Label.b_pk, Label.decision).order_by(Label.created_at, Label.pk)
    ).all():
        if decision != "unsure":
            latest[(a, b)] = decision
    return latest


# --- export ----------------------------------------------------------------------------


def iter_labels(sessions: sessionmaker[Session]) -> Iterator[dict[str, Any]]:
    """Every label ever recorded, oldest first, as export records (times in UTC)."""
    a_item, b_item = ItemRow.__table__.alias("a_item"), ItemRow.__table__.alias("b_item")
    query = (select(a_item.c.id, b_item.c.id, Label.decision, Label.reviewer, Label.created_at)
             .join(a_item, a_item.c.pk == Label.a_pk).join(b_item, b_item.c.pk == Label.b_pk)
             .order_by(Label.created_at, Label.pk).execution_options(yield_per=10_000))
    with sessions() as session:
        for a, b, decision, reviewer, created in session.execute(query):
            yield {"a": a, "b": b, "decision": decision, "reviewer": reviewer,
                   "created_at": _utc(created).isoformat()}


def write_labels(records: Iterable[dict[str, Any]], out: TextIO, fmt: str = "jsonl") -> int:
    """Write label records as JSON Lines or CSV (header a,b,decision,reviewer,created_at);
    returns how many. Both read back with `import_labels`."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    n = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(EXPORT_FIELDS)
        for n, record in enumerate(records, start=1):
            writer.writerow([record[k] for k in EXPORT_FIELDS])
    else:
        for n, record in enumerate(records, start=1):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return n


# --- import ----------------------------------------------------------------------------


@dataclass
class RowError:
    line: int
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.detail}"


@dataclass
class ImportReport:
    """What a bulk import did: rows imported, rows already in the store (same pair,
    decision, reviewer and time: a re-import changes nothing), rows rejected."""

    source: str
    imported: int = 0
    unchanged: int = 0
    errors: list[RowError] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{self.source}: {self.imported} labels imported"
        if self.unchanged:
            text += f", {self.unchanged} already there"
        if self.errors:
            counts: dict[str, int] = {}
            for e in self.errors:
                counts[e.reason] = counts.get(e.reason, 0) + 1
            text += f", {len(self.errors)} rows rejected (" + ", ".join(
                f"{r} {c}" for r, c in sorted(counts.items())) + ")"
        return text


@dataclass
class _Row:
    line: int
    a: str
    b: str
    decision: str
    reviewer: str | None
    created_at: datetime | None


def import_labels(sessions: sessionmaker[Session], path: str | Path, reviewer: str,
                  fmt: str | None = None) -> ImportReport:
    """Import labels from a CSV file (header with a, b, decision and optionally reviewer,
    created_at) or JSON Lines ({"a", "b", "decision", "reviewer"?, "created_at"?} a line).
    `reviewer` stands in where a row names none; a row without created_at gets the time of
    the import. A bad row (malformed line, bad decision or time, unknown item, a pair of one
    item) is reported with its line number and reason and the rest are imported, in one
    transaction."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no labels file at {path}")
    fmt = fmt or _guess_format(path)
    report = ImportReport(str(path))
    rows: list[_Row] = []
    for parsed in (_read_csv(path) if fmt == "csv" else _read_jsonl(path)):
        (report.errors.append if isinstance(parsed, RowError) else rows.append)(parsed)
    with sessions.begin() as session:
        pks = _find_pks(session, (i for r in rows for i in (r.a, r.b)))
        existing = _existing_keys(session, {pks[i] for r in rows for i in (r.a, r.b) if i in pks})
        now = utcnow()
        records = []
        for r in rows:
            missing = [i for i in (r.a, r.b) if i not in pks]
            if missing:
                report.errors.append(RowError(r.line, "unknown_item", "no item with id "
                                              + ", ".join(map(repr, dict.fromkeys(missing)))))
                continue
            lo, hi = sorted((pks[r.a], pks[r.b]))
            who = r.reviewer or reviewer
            if r.created_at is not None:
                key = (lo, hi, r.decision, who, r.created_at.isoformat())
                if key in existing:
                    report.unchanged += 1
                    continue
                existing.add(key)
            records.append({"a_pk": lo, "b_pk": hi, "decision": r.decision, "reviewer": who,
                            "created_at": r.created_at or now})
        if records:
            session.execute(insert(Label), records)
        report.imported = len(records)
    report.errors.sort(key=lambda e: e.line)
    return report


def _guess_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    with path.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                return "jsonl" if raw.lstrip().startswith(b"{") else "csv"
    return "jsonl"


def _read_jsonl(path: Path) -> Iterator[_Row | RowError]:
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8-sig" if line_no == 1 else "utf-8"))
            except UnicodeDecodeError:
                yield RowError(line_no, "malformed_line", "not UTF-8")
                continue
            except ValueError as exc:
                yield RowError(line_no, "malformed_line", f"not JSON: {exc}")
                continue
            if not isinstance(record, dict):
                yield RowError(line_no, "malformed_line", "not a JSON object")
                continue
            yield _row(line_no, record)


def _read_csv(path: Path) -> Iterator[_Row | RowError]:
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            return
        names = [h.strip().lower() for h in header]
        missing = [n for n in ("a", "b", "decision") if n not in names]
        if missing:
            raise ValueError(f"{path}: the CSV header must name a, b and decision "
                             f"(missing {', '.join(missing)})")
        line_no = reader.line_num
        while True:
            start = line_no + 1
            try:
                values = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                line_no = reader.line_num
                yield RowError(start, "malformed_line", f"not CSV: {exc}")
                continue
            line_no = reader.line_num
            if not values or not any(v.strip() for v in values):
                continue
            if len(values) != len(names):
                yield RowError(start, "malformed_line",
                               f"{len(values)} fields where the header has {len(names)}")
                continue
            yield _row(start, dict(zip(names, values)))


def _row(line_no: int, record: dict[str, Any]) -> _Row | RowError:
    values: dict[str, str] = {}
    for name in ("a", "b", "decision"):
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            return RowError(line_no, "malformed_line",
                            f"no {name!r}" if value in (None, "") else f"{name!r} is not a text")
        values[name] = value.strip()
    decision = values["decision"].lower()
    if decision not in DECISIONS:
        return RowError(line_no, "bad_decision", f"{values['decision']!r} is not one of "
                                                 f"{', '.join(DECISIONS)}")
    if values["a"] == values["b"]:
        return RowError(line_no, "same_item", f"a and b are both {values['a']!r}")
    reviewer = record.get("reviewer")
    if reviewer is not None and not isinstance(reviewer, str):
        return RowError(line_no, "malformed_line", "'reviewer' is not a text")
    created = record.get("created_at")
    created_at = None
    if created not in (None, ""):
        try:
            if not isinstance(created, str):
                raise TypeError
            created_at = _utc(datetime.fromisoformat(created.strip()))
        except (TypeError, ValueError):
            return RowError(line_no, "bad_time", f"created_at {created!r} is not an ISO 8601 time")
    return _Row(line_no, values["a"], values["b"], decision,
                (reviewer or "").strip()[:128] or None, created_at)


def _existing_keys(session: Session, pks: set[int]) -> set[tuple[int, int, str, str, str]]:
    keys: set[tuple[int, int, str, str, str]] = set()
    ordered = sorted(pks)
    for start in range(0, len(ordered), _CHUNK):
        for a, b, decision, reviewer, created in session.execute(
            select(Label.a_pk, Label.b_pk, Label.decision, Label.reviewer, Label.created_at)
            .where(Label.a_pk.in_(ordered[start:start + _CHUNK]))
        ):
            keys.add((a, b, decision, reviewer, _utc(created).isoformat()))
    return keys


def _utc(moment: datetime) -> datetime:
    """Aware UTC; SQLite hands back naive times, which are stored in UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


# --- the review queue ------------------------------------------------------------------


def check_tiers(tiers: Sequence[str]) -> tuple[str, ...]:
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        raise ValueError(f"unknown tier {', '.join(map(repr, unknown)) or '(none)'}; "
                         f"expected some of {', '.join(TIERS)}")
    return tuple(dict.fromkeys(tiers))


def queue_select(reviewer: str | None, tiers: Sequence[str], now: datetime,
                 exclude: Iterable[PairKey] = (), only: PairKey | None = None):  # noqa: ANN201
    """SELECT a_pk, b_pk of the queue as `reviewer` sees it at `now`, in review order:
    undecided pairs of `tiers` (in that order; most uncertain first within one), less the
    ones the reviewer called unsure, the ones another reviewer holds, and `exclude`.
    With no reviewer, the queue as a whole: every undecided pair, claimed or not."""
    same_pair = (Label.a_pk == Pair.a_pk, Label.b_pk == Pair.b_pk)
    decided = select(Label.pk).where(*same_pair, Label.decision != "unsure").exists()
    query = select(Pair.a_pk, Pair.b_pk).where(Pair.tier.in_(list(tiers)), ~decided)
    if reviewer is not None:
        unsure = select(Label.pk).where(*same_pair, Label.decision == "unsure",
                                        Label.reviewer == reviewer).exists()
        held = select(ReviewClaim.a_pk).where(
            ReviewClaim.a_pk == Pair.a_pk, ReviewClaim.b_pk == Pair.b_pk,
            ReviewClaim.expires_at > now, ReviewClaim.reviewer != reviewer).exists()
        query = query.where(~unsure, ~held)
    exclude = list(exclude)
    if exclude:
        query = query.where(tuple_(Pair.a_pk, Pair.b_pk).not_in(exclude))
    if only is not None:
        query = query.where(Pair.a_pk == only[0], Pair.b_pk == only[1])
    rank = case({t: i for i, t in enumerate(tiers)}, value=Pair.tier, else_=len(tiers))
    nearest_first = case((Pair.tier == "strong", Pair.score), else_=-Pair.score)
    return query.order_by(rank, nearest_first, Pair.a_pk, Pair.b_pk)


def queue_size(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
               exclude: Iterable[PairKey] = ()) -> int:
    with sessions() as session:
        inner = queue_select(reviewer, tiers, utcnow(), exclude).order_by(None).subquery()
        return session.scalar(select(func.count()).select_from(inner)) or 0


def peek_queue(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
               limit: int | None = None) -> list[dict[str, Any]]:
    """The queue as `reviewer` would be offered it, without claiming anything."""
    with sessions() as session:
        query = queue_select(reviewer, tiers, utcnow())
        keys = [tuple(r) for r in session.execute(query.limit(limit) if limit else query)]
        views = load_pairs(session, keys)
    return [views[k].record() for k in keys if k in views]


def claim(sessions: sessionmaker[Session], reviewer: str, tiers: Sequence[str],
          ttl: timedelta, *, n: int = 1, exclude: Iterable[PairKey] = (),
          only: PairKey | None = None) -> list[PairKey]:
    """Claim up to `n` pairs at the head of `reviewer`'s queue (or just `only`): claim rows
    written and committed, so no other reviewer's session is offered them until they are
    released or expire. Returns the pairs claimed, in queue order."""
    exclude = list(exclude)
    for _ in range(_MAX_RACES):
        with sessions.begin() as session:
            now = utcnow()
            query = queue_select(reviewer, tiers, now, exclude, only).limit(n)
            if session.get_bind().dialect.name == "postgresql":
                # Rows another session is picking right now are passed over, not waited on.
                query = query.with_for_update(of=Pair, skip_locked=True)
            picked = [tuple(r) for r in session.execute(query).all()]
            if not picked:
                return []
            got = [pair for pair in picked if _take(session, pair, reviewer, now, ttl)]
            decided = _decided(session, got)  # labelled between the pick and the claim
            if decided:
                _release(session, reviewer, decided)
            got = [pair for pair in got if pair not in decided]
            if got:
                return got
            exclude.extend(decided)
    return []


def release(sessions: sessionmaker[Session], reviewer: str, pairs: Iterable[PairKey]) -> None:
    """Give up the reviewer's claims on these pairs."""
    pairs = list(pairs)
    if pairs:
        with sessions.begin() as session:
            _release(session, reviewer, pairs)


def _release(session: Session, reviewer: str, pairs: list[PairKey]) -> None:
    for start in range(0, len(pairs), 500):
        session.execute(delete(ReviewClaim).where(
            ReviewClaim.reviewer == reviewer,
            or_(*(and_(ReviewClaim.a_pk == a, ReviewClaim.b_pk == b)
                  for a, b in pairs[start:start + 500]))))


def _take(session: Session, pair: PairKey, reviewer: str, now: datetime, ttl: timedelta) -> bool:
    """INSERT the claim row, or take over one that expired or is the reviewer's own."""
    stmt = dialect_insert(session, ReviewClaim).values(
        a_pk=pair[0], b_pk=pair[1], reviewer=reviewer, claimed_at=now, expires_at=now + ttl)
    stmt = stmt.on_conflict_do_update(
        index_elements=["a_pk", "b_pk"],
        set_={"reviewer": stmt.excluded.reviewer, "claimed_at": stmt.excluded.claimed_at,
              "expires_at": stmt.excluded.expires_at},
        where=or_(ReviewClaim.expires_at <= now, ReviewClaim.reviewer == reviewer),
    ).returning(ReviewClaim.a_pk)
    return session.execute(stmt).first() is not None


def _decided(session: Session, pairs: list[PairKey]) -> list[PairKey]:
    if not pairs:
        return []
    rows = session.execute(select(Label.a_pk, Label.b_pk).where(
        Label.decision != "unsure", tuple_(Label.a_pk, Label.b_pk).in_(pairs))).all()
    return sorted({tuple(r) for r in rows})


# --- what a reviewer is shown ----------------------------------------------------------


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


# --- a reviewer's session --------------------------------------------------------------


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
        self.reviewer = reviewer
        self.tiers = check_tiers(tiers or settings.review_tiers)
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
                self._current = load_pairs(session, [key]).get(key)
            if self._current is None:  # rescored away meanwhile
                release(self.sessions, self.reviewer, [key])
        return self._current

    def _next_key(self) -> PairKey | None:
        if self.front:
            return self.front.pop(0)
        got = claim(self.sessions, self.reviewer, self.tiers, self.ttl,
                    exclude=self.skipped + self.set_aside)
        if got:
            return got[0]
        while self.skipped:  # the queue is done: skipped pairs once more
            key = self.skipped.pop(0)
            self.set_aside.append(key)
            if claim(self.sessions, self.reviewer, self.tiers, self.ttl, only=key):
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
            session.execute(delete(Label).where(Label.pk == done.label_pk,
                                                Label.reviewer == self.reviewer))
            taken = _take(session, done.key, self.reviewer, utcnow(), self.ttl)
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
        return (queue_size(self.sessions, self.reviewer, self.tiers,
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


__all__ = ["DECISIONS", "Done", "ImportReport", "PairView", "ReviewSession", "RowError", "claim",
           "import_labels", "iter_labels", "label_pair", "peek_queue", "release",
           "write_labels"]
