"""Time: an item is compared only with items inside its class's window (by item time, so
a back-filled archive pairs as the live stream did), and `expire` (and every ingest)
deletes the items past their class's retention."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import text

from helpers import pair_map
from mmdedup import Platform

STORY = ("the river rose overnight and the old bridge at the mill was closed to all traffic "
         "until engineers can inspect it, the council said on its website")
NOTICE = ("notice of a public hearing on the proposed change to the zoning of the land north of "
          "the railway station, written objections to the planning office")
OTHER = ("a late goal gave the home side a narrow win in the derby and sent the fans into the "
         "streets to celebrate until the early hours of the morning")

CONFIG = '''class_field = "class"
time_field = "published"

[windows]
news = { window = "7d", keep = "90d" }
notice = { window = "forever" }
'''


def item(id_: str, text: str, kind: str | None, when: datetime | None, edit: int = 0) -> dict:
    words = text.split()
    if edit:
        words[edit] = f"edited{edit}"
    meta = {} if kind is None else {"class": kind}
    if when is not None:
        meta["published"] = when.isoformat()
    return {"id": id_, "text": " ".join(words), "meta": meta}


def day(n: float) -> datetime:
    return datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=n)


STREAM = [
    item("n1", STORY, "news", day(0)),
    item("n2", STORY, "news", day(4), edit=3),         # 4 days after n1: compared
    item("n3", STORY, "news", day(20), edit=5),        # 16 and 20 days after: compared with neither
    item("e1", OTHER, "news", day(0)),
    item("e2", OTHER, "news", day(30)),                # an exact copy, a month later: not compared
    item("m1", NOTICE, "notice", day(-2000)),
    item("m2", NOTICE, "notice", day(0), edit=2),      # five years later: notices are compared forever
    item("x1", OTHER, None, day(400), edit=4),         # no class: compared with all before it
    item("r1", STORY, "notice", day(40), edit=7),      # a notice repeating the news: its class decides
]


@pytest.fixture
def windowed(home: Path, db_url: str):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(CONFIG)
    return home, db_url


def test_an_item_is_compared_only_inside_its_class_window(windowed) -> None:
    home, url = windowed
    with Platform.open(home, url) as p:
        p.ingest(STREAM)
        found = set(pair_map(p))
    assert ("n1", "n2") in found
    assert not {("n1", "n3"), ("n2", "n3")} & found
    assert ("e1", "e2") not in found
    assert ("m1", "m2") in found
    assert ("e1", "x1") in found and ("e2", "x1") in found
    assert {("n1", "r1"), ("n2", "r1"), ("n3", "r1")} <= found


def test_a_back_filled_archive_pairs_as_the_live_stream_did(windowed, tmp_path: Path) -> None:
    """By item time, not by arrival: the stream ingested newest first, one item a run,
    pairs exactly as in time order."""
    home, url = windowed
    with Platform.open(home, url) as p:
        for record in reversed(STREAM):
            p.ingest([record])
        backwards = {k: v["score"] for k, v in pair_map(p).items()}
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "config.toml").write_text(CONFIG)
    with Platform.open(tmp_path / "again", f"sqlite:///{tmp_path / 'again.db'}") as p:
        p.ingest(STREAM)
        forwards = {k: v["score"] for k, v in pair_map(p).items()}
    assert backwards == forwards and forwards


def test_without_windows_every_pair_is_compared(home: Path, db_url: str) -> None:
    with Platform.open(home, db_url) as p:
        p.ingest(STREAM)
        found = set(pair_map(p))
    assert {("n1", "n3"), ("n2", "n3"), ("e1", "e2")} <= found


def test_expire_deletes_what_is_past_its_retention(windowed, cli) -> None:
    """Retention counts back from the class's newest item time, never from later than
    now: an item dated in the future does not age the rest."""
    home, url = windowed
    now = datetime.now(timezone.utc)
    records = [item("old", STORY, "news", now - timedelta(days=200)),
               item("older-copy", STORY, "news", now - timedelta(days=120), edit=3),
               item("recent", OTHER, "news", now - timedelta(days=10)),
               item("typo", NOTICE, "news", now + timedelta(days=1000)),
               item("notice", NOTICE, "notice", now - timedelta(days=3000)),
               item("plain", OTHER, None, now - timedelta(days=3000), edit=2)]
    (home / "config.toml").write_text(CONFIG.replace(', keep = "90d"', ""))  # kept forever, at first
    with Platform.open(home, url) as p:
        assert p.ingest(records).expired == 0
    (home / "config.toml").write_text(CONFIG)
    rc, out, err = cli("expire", "--dry-run")
    assert rc == 0 and sorted(out.split()) == ["old", "older-copy"] and "would delete 2 items" in err
    rc, out, _ = cli("expire", "--format", "json")
    assert rc == 0 and sorted(json.loads(out)["ids"]) == ["old", "older-copy"]
    rc, out, _ = cli("expire", "--format", "json")
    assert json.loads(out)["ids"] == []
    # Every ingest ends with it: a news item back-filled from a year ago goes at once.
    with Platform.open(home, url) as p:
        report = p.ingest([item("archive", STORY, "news", now - timedelta(days=365))])
        assert report.new == 1 and report.expired == 1 and "1 items past their retention deleted" in report.summary()
        assert sorted(i for k in pair_map(p) for i in k if i in ("old", "older-copy", "archive")) == []
        # --before reads the item time too.
        gone = p.delete(before=now - timedelta(days=1000), dry_run=True)
        assert sorted(gone.ids) == ["notice", "plain"]


def test_windows_set_on_a_store_apply_to_its_pairs_at_the_next_retrain(home: Path, db_url: str) -> None:
    """Items stored before class_field and time_field were set get their class and time
    from their meta, and the pairs outside the windows go: the store is then as if it had
    been ingested with these settings."""
    with Platform.open(home, db_url) as p:
        p.ingest(STREAM)
        before = set(pair_map(p))
    assert {("n1", "n3"), ("e1", "e2")} <= before
    (home / "config.toml").write_text(CONFIG)
    with Platform.open(home, db_url) as p:
        report = p.retrain()
        after = set(pair_map(p))
        assert report.windowed == {"items": len(STREAM), "pairs": len(before - after)} and "windows:" in report.summary()
        assert p.retrain().windowed == {"items": 0, "pairs": 0}  # (done once)
    (home.parent / "fresh").mkdir()
    (home.parent / "fresh" / "config.toml").write_text(CONFIG)
    with Platform.open(home.parent / "fresh", f"sqlite:///{home.parent / 'fresh.db'}") as p:
        p.ingest(STREAM)
        expected = set(pair_map(p))
    assert after == expected and not {("n1", "n3"), ("n2", "n3")} & after


# --- the horizon: items behind every window leave the candidate indexes ------------------

HORIZON_CONFIG = '''class_field = "class"
time_field = "published"

[windows]
news = { window = "3d" }
"*" = { window = "2d" }
'''


def daily_stream(days: int) -> list[list[dict]]:
    """Each day four new stories, an edited copy of one from the day before (inside the
    window) and one from five days before (outside it)."""
    rng = random.Random(7)
    vocabulary = [f"w{n}" for n in range(3000)]
    stories: list[str] = []
    out = []
    for d in range(days):
        batch = []
        for k in range(4):
            stories.append(" ".join(rng.choice(vocabulary) for _ in range(40)))
            batch.append(item(f"d{d}-s{k}", stories[-1], "news", day(d)))
        for back in (1, 5):
            if d >= back:
                batch.append(item(f"d{d}-copy{back}", stories[4 * (d - back)], "news", day(d) + timedelta(hours=1),
                                  edit=3 + back))
        out.append(batch)
    return out


def live_ids(platform: Platform) -> dict[str, set[str]]:
    """The items each candidate index holds now, by id."""
    with platform.sessions() as session:
        ids = dict(session.execute(text("SELECT pk, id FROM items")).all())
        text_index = platform.signal("text").index(session)
        exact_index = platform._exact.index(session)
    return {name: {ids[pk] for pk in found.tolist()}
            for name, found in (("simhash", text_index.hamming.ids()), ("lsh", text_index.lsh.ids()),
                                ("exact", exact_index.content.ids()))}


def test_items_behind_every_window_leave_the_indexes_and_nothing_is_missed(home: Path, db_url: str,
                                                                          tmp_path: Path) -> None:
    """Ingested day by day, with every class's window finite ("*" too), an item older than
    the newest item time minus the widest window (3 days) leaves every candidate index,
    in this process, in a new one and in one that had the indexes open. The pairs are
    those of the same stream where nothing leaves (no "*"); the store still holds every
    item."""
    days = daily_stream(12)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(HORIZON_CONFIG)
    with Platform.open(home, db_url) as watcher, Platform.open(home, db_url) as p:
        for n, batch in enumerate(days):
            p.ingest(batch)
            if n == 2:  # (it holds the indexes from here on)
                assert [m.id for m in watcher.query(days[0][0]["text"])][:1] == ["d0-s0"]
        found = pair_map(p)
        if True:
            times = {i["id"]: datetime.fromisoformat(i["meta"]["published"]) for b in days for i in b}
            in_window = {k for k, t in times.items() if t >= max(times.values()) - timedelta(days=3)}
            assert live_ids(p) == {"simhash": in_window, "lsh": in_window, "exact": in_window}
            assert p.expire().evicted == 0  # (nothing more to take out)
        assert live_ids(watcher) == {"simhash": in_window, "lsh": in_window, "exact": in_window}
        # A probe of an evicted story finds nothing; a recent one is found.
        assert not watcher.query(days[2][0]["text"])
        assert [m.id for m in watcher.query(days[11][0]["text"])][:1] == ["d11-s0"]
    with Platform.open(home, db_url) as fresh:
        assert live_ids(fresh) == {"simhash": in_window, "lsh": in_window, "exact": in_window}
        assert len(fresh.pairs()) == len(found)
        with fresh.sessions() as session:
            assert session.scalar(text("SELECT count(*) FROM items")) == sum(map(len, days))
    (tmp_path / "all").mkdir()
    (tmp_path / "all" / "config.toml").write_text(HORIZON_CONFIG.replace('"*" = { window = "2d" }\n', ""))
    with Platform.open(tmp_path / "all", f"sqlite:///{tmp_path / 'all.db'}") as p:
        for batch in days:
            p.ingest(batch)
        assert len(live_ids(p)["lsh"]) == sum(map(len, days))
        everything = pair_map(p)
    assert {k: v["score"] for k, v in found.items()} == {k: v["score"] for k, v in everything.items()}
    paired = {frozenset(k) for k in found}
    assert all(frozenset((f"d{d - 1}-s0", f"d{d}-copy1")) in paired for d in range(1, 12))
    assert not any(frozenset((f"d{d - 5}-s0", f"d{d}-copy5")) in paired for d in range(5, 12))


def test_index_files_saved_before_an_eviction_open_without_a_rebuild(home: Path, db_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    days = daily_stream(8)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(HORIZON_CONFIG)
    with Platform.open(home, db_url) as p:
        for batch in days[:4]:
            p.ingest(batch)  # (each saves its index files)
    from mmdedup.signals.base import Signal

    def refused(*args, **kwargs):
        raise AssertionError("the index was rebuilt from the store")

    with Platform.open(home, db_url) as p:
        monkeypatch.setattr(Signal, "rebuilt_index", refused)
        for batch in days[4:]:
            p.ingest(batch)
        held = live_ids(p)
    with Platform.open(home, db_url) as p:
        assert live_ids(p) == held and "d0-s0" not in held["lsh"] and "d7-s0" in held["lsh"]


def test_widened_windows_bring_evicted_items_back(home: Path, db_url: str) -> None:
    days = daily_stream(8)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(HORIZON_CONFIG)
    with Platform.open(home, db_url) as p:
        for batch in days:
            p.ingest(batch)
        assert "d1-s0" not in live_ids(p)["lsh"]
    (home / "config.toml").write_text(HORIZON_CONFIG.replace('"3d"', '"30d"'))
    with Platform.open(home, db_url) as p:
        report = p.expire()
        assert report.evicted == 0
        assert live_ids(p)["lsh"] == {i["id"] for b in days for i in b}
        assert [m.id for m in p.query(days[1][0]["text"])][:1] == ["d1-s0"]
    (home / "config.toml").write_text(HORIZON_CONFIG.replace('"*" = { window = "2d" }\n', ""))
    with Platform.open(home, db_url) as p:
        p.expire()
        assert len(live_ids(p)["lsh"]) == sum(map(len, days))


def test_the_star_class_sets_the_window_and_keep_of_every_class_not_listed(home: Path, db_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(CONFIG + '"*" = { window = "2d", keep = "5d" }\n')
    records = [item("a", OTHER, None, day(0)), item("b", OTHER, "sport", day(1), edit=3),
               item("c", OTHER, None, day(4), edit=5), item("n", STORY, "news", day(-30)),
               item("late", STORY, "sport", day(9))]
    with Platform.open(home, db_url) as p:
        assert p.ingest(records[:3]).expired == 0
        found = {frozenset(k) for k in pair_map(p)}
        assert frozenset(("a", "b")) in found and frozenset(("b", "c")) not in found
        # "sport" and the unclassed keep 5 days before their newest (day 9): a and b go, c
        # (day 4) stays; news keeps 90 days before its own newest.
        assert p.ingest(records[3:]).expired == 2
        assert {m.id for m in p.query(OTHER)} == {"c"}
        assert {m.id for m in p.query(STORY)} == {"n", "late"}
