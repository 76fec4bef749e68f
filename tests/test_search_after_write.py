"""The search an engine runs after writing (the ray engine's workers run it; an ingest
runs it here for items a run cut short left unsearched): over every item of a store it
finds each pair the chunks found, once, with the same scores; and its write replaces
what another process wrote meanwhile instead of failing on it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sqlalchemy import text

from mmdedup import Platform

from helpers import pairs_by_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from concurrent_ingest import corpus  # noqa: E402


def text_pks(p: Platform) -> np.ndarray:
    with p.sessions() as session:
        return np.array(session.execute(text("SELECT pk FROM items ORDER BY pk")).scalars().all(), np.int64)


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
