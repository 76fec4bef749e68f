"""A page repeated across a crawl: each copy is compared with at most
`max_candidates_per_item` of the items stored before it (the earliest), the run says what
the cap cut, a search at each chunk and one after writing cut the same candidates, and
texts outside the hot bucket keep every pair they had."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import select, text

from mmdedup import Platform
from mmdedup.index.lsh import BandLSH
from mmdedup.input.sources import read_items
from mmdedup.pipeline.ingest import local_engine, run_ingest
from mmdedup.signals.base import capped_pairs
from mmdedup.store.schema import IngestRun

from helpers import pairs_by_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from concurrent_ingest import corpus  # noqa: E402
from hot_template import copies  # noqa: E402

CAP = 5


def near_pairs(p: Platform) -> list[tuple[int, int]]:
    with p.sessions() as session:
        return [tuple(r) for r in session.execute(text(
            "SELECT a_pk, b_pk FROM pairs WHERE model_version <> 'exact'")).all()]


def earlier_partners(pairs: list[tuple[int, int]]) -> Counter[int]:
    """For each item, how many of its pairs are with an item stored before it."""
    return Counter(max(a, b) for a, b in pairs)


def test_a_capped_bucket_gives_each_query_its_earliest_entries_and_counts_the_rest() -> None:
    rng = np.random.default_rng(3)
    lsh = BandLSH(0.5, num_perm=64)
    hot = np.repeat(rng.integers(0, 2 ** 32, (1, 64), dtype=np.uint64), 40, axis=0)
    lsh.add(np.arange(100, 140), hot)
    lsh.add(np.arange(200, 210), rng.integers(0, 2 ** 32, (10, 64), dtype=np.uint64))
    found = lsh.query(hot[:1], first=CAP)
    assert sorted(set(found.ids.tolist())) == list(range(100, 100 + CAP))
    assert found.passed.tolist() == [lsh.bands * (40 - CAP)]
    whole = lsh.query(hot[:1])
    assert sorted(whole.ids.tolist()) == list(range(100, 140)) and whole.passed.tolist() == [0]
    # A bucket that fits is read whole.
    other = lsh.query(rng.integers(0, 2 ** 32, (1, 64), dtype=np.uint64), first=CAP)
    assert other.passed.tolist() == [0]


def test_entries_of_changed_items_do_not_take_a_capped_buckets_places() -> None:
    """The earliest copies re-ingested with changes leave dead entries at the head of the
    bucket until a compaction: the cut counts live entries, or later copies would find
    none of the copies still stored."""
    rng = np.random.default_rng(4)
    lsh = BandLSH(0.5, num_perm=64)
    hot = np.repeat(rng.integers(0, 2 ** 32, (1, 64), dtype=np.uint64), 40, axis=0)
    lsh.add(np.arange(100, 140), hot)
    assert lsh.remove(np.arange(100, 108)) == 8 and lsh._slots.n_dead == 8  # (below the compaction)
    found = lsh.query(hot[:1], first=CAP)
    assert sorted(set(found.ids.tolist())) == list(range(108, 108 + CAP))
    assert found.passed.tolist() == [lsh.bands * (40 - 8 - CAP)]
    assert sorted(set(lsh.query(hot[:1]).ids.tolist())) == list(range(108, 140))


def test_capped_pairs_keep_the_earliest_before_and_after_each_item_and_each_pair_once() -> None:
    # Item 10 found 1..6 before it and 11..14 after it; 3 is searched in the same pass.
    found = np.array([[10, o] for o in (6, 5, 4, 3, 2, 1, 14, 13, 12, 11, 10)]
                     + [[3, 10], [3, 1]], np.int64)
    pairs, cut, dropped = capped_pairs(found, None, 2)
    assert pairs.tolist() == [[1, 3], [1, 10], [2, 10], [3, 10], [10, 11], [10, 12]]
    assert cut.tolist() == [10] and dropped == 6
    # In a pass over 3 and 10, (3, 10) is 10's (the later one's) to find: 3 keeps only 1.
    pairs, cut, dropped = capped_pairs(found, np.array([3, 10]), 2)
    assert pairs.tolist() == [[1, 3], [1, 10], [2, 10], [10, 11], [10, 12]]
    assert cut.tolist() == [10] and dropped == 6
    empty, cut, dropped = capped_pairs(np.zeros((0, 2), np.int64), None, 2)
    assert empty.shape == (0, 2) and len(cut) == 0 and dropped == 0


def test_a_page_repeated_across_chunks_pairs_each_copy_with_at_most_the_cap(
        new_store, monkeypatch) -> None:
    monkeypatch.setenv("MMDEDUP_INGEST_CHUNK", "16")
    first, second = corpus(30)
    hot = [{"id": f"hot{i:03d}", "text": t} for i, t in enumerate(copies(60))]
    # The copies spread over the run, between texts with a near copy each and unrelated ones.
    records = [*first[:15], *hot[:30], *first[15:], *hot[30:], *second]

    (whole, whole_url), (home, url), (later, later_url) = (new_store(n) for n in ("whole", "at-each-chunk", "after"))
    with Platform.open(whole, whole_url) as p:
        assert not p.ingest(records, source_name="batch").capped  # (60 copies: under the default)
        uncapped = near_pairs(p)
    monkeypatch.setenv("MMDEDUP_MAX_CANDIDATES_PER_ITEM", str(CAP))
    with Platform.open(home, url) as p:
        report = p.ingest(records, source_name="batch")
        capped = near_pairs(p)
        with p.sessions() as session:
            counts = session.execute(select(IngestRun.counts)).scalar_one()
    with Platform.open(later, later_url) as p:
        run_ingest(p.sessions, local_engine(read_items(records), None, p.settings, p.sessions),
                   source="batch", settings=p.settings, signals=p._signals, scorer=p._scorer,
                   exact=p._exact, search=p._search_here, defer=True)

    # Without the cap every copy pairs with nearly every earlier one; with it, each text
    # pairs with at most CAP earlier ones, and every copy but the first still with one.
    assert max(earlier_partners(uncapped).values()) >= 40
    partners = earlier_partners(capped)
    assert max(partners.values()) <= CAP
    with Platform.open(home, url) as p, p.sessions() as session:
        pk = dict(session.execute(text("SELECT pk, id FROM items")).all())
    assert {pk[b] for b in partners} >= {item["id"] for item in hot[1:]}
    # The run says what was cut, and keeps it with the run.
    cut = report.capped["text"]
    assert cut["searches"] >= 50 and cut["dropped"] + cut["passed over"] > 0
    assert f"text: {cut['searches']} searches met max_candidates_per_item" in report.summary()
    assert counts["capped"] == {"text": dict(cut)}
    # Texts outside the hot bucket keep every pair they had.
    expected = pairs_by_ids(whole, whole_url)
    got = pairs_by_ids(home, url)
    outside = {pair for pair in expected if not any(i.startswith("hot") for i in pair)}
    assert len(outside) >= 20 and {pair: got[pair] for pair in outside if pair in got} == \
        {pair: expected[pair] for pair in outside}
    # A search after writing (an engine's) cuts what the search at each chunk cut.
    assert pairs_by_ids(later, later_url) == got


@pytest.mark.parametrize("engine", ["at each chunk", "after writing"])
def test_a_picture_repeated_pairs_each_copy_with_at_most_the_cap(
        new_store, tmp_path: Path, monkeypatch, engine: str) -> None:
    monkeypatch.setenv("MMDEDUP_MAX_CANDIDATES_PER_ITEM", "2")
    monkeypatch.setenv("MMDEDUP_INGEST_CHUNK", "4")
    pixels = np.random.default_rng(5).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    picture = Image.fromarray(pixels).resize((320, 240), Image.BICUBIC)
    items = []
    for q in range(40, 96, 7):  # (one picture saved at 8 qualities: no two files alike)
        picture.save(tmp_path / f"q{q}.jpg", quality=q)
        items.append({"id": f"q{q}", "images": [f"q{q}.jpg"]})
    home, url = new_store("pictures")
    with Platform.open(home, url) as p:
        if engine == "at each chunk":
            report = p.ingest(items, root=tmp_path, source_name="batch")
        else:
            report = run_ingest(p.sessions, local_engine(read_items(items), tmp_path, p.settings, p.sessions),
                                source="batch", settings=p.settings, signals=p._signals, scorer=p._scorer,
                                exact=p._exact, search=p._search_here, defer=True)
        partners = earlier_partners(near_pairs(p))
    assert report.capped["image"]["dropped"] > 0
    # Every copy but the first pairs with the two earliest copies, and no more.
    assert sorted(partners.values()) == [1] + [2] * 6


def test_a_page_stored_many_times_pairs_each_copy_with_its_earliest_exact_copies(
        new_store, monkeypatch) -> None:
    monkeypatch.setenv("MMDEDUP_MAX_EXACT_PAIRS_PER_ITEM", "3")
    monkeypatch.setenv("MMDEDUP_INGEST_CHUNK", "4")
    home, url = new_store("exact")
    with Platform.open(home, url) as p:
        report = p.ingest([{"id": f"e{i}", "text": "Page not found. " * (1 + i % 2)} for i in range(20)],
                          source_name="batch")
        with p.sessions() as session:
            pk = dict(session.execute(text("SELECT pk, id FROM items")).all())
            exact = sorted((pk[a], pk[b]) for a, b in session.execute(text(
                "SELECT a_pk, b_pk FROM pairs WHERE model_version = 'exact'")).all())
    # Two groups of ten (one text, and it twice): each copy pairs with its group's 3 earliest.
    assert report.exact_pairs == len(exact) == 2 * (1 + 2 + 3 * 7)
    for group in (0, 1):
        earliest = {f"e{i}" for i in range(group, 6, 2)}
        members = [f"e{i}" for i in range(group, 20, 2)]
        for m in members[3:]:
            assert {a for a, b in exact if b == m} == earliest
