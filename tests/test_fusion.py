"""Fusion: renormalisation over present signals, strong single signals not drowned, dom
never deciding alone, tiers at their boundaries, and the kind of match."""

from __future__ import annotations

import pytest

from mmdedup.config import Settings
from mmdedup.signals import registry
from mmdedup.signals.scorer import fusion_of

# The product's fusion: weights and content signals from the registered signals' defaults.
FUSION = fusion_of([kind for kind in registry.SIGNALS], Settings())


def fuse(signals):
    return FUSION.fuse(signals)


def match_kind(signals, threshold):
    return FUSION.kind(signals, threshold)


def test_missing_signals_renormalise() -> None:
    assert fuse({"text": 0.8}) == pytest.approx(0.8)
    assert fuse({"text": 0.8, "image": None}) == pytest.approx(0.8)
    both = fuse({"text": 0.6, "image": 0.6})
    assert both == pytest.approx(0.6)


def test_strong_single_signal_not_drowned() -> None:
    assert fuse({"text": 0.1, "image": 0.97}) == pytest.approx(0.97)
    assert fuse({"text": 0.95, "dom": 0.02}) == pytest.approx(0.95)


def test_dom_alone_never_makes_a_duplicate() -> None:
    score = fuse({"text": 0.1, "dom": 1.0})
    assert Settings().tier(score) is None


def test_dom_moves_the_mean_a_little() -> None:
    assert fuse({"text": 0.85, "dom": 1.0}) > 0.85


def test_tiers_at_their_boundaries() -> None:
    s = Settings()
    assert [s.tier(x) for x in (0.9, 0.8999, 0.8, 0.7999, 0.7, 0.6999)] == \
        ["strong", "medium", "medium", "weak", "weak", None]


def test_kind_of_match() -> None:
    assert match_kind({"text": 0.95, "image": 0.2}, 0.9) == "text-reuse"
    assert match_kind({"text": 0.2, "image": 0.95}, 0.9) == "image-reuse"
    assert match_kind({"text": 0.95, "image": 0.92}, 0.9) == "same-item"
    assert match_kind({"text": 0.95, "semantic": 0.97}, 0.9) == "paraphrase"
    assert match_kind({"text": 0.97, "semantic": 0.95}, 0.9) == "text-reuse"


def test_an_identical_dom_never_lifts_a_pair_whose_texts_differ() -> None:
    # Two different articles of one site: one template (dom 1.0), texts short of medium.
    for text in (0.3, 0.6, 0.75, 0.78, 0.7999):
        assert fuse({"text": text, "dom": 1.0}) == pytest.approx(text)
        assert Settings().tier(fuse({"text": text, "dom": 1.0})) == Settings().tier(text)
    # Several content signals: still the content alone, whatever the template says.
    assert fuse({"text": 0.7, "image": 0.6, "dom": 1.0}) == pytest.approx(fuse({"text": 0.7, "image": 0.6}))
    # Where the text agrees the template may still move the pair up.
    assert fuse({"text": 0.8, "dom": 1.0}) > 0.8
