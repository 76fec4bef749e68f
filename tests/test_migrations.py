"""Migrations go up and down on both databases, through the API and the alembic command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from mmdedup.store.db import downgrade, make_engine, migrate

ROOT = Path(__file__).resolve().parents[1]
TABLES = {"items", "assets", "signatures", "pairs", "labels", "ingest_runs", "failures",
          "model_versions", "word_weights", "doc_freqs", "store_state", "web_sites", "web_blocks",
          "review_claims", "signature_versions", "unsearched", "deletions", "stream_cursors",
          "adapted_thresholds", "text_anchors"}


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate(engine)
    assert tables(db_url) == TABLES
    downgrade(engine, "base")
    assert tables(db_url) == set()
    migrate(engine)
    assert tables(db_url) == TABLES
    engine.dispose()


def test_alembic_command_line(db_url: str) -> None:
    alembic = Path(sys.executable).with_name("alembic")
    env = {**os.environ, "MMDEDUP_DATABASE_URL": db_url}
    for step, expected in (("upgrade", TABLES), ("downgrade", set()), ("upgrade", TABLES)):
        target = "head" if step == "upgrade" else "base"
        done = subprocess.run([str(alembic), step, target], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert tables(db_url) == expected


def test_the_schema_head_constant_is_alembics_head() -> None:
    """Stores at SCHEMA_HEAD open without loading Alembic: it must name the newest migration."""
    from alembic.script import ScriptDirectory

    from mmdedup.store.db import SCHEMA_HEAD, alembic_config

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == SCHEMA_HEAD


def test_signatures_are_indexed_by_version_and_write(db_url: str) -> None:
    """Loading one signature version (index rebuilds, cache stamps, catching up) must not
    scan the table; a version is a small number, not its string in every row."""
    engine = make_engine(db_url)
    migrate(engine)
    indexes = {i["name"]: i["column_names"] for i in inspect(engine).get_indexes("signatures")}
    columns = {c["name"] for c in inspect(engine).get_columns("signatures")}
    engine.dispose()
    assert indexes == {"ix_signatures_version_seq": ["version_id", "seq"],
                       "ix_signatures_version_evicted": ["version_id", "evicted_seq"]}
    assert columns == {"item_pk", "kind", "version_id", "value", "seq", "evicted_seq"}


def test_signatures_keep_their_versions_through_the_version_ids_migration(db_url: str) -> None:
    """A store at 0008 holds version strings in its rows; after 0009 every signature is
    read back under the same version, and an index can still catch up by write number."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    engine = make_engine(db_url)
    migrate(engine, "0008")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO items (id, meta, content_key, fingerprint, status, created_at, "
                          "updated_at) VALUES ('a', '{}', :k1, 'f1', 'ok', '2026-01-01', '2026-01-01'), "
                          "('b', '{}', :k2, 'f2', 'ok', '2026-01-01', '2026-01-01')"),
                     {"k1": "a" * 64, "k2": "b" * 64})
        pks = dict(conn.execute(text("SELECT id, pk FROM items")).all())
        rows = [(pks["a"], "text", "v-long-" + "x" * 200, b"\x01", 1),
                (pks["b"], "text", "v-other", b"\x02", 2),
                (pks["a"], "tokens", "t1", b"\x03", 2)]
        for pk, kind, version, value, seq in rows:
            conn.execute(text("INSERT INTO signatures (item_pk, kind, version, value, created_at, seq) "
                              "VALUES (:pk, :kind, :version, :value, '2026-01-01', :seq)"),
                         {"pk": pk, "kind": kind, "version": version, "value": value, "seq": seq})
    migrate(engine, "0011")  # (0012 marks every text version with the 16-bit layout)
    with Session(engine) as session:  # (read as the store's code of 0011 read them)
        stored = {tuple(r) for r in session.execute(text(
            "SELECT s.item_pk, v.kind, v.version, s.value, s.seq FROM signatures s "
            "JOIN signature_versions v ON v.id = s.version_id WHERE v.kind = s.kind AND v.kind != 'exact'")).all()}
        assert stored == set(rows)
        assert {tuple(r) for r in session.execute(text("SELECT kind, version FROM signature_versions"))} == {
            ("text", "v-long-" + "x" * 200), ("text", "v-other"), ("tokens", "t1"), ("exact", "sha256-first64/1")}
    downgrade(engine, "0008")
    with engine.connect() as conn:
        back = set(conn.execute(text("SELECT item_pk, kind, version, seq FROM signatures")).all())
    engine.dispose()
    assert back == {(pk, kind, version, seq) for pk, kind, version, _, seq in rows}


