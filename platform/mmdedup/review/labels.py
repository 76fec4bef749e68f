"""Reviewer labels: recording them, the decisions in force, importing and exporting them.

A label is one reviewer's decision on one pair (duplicate, distinct or unsure) with the
reviewer's name and the time; labels are never overwritten, the latest duplicate/distinct
label on a pair is the decision in force ('unsure' decides nothing), as the clusters read
them. The review queue and its claims are in queue.py, a reviewer's pass in session.py.
"""

from __future__ import annotations

import csv
import getpass
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, TextIO

from sqlalchemy.orm import Session, sessionmaker

from ..results import UnknownItem
from ..score.windows import as_utc
from ..store.labels import (
    deleted_decisions,
    insert_label,
    insert_labels,
    label_decisions,
    labels_from,
    stream_labels_with_ids,
)
from ..store.queries import pks_by_id
from ..store.queue import release_claim
from ..store.schema import Label, utcnow

DECISIONS = ("duplicate", "distinct", "unsure")
EXPORT_FIELDS = ("a", "b", "decision", "reviewer", "created_at")
EXPORT_FORMATS = ("jsonl", "csv")
# Import row errors, each with the line number and a detail.
IMPORT_REASONS = ("malformed_line", "bad_decision", "unknown_item", "same_item", "bad_time")

PairKey = tuple[int, int]


# --- recording -------------------------------------------------------------------------


def default_reviewer() -> str:
    try:
        return os.environ.get("MMDEDUP_REVIEWER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def check_decision(decision: str) -> str:
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}; expected one of {', '.join(DECISIONS)}")
    return decision


def _find_pks(session: Session, ids: Iterable[str]) -> dict[str, int]:
    """{id: pk} of the ones of these item ids that exist."""
    return pks_by_id(session, list(dict.fromkeys(ids)))


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
    label = insert_label(session, lo, hi, check_decision(decision), reviewer,
                         created_at or utcnow())
    release_claim(session, lo, hi, reviewer)
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
    for a, b, decision in label_decisions(session):
        if decision != "unsure":
            latest[(a, b)] = decision
    return latest


# --- export ----------------------------------------------------------------------------


def iter_labels(sessions: sessionmaker[Session]) -> Iterator[dict[str, Any]]:
    """Every label ever recorded, oldest first, as export records (times in UTC). A
    label about a deleted item says so: "deleted" names its deleted side(s), "a" and/or
    "b" (the key is there only then)."""
    with sessions() as session:
        for a, b, decision, reviewer, created, a_gone, b_gone in stream_labels_with_ids(session):
            record = {"a": a, "b": b, "decision": decision, "reviewer": reviewer,
                      "created_at": as_utc(created).isoformat()}
            if a_gone or b_gone:
                record["deleted"] = [side for side, gone in (("a", a_gone), ("b", b_gone)) if gone]
            yield record


def deleted_pair_decisions(session: Session) -> list[tuple[dict[str, float], str]]:
    """(signal scores, decision) in force for each labelled pair that lost an item to a
    deletion: the latest duplicate/distinct label, with the scores the pair had then
    (a pair that had none left out)."""
    latest: dict[tuple[str, str], tuple[dict[str, float], str]] = {}
    for a, b, decision, signals in deleted_decisions(session):
        if decision != "unsure":
            latest[(a, b)] = (signals, decision)
    return [v for v in latest.values() if v[0]]


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
        insert_labels(session, records)
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
            created_at = as_utc(datetime.fromisoformat(created.strip()))
        except (TypeError, ValueError):
            return RowError(line_no, "bad_time", f"created_at {created!r} is not an ISO 8601 time")
    return _Row(line_no, values["a"], values["b"], decision,
                (reviewer or "").strip()[:128] or None, created_at)


def _existing_keys(session: Session, pks: set[int]) -> set[tuple[int, int, str, str, str]]:
    return {(a, b, decision, reviewer, as_utc(created).isoformat())
            for a, b, decision, reviewer, created in labels_from(session, sorted(pks))}




__all__ = ["DECISIONS", "ImportReport", "RowError", "decisions_in_force", "default_reviewer",
           "import_labels", "iter_labels", "label_pair", "write_labels"]
