"""Streams: JSON Lines on standard input or a followed file, a decision a line per record;
a followed stream killed at random moments and started again loses nothing and decides
nothing twice, across a rotation of its file."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from helpers import pairs_by_ids, wait_for
from mmdedup import Platform
from mmdedup.extract.text_sketches import TextSigner
from mmdedup.input.lines import Line, read_lines
from mmdedup.pipeline.stream import batches

STORIES = [
    "the river rose overnight and the old bridge at the mill was closed to all traffic until engineers can inspect it",
    "council votes to fund a new library in the north district after a long debate about the budget for next year",
    "a late goal gave the home side a narrow win in the derby and sent the fans into the streets to celebrate",
    "researchers found that the new alloy keeps its strength at high temperatures which could help jet engines",
    "the museum will open a new wing for modern art next spring after years of work and a large private gift",
]


def records(n: int, seed: int = 0) -> list[dict]:
    """n records: stories, their exact reposts and edited copies, in a shuffled order
    that keeps each story first."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        story = STORIES[i % len(STORIES)].split()
        kind = (i // len(STORIES)) % 3
        if kind == 2:
            story[(i * 7) % len(story)] = f"edit{i}"
        text = " ".join(story) + ("" if kind else f" report {i // 15}")
        out.append({"id": f"r{i}", "text": text if kind != 1 else out[i - len(STORIES)]["text"]})
    rng.shuffle(out[len(STORIES):])
    return out


def run_stream(home: Path, url: str, *args: str, stdin: str | None = None, **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mmdedup", "--home", str(home), "--db", url, "ingest", *args]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_standard_input_gives_a_decision_a_record(home: Path, db_url: str, tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in [
        {"id": "a", "text": STORIES[0]},
        {"id": "b", "text": STORIES[1]},
        {"id": "a-copy", "text": STORIES[0]},
        {"id": "b-edit", "text": STORIES[1].replace("library", "museum")},
        {"id": "c", "text": STORIES[2]},
        {"id": "c", "text": STORIES[2] + " and more"},  # the same id again: an update, next batch
    ]] + ["{not json", json.dumps({"id": "b", "text": STORIES[1]})]
    proc = run_stream(home, db_url, "-", stdin="")
    out, err = proc.communicate("\n".join(lines) + "\n", timeout=300)
    assert proc.returncode == 0, err
    said = [json.loads(line) for line in out.splitlines()]
    assert [(d["id"], d["status"], d["of"]) for d in said] == [
        ("a", "new", None), ("b", "new", None), ("a-copy", "duplicate", "a"),
        ("b-edit", "near-duplicate", "b"), ("c", "new", None), ("c", "new", None),
        ("line 7", "failed", None), ("b", "unchanged", None)]
    assert said[3]["tier"] in ("strong", "medium") and 0.8 <= said[3]["score"] < 1.0
    assert said[6]["reason"] == "malformed_json"
    assert set(said[0]) == {"id", "status", "of", "score", "tier"}
    assert "decisions: 1 duplicate, 1 failed, 1 near-duplicate, 4 new, 1 unchanged" in err
    # The store holds what a batch ingest of the same records holds.
    with Platform.open(tmp_path / "batch", f"sqlite:///{tmp_path / 'batch.db'}") as p:
        p.ingest([json.loads(line) for line in lines if line.startswith("{\"")][:5])
        p.ingest([json.loads(lines[5])])
        expected = {tuple(sorted((x.a, x.b))): round(x.score, 6) for x in p.pairs()}
    assert {k: v[0] for k, v in pairs_by_ids(home, db_url).items()} == expected


