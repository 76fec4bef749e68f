"""Time: an item is compared only with items inside its class's window (by item time, so
a back-filled archive pairs as the live stream did), and `expire` (and every ingest)
deletes the items past their class's retention."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

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
