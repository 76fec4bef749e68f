"""Fusion weights and thresholds fitted from labels: no fit below the minimum, weight moving
toward the signal that separates the classes and away from the one that does not, the
prior holding the defaults against uninformative labels, ordered and floored thresholds,
params round trip and stable versions, and held-out separation at least the defaults'."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from mmdedup.config import Settings
from mmdedup.learn.fusion_fit import FusionModel, fit_from_settings, fit_fusion
from mmdedup.score.fusion import fuse
from mmdedup.signals import registry
from mmdedup.signals.scorer import fusion_of

S = Settings()
FUSION = fusion_of(registry.SIGNALS, S)
W = dict(FUSION.weights)
CONTENT = FUSION.media
TIERS = (S.tier_strong, S.tier_medium, S.tier_weak)


def synth(seed: int, n: int, *, random_labels: bool = False) -> list:
    """Pairs where image separates the classes, text weakly, dom and clip not at all;
    signals go missing at random, video and semantic never appear. Content scores sit
    around the medium tier: below STRUCTURE_NEEDS the structural signals do not count
    (score/fusion.py) and the weights change no fused score."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dup = bool(rng.random() < 0.5)
        sig: dict[str, float | None] = {}
        if rng.random() < 0.9:
            sig["text"] = float(np.clip(rng.normal(0.86 if dup else 0.84, 0.06), 0.8, 1))
        if rng.random() < 0.8:
            sig["image"] = float(np.clip(rng.normal(0.95 if dup else 0.84, 0.06), 0.8, 1))
        if rng.random() < 0.9:
            sig["dom"] = float(rng.uniform(0, 1))
        if rng.random() < 0.3:
            sig["clip"] = float(rng.uniform(0.3, 0.8))
        if rng.random() < 0.2:
            sig["video"] = None  # stored as missing
        out.append((sig, bool(rng.random() < 0.5) if random_labels else dup))
    return out