def test_items_stored_before_the_exact_keys_migration_still_find_their_copies(
        home: Path, db_url: str) -> None:
    """A store made before the content keys lost their SQL index: after migrating, a new
    copy of an old item is still its exact duplicate, and a query still finds the old
    item's exact text."""
    from mmdedup import Platform

    text = "The council approved the library budget on Tuesday after a long debate."
    with Platform.open(home, db_url) as p:
        p.ingest([{"id": "old", "text": text}])
    engine = make_engine(db_url)
    downgrade(engine, "0009")  # the old item as a store before 0010 holds it
    migrate(engine)
    engine.dispose()
    with Platform.open(home, db_url) as p:
        p.ingest([{"id": "copy", "text": text}])
        assert {frozenset((x.a, x.b)): x.kind for x in p.pairs()} == {frozenset(("old", "copy")): "same-item"}
        assert {m.id for m in p.query(text=text) if m.signals.get("text") == 1.0} == {"old", "copy"}


def _schema_and_rows(engine) -> dict:  # noqa: ANN001
    """Everything of a store's schema the inspector sees, and every row, by table; the
    order of the columns is left out (a migration adds a column at the end)."""
    from sqlalchemy import text

    out = {}
    with engine.connect() as conn:
        insp = inspect(conn)
        for name in sorted(insp.get_table_names()):
            out[name] = {
                "columns": sorted((c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                                  for c in insp.get_columns(name)),
                "pk": insp.get_pk_constraint(name),
                "fks": sorted(map(repr, insp.get_foreign_keys(name))),
                "indexes": sorted(map(repr, insp.get_indexes(name))),
                "unique": sorted(map(repr, insp.get_unique_constraints(name))),
                "checks": sorted(map(repr, insp.get_check_constraints(name))),
                "rows": sorted(sorted(r.items()) for r in conn.execute(text(f'SELECT * FROM "{name}"'))
                               .mappings()),
            }
    return out


def test_a_new_store_is_made_as_the_migrations_make_it(db_url: str, monkeypatch) -> None:  # noqa: ANN001
    """A new store is created from the mapped tables instead of by running every migration:
    its schema, seed rows and Alembic version must be exactly the migrations' (a new
    migration that is not also in schema.py, or a seed row left out, fails here)."""
    from sqlalchemy import MetaData

    from mmdedup.store import db

    engine = make_engine(db_url)
    try:
        migrate(engine)
        migrated = _schema_and_rows(engine)
        everything = MetaData()
        everything.reflect(engine)
        everything.drop_all(engine)
        assert tables(db_url) == set() and "alembic_version" not in _schema_and_rows(engine)
        with monkeypatch.context() as patched:  # made without running the migrations
            patched.setattr(db, "migrate", lambda *a, **k: pytest.fail("migrations ran"))
            db.open_store(db_url).kw["bind"].dispose()
        assert db.current_revision(engine) == db.SCHEMA_HEAD
        assert _schema_and_rows(engine) == migrated
    finally:
        engine.dispose()


def test_items_stored_with_hex_digests_are_unchanged_and_found_after_the_binary_digests_migration(
        home: Path, db_url: str) -> None:
    """Digests stored as hex before 0011 become their bytes: a rerun of the same items
    finds them unchanged (fingerprints), a copy is still their exact duplicate (content
    keys) and a query finds the exact text (text hashes); a downgrade gives the hex back."""
    from sqlalchemy import text as sql

    from mmdedup import Platform

    items = [{"id": "old", "text": "The council approved the library budget on Tuesday."},
             {"id": "pic", "title": "Only a title, no text"}]
    with Platform.open(home, db_url) as p:
        p.ingest(items)
        with p.sessions() as session:
            before = session.execute(sql("SELECT id, text_hash, content_key, fingerprint FROM items")).all()
    engine = make_engine(db_url)
    downgrade(engine, "0010")
    with engine.connect() as conn:
        hexed = conn.execute(sql("SELECT id, text_hash, content_key, fingerprint FROM items")).all()
    assert {r[0]: tuple(None if v is None else bytes(v).hex() for v in r[1:]) for r in before} == \
        {r[0]: tuple(r[1:]) for r in hexed}
    assert all(len(v) == 64 for r in hexed for v in r[1:] if v is not None)
    migrate(engine)
    engine.dispose()
    with Platform.open(home, db_url) as p:
        with p.sessions() as session:
            after = session.execute(sql("SELECT id, text_hash, content_key, fingerprint FROM items")).all()
        assert sorted(map(tuple, after)) == sorted(map(tuple, before))
        assert all(len(v) == 32 for r in after for v in r[1:] if v is not None)
        report = p.ingest(items + [{"id": "copy", "text": items[0]["text"]}])
        assert (report.new, report.unchanged) == (1, 2)
        assert {frozenset((x.a, x.b)): x.kind for x in p.pairs()} == {frozenset(("old", "copy")): "same-item"}
        assert {m.id for m in p.query(text=items[0]["text"]) if m.signals.get("text") == 1.0} == {"old", "copy"}


def test_text_signatures_stored_in_32_bits_become_what_signing_again_gives(
        home: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store made before 0012 holds each MinHash position in 32 bits: migrated, every text
    signature is bit for bit what the new code signs (no text is signed again), and the
    store finds a new copy's pairs and answers queries as one made by the new code."""
    from sqlalchemy import text as sql

    from mmdedup import Platform
    from mmdedup.extract import text_sketches

    texts = [f"Notice {i}: the council approved the library budget of {i} thousand on Tuesday after "
             f"a long debate about opening hours, staff and the reading room." for i in range(6)] + ["!!! ... ???"]
    items = [{"id": f"t{i}", "text": t} for i, t in enumerate(texts)]
    query = "SELECT s.item_pk, v.version, s.value FROM signatures s JOIN signature_versions v " \
            "ON v.id = s.version_id WHERE s.kind = 'text' ORDER BY s.item_pk"
    with Platform.open(home, db_url) as p:
        p.ingest(items)
        with p.sessions() as session:
            new = [(pk, version, bytes(value)) for pk, version, value in session.execute(sql(query))]
        signer = p.signal("text").signer
        with monkeypatch.context() as old_code:  # every position in 32 bits, as before 0012
            old_code.setattr(text_sketches, "stored_values", lambda values: values)
            old = signer.sign(texts)
    assert len(new) == len(texts) and all(len(value) == 520 and version.endswith("|b16") for _, version, value in new)
    engine = make_engine(db_url)
    downgrade(engine, "0011")
    with engine.begin() as conn:
        conn.execute(sql("UPDATE signature_versions SET version = substr(version, 1, length(version) - 4) "
                         "WHERE kind = 'text'"))
        for i, (pk, _, _) in enumerate(new):
            blob = old.simhash[i : i + 1].tobytes() + old.wminhash[i].tobytes() + old.minhash[i].tobytes()
            conn.execute(sql("UPDATE signatures SET value = :v WHERE item_pk = :pk AND kind = 'text'"),
                         {"v": blob, "pk": pk})
    migrate(engine)
    with engine.connect() as conn:
        assert [(pk, version, bytes(value)) for pk, version, value in conn.execute(sql(query))] == new
    engine.dispose()
    assert old.empty[-1] and not old.empty[:-1].any() and (old.wminhash[:-1] >= 0xFFFF).any()
    with Platform.open(home, db_url) as p:
        report = p.ingest(items + [{"id": "copy", "text": texts[2] + " Reported by the city desk."}])
        assert (report.new, report.unchanged) == (1, len(items))
        assert {frozenset((x.a, x.b)) for x in p.pairs() if "copy" in (x.a, x.b)} >= {frozenset(("t2", "copy"))}
        assert p.query(text=texts[4])[0].id == "t4"
        with p.sessions() as session:
            assert [r for r in session.execute(sql(query)) if r[0] <= len(new)] == new  # none signed again
