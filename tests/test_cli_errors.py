"""The mmdedup command when things go wrong around it: a store that is missing, read-only,
unreachable or full; output its reader cuts short; item data that would drive the
terminal; and the small things of the command line itself (help, --version, options in
either place)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, make_url
from sqlalchemy.exc import OperationalError

from conftest import PG_URL, write_manifest
from mmdedup.cli import build_parser, main

EXE = Path(sys.executable).with_name("mmdedup")
READ_COMMANDS = [["stats"], ["pairs"], ["clusters"], ["failures"], ["labels"],
                 ["labels", "--export"], ["query", "--text", "river floods the town"]]
RAW = ("\x1b", "\x9b", "\x07", "\u202e")  # ESC, CSI (C1), BEL, right-to-left override


def one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmdedup: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


# --- item data never drives the terminal ----------------------------------------------------

EVIL = "n\x1b[2J\x9b31m\u202eevil"  # clears the screen, colours it, turns it around


def test_control_characters_in_item_data_reach_no_terminal_raw(cli, tmp_path: Path, monkeypatch,
                                                                capsys) -> None:
    text = "Breaking: the river floods the old town, the council meets tonight."
    manifest = write_manifest(tmp_path / "c", [
        {"id": "a", "title": "plain", "text": text},
        {"id": EVIL, "title": "title\x1b]0;owned\x07", "text": text},
        {"id": "m", "text": text + " Later more.", "images": ["missing\x1b[5m.jpg"]},
    ])
    rc, out, err = cli("ingest", str(manifest), "--no-progress")
    assert rc == 0, err
    shown = "n\\x1b[2J\\x9b31m\\u202eevil"
    # The review screen: ids, titles and texts escaped.
    monkeypatch.setattr(sys, "stdin", io.StringIO("q\n"))
    rc, out, err = cli("review", "--reviewer", "ann", "--tiers", "strong,medium,weak")
    assert rc == 0 and "\\x1b]0;owned\\x07" in out and shown in out
    for raw in RAW:
        assert raw not in out

    for args in (["pairs"], ["clusters"], ["failures"], ["query", "--text", text],
                 ["label", "a", EVIL, "--duplicate"], ["labels"], ["label", "a", "nope\x1b[2J",
                                                                    "--distinct"]):
        rc, out, err = cli(*args)
        for raw in RAW:
            assert raw not in out and raw not in err, (args, out, err)
    rc, out, _ = cli("pairs")
    assert shown in out
    rc, out, _ = cli("failures")
    assert "missing\\x1b[5m.jpg" in out
    rc, _, err = cli("label", "a", "nope\x1b[2J", "--distinct")
    one_line_error(rc, err, "nope\\x1b[2J")

    # JSON keeps the data (parsed back, the id is the id) with nothing raw in the text.
    rc, out, _ = cli("pairs", "--format", "jsonl")
    assert EVIL in {json.loads(line)["b"] for line in out.splitlines()}
    assert not any(raw in out for raw in RAW)
    rc, out, _ = cli("query", "--text", text, "--format", "json")
    assert EVIL in {m["id"] for m in json.loads(out)}
    # CSV is data in a pipe, and escaped on a terminal.
    rc, out, _ = cli("pairs", "--format", "csv")
    assert EVIL in {row["b"] for row in csv.DictReader(io.StringIO(out))}
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    rc, out, _ = cli("pairs", "--format", "csv")
    assert shown in out and not any(raw in out for raw in RAW)


# --- stores that are missing, unreachable or of the wrong kind ------------------------------

def test_read_commands_on_a_missing_store_say_so_and_create_nothing(cli, capsys,
                                                                    tmp_path: Path) -> None:
    typo = tmp_path / "hmoe"
    for args in [*READ_COMMANDS, ["report", "--out", str(tmp_path / "r.html")]]:
        rc, _, err = run_main(capsys, "--home", str(typo), *args)
        one_line_error(rc, err, f"no mmdedup store at {typo}", "ingest")
    assert not typo.exists() and not (tmp_path / "r.html").exists()


def test_read_commands_on_a_database_without_tables_create_none(capsys, tmp_path: Path,
                                                                 db_url: str) -> None:
    for args in READ_COMMANDS:
        rc, _, err = run_main(capsys, "--home", str(tmp_path / "h"), "--db", db_url, *args)
        one_line_error(rc, err, "holds no mmdedup store", "ingest")
    if db_url.startswith("sqlite"):
        assert not Path(make_url(db_url).database).exists()
    else:
        engine = create_engine(db_url)
        try:
            assert inspect(engine).get_table_names() == []
        finally:
            engine.dispose()
    # A command that writes creates the store as ever.
    manifest = write_manifest(tmp_path / "c", [{"id": "a", "text": "one"}])
    rc, _, err = run_main(capsys, "--home", str(tmp_path / "h"), "--db", db_url, "ingest",
                          str(manifest), "--no-progress")
    assert rc == 0, err


def test_a_read_command_brings_an_older_store_up_to_date(capsys, tmp_path: Path,
                                                         db_url: str) -> None:
    """A store an earlier release made is upgraded by whichever command comes first, as
    ever: reading does not make a user run an upgrade step of their own."""
    from mmdedup.store.db import make_engine, migrate

    engine = make_engine(db_url)
    migrate(engine, "0005")
    engine.dispose()
    rc, out, err = run_main(capsys, "--home", str(tmp_path / "h"), "--db", db_url, "stats")
    assert rc == 0, err
    engine = create_engine(db_url)
    try:
        assert {"store_state", "review_claims"} <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_an_sqlite_file_without_mmdedup_tables_is_not_a_store(capsys, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE notes (x)").connection.commit()
    rc, _, err = run_main(capsys, "--home", str(tmp_path), "--db", f"sqlite:///{other}", "pairs")
    one_line_error(rc, err, "holds no mmdedup store")
    assert [r[0] for r in sqlite3.connect(other).execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]


@pytest.mark.parametrize(("url", "needles"), [
    ("postgresql+psycopg://postgres@127.0.0.1:1/mmdedup", ("cannot reach", "127.0.0.1:1",
                                                          "running")),
    ("mysql://user@127.0.0.1/mmdedup", ("SQLite or PostgreSQL", "not mysql")),
    ("postgresql+nosuchdriver://user@127.0.0.1/mmdedup", ("driver", "not installed")),
    ("no url at all", ("cannot be read",)),
])
def test_unusable_database_urls_are_one_line(capsys, tmp_path: Path, url: str,
                                             needles: tuple[str, ...]) -> None:
    for args in (["stats"], ["ingest", str(tmp_path)]):
        rc, _, err = run_main(capsys, "--home", str(tmp_path / "h"), "--db", url, *args)
        one_line_error(rc, err, *needles)


@pytest.mark.skipif(PG_URL is None, reason="needs a PostgreSQL server")
@pytest.mark.parametrize(("change", "needles"), [
    ({"database": "no_such_db_x9"}, ("no_such_db_x9 does not exist", "createdb")),
    ({"username": "no_such_user_x9"}, ("refused user no_such_user_x9",)),
])
def test_a_missing_database_or_user_is_one_line(capsys, tmp_path: Path, change: dict,
                                                needles: tuple[str, ...]) -> None:
    url = make_url(PG_URL).set(**change).render_as_string(hide_password=False)
    for args in (["stats"], ["ingest", str(tmp_path)]):
        rc, _, err = run_main(capsys, "--home", str(tmp_path / "h"), "--db", url, *args)
        one_line_error(rc, err, *needles)


def test_a_home_that_is_a_file(capsys, tmp_path: Path) -> None:
    home = tmp_path / "store"
    home.write_text("not a folder")
    for args in (["stats"], ["ingest", str(tmp_path)]):
        rc, _, err = run_main(capsys, "--home", str(home), *args)
        one_line_error(rc, err, f"{home} is a file")


# --- a read-only store ---------------------------------------------------------------------

def read_only(home: Path) -> Callable[..., subprocess.CompletedProcess]:
    """A runner of `mmdedup` that cannot write `home`: the folder's permissions taken away
    for a user, a read-only bind mount of it for root (whom permissions do not stop)."""
    if os.geteuid() != 0:
        for path in [home, *home.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)

        def run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(EXE), *args], capture_output=True, text=True)
        return run
    if shutil.which("unshare") is None:
        pytest.skip("no unshare to mount the store read-only for root")
    mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["unshare", "-m", "sh", "-c", mount, str(home), str(EXE), *args],
                              capture_output=True, text=True)
    probe = run("--version")
    if probe.returncode != 0:
        pytest.skip(f"cannot mount read-only here: {probe.stderr.strip()}")
    return run


def test_a_read_only_store_answers_every_read_command(tmp_path: Path, db_url: str,
                                                      capsys) -> None:
    home = tmp_path / "home"
    manifest = write_manifest(tmp_path / "c", [
        {"id": "a", "text": "Breaking: river floods the old town."},
        {"id": "b", "text": "Breaking: river floods the old town."},
        '{"id": oops}'])
    rc, _, err = run_main(capsys, "--home", str(home), "--db", db_url, "ingest", str(manifest),
                          "--no-progress")
    assert rc == 0, err
    before = sorted((p.name, p.stat().st_size) for p in home.rglob("*"))
    run = read_only(home)
    try:
        for args in [*READ_COMMANDS, ["report", "--out", str(tmp_path / "r.html")]]:
            done = run("--home", str(home), "--db", db_url, *args)
            assert done.returncode == 0, (args, done.stderr)
            assert "Traceback" not in done.stderr
        done = run("--home", str(home), "--db", db_url, "pairs", "--format", "jsonl")
        assert [json.loads(line)["b"] for line in done.stdout.splitlines()] == ["b"]
        assert (tmp_path / "r.html").stat().st_size > 0
        if db_url.startswith("sqlite"):  # the database lives in the home: ingest can't write
            done = run("--home", str(home), "ingest", str(manifest))
            one_line_error(done.returncode, done.stderr, "read-only", "stats, pairs")
    finally:
        for path in [home, *home.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    after = sorted((p.name, p.stat().st_size) for p in home.rglob("*")
                   if not p.name.endswith(("-wal", "-shm")))
    assert after == [x for x in before if not x[0].endswith(("-wal", "-shm"))]


# --- a full disk ---------------------------------------------------------------------------

def test_a_full_disk_is_one_line(cli, tmp_path: Path, db_url: str, monkeypatch) -> None:
    """The driver's disk-full error, raised where the store writes a chunk (SQLite's
    message, PostgreSQL's SQLSTATE 53100), becomes one line naming it."""
    from mmdedup.store import items

    if db_url.startswith("sqlite"):
        cause: Exception = sqlite3.OperationalError("database or disk is full")
    else:
        cause = psycopg.errors.DiskFull("could not extend file: No space left on device")

    def full(*_: object, **__: object) -> None:
        raise OperationalError("INSERT INTO items ...", {}, cause)

    monkeypatch.setattr(items, "fingerprints", full)
    manifest = write_manifest(tmp_path / "c", [{"id": "a", "text": "one"}])
    rc, _, err = cli("ingest", str(manifest), "--no-progress")
    one_line_error(rc, err, "full", "free some space", "run the command again")