def auc(scores: list[float], labels: list[bool]) -> float:
    s, y = np.asarray(scores), np.asarray(labels)
    pos, neg = s[y], s[~y]
    return float(((pos[:, None] > neg[None, :]).sum()
                  + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (len(pos) * len(neg)))


def test_no_fit_below_the_minimum() -> None:
    data = synth(0, 200)
    dups = [e for e in data if e[1]][:19]
    distinct = [e for e in data if not e[1]][:50]
    model = fit_fusion(dups + distinct, W, TIERS, content=CONTENT, min_labels=20)
    assert not model.fitted
    assert model.weights == W
    assert (model.strong, model.medium, model.weak) == TIERS
    assert (model.n_duplicate, model.n_distinct) == (19, 50)
    assert model.reason == "not enough labels (duplicate 19, distinct 50; need 20 of each)"
    assert fit_fusion([], W, TIERS, content=CONTENT).reason.startswith("not enough labels (duplicate 0")
    # the settings' minimum is the one applied
    assert "need 20 of each" in fit_from_settings(dups + distinct, S, FUSION).reason


def test_separating_signal_gains_weight_the_other_loses() -> None:
    model = fit_fusion(synth(1, 400), W, TIERS, content=CONTENT, min_labels=20)
    assert model.fitted, model.reason
    assert model.weights["image"] > W["image"] * 1.1
    assert model.weights["dom"] < W["dom"]
    assert model.weights["text"] < W["text"]  # weakly informative beside image
    # signals no labelled pair has keep their defaults exactly ...
    assert model.weights["video"] == W["video"] and model.weights["semantic"] == W["semantic"]
    # ... and the fitted ones keep the sum their defaults had
    fitted = ("text", "image", "dom", "clip")
    assert sum(model.weights[k] for k in fitted) == pytest.approx(sum(W[k] for k in fitted),
                                                                  abs=1e-3)
    assert all(w > 0 for w in model.weights.values())


def test_prior_holds_the_defaults_against_random_labels() -> None:
    for seed in range(4):
        model = fit_fusion(synth(10 + seed, 300, random_labels=True), W, TIERS, content=CONTENT)
        assert model.fitted
        for k, w in W.items():
            assert 0.85 * w <= model.weights[k] <= 1.15 * w, (seed, k, model.weights)


def test_more_labels_move_weights_further() -> None:
    few = fit_fusion(synth(2, 60), W, TIERS, content=CONTENT)
    many = fit_fusion(synth(2, 1000), W, TIERS, content=CONTENT)
    assert few.fitted and many.fitted
    assert W["image"] < few.weights["image"] < many.weights["image"]
    strong_prior = fit_fusion(synth(2, 1000), W, TIERS, content=CONTENT, prior_strength=100.0)
    assert W["image"] < strong_prior.weights["image"] < many.weights["image"]


def test_held_out_separation_at_least_the_defaults() -> None:
    model = fit_fusion(synth(3, 400), W, TIERS, content=CONTENT)
    held_out = synth(4, 2000)
    labels = [d for _, d in held_out]
    fitted = auc([fuse(s, model.weights, CONTENT) for s, _ in held_out], labels)
    default = auc([fuse(s, W, CONTENT) for s, _ in held_out], labels)
    assert fitted >= default
    # the labelled metrics say the same, for the defaults and the fitted model
    assert model.metrics["new"]["auc"] >= model.metrics["old"]["auc"]


def _check_order(model: FusionModel) -> None:
    assert model.weak == S.tier_weak
    assert model.weak <= model.medium <= model.strong <= 1.0
    assert model.strong >= S.tier_medium


def _labelled(dup_scores: np.ndarray, dis_scores: np.ndarray) -> list:
    """One image signal per pair, so the fused score is the given score."""
    return ([({"image": float(v)}, True) for v in dup_scores]
            + [({"image": float(v)}, False) for v in dis_scores])


def test_thresholds_from_the_label_distributions() -> None:
    rng = np.random.default_rng(5)
    dup = np.clip(rng.normal(0.88, 0.04, 60), 0, 1)
    dis = np.clip(rng.normal(0.76, 0.05, 60), 0, 1)  # overlapping: a review band remains
    model = fit_fusion(_labelled(dup, dis), W, TIERS, content=CONTENT)
    _check_order(model)
    assert model.medium < model.strong
    # medium: mean_dup - 2 sd_dup, rounded down
    assert model.medium == pytest.approx(np.floor((dup.mean() - 2 * dup.std(ddof=1)) * 1000)
                                         / 1000)
    # strong: above every labelled distinct pair (under 100 of them) and mean + 2 sd
    assert model.strong > dis.max()
    assert model.strong >= dis.mean() + 2 * dis.std(ddof=1)
    new, old = model.metrics["new"], model.metrics["old"]
    for report in (new, old):
        assert set(report) >= {"strong", "medium", "weak", "auc", "thresholds"}
    assert new["strong"]["precision"] == 1.0
    assert new["medium"]["recall"] >= 0.9
    assert new["medium"]["recall"] >= old["medium"]["recall"]
    assert old["thresholds"] == dict(zip(("strong", "medium", "weak"), TIERS))


def test_thresholds_floored_and_capped() -> None:
    rng = np.random.default_rng(6)
    # duplicates spread wide: medium would fall below weak
    wide = fit_fusion(_labelled(rng.uniform(0.3, 1.0, 50), rng.uniform(0.0, 0.5, 50)), W, TIERS, content=CONTENT)
    _check_order(wide)
    # cleanly separated: the review band narrows (medium rises toward the duplicates), but
    # auto-merging is never loosened below the configured strong
    clean = fit_fusion(_labelled(rng.normal(0.93, 0.02, 60), rng.normal(0.70, 0.03, 60)),
                       W, TIERS, content=CONTENT)
    _check_order(clean)
    assert clean.strong == S.tier_strong and "never loosen" in clean.reason
    assert S.tier_medium < clean.medium < clean.strong
    assert wide.medium == S.tier_weak and "medium floored" in wide.reason
    # distinct pairs far below: strong still not below the configured strong
    low = fit_fusion(_labelled(rng.uniform(0.95, 1.0, 50), rng.uniform(0.0, 0.3, 50)), W, TIERS, content=CONTENT)
    _check_order(low)
    assert low.strong == S.tier_strong
    # distinct pairs at the top score: strong capped at 1.0, medium no higher
    top = fit_fusion(_labelled(rng.uniform(0.95, 1.0, 50),
                               np.r_[rng.uniform(0.5, 0.8, 49), 1.0]), W, TIERS, content=CONTENT)
    _check_order(top)
    assert top.strong == 1.0 and "capped" in top.reason
    assert top.medium <= top.strong
    for seed in range(5):
        _check_order(fit_fusion(synth(20 + seed, 200), W, TIERS, content=CONTENT))


def test_params_round_trip_and_version() -> None:
    model = fit_fusion(synth(7, 300), W, TIERS, content=CONTENT)
    params = json.loads(json.dumps(model.as_params()))  # as stored in a JSON column
    back = FusionModel.from_params(params)
    assert back == model and back.as_params() == model.as_params()
    assert back.version == model.version == params["version"]
    assert model.version.startswith("fusion-") and len(model.version) <= 64
    # stable: the same labels give the same version, and it does not depend on metrics
    assert fit_fusion(synth(7, 300), W, TIERS, content=CONTENT).version == model.version
    assert FusionModel(**{**vars(model), "metrics": {}}).version == model.version
    # changes with the weights or the thresholds
    other = dict(model.weights, dom=model.weights["dom"] + 0.01)
    assert FusionModel(**{**vars(model), "weights": other}).version != model.version
    assert FusionModel(**{**vars(model), "strong": 0.99}).version != model.version
    # pinned: the hash itself does not drift between releases
    fixed = FusionModel({"text": 0.5, "image": 0.3}, 0.9, 0.8, 0.7, 0, 0, False, "defaults")
    assert fixed.version == FusionModel.from_params(fixed.as_params()).version
    assert fixed.version == "fusion-" + hashlib.sha256(
        b'{"medium":0.8,"strong":0.9,"weak":0.7,"weights":{"image":0.3,"text":0.5}}'
    ).hexdigest()[:16]
    with pytest.raises(ValueError):
        FusionModel.from_params({**params, "strong": 0.5})  # version no longer matches
    unfitted = fit_fusion([], W, TIERS, content=CONTENT)
    assert FusionModel.from_params(unfitted.as_params()) == unfitted


def test_bad_input_refused() -> None:
    with pytest.raises(TypeError):
        fit_fusion([({"text": 0.9}, "duplicate")], W, TIERS, content=CONTENT)
    with pytest.raises(ValueError):
        fit_fusion([({"text": 1.5}, True)], W, TIERS, content=CONTENT)
    with pytest.raises(ValueError):
        fit_fusion([], W, (0.7, 0.8, 0.9), content=CONTENT)
    # NaN is missing, like None
    data = synth(8, 200)
    nan = [({**s, "clip": float("nan")} if "clip" not in s else s, d) for s, d in data]
    assert fit_fusion(nan, W, TIERS, content=CONTENT).weights == fit_fusion(data, W, TIERS, content=CONTENT).weights
