"""Migrations go up and down on both databases, through the API and the alembic command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, inspect

from mmdedup.store.db import downgrade, make_engine, migrate

ROOT = Path(__file__).resolve().parents[1]
TABLES = {"items", "assets", "signatures", "pairs", "labels", "ingest_runs", "failures",
          "model_versions", "word_weights", "doc_freqs", "store_state", "web_sites", "web_blocks",
          "review_claims"}


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


def test_signatures_are_indexed_by_kind_and_version(db_url: str) -> None:
    """Loading one signature kind (index rebuilds, cache stamps) must not scan the table."""
    engine = make_engine(db_url)
    migrate(engine)
    indexes = {i["name"]: i["column_names"] for i in inspect(engine).get_indexes("signatures")}
    engine.dispose()
    assert indexes.get("ix_signatures_kind_version") == ["kind", "version", "item_pk"]
