"""Signal calibration: the default maps are monotone and say what docs/benchmarks.md says
they say, and the fitting in scripts/calibrate_signals.py recovers known curves."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mmdedup.config import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import calibrate_signals as cs  # noqa: E402

pytest.importorskip("sklearn")

S = Settings()
MAPS = {
    # setting: True where a higher raw figure means more alike
    "text_calibration": True,
    "image_calibration": False,  # a Hamming distance
    "video_calibration": True,
    "semantic_calibration": True,
    "clip_calibration": True,
    "clip_text_calibration": True,
}


def knots(setting: str) -> tuple:
    """The default map named "<signal>_<field>" (text_calibration, clip_text_calibration)."""
    return cs.current_map(S, setting)


def score(setting: str, raw: float) -> float:
    return float(cs.apply(knots(setting), raw))


@pytest.mark.parametrize("setting,increasing", MAPS.items())
def test_default_maps_are_monotone(setting: str, increasing: bool) -> None:
    points = knots(setting)
    xs = np.array([x for x, _ in points])
    ys = np.array([y for _, y in points])
    assert len(points) >= 2 and np.all(np.diff(xs) > 0), "raw knots strictly increasing"
    assert np.all((ys >= 0) & (ys <= 1))
    steps = np.diff(ys)
    assert np.all(steps >= 0) if increasing else np.all(steps <= 0)
    # and so is the interpolated map, over and beyond the knots
    grid = np.linspace(xs[0] - 1, xs[-1] + 1, 2001)
    values = cs.apply(points, grid)
    assert np.all(np.diff(values) >= -1e-12) if increasing else np.all(np.diff(values) <= 1e-12)


def test_fitted_maps_end_at_no_similarity_and_identical() -> None:
    assert score("text_calibration", 0.0) == 0.0 and score("text_calibration", 1.0) == 1.0
    assert score("video_calibration", 0.0) == 0.0 and score("video_calibration", 1.0) == 1.0
    assert score("image_calibration", 0.0) == 1.0 and score("image_calibration", 32.0) == 0.0


def test_documented_anchor_points() -> None:
    """docs/benchmarks.md, "Signal calibration": the rule each fitted map states."""
    # text: a raw Jaccard of 0.6 is already a near-duplicate (medium: shown to a
    # reviewer), 0.65 strong; 0.3, more than the template corpus's non-duplicates reach,
    # is below the tiers; the review band is not squeezed away
    assert S.tier_medium <= score("text_calibration", 0.6) < S.tier_strong
    assert score("text_calibration", 0.65) >= S.tier_strong
    assert score("text_calibration", 0.3) < S.tier_weak
    text_map = knots("text_calibration")
    raw_at = {t: np.interp(getattr(S, f"tier_{t}"), [y for _, y in text_map],
                           [x for x, _ in text_map]) for t in ("medium", "strong")}
    assert raw_at["strong"] - raw_at["medium"] >= 0.05
    # image (img3: a mean of three pHash distances, steps of 2/3 of a bit; set on
    # image_tiers.py, "Pictures through the product"): 10 2/3 is strong (mild edits of
    # photos), 11 1/3 (where different flat graphics gather) only weak, 14 2/3 (where
    # different photos begin) below the tiers
    assert score("image_calibration", 32 / 3) >= S.tier_strong
    assert S.tier_weak <= score("image_calibration", 34 / 3) < S.tier_medium
    assert score("image_calibration", 44 / 3) < S.tier_weak
    # video: copies align >= 0.89 (strong at 0.9); a share of 0.6 is below the tiers
    assert score("video_calibration", 0.9) >= S.tier_strong
    assert score("video_calibration", 0.6) < S.tier_weak
    # the uncalibrated CLIP text-to-image map never claims a duplicate
    assert max(y for _, y in knots("clip_text_calibration")) < S.tier_weak


# --- the fit -------------------------------------------------------------------------------


def test_fit_recovers_a_noisy_step() -> None:
    """P(duplicate) 0.2 below raw 0.5 and 0.9 above; with the sample's own base rate as the
    prior the isotonic fit returns those frequencies, and crosses 0.5 at the step."""
    rng = np.random.default_rng(0)
    raw = rng.uniform(0, 1, 40_000)
    label = rng.uniform(0, 1, raw.size) < np.where(raw < 0.5, 0.2, 0.9)
    x, y = cs.fit_curve(raw, label, prior=label.mean())
    below, above = np.interp([0.1, 0.3, 0.45], x, y), np.interp([0.55, 0.7, 0.95], x, y)
    assert np.allclose(below, 0.2, atol=0.03) and np.allclose(above, 0.9, atol=0.03)
    assert cs.crossing(x, y, 0.5, True) == pytest.approx(0.5, abs=0.01)


def test_prior_moves_the_estimate_by_bayes_rule() -> None:
    """Half the duplicates and a tenth of the others above 0.5: the likelihood ratio there
    is 5, so P = 5 prior / (5 prior + 1 - prior)."""
    raw = np.r_[np.full(50, 0.2), np.full(50, 0.8), np.full(900, 0.2), np.full(100, 0.8)]
    label = np.r_[np.ones(100, bool), np.zeros(1000, bool)]
    for prior in (0.5, 0.1, 0.01):
        x, y = cs.fit_curve(raw, label, prior=prior, shrink=0.0)
        want = 5 * prior / (5 * prior + 1 - prior)
        assert float(np.interp(0.8, x, y)) == pytest.approx(want, rel=1e-6)


def test_fit_map_puts_the_tiers_in_the_gap_of_a_clean_step() -> None:
    """Separable data (non-duplicates <= 0.3, duplicates >= 0.6): the estimate rises
    linearly across the gap, so each level sits at its share of it, and the knots keep
    exactly the tier decisions of the fitted curve."""
    rng = np.random.default_rng(1)
    neg, pos = rng.uniform(0.0, 0.3, 5000), rng.uniform(0.6, 1.0, 500)
    neg[0], pos[0] = 0.3, 0.6
    raw, label = np.r_[neg, pos], np.r_[np.zeros(5000, bool), np.ones(500, bool)]
    knots = cs.fit_map(raw, label, cs.SIGNALS["text"])
    assert knots[0] == (0.0, 0.0) and knots[-1] == (1.0, 1.0)
    at = dict((y, x) for x, y in knots)
    for level in (0.5, 0.7, 0.8, 0.9):
        assert at[level] == pytest.approx(0.3 + level * 0.3, abs=0.002)
    x, y = cs.fit_curve(raw, label)
    grid = np.linspace(0, 1, 5001)
    for tier in (0.7, 0.8, 0.9):
        by_curve, by_knots = np.interp(grid, x, y) >= tier, cs.apply(knots, grid) >= tier
        assert not (by_knots & ~by_curve).any()  # rounding never admits more
        assert (by_curve & ~by_knots).sum() <= 3  # and costs at most a rounding step


def test_fit_map_for_a_distance() -> None:
    """A Hamming distance (lower = more alike): copies within 12 bits, others from 14."""
    rng = np.random.default_rng(2)
    pos = rng.choice(np.arange(0, 13, 2), 300)
    neg = rng.choice(np.arange(14, 40, 2), 3000)
    raw, label = np.r_[pos, neg].astype(float), np.r_[np.ones(300, bool), np.zeros(3000, bool)]
    knots = cs.fit_map(raw, label, cs.SIGNALS["image"])
    assert knots[0] == (0.0, 1.0) and knots[-1] == (32.0, 0.0)
    assert all(12 <= x <= 14 for x, y in knots if y in (0.7, 0.8, 0.9))
    assert float(cs.apply(knots, 12)) >= 0.9 and float(cs.apply(knots, 14)) < 0.1 + 1e-9


def test_a_level_the_fit_never_reaches_is_not_claimed() -> None:
    """Duplicates and non-duplicates mixed everywhere: the estimate stays low, and the map
    reaches the tiers only past the last labelled pair (identical is still 1)."""
    rng = np.random.default_rng(3)
    raw = rng.uniform(0.5, 0.95, 4000)
    label = rng.uniform(0, 1, raw.size) < 0.3
    knots = cs.fit_map(raw, label, cs.SIGNALS["semantic"])
    assert knots[-1] == (1.0, 1.0)
    assert float(cs.apply(knots, raw.max())) < 0.7


def test_fit_needs_both_labels() -> None:
    with pytest.raises(ValueError, match="duplicates and non-duplicates"):
        cs.fit_curve(np.array([0.1, 0.9]), np.array([True, True]))


def test_tier_table_and_verdict() -> None:
    raw = np.array([0.1, 0.5, 0.9, 0.95])
    label = np.array([False, False, True, True])
    tiers = {"weak": 0.7, "medium": 0.8, "strong": 0.9}
    loose = ((0.0, 0.0), (0.5, 0.75), (1.0, 1.0))
    tight = ((0.0, 0.0), (0.85, 0.9), (1.0, 1.0))
    assert cs.tier_table(raw, label, loose, tiers)["weak"] == (2 / 3, 1.0, 1)
    assert cs.tier_table(raw, label, tight, tiers)["strong"] == (1.0, 1.0, 0)
    assert cs.at_least_as_good(cs.tier_table(raw, label, loose, tiers), cs.tier_table(raw, label, tight, tiers))
    assert not cs.at_least_as_good(cs.tier_table(raw, label, tight, tiers),
                                   cs.tier_table(raw, label, ((0.0, 0.0), (1.0, 0.75)), tiers))


def test_operating_points_of_a_distance_and_a_similarity() -> None:
    """The loosest threshold reaching each recall, and the other pairs it lets in."""
    bits = np.array([2.0, 4.0, 6.0, 8.0, 5.0, 9.0])
    label = np.array([True, True, True, True, False, False])
    assert cs.operating_points(bits, label, False, [0.5, 0.75, 1.0]) == [
        (0.5, 4.0, 0, 0.5), (0.75, 6.0, 1, 0.75), (1.0, 8.0, 1, 1.0)]
    assert cs.operating_points(-bits, label, True, [0.75]) == [(0.75, -6.0, 1, 0.75)]


def test_config_lines_round_trip() -> None:
    """The printed lines are Python that gives back the knots."""
    knots = ((0.0, 0.0), (0.288, 0.1), (0.376, 0.5), (0.419, 0.7), (0.441, 0.8), (0.463, 0.9), (1.0, 1.0))
    text = cs.config_lines(cs.SIGNALS["text"], knots, "python scripts/calibrate_signals.py --seed 1")
    assert text.splitlines()[0].strip() == "# fitted by `python scripts/calibrate_signals.py --seed 1`"
    body = text.split("= ", 1)[1]
    assert eval(body) == knots  # noqa: S307 - our own output


def test_a_bound_on_the_raw_similarity_bounds_the_score_even_where_knots_dip() -> None:
    from mmdedup.score.calibration import calibrate, calibrate_at_most

    knots = ((0.0, 0.0), (0.4, 0.7), (0.6, 0.5), (1.0, 1.0))  # a dip: 0.4 scores above 0.6
    raw = np.linspace(0, 1, 101)
    bound = calibrate_at_most(raw, knots)
    assert (np.diff(bound) >= 0).all()
    assert all(bound[i] >= calibrate(raw[: i + 1], knots).max() for i in range(len(raw)))
    assert calibrate_at_most(0.5, knots) == 0.7 and calibrate_at_most(0.3, knots) == calibrate(0.3, knots)
