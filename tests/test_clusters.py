"""Exact-duplicate clusters and how reviewer labels change them."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from sqlalchemy import text

from mmdedup import Platform
from mmdedup.store import queries
from mmdedup.store.schema import Pair
from mmdedup.score.cluster import accepted_edges, components

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
    strong = [np.array([[1, 2], [2, 3]]), np.array([[6, 7]])]
    assert components(accepted_edges(strong, {(6, 7): "distinct", (4, 5): "duplicate"})) == [[1, 2, 3], [4, 5]]


def test_partial_reuse_does_not_chain_items_that_share_nothing(platform: Platform, tmp_path: Path) -> None:
    """a and b share a picture (different stories); b and c share a story (different
    pictures): both pairs are strong and listed, but a and c share nothing, so the
    pairs whose other medium clearly disagrees join no group."""
    words = [f"w{k}x{j}" for k in range(1, 8) for j in range(40)]
    platform.ingest(write_manifest(tmp_path / "c", [{"id": f"i{k}", "text": " ".join(words[(k - 1) * 40:k * 40])}
                                                    for k in range(1, 8)]))
    assert platform.pairs() == []
    signals = {(1, 2): {"image": 1.0, "text": 0.02, "dom": None},
               (2, 3): {"text": 0.97, "image": 0.1},
               (4, 5): {"text": 0.95, "image": 0.92},  # the same item
               (6, 7): {"text": 0.93, "semantic": None}}  # text only: nothing to disagree
    with platform.sessions() as s, s.begin():
        pk = {int(i[1:]): n for n, i in s.execute(text("SELECT pk, id FROM items"))}
        s.add_all(Pair(a_pk=pk[a], b_pk=pk[b], score=0.95, kind="text-reuse", signals=v)
                  for (a, b), v in signals.items())
    assert len(platform.pairs("strong")) == 4
    assert platform.clusters() == [{"canonical": "i4", "members": ["i4", "i5"]},
                                   {"canonical": "i6", "members": ["i6", "i7"]}]
    platform.label("i1", "i2", duplicate=True)  # a reviewer can still join them
    assert [c["members"] for c in platform.clusters()] == [["i1", "i2"], ["i4", "i5"], ["i6", "i7"]]


@pytest.mark.parametrize("batch", [1, 7, 500, 100_000])
def test_components_over_batches_are_networkx_components(batch: int) -> None:
    """Groups joined across many batches (a chain whose links arrive in reverse, so each
    batch merges roots an earlier one made) come out as one graph's components do."""
    rng = np.random.default_rng(batch)
    edges = np.concatenate([rng.integers(0, 3000, size=(2000, 2)),
                            np.stack([np.arange(5000, 5400), np.arange(5001, 5401)], 1)[::-1]])
    edges = edges[edges[:, 0] != edges[:, 1]]
    want = sorted(sorted(g) for g in nx.connected_components(nx.Graph(edges.tolist())))
    got = components(edges[i:i + batch] for i in range(0, len(edges), batch))
    assert got == want and len(got) > 100 and [5000 + i for i in range(401)] in got


def test_no_edges_make_no_groups() -> None:
    assert components([]) == [] and components([np.zeros((0, 2), np.int64)]) == []


def test_pairs_read_a_batch_at_a_time_are_the_pairs_in_order(loaded: Platform, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    loaded.ingest(write_manifest(tmp_path / "c", [{"id": "e3", "text": "The council approved the budget!"},
                                                  {"id": "n4", "text": "国务院办公厅发布通知，要求各地加强防汛工作!"}],
                                 "more.jsonl"))
    whole = [p.as_dict() for p in loaded.pairs()]
    assert len(whole) > 5 and [p["score"] for p in whole] == sorted((p["score"] for p in whole), reverse=True)
    read = queries.pairs_in_tiers
    monkeypatch.setattr(queries, "pairs_in_tiers", lambda *args: read(*args, batch=2))
    assert [p.as_dict() for p in loaded.iter_pairs()] == whole
