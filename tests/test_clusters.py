"""Exact-duplicate clusters and how reviewer labels change them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmdedup import Platform
from mmdedup.score.cluster import accepted_edges, components

CONTENT = ("text", "semantic", "image", "video")  # the content signals

from conftest import write_manifest

ITEMS = [
    {"id": "n1", "text": "国务院办公厅发布通知，要求各地加强防汛工作。"},
    {"id": "n2", "text": "国务院办公厅发布通知, 要求各地加强防汛工作."},
    {"id": "n3", "text": "国务院办公厅发布通知，要求各地加强防汛工作．"},
    {"id": "e1", "text": "The council approved the budget."},
    {"id": "e2", "text": "THE COUNCIL   approved the budget."},
    {"id": "x", "text": "Something unrelated entirely."},
]


@pytest.fixture
def loaded(platform: Platform, tmp_path: Path) -> Platform:
    platform.ingest(write_manifest(tmp_path / "c", ITEMS))
    return platform


def test_exact_duplicates_after_normalisation(loaded: Platform) -> None:
    assert loaded.clusters() == [
        {"canonical": "n1", "members": ["n1", "n2", "n3"]},
        {"canonical": "e1", "members": ["e1", "e2"]},
    ]
    pairs = loaded.pairs("strong")
    assert {(p["a"], p["b"]) for p in pairs} == {("n1", "n2"), ("n1", "n3"), ("n2", "n3"), ("e1", "e2")}
    assert all(p["score"] == 1.0 and p["tier"] == "strong" and p["kind"] == "same-item" for p in pairs)
    assert pairs[0]["signals"] == {"text": 1.0, "image": None, "video": None, "dom": None}


def test_canonical_is_earliest_ingested(platform: Platform, tmp_path: Path) -> None:
    platform.ingest(write_manifest(tmp_path / "c", [{"id": "z-late", "text": "same"}]))
    platform.ingest(write_manifest(tmp_path / "c", [{"id": "a-early", "text": "SAME"}], "m2.jsonl"))
    assert platform.clusters() == [{"canonical": "z-late", "members": ["z-late", "a-early"]}]


def test_labels_split_and_join_clusters(loaded: Platform) -> None:
    loaded.label("e1", "e2", duplicate=False, reviewer="ann")
    assert [c["canonical"] for c in loaded.clusters()] == ["n1"]
    loaded.label("e2", "e1", duplicate=True, reviewer="bob")  # the latest decision wins
    loaded.label("x", "n2", duplicate=True, reviewer="bob")
    clusters = loaded.clusters()
    # the longest text leads the group (26 word characters to the notices' 20)
    assert {"canonical": "x", "members": ["n1", "n2", "n3", "x"]} in clusters
    assert {"canonical": "e1", "members": ["e1", "e2"]} in clusters
    assert loaded.stats()["labels"] == {"distinct": 1, "duplicate": 2}


def test_label_unknown_item_is_a_clear_error(loaded: Platform) -> None:
    with pytest.raises(KeyError, match="nope"):
        loaded.label("n1", "nope", duplicate=True)
    with pytest.raises(ValueError):
        loaded.label("n1", "n1", duplicate=True)


def test_components_and_rejected_edges() -> None:
    edges = accepted_edges([(1, 2, "strong", None), (2, 3, "strong", {"text": 0.95}),
                            (4, 5, "medium", None), (6, 7, "strong", None)],
                           {(6, 7): "distinct", (4, 5): "duplicate"}, 0.7, CONTENT)
    assert components(edges) == [[1, 2, 3], [4, 5]]


def test_partial_reuse_does_not_chain_items_that_share_nothing() -> None:
    """a and b share a picture (different stories); b and c share a story (different
    pictures): both pairs are strong and listed, but a and c share nothing, so the
    pairs whose other medium clearly disagrees join no group."""
    pairs = [(1, 2, "strong", {"image": 1.0, "text": 0.02, "dom": None}),
             (2, 3, "strong", {"text": 0.97, "image": 0.1}),
             (4, 5, "strong", {"text": 0.95, "image": 0.92}),  # the same item
             (6, 7, "strong", {"text": 0.93})]  # text only: nothing to disagree
    assert components(accepted_edges(pairs, {}, 0.7, CONTENT)) == [[4, 5], [6, 7]]
    # a reviewer can still join them
    assert components(accepted_edges(pairs, {(1, 2): "duplicate"}, 0.7, CONTENT)) == [[1, 2], [4, 5], [6, 7]]