def test_a_followed_file_killed_at_random_moments_loses_nothing_and_says_each_once(
        home: Path, db_url: str, tmp_path: Path) -> None:
    """A writer appends records (and rotates the file once) while the stream runs; the
    stream is killed with SIGKILL three times at random moments and started again. In
    the end the store holds every record once, with the pairs a batch ingest of them
    finds, and the --out file a decision line for each record, once."""
    rng = random.Random(7)
    todo = records(120)
    log, out = tmp_path / "feed.jsonl", tmp_path / "decisions.jsonl"
    env = {**os.environ, "MMDEDUP_STREAM_BATCH": "7", "MMDEDUP_STREAM_BATCH_SECONDS": "0.2"}
    written = 0
    done = threading.Event()

    def writer() -> None:
        nonlocal written
        for i, r in enumerate(todo):
            if i == 60:  # rotated, once the stream has said everything so far
                wait_for(lambda: len(said_ids()) >= 60, 300)
                log.rename(tmp_path / "feed.jsonl.1")
            with log.open("a") as fh:
                text = json.dumps(r) + "\n"
                cut = rng.randrange(len(text))  # a line written in two goes
                fh.write(text[:cut])
                fh.flush()
                time.sleep(0.001)
                fh.write(text[cut:])
            written = i + 1
            time.sleep(rng.uniform(0, 0.03))
        done.set()

    def said_ids() -> list[str]:
        return [json.loads(line)["id"] for line in out.read_text().splitlines()] if out.exists() else []

    log.touch()
    feeding = threading.Thread(target=writer, daemon=True)
    feeding.start()
    for _ in range(3):
        proc = run_stream(home, db_url, str(log), "--follow", "--out", str(out), env=env)
        time.sleep(rng.uniform(1.5, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    proc = run_stream(home, db_url, str(log), "--follow", "--out", str(out), "--idle", "3", env=env)
    assert done.wait(300)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    ids = said_ids()
    assert sorted(ids) == sorted(r["id"] for r in todo), "each record said exactly once"
    with Platform.open(tmp_path / "batch", f"sqlite:///{tmp_path / 'batch.db'}") as p:
        p.ingest(todo)
        expected = {tuple(sorted((x.a, x.b))): round(x.score, 6) for x in p.pairs()}
    assert {k: v[0] for k, v in pairs_by_ids(home, db_url).items()} == expected and expected
    with Platform.open(home, db_url) as p:
        assert p.stats()["items"] == len(todo)


def test_a_line_is_read_once_it_ends_and_an_over_long_one_is_only_counted() -> None:
    fh = io.BytesIO(b'{"id": "a"}\n' + b"x" * 50 + b"\n" + b'{"id"')
    growing = iter([True, True, False])
    got = list(read_lines(fh, 40, lambda offset: next(growing)))
    assert got[0] == Line(1, b'{"id": "a"}\n', 12, 0, 12)
    assert got[1] == Line(2, None, 51, 0, 63)
    assert got[2:4] == [None, None]  # the unfinished line waits while the file may grow
    assert got[4] == Line(3, b'{"id"', 5, 0, 68)  # and is read once it will not
    fh.seek(0)
    assert [x.number for x in read_lines(fh, 40, lambda offset: None) if x] == [1, 2]  # stopped: left


def test_batches_close_by_count_and_by_time() -> None:
    stop = threading.Event()

    def slow():
        for i in range(5):
            yield Line(i + 1, b"{}\n", 3)
        time.sleep(0.6)
        yield Line(6, b"{}\n", 3)

    started = time.monotonic()
    got = [(len(b), round(time.monotonic() - started, 1)) for b in batches(slow(), 3, 0.2, 0, stop)]
    assert [n for n, _ in got] == [3, 2, 1]
    assert got[1][1] < 0.5  # the second closed on time, not waiting for the sixth line


def test_a_restart_completes_the_out_file_and_leaves_one_it_did_not_count(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from mmdedup.pipeline.stream import complete_out

    done, last = '{"id": "a"}\n', '{"id": "b"}\n{"id": "c"}\n'
    cursor = SimpleNamespace(out_bytes=len(done + last), last_lines=last)
    for written in ("", last[:5], last):  # killed before, while, after writing the last batch
        out = tmp_path / "out.jsonl"
        out.write_text(done + written)
        assert complete_out(out, cursor) == len(done + last) and out.read_text() == done + last
    out.write_text("")  # not the file the cursor counted (a new one): left as it is
    assert complete_out(out, cursor) == 0 and out.read_text() == ""


def test_two_streams_on_one_store_find_each_others_duplicates(home: Path, db_url: str) -> None:
    """Two stream processes at once, each given the originals of half the stories and
    edited copies of the other half: every copy is paired with its original, whichever
    process wrote it, and exactly one of the two decision lines of each pair names the
    other item (the one written second; the first had nothing to find yet). Each batch
    searches what the other process committed before it (the store is the shared window)."""
    two_streams_find_each_others_duplicates(home, db_url, "")


def two_streams_find_each_others_duplicates(home: Path, db_url: str, config: str) -> list[dict]:
    """The test above on a store with this configuration added; the decision lines."""
    rng = random.Random(5)
    vocabulary = [f"w{n}" for n in range(4000)]
    stories = [[rng.choice(vocabulary) for _ in range(60)] for _ in range(40)]

    def copy(i: int) -> dict:
        words = list(stories[i])
        words[(7 * i) % 60] = "edited"
        return {"id": f"copy{i}", "text": " ".join(words)}

    halves = [[{"id": f"orig{i}", "text": " ".join(stories[i])} for i in range(0, 20)] + [copy(i) for i in range(20, 40)],
              [{"id": f"orig{i}", "text": " ".join(stories[i])} for i in range(20, 40)] + [copy(i) for i in range(0, 20)]]
    for half in halves:
        rng.shuffle(half)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("stream_batch = 2\nstream_batch_seconds = 0.05\n" + config)
    with Platform.open(home, db_url):
        pass  # (the store made once, before both start)
    procs = [run_stream(home, db_url, "-", stdin="") for _ in halves]
    for proc, half in zip(procs, halves):
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in half))
        proc.stdin.close()
    said = []
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        said += [json.loads(line) for line in proc.stdout.read().splitlines()]
    found = pairs_by_ids(home, db_url)
    for i in range(40):
        assert tuple(sorted((f"orig{i}", f"copy{i}"))) in found
        named = [d for d in said if (d["id"], d["of"]) in ((f"orig{i}", f"copy{i}"), (f"copy{i}", f"orig{i}"))]
        assert len(named) == 1 and named[0]["status"] == "near-duplicate"
    assert len(said) == 80
    return said


def test_exact_repeats_take_their_originals_signatures_and_no_decision_changes(
        tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream in which a third of the records repeat the text of one before (stored by
    a batch ingest before the stream started, or by an earlier batch of it): with
    `stream_repeats` the repeats of stored items are not signed (their original's
    signatures are stored for them), and the decision lines, the pairs and the stored
    signatures are those of the same stream without it."""
    rng = random.Random(9)
    vocabulary = [f"w{n}" for n in range(3000)]
    before = [{"id": f"old{i}", "text": " ".join(rng.choice(vocabulary) for _ in range(50))} for i in range(20)]
    todo: list[dict] = []
    for i in range(90):
        if i % 3 == 2:
            # (a text stored before: by the batch ingest, or in an earlier batch of ten)
            todo.append({"id": f"repeat{i}", "text": rng.choice(before + todo[: i - i % 10])["text"]})
        elif i % 3 == 1:
            words = rng.choice(before + todo)["text"].split()
            words[rng.randrange(len(words))] = "edited"
            todo.append({"id": f"edit{i}", "text": " ".join(words)})
        else:
            todo.append({"id": f"new{i}", "text": " ".join(rng.choice(vocabulary) for _ in range(50))})
    signed = []
    real = TextSigner.sign_tokens
    monkeypatch.setattr(TextSigner, "sign_tokens", lambda self, tokens, texts=None:
                        signed.append(len(tokens)) or real(self, tokens, texts))
    runs = {}
    for name, on in (("with", "true"), ("without", "false")):
        home, feed = tmp_path / name, tmp_path / f"{name}.jsonl"
        home.mkdir()
        (home / "config.toml").write_text(f"stream_batch = 10\nstream_repeats = {on}\n")
        feed.write_text("".join(json.dumps(r) + "\n" for r in todo))
        url = db_url if on == "true" else f"sqlite:///{tmp_path / 'without.db'}"
        with Platform.open(home, url) as p:
            p.ingest(before)
            signed.clear()
            out = io.StringIO()
            report = p.stream(feed, follow=True, out=out, idle=1.0)
            with p.sessions() as session:
                stored = dict(session.execute(text(
                    "SELECT i.id, s.value FROM signatures s JOIN items i ON i.pk = s.item_pk WHERE s.kind = 'text'")).all())
        runs[name] = (out.getvalue().splitlines(), pairs_by_ids(home, url), {k: bytes(v) for k, v in stored.items()},
                      sum(signed), report.engine)
    with_, without = runs["with"], runs["without"]
    assert with_[0] == without[0] and len(with_[0]) == len(todo)
    assert with_[1] == without[1]
    assert with_[2] == without[2]
    lent = with_[4]["repeats"]["given stored values"]
    assert lent == 30 and "repeats" not in without[4]
    assert without[3] - with_[3] == lent
    assert sum(json.loads(line)["status"] == "duplicate" for line in with_[0]) == 30
