"""A window shared through Redis (`window_store`): the pairs and query results of the
indexes in memory; two stream processes find each other's duplicates through it; Redis
restarted mid-stream is rebuilt from the store and nothing is missed; deleted and evicted
items leave it; an unreachable server is a clear error."""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

import pytest
import redis
from sqlalchemy import text

from helpers import pair_map, pairs_by_ids, wait_for
from mmdedup import Platform
from mmdedup.index.redis_window import WindowSlot
from test_stream import run_stream, two_streams_find_each_others_duplicates
from test_tfidf_refresh import CHUNK, MIN_DOCS, outcome
from test_tfidf_refresh import corpus as refresh_corpus
from test_windows import HORIZON_CONFIG, daily_stream


class RedisServer:
    """A Redis server of the test's own on a free port of 127.0.0.1, without persistence,
    so that a restart loses everything, as a restarted cache server does. Where no
    redis-server binary is installed: a database of the machine's server, and a restart
    is its flush with every client cut off."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.binary = shutil.which("redis-server")
        self.proc: subprocess.Popen | None = None
        if self.binary:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port, self.db = s.getsockname()[1], 0
        else:
            self.port, self.db = 6379, random.randrange(1, 16)
        self.url = f"redis://127.0.0.1:{self.port}/{self.db}"
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, db=self.db)

    def start(self) -> None:
        if self.binary:
            self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                                          "--save", "", "--appendonly", "no", "--dir", str(self.tmp)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._up, 30)
        if not self.binary:
            self.client().flushdb()

    def _up(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.exceptions.ConnectionError:
            return False

    def restart(self) -> None:
        if self.binary:
            self.stop()
            self.start()
        else:
            client = self.client()
            client.flushdb()
            client.client_kill_filter(_type="normal", skipme=True)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        elif not self.binary:
            self.client().flushdb()

    def window_pks(self, part: str = "text:*:h") -> set[int]:
        """The items a part of the window holds a record of (text SimHash by default):
        128 records a hash, item pk // 128 naming the hash and pk % 128 the field."""
        client = self.client()
        return {int(k.rsplit(b":", 1)[1], 16) * 128 + int(field)
                for k in client.scan_iter(match=f"mmdedup:*:{part}:i:*") for field in client.hkeys(k)}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    s = RedisServer(tmp_path)
    try:
        yield s
    finally:
        s.stop()


def corpus(n: int, seed: int = 3) -> list[dict]:
    """n stories of 60 words, then edited copies of a third of them, exact reposts of a
    tenth, and a few short texts."""
    rng = random.Random(seed)
    vocabulary = [f"w{k}" for k in range(5000)]
    stories = [[rng.choice(vocabulary) for _ in range(60)] for _ in range(n)]
    out = [{"id": f"s{i}", "text": " ".join(s)} for i, s in enumerate(stories)]
    for i in range(0, n, 3):
        words = list(stories[i])
        for k in rng.sample(range(60), 1 + i % 5):
            words[k] = f"edit{k}"
        out.append({"id": f"copy{i}", "text": " ".join(words)})
    out += [{"id": f"repost{i}", "text": out[i]["text"]} for i in range(0, n, 10)]
    out += [{"id": f"short{i}", "text": f"brief note {i % 4}"} for i in range(6)]
    return out


def store(home: Path, config: str = "") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)
    return home


