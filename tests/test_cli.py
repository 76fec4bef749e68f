"""The mmdedup command as users script it: formats, errors, and the installed entry point."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import write_manifest

ITEMS = [
    {"id": "a", "text": "Breaking: river floods the old town."},
    {"id": "b", "text": "breaking:  River floods the old town!"[:-1] + "."},
    {"id": "c", "text": "An unrelated story about apples."},
    '{"id": oops}',
]


def test_ingest_pairs_clusters_label_failures_stats(cli, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "c", ITEMS)
    rc, out, _ = cli("ingest", str(manifest), "--no-progress")
    assert rc == 0 and "3 new" in out and "1 failed" in out and "malformed_json 1" in out

    rc, out, _ = cli("pairs", "--format", "jsonl", "--min-tier", "strong")
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines == [{"a": "a", "b": "b", "score": 1.0, "tier": "strong", "kind": "same-item",
                      "signals": {"text": 1.0, "image": None, "video": None, "dom": None}}]

    rc, out, _ = cli("pairs", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["a"] == "a" and rows[0]["text"] == "1.0" and rows[0]["image"] == ""

    rc, out, _ = cli("pairs")
    assert "same-item" in out and "1 pairs" in out

    rc, out, _ = cli("clusters", "--format", "jsonl")
    assert [json.loads(line) for line in out.splitlines()] == [{"canonical": "a", "members": ["a", "b"]}]

    rc, out, _ = cli("label", "a", "b", "--distinct", "--reviewer", "ann")
    assert rc == 0
    rc, out, _ = cli("clusters", "--format", "jsonl")
    assert out == ""

    rc, out, _ = cli("failures", "--format", "jsonl")
    assert [json.loads(line)["reason"] for line in out.splitlines()] == ["malformed_json"]
    rc, out, _ = cli("failures")
    assert "malformed_json" in out and "line 4" in out

    rc, out, _ = cli("stats", "--format", "json")
    stats = json.loads(out)
    assert stats["items"] == 3 and stats["labels"] == {"distinct": 1} and stats["clusters"] == 0


def test_errors_are_one_line_with_status_2(cli, tmp_path: Path) -> None:
    rc, out, err = cli("ingest", str(tmp_path / "missing.jsonl"))
    assert rc == 2 and "no manifest or folder" in err
    rc, out, err = cli("label", "x", "y", "--duplicate")
    assert rc == 2 and err.strip() == "mmdedup: error: no item with id 'x', 'y'"


def test_installed_console_script(tmp_path: Path, db_url: str) -> None:
    manifest = write_manifest(tmp_path / "c", ITEMS[:2])
    exe = Path(sys.executable).with_name("mmdedup")
    env = {**os.environ, "MMDEDUP_HOME": str(tmp_path / "home"), "MMDEDUP_DATABASE_URL": db_url}
    done = subprocess.run([str(exe), "ingest", str(manifest)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([str(exe), "clusters", "--format", "jsonl"], env=env, capture_output=True,
                          text=True)
    assert json.loads(done.stdout) == {"canonical": "a", "members": ["a", "b"]}
