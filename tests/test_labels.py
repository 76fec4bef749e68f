"""Labels: one at a time and in bulk (bad rows reported by line and reason, the rest
imported), exported and imported back, and kept across migrations."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from mmdedup import Platform
from mmdedup.store.db import downgrade, make_engine, migrate
from mmdedup.store.schema import Base, Label, Pair, ReviewClaim

ITEMS = [{"id": "a", "text": "Breaking: river floods the old town."},
         {"id": "b", "text": "The river floods the old town again, breaking records."},
         {"id": "c", "text": "An unrelated story about apples."},
         {"id": "日本", "text": "一个中文标识的条目。"}]


def lines(*records: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                   for r in records)


def test_bulk_import_reports_bad_rows_and_imports_the_rest(platform: Platform, tmp_path: Path) -> None:
    platform.ingest(ITEMS)
    path = tmp_path / "labels.jsonl"
    path.write_text(lines(
        {"a": "a", "b": "b", "decision": "duplicate", "reviewer": "ann"},          # 1
        {"a": "a", "b": "nope", "decision": "distinct"},                           # 2
        {"a": "a", "b": "c", "decision": "maybe"},                                 # 3
        '{"a": "a", "b": oops',                                                    # 4
        "",                                                                        # 5 blank
        '["a", "b", "duplicate"]',                                                 # 6
        {"a": "c", "b": "b", "decision": " DISTINCT "},                            # 7
        {"a": "c", "b": "c", "decision": "unsure"},                                # 8
        {"a": "a", "b": "c", "decision": "unsure", "created_at": "yesterday"},     # 9
        {"a": "日本", "b": "c", "decision": "unsure",
         "created_at": "2024-05-01T10:00:00+02:00", "reviewer": "李"},             # 10
        {"b": "c", "decision": "duplicate"},                                       # 11
        {"a": "x", "b": "y", "decision": "duplicate"},                             # 12
    ), encoding="utf-8")
    report = platform.import_labels(path, reviewer="importer")
    assert report.imported == 3 and report.unchanged == 0
    assert [(e.line, e.reason) for e in report.errors] == [
        (2, "unknown_item"), (3, "bad_decision"), (4, "malformed_line"), (6, "malformed_line"),
        (8, "same_item"), (9, "bad_time"), (11, "malformed_line"), (12, "unknown_item")]
    assert "'nope'" in report.errors[0].detail and "'x', 'y'" in report.errors[-1].detail
    assert "3 labels imported" in report.summary() and "8 rows rejected" in report.summary()
    labels = platform.labels()
    assert [(r["a"], r["b"], r["decision"], r["reviewer"]) for r in labels] == [
        ("c", "日本", "unsure", "李"),  # oldest first: it came with its time
        ("a", "b", "duplicate", "ann"), ("b", "c", "distinct", "importer")]
    assert labels[0]["created_at"] == "2024-05-01T08:00:00+00:00"
    assert all(datetime.fromisoformat(r["created_at"]).tzinfo for r in labels)
    assert {"canonical": "b", "members": ["a", "b"]} in platform.clusters()  # b: the longer text


def test_csv_import_through_the_cli(cli, platform: Platform, tmp_path: Path) -> None:
    platform.ingest(ITEMS)
    path = tmp_path / "labels.csv"
    path.write_text('\ufeffA,B,Decision,Reviewer\n'   # a BOM and capitals, as spreadsheets write
                    'a,b,duplicate,bob\n'
                    'a,c,distinct\n'              # 3: a field short
                    '"b","c","unsure",""\n'       # 4: no reviewer: --reviewer's
                    '"a","c","not\nsure",x\n'     # 5-6: one row over two lines
                    'a,zzz,distinct,bob\n'        # 7
                    '\n'
                    'c,b,distinct,bob\n', encoding="utf-8")  # 9
    rc, out, err = cli("label", "--file", str(path), "--reviewer", "cleo")
    assert rc == 1
    assert err.splitlines() == [
        f"{path}:3: malformed_line: 3 fields where the header has 4",
        f"{path}:5: bad_decision: 'not\\nsure' is not one of duplicate, distinct, unsure",
        f"{path}:7: unknown_item: no item with id 'zzz'"]
    assert "3 labels imported" in out and "3 rows rejected" in out
    assert [(r["a"], r["b"], r["decision"], r["reviewer"]) for r in platform.labels()] == [
        ("a", "b", "duplicate", "bob"), ("b", "c", "unsure", "cleo"),
        ("b", "c", "distinct", "bob")]

    bad_header = tmp_path / "bad.csv"
    bad_header.write_text("left,right,decision\na,b,duplicate\n")
    rc, _, err = cli("label", "--file", str(bad_header))
    assert rc == 2 and "must name a, b and decision (missing a, b)" in err
    rc, _, err = cli("label", "--file", str(tmp_path / "none.jsonl"))
    assert rc == 2 and "no labels file" in err


def test_label_commands(cli, platform: Platform) -> None:
    platform.ingest(ITEMS)
    rc, out, _ = cli("label", "a", "b", "--unsure", "--reviewer", "ann")
    assert rc == 0 and out.strip() == "a ~ b: unsure"
    rc, out, _ = cli("label", "a", "b", "--duplicate", "--reviewer", "ann")
    assert rc == 0 and out.strip() == "a ~ b: duplicate"
    rc, _, err = cli("label", "a", "b")
    assert rc == 2 and "one of --duplicate, --distinct, --unsure" in err
    rc, _, err = cli("label", "a", "--file", "x.csv")
    assert rc == 2 and "takes no pair" in err
    rc, out, _ = cli("labels")
    assert "2 labels" in out and "unsure" in out and "duplicate" in out
    rc, out, _ = cli("stats", "--format", "json")
    assert json.loads(out)["labels"] == {"duplicate": 1, "unsure": 1}


def test_export_and_import_round_trip(cli, platform: Platform, tmp_path: Path) -> None:
    platform.ingest(ITEMS)
    platform.label("a", "b", duplicate=True, reviewer="ann")
    platform.label("b", "a", decision="unsure", reviewer="bob")
    platform.label("日本", "c", duplicate=False, reviewer="李")

    rc, out, _ = cli("labels", "--export")
    records = [json.loads(line) for line in out.splitlines()]
    assert [list(r) for r in records] == [["a", "b", "decision", "reviewer", "created_at"]] * 3
    assert [(r["a"], r["b"], r["decision"], r["reviewer"]) for r in records] == [
        ("a", "b", "duplicate", "ann"), ("a", "b", "unsure", "bob"), ("c", "日本", "distinct", "李")]
    rc, out_csv, _ = cli("labels", "--export", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out_csv)))
    assert rows == [{k: str(v) for k, v in r.items()} for r in records]
    exported = tmp_path / "labels.csv"
    rc, _, err = cli("labels", "--export", "--format", "csv", "--out", str(exported))
    assert rc == 0 and "wrote 3 labels" in err and exported.read_text(encoding="utf-8") == out_csv

    # Into another store holding the same items: the same labels, times included.
    with Platform.open(tmp_path / "other") as other:
        other.ingest(ITEMS)
        report = other.import_labels(exported)
        assert report.imported == 3 and not report.errors
        assert other.labels() == records
        # Importing again changes nothing: the rows are already there.
        jsonl = tmp_path / "labels.jsonl"
        other.export_labels(jsonl)
        again = other.import_labels(jsonl)
        assert (again.imported, again.unchanged) == (0, 3) and other.labels() == records


def test_labels_survive_migrations(db_url: str, home: Path) -> None:
    engine = make_engine(db_url)
    try:
        # A store at the previous head (0003), labels written there.
        migrate(engine, "0003")
        assert "review_claims" not in inspect(engine).get_table_names()
        with Session(engine) as s, s.begin():
            # (items as that revision holds them: digests in hex, written as plain SQL)
            for i in ("p", "q", "r"):
                s.execute(text("INSERT INTO items (id, text, meta, content_key, fingerprint, status, "
                               "created_at, updated_at) VALUES (:id, :body, '{}', :key, :fp, 'ok', '2024-05-01', "
                               "'2024-05-01')"), {"id": i, "body": i, "key": sha256(i.encode()).hexdigest(),
                                                  "fp": sha256(i.encode()).hexdigest()})
            pks = dict(s.execute(text("SELECT id, pk FROM items")).all())
            p, q, r = (pks[i] for i in ("p", "q", "r"))
            s.add(Pair(a_pk=p, b_pk=q, score=0.85, kind="text-reuse", signals={}))
            s.add(Pair(a_pk=p, b_pk=r, score=0.82, kind="text-reuse", signals={}))
            # (a label as that revision holds it: the columns it has)
            s.execute(Label.__table__.insert().values(
                a_pk=p, b_pk=q, decision="duplicate", reviewer="ann",
                created_at=datetime(2024, 5, 1, 8, tzinfo=timezone.utc)))
        expected = [{"a": "p", "b": "q", "decision": "duplicate", "reviewer": "ann",
                     "created_at": "2024-05-01T08:00:00+00:00"}]

        # Up through 0004 (on open), labels intact, the queue and claims working.
        with Platform.open(home, db_url) as platform:
            assert platform.labels() == expected
            session = platform.review_session("bob")
            assert session.current().a["id"] == "p" and session.current().b["id"] == "r"
            # bob's session is left holding its claim: a downgrade drops the claims table.
        with engine.connect() as conn:
            assert conn.scalar(select(ReviewClaim.reviewer)) == "bob"
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                    Base.metadata)
            # The migrations build exactly the mapped review tables.
            assert [d for d in diff if re.search(r"review_claims|<labels>|'labels'", repr(d))] == []

        # Down to 0003 and up again: the claims go and come back empty, labels stay.
        downgrade(engine, "0003")
        assert "review_claims" not in inspect(engine).get_table_names()
        with Session(engine) as s:
            assert s.execute(select(Label.decision, Label.reviewer)).all() == [("duplicate", "ann")]
        with Platform.open(home, db_url) as platform:
            assert platform.labels() == expected
            assert [(x["a"], x["b"]) for x in platform.review_queue("ann")] == [("p", "r")]
    finally:
        engine.dispose()