def test_pairs_queries_and_deletions_through_redis_are_those_of_the_indexes_in_memory(
        tmp_path: Path, db_url: str, server: RedisServer) -> None:
    """The same texts ingested in three batches into a store whose window is in Redis and
    into one whose indexes are in memory: the same pairs, score for score, and the same
    query results; after a deletion, the same again, and the deleted items are gone from
    the window. The processes kept no index files of the shared signals."""
    items = corpus(240)
    random.Random(1).shuffle(items)
    shared = store(tmp_path / "shared", f'window_store = "{server.url}"\n')
    with Platform.open(shared, db_url) as a, \
            Platform.open(store(tmp_path / "local"), f"sqlite:///{tmp_path / 'local.db'}") as b:
        for part in (items[:100], items[100:200], items[200:]):
            a.ingest(part)
            b.ingest(part)
        pairs = pair_map(b)
        assert pair_map(a) == pairs and len(pairs) > 100
        for probe in ("s3", "copy9", "short1"):
            wanted = next(r["text"] for r in items if r["id"] == probe)
            assert [(m.id, round(m.score, 6)) for m in a.query(wanted)] == \
                [(m.id, round(m.score, 6)) for m in b.query(wanted)]
            assert a.query(wanted)
        before = server.window_pks()
        assert len(before) == len(items)
        gone = ["s0", "copy0", "s9", "repost10"]
        a.delete(gone)
        b.delete(gone)
        assert pair_map(a) == pair_map(b)
        assert not {m.id for m in a.query(items[0]["text"])} & set(gone)
        a.ingest([{"id": "late", "text": next(r["text"] for r in items if r["id"] == "s3")}])
        assert len(server.window_pks()) == len(items) - len(gone) + 1
    assert not list((shared / "index").glob("text-*")) and not list((shared / "index").glob("exact-*"))


def test_two_streams_sharing_redis_find_each_others_duplicates(home: Path, db_url: str,
                                                               server: RedisServer) -> None:
    """test_stream's two streams at once, on one store and one Redis window: every copy is
    paired with its original whichever process wrote it, through the window; neither
    process kept a text index of its own."""
    said = two_streams_find_each_others_duplicates(home, db_url, f'window_store = "{server.url}"\n')
    assert len(said) == 80 and len(server.window_pks()) == 80
    assert not list((home / "index").glob("text-*"))


def test_redis_restarted_mid_stream_is_rebuilt_and_nothing_is_missed(home: Path, db_url: str, tmp_path: Path,
                                                                     server: RedisServer) -> None:
    """A followed stream whose Redis server is killed and started again, empty, at random
    moments while records arrive: the stream goes on, the window is rebuilt from the store
    each time, and the pairs are those of a batch ingest of the same records."""
    rng = random.Random(11)
    items = corpus(120, seed=4)  # (under tfidf_min_docs: the scores of a batch ingest, to the digit)
    rng.shuffle(items)
    log, out = tmp_path / "feed.jsonl", tmp_path / "decisions.jsonl"
    store(home, f'stream_batch = 5\nstream_batch_seconds = 0.1\nwindow_store = "{server.url}"\n')
    log.touch()
    proc = run_stream(home, db_url, str(log), "--follow", "--out", str(out), "--idle", "4")
    restarts = 0

    def said() -> int:
        return len(out.read_text().splitlines()) if out.exists() else 0

    def writer() -> None:
        nonlocal restarts
        for i, r in enumerate(items):
            with log.open("a") as fh:
                fh.write(json.dumps(r) + "\n")
            time.sleep(rng.uniform(0, 0.01))
            if i in (60, 120, 170):
                if i == 60:
                    wait_for(lambda: said() >= 40, 120)  # (the window holds something to lose)
                server.restart()
                restarts += 1

    feeding = threading.Thread(target=writer, daemon=True)
    feeding.start()
    feeding.join(300)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert restarts == 3 and said() == len(items)
    with Platform.open(store(tmp_path / "batch"), f"sqlite:///{tmp_path / 'batch.db'}") as p:
        p.ingest(items)
        expected = {tuple(sorted((x.a, x.b))): round(x.score, 6) for x in p.pairs()}
    assert {k: v[0] for k, v in pairs_by_ids(home, db_url).items()} == expected and len(expected) > 50
    assert len(server.window_pks()) == len(items)