def test_a_really_full_disk(tmp_path: Path) -> None:
    """The same on a 1 MiB file system (a tmpfs, where this user may mount one)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting a tmpfs needs root")
    manifest = write_manifest(tmp_path / "c", [
        {"id": f"i{i}", "text": " ".join(f"w{(i * 7 + k) % 3001}" for k in range(80))}
        for i in range(2000)])
    home = tmp_path / "small"
    home.mkdir()
    mount = 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"'
    done = subprocess.run(["unshare", "-m", "sh", "-c", mount, str(home), str(EXE), "--home",
                           str(home), "ingest", str(manifest), "--no-progress"],
                          capture_output=True, text=True)
    if done.returncode != 2 and ("mount:" in done.stderr or "unshare:" in done.stderr):
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    one_line_error(done.returncode, done.stderr, "full", "free some space")


# --- output cut short ----------------------------------------------------------------------

def test_output_cut_short_by_its_reader_ends_quietly(tmp_path: Path, db_url: str, capsys) -> None:
    home = tmp_path / "home"
    records = [{"id": f"g{g}-{k}", "text": f"story {g} of the river town, number {g * 7}"}
               for g in range(60) for k in range(4)] + ["{bad"] * 50
    rc, _, err = run_main(capsys, "--home", str(home), "--db", db_url, "ingest",
                          str(write_manifest(tmp_path / "c", records)), "--no-progress")
    labels = tmp_path / "labels.csv"
    labels.write_text("a,b,decision\n" + "".join(f"g{g}-0,g{g}-1,duplicate\n" for g in range(60)))
    run_main(capsys, "--home", str(home), "--db", db_url, "label", "--file", str(labels))
    base = [str(EXE), "--home", str(home), "--db", db_url]
    for args in (["pairs"], ["pairs", "--format", "csv"], ["clusters"], ["labels", "--export"],
                 ["failures", "--format", "jsonl"], ["stats"]):
        # The reader is gone before the first line is written...
        proc = subprocess.Popen([*base, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait() == 141 and err == "", (args, err)
        if args[0] not in ("pairs", "clusters") or "--format" in args:
            continue
        # ... or leaves after one, as `head -1` does.
        done = subprocess.run(["sh", "-c", '"$@" | head -1', "sh", *base, *args],
                              capture_output=True, text=True)
        assert done.returncode == 0 and done.stderr == "" and done.stdout, (args, done.stderr)


# --- the command line ----------------------------------------------------------------------

def test_version_and_help(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("mmdedup ")
    parser = build_parser()
    assert "near-duplicate" in parser.description and "Platform" not in parser.description
    missing = []

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for command, sub in action.choices.items():
                    if not helps.get(command):
                        missing.append(command)
                    walk(sub, command)
            elif not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    walk(parser, "mmdedup")
    assert not missing, missing


def test_help_and_usage_errors_load_no_platform() -> None:
    """`--help`, `--version` and a mistyped command answer before the store, the signals
    and their libraries are imported (they took a second to load before any of them)."""
    heavy = ["sqlalchemy", "numpy", "scipy", "torch", "alembic", "mmdedup.api", "PIL"]
    probe = ("import sys\nfrom mmdedup.cli import main\n"
             "for argv in (['--help'], ['--version'], ['pairs', '--help'], ['no-such-command']):\n"
             "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
             f"print([m for m in {heavy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    # and the Python API still finds what it exports
    done = subprocess.run([sys.executable, "-c", "import mmdedup; print(mmdedup.Platform.open.__name__)"],
                          capture_output=True, text=True)
    assert done.stdout.strip() == "open", done.stderr


def test_store_options_after_the_command(capsys, home: Path, db_url: str, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "c", [{"id": "a", "text": "x y"}, {"id": "b", "text": "x y"}])
    rc, _, err = run_main(capsys, "ingest", str(manifest), "--home", str(home), "--db", db_url,
                          "--no-progress")
    assert rc == 0, err
    rc, out, _ = run_main(capsys, "pairs", "--format", "jsonl", "--home", str(home), "--db", db_url)
    assert [json.loads(line)["b"] for line in out.splitlines()] == ["b"]
    # After the command, it wins over the one before.
    rc, _, err = run_main(capsys, "--home", str(tmp_path / "typo"), "pairs", "--home", str(home),
                          "--db", db_url)
    assert rc == 0, err


def test_options_that_would_be_ignored_or_make_no_sense_are_refused(cli, capsys) -> None:
    for args, needle in ((["labels", "--format", "csv"], "--export"),
                         (["ingest", ".", "--workers", "0"], "--workers"),
                         (["query", "--text", "x", "--k", "0"], "--k")):
        with pytest.raises(SystemExit) as exit_:
            cli(*args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and needle in err.splitlines()[-1], err


# --- failures ------------------------------------------------------------------------------

def test_failures_list_a_still_failing_record_once_with_a_time_zone(cli, tmp_path: Path) -> None:
    good = {"id": "a", "text": "fine"}
    manifest = write_manifest(tmp_path / "c", [good, {"id": "b", "text": " "}])
    for _ in range(3):
        rc, _, _ = cli("ingest", str(manifest), "--no-progress")
    rc, out, _ = cli("failures", "--all", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["reason"], r["resolved"]) for r in rows] == [
        ("b", "empty_content", False)]
    at = datetime.fromisoformat(rows[0]["at"])
    assert at.utcoffset() == timedelta(0)
    assert abs(datetime.now(at.tzinfo) - at) < timedelta(minutes=5)
    write_manifest(tmp_path / "c", [good, {"id": "b", "text": "mended"}])
    cli("ingest", str(manifest), "--no-progress")
    rc, out, _ = cli("failures", "--all", "--format", "jsonl")
    assert [(json.loads(line)["key"], json.loads(line)["resolved"])
            for line in out.splitlines()] == [("b", True)]
    rc, out, _ = cli("failures", "--format", "jsonl")
    assert out == ""


# --- query -------------------------------------------------------------------------------

def test_query_prints_a_table_by_default_and_json_when_asked(cli, tmp_path: Path) -> None:
    text = "Breaking: the river floods the old town, the council meets tonight."
    cli("ingest", str(write_manifest(tmp_path / "c", [{"id": "a", "text": text}])), "--no-progress")
    rc, out, _ = cli("query", "--text", text)
    assert rc == 0 and "1 matches" in out and "│ a " in out
    rc, out, _ = cli("query", "--text", text, "--format", "json")
    assert [m["id"] for m in json.loads(out)] == ["a"]


def test_query_by_page_scores_the_dom_signal_as_pairs_do(cli, tmp_path: Path) -> None:
    pages = Path(__file__).parent / "data" / "web"
    folder = tmp_path / "crawl"
    folder.mkdir()
    for name in ("en_a1.html", "en_b1.html"):
        shutil.copy(pages / name, folder / name)
    cli("ingest", str(folder), "--no-progress")
    rc, out, _ = cli("pairs", "--format", "jsonl")
    pair = json.loads(out.splitlines()[0])
    rc, out, _ = cli("query", "--html", str(pages / "en_a1.html"), "--format", "json")
    found = {m["id"]: m["signals"] for m in json.loads(out)}
    assert found["en_a1.html"]["dom"] == pytest.approx(1.0)
    assert found["en_b1.html"]["dom"] == pytest.approx(pair["signals"]["dom"])
