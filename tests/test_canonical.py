"""A cluster's canonical member is the original by a documented rule (publication time,
then the fuller copy, then the earliest ingested), not whichever file sorts first."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from PIL import Image
from skimage import data
from sqlalchemy import select

from mmdedup import Platform
from mmdedup.config import CANONICAL_CRITERIA, Settings
from mmdedup.score.canonical import CRITERIA, Facts, canonical, parse_time
from mmdedup.store.schema import Asset, Item

from conftest import write_manifest
from helpers import clip, encode

STORY = ("The city council approved the new budget on Tuesday after a long debate. "
         "Funding for public libraries and parks rises by ten percent next year.")
MORE = " The mayor said the plan balances growth with the needs of older residents."


def test_folder_original_picture_is_canonical_not_the_crop_that_sorts_first(
        platform: Platform, tmp_path: Path) -> None:
    folder = tmp_path / "pics"
    folder.mkdir()
    photo = Image.fromarray(data.astronaut())  # 512 x 512
    photo.save(folder / "astronaut.png")
    photo.crop((12, 12, 500, 500)).save(folder / "astronaut-crop.jpg", quality=90)
    platform.ingest(folder)
    [cluster] = platform.clusters()
    assert cluster["members"] == ["astronaut-crop.jpg", "astronaut.png"]  # ingested in name order
    assert cluster["canonical"] == "astronaut.png"
    with platform.sessions() as session:
        sizes = dict(session.execute(select(Item.id, Asset.width * Asset.height)
                                     .join(Asset, Asset.item_pk == Item.pk)).all())
    assert sizes == {"astronaut.png": 512 * 512, "astronaut-crop.jpg": 488 * 488}


def test_folder_longer_video_is_canonical(platform: Platform, tmp_path: Path, photos) -> None:
    folder = tmp_path / "videos"
    folder.mkdir()
    frames = clip(photos["astronaut"], photos["coffee"])
    encode(frames, path=folder / "launch.mp4")
    encode(frames[12:], path=folder / "launch-cut.mp4", bit_rate=80_000)
    platform.ingest(folder)
    [cluster] = platform.clusters()
    assert cluster["members"][0] == "launch-cut.mp4" and cluster["canonical"] == "launch.mp4"
    with platform.sessions() as session:
        seconds = dict(session.execute(select(Item.id, Asset.duration)
                                       .join(Asset, Asset.item_pk == Item.pk)).all())
    assert seconds["launch.mp4"] == pytest.approx(seconds["launch-cut.mp4"] + 0.5, abs=0.1)


def test_publication_time_wins_over_the_fuller_copy(platform: Platform, tmp_path: Path) -> None:
    platform.ingest(write_manifest(tmp_path / "m", [
        {"id": "repost", "text": STORY + MORE, "meta": {"published": "2024-05-02T09:00:00Z"}},
        {"id": "first", "text": STORY, "meta": {"date": "2024-05-01"}},
        {"id": "undated", "text": STORY},
    ]))
    [cluster] = platform.clusters()
    assert set(cluster["members"]) == {"repost", "first", "undated"}
    assert cluster["canonical"] == "first"


def test_without_times_the_fuller_text_wins_and_ties_go_to_the_earliest(
        platform: Platform, tmp_path: Path) -> None:
    platform.ingest(write_manifest(tmp_path / "m", [
        {"id": "short", "text": STORY},
        {"id": "long", "text": STORY + MORE, "meta": {"published": "not a time"}},
    ]))
    platform.ingest(write_manifest(tmp_path / "m2", [
        {"id": "a", "text": "Exactly the same words, twice over."},
        {"id": "b", "text": "EXACTLY   the same words; twice over!"},  # spacing is no addition
    ]))
    assert {c["canonical"] for c in platform.clusters()} == {"long", "a"}


def test_the_rule_and_time_keys_are_settings(home: Path, db_url: str, tmp_path: Path) -> None:
    items = [{"id": "short", "text": STORY, "meta": {"seen": 1714500000}},
             {"id": "long", "text": STORY + MORE, "meta": {"seen": 1714600000}}]
    (home / "config.toml").write_text('canonical_rule = ["earliest_ingested"]\n')
    with Platform.open(home, db_url) as p:
        p.ingest(write_manifest(tmp_path / "m", items[::-1]))
        assert p.clusters()[0]["canonical"] == "long"  # the first ingested, as before
    (home / "config.toml").write_text('canonical_rule = ["earliest_published", "longest_text"]\n'
                                      'canonical_time_keys = ["seen"]\n')
    with Platform.open(home, db_url) as p:
        assert p.clusters()[0]["canonical"] == "short"  # seen first
    (home / "config.toml").write_text('canonical_rule = ["longest_txt"]\n')
    with pytest.raises(ValueError, match="config.toml.*canonical_rule.*longest_txt.*longest_text"):
        Platform.open(home, db_url)


def test_rule_order_decides() -> None:
    facts = {1: Facts(None, 100, 10, 0.0), 2: Facts(None, 50, 900, 0.0),
             3: Facts(200.0, 10, 0, 0.0), 4: Facts(None, 50, 900, 7.0)}
    assert canonical([1, 2, 3, 4], facts,
                     ("earliest_published", "longest_text", "largest_pictures", "longest_video")) == 3
    assert canonical([1, 2, 4], facts, ("longest_text",)) == 1
    assert canonical([1, 2, 4], facts, ("largest_pictures",)) == 2  # tie with 4: earliest
    assert canonical([1, 2, 4], facts, ("largest_pictures", "longest_video")) == 4
    assert canonical([2, 4], facts, ()) == 2
    with pytest.raises(ValueError, match="canonical_rule"):
        Settings(canonical_rule="longest_text")
    assert CRITERIA == CANONICAL_CRITERIA  # what the setting may name is what is implemented


@pytest.mark.parametrize(("value", "expected"), [
    ("2024-05-01", datetime(2024, 5, 1, tzinfo=timezone.utc)),
    ("2024-05-01T10:00:00Z", datetime(2024, 5, 1, 10, tzinfo=timezone.utc)),
    ("2024-05-01T12:00:00+02:00", datetime(2024, 5, 1, 10, tzinfo=timezone.utc)),
    ("2024-05-01 10:00", datetime(2024, 5, 1, 10, tzinfo=timezone.utc)),
    ("Wed, 01 May 2024 10:00:00 GMT", datetime(2024, 5, 1, 10, tzinfo=timezone.utc)),
    (1714557600, datetime(2024, 5, 1, 10, tzinfo=timezone.utc)),
    (1714557600000, datetime(2024, 5, 1, 10, tzinfo=timezone.utc)),
    (1714557600.5, datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=timezone.utc)),
])
def test_times_are_read_in_the_usual_forms(value: object, expected: datetime) -> None:
    assert parse_time(value) == expected.timestamp()


@pytest.mark.parametrize("value", ["yesterday", "", "2024-13-45", True, None, {"y": 2024},
                                   [2024], float("nan"), 10 ** 30, "9" * 400])
def test_unreadable_times_are_no_time(value: object) -> None:
    assert parse_time(value) is None