def test_items_behind_the_horizon_leave_the_redis_window_and_its_keys_expire(home: Path, db_url: str,
                                                                            server: RedisServer) -> None:
    """Day by day under windows whose widest is 3 days: the window in Redis holds the items
    inside the horizon only, the pairs are those of the indexes in memory, and every key
    expires by itself two widest windows after its last write."""
    days = daily_stream(9)
    store(home, f'window_store = "{server.url}"\n' + HORIZON_CONFIG)
    local = store(home.parent / "local", HORIZON_CONFIG)
    with Platform.open(home, db_url) as p, Platform.open(local, f"sqlite:///{local / 'store.db'}") as q:
        for batch in days:
            p.ingest(batch)
            q.ingest(batch)
        assert pair_map(p) == pair_map(q)
        with p.sessions() as session:
            ids = dict(session.execute(text("SELECT pk, id FROM items")).all())
    times = {i["id"]: datetime.fromisoformat(i["meta"]["published"]) for b in days for i in b}
    in_window = {k for k, t in times.items() if t >= max(times.values()) - timedelta(days=3)}
    assert {ids[pk] for pk in server.window_pks()} == in_window
    assert {ids[pk] for pk in server.window_pks("exact:*:c")} == in_window
    client = server.client()
    entries = [k for k in client.scan_iter(match="mmdedup:*", count=1000) if k.count(b":") > 3]
    ttls = {client.ttl(k) for k in entries}
    assert entries and max(ttls) <= 2 * 3 * 86400 and min(ttls) > 2 * 3 * 86400 - 600


def test_an_unreachable_window_store_is_a_clear_error_and_writes_nothing(home: Path, db_url: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (closed once the block ends: nothing listens there)
    store(home, f'window_store = "redis://127.0.0.1:{port}/0"\n')
    with Platform.open(home, db_url) as p:
        with pytest.raises(ValueError, match=f"window_store = 'redis://127.0.0.1:{port}/0': Redis cannot be reached"):
            p.ingest([{"id": "a", "text": "a text that cannot be indexed while its window is away"}])
        assert p.stats()["items"] == 0


def test_a_tf_idf_refresh_in_steps_hands_its_redis_window_over_without_a_rebuild(
        tmp_path: Path, db_url: str, server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TF-IDF refresh in steps, begun in one process and switched in the next: its
    pending index is built in the shared window as it signs, and becomes the active index
    of its version when it switches, so no window is ever built twice (a rebuild of the
    whole window would stall the batch that switches). The signatures and pairs are those
    of the same ingests with the indexes in memory."""
    config = f"tfidf_min_docs = {MIN_DOCS}\ningest_chunk = {CHUNK}\ntfidf_refresh_at_once = 0\n"
    items, designed = refresh_corpus(760)
    started: list[str] = []
    start = WindowSlot.start
    monkeypatch.setattr(WindowSlot, "start", lambda slot: started.append(slot.name) or start(slot))
    shared = store(tmp_path / "shared", config + f'window_store = "{server.url}"\n')
    local = store(tmp_path / "local", config)
    for part in (items[:400], items[400:]):  # (each in a process of its own, as it were)
        with Platform.open(shared, db_url) as p:
            p.ingest(part)
            assert p.signal("text").refreshes <= 1
        with Platform.open(local, f"sqlite:///{tmp_path / 'local.db'}") as p:
            p.ingest(part)
    with Platform.open(shared, db_url) as p:
        got = outcome(p)
    with Platform.open(local, f"sqlite:///{tmp_path / 'local.db'}") as p:
        expected = outcome(p)
    assert got == expected and designed <= got[2]
    assert len(started) == len(set(started)) == 3  # (exact keys, text before and after the refresh)
    assert len(server.window_pks()) == len(items)
    # The window of the version the refresh left went with it.
    states = [k for k in server.client().scan_iter(match="mmdedup:*") if k.count(b":") == 3]
    assert sorted(k.split(b":")[2] for k in states) == [b"exact", b"text"]
