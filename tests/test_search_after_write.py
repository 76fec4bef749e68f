"""The search an engine runs after writing (the ray engine's workers run it; an ingest
runs it here for items a run cut short left unsearched): an ingest that leaves its texts'
and pictures' search until its chunks are written stores what one searching at each chunk
stores; over every item of a store the search finds each pair the chunks found, once,
with the same scores; and its write replaces what another process wrote meanwhile instead
of failing on it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import text

from mmdedup import Platform
from mmdedup.input.sources import read_items
from mmdedup.pipeline.ray_engine import EngineUnavailable
from mmdedup.pipeline.ingest import local_engine, run_ingest

from helpers import pairs_by_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from concurrent_ingest import corpus  # noqa: E402


def text_pks(p: Platform) -> np.ndarray:
    with p.sessions() as session:
        return np.array(session.execute(text("SELECT pk FROM items ORDER BY pk")).scalars().all(), np.int64)


def picture(path: Path, seed: int, quality: int | None = None) -> None:
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).resize((320, 240), Image.BICUBIC)
    image.save(path, quality=quality) if quality else image.save(path)


def test_an_ingest_searching_after_writing_stores_what_searching_at_each_chunk_stores(
        new_store, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MMDEDUP_INGEST_CHUNK", "16")
    first, second = corpus(40)
    for i in range(6):
        picture(tmp_path / f"p{i}.png", seed=i)
        picture(tmp_path / f"p{i}.jpg", seed=i, quality=60)
    items = [*first, *({"id": f"p{i}.{ext}", "images": [f"p{i}.{ext}"]} for i in range(6)
                       for ext in ("png", "jpg")), *second]
    (home, url), (later, later_url) = new_store("at-each-chunk"), new_store("after")
    with Platform.open(home, url) as p:
        p.ingest(items, root=tmp_path, source_name="batch")
    with Platform.open(later, later_url) as p:
        report = run_ingest(p.sessions, local_engine(read_items(items), tmp_path, p.settings, p.sessions),
                            source="batch", settings=p.settings, signals=p._signals, scorer=p._scorer,
                            exact=p._exact, search=p._search_here, defer=True)
    expected = pairs_by_ids(home, url)
    assert ("p0.jpg", "p0.png") in expected and len(expected) >= 30
    assert pairs_by_ids(later, later_url) == expected
    # (every text and every picture searched once its chunks were written)
    assert report.searched == len(items)


def test_a_search_over_every_item_finds_each_pair_of_the_chunks_once(platform: Platform) -> None:
    first, second = corpus(40)
    platform.ingest(first + second, source_name="batch")
    with platform.sessions() as session:
        stored = {tuple(row) for row in session.execute(text(
            "SELECT a_pk, b_pk FROM pairs WHERE model_version <> 'exact'")).all()}
    assert len(stored) >= 20
    pks = text_pks(platform)
    halves = [platform.searched("text", part, pks) for part in (pks[::2], pks[1::2])]
    found = [(r["a_pk"], r["b_pk"]) for half in halves for r in half.scored.records]
    assert len(found) == len(set(found))  # each pair from one side only
    assert set(found) == stored
    # Every one of them stored already, so each write replaces it.
    assert {pair for half in halves for pair in half.scored.stale} == stored


def test_a_search_written_after_another_process_wrote_the_same_pairs(home: Path, db_url: str) -> None:
    first, second = corpus(40)
    with Platform.open(home, db_url) as p:
        p.ingest(first + second, source_name="batch")
    expected = pairs_by_ids(home, db_url)
    with Platform.open(home, db_url) as p:
        with p.sessions.begin() as session:
            session.execute(text("DELETE FROM pairs WHERE model_version <> 'exact'"))
        pks = text_pks(p)
        # Two searches scored while no pair is stored: the second is written after the
        # first wrote every one of its pairs.
        late, early = p.searched("text", pks, pks), p.searched("text", pks, pks)
        assert late.scored.stale == [] and len(late.scored.records) >= 20
        for found in (early, late):
            with p.sessions.begin() as session:
                p._scorer.write(session, found.scored, elsewhere=True)
    assert pairs_by_ids(home, db_url) == expected


def test_a_search_scoring_for_a_writer_with_an_encoder_this_process_lacks_says_so(
        platform: Platform) -> None:
    """A worker scores with the signals the writer has on: one whose model it cannot load
    (here no CLIP weights) stops the search with the reason, rather than scoring without."""
    first, second = corpus(5)
    platform.ingest(first + second, source_name="batch")
    pks = text_pks(platform)
    assert platform.signal("clip").version() is None
    with pytest.raises(EngineUnavailable, match="the clip signal, on where this ingest writes, is off"):
        platform.searched("text", pks, pks, on=("text", "clip"))
    assert platform.searched("text", pks, pks, on=("text",)).candidates >= 5
