"""Fusion weights and tier thresholds fitted from reviewer labels.

Pure functions over plain data: no database. The caller turns the labels in force into
`(signals, is_duplicate)` examples (`signals` as stored on the pair, calibrated per-signal
scores on [0, 1], None or absent where the pair lacks the signal), calls `fit_fusion`, and
stores the result as a ModelVersion of kind "fusion" with `version=model.version` and
`params=model.as_params()`; `FusionModel.from_params` reads it back.

Weights. The product's score is `score.fusion.fuse`: the larger of the weighted mean over
the signals a pair has (weights renormalised over them) and its best content signal, the
structural signals left out of the mean where the best content signal is under
STRUCTURE_NEEDS. The weights only act through that mean, so they are fitted *through fuse itself*: maximise the
likelihood of

    P(duplicate) = sigmoid(a * fuse(signals; w) + b),   a >= 0,

over the log-weights and (a, b), with a Gaussian prior pulling each log w_k toward
log(default w_k) (`prior_strength` is its precision: the penalty is
prior_strength / 2 * sum_k (log w_k - log w0_k)^2, against the summed, not averaged,
log-likelihood, so a few labels barely move the weights and many labels can). A missing
signal contributes nothing, exactly as in fuse: it is left out of that pair's mean and its
weight out of the renormalisation. Working in log-weights keeps every weight positive;
the weights are normalised (a softmax) so that the fitted ones sum to what their defaults
summed to, which changes nothing in fuse (a mean is scale-free) but keeps them comparable
with the defaults. Only signals with a positive default weight that at least one labelled
pair has are fitted; the others keep their default weight exactly (no evidence on them).
Uninformative labels drive the slope `a` to 0, where the weights no longer matter to the
likelihood and the prior holds them at the defaults. Nothing is fitted until both classes
have `min_labels` labels: the defaults come back unchanged, with the reason.

Thresholds, from the labelled fused scores under the fitted weights (a starting point to
be checked by a person, not a proof; the labels mostly come from the review queue, so
they over-represent the medium band):
- weak stays at its default: pairs below it are never shown, hence never labelled, so
  the labels cannot say where it should be. It is the floor of the other two.
- strong (merged without review) is the larger of mean_distinct + 2 sd_distinct and the
  lowest score that fewer than 1% of the labelled distinct pairs reach (with under 100
  distinct labels: just above the highest one), rounded up to 0.001, kept within
  [default strong, 1.0]: labels can make auto-merging stricter, never looser. Merging
  more without review is a person's decision (the `tier_strong` setting), not something
  a few hundred labels drawn from the review queue should decide.
- medium (sent to review) is mean_duplicate - 2 sd_duplicate (about 98% of duplicates
  at or above it if roughly normal), rounded down to 0.001, kept within [weak, strong].
So weak <= medium <= strong always. `metrics` reports the labelled (in-sample, so
optimistic) precision and recall of "score >= threshold" at each tier, for the defaults
and for the fitted model, and each weighting's ROC AUC on the labels.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from ..config import Settings
from ..score.fusion import STRUCTURE_NEEDS, Fusion, fuse

Example = tuple[Mapping[str, float | None], bool]

PARAMS_FORMAT = 1
WEIGHT_DECIMALS = 4
THRESHOLD_STEP = 0.001
DISTINCT_TAIL = 0.01  # strong: fewer than this share of labelled distinct pairs reach it
_MAX_SLOPE = 200.0
_MAX_LOG_RATIO = 10.0  # a fitted weight stays within e^10 of its default either way


@dataclass(frozen=True)
class FusionModel:
    weights: dict[str, float]
    strong: float
    medium: float
    weak: float
    n_duplicate: int
    n_distinct: int
    fitted: bool
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def version(self) -> str:
        """Stable: a hash of what decides scores and tiers (weights and thresholds), so the
        same model always has the same version whatever labels and metrics came with it."""
        core = {"weights": {k: self.weights[k] for k in sorted(self.weights)},
                "strong": self.strong, "medium": self.medium, "weak": self.weak}
        blob = json.dumps(core, sort_keys=True, separators=(",", ":"))
        return "fusion-" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def as_params(self) -> dict[str, Any]:
        """Plain JSON for ModelVersion.params (includes the version, checked on load)."""
        return {"format": PARAMS_FORMAT, "version": self.version,
                "weights": {k: self.weights[k] for k in sorted(self.weights)},
                "strong": self.strong, "medium": self.medium, "weak": self.weak,
                "n_duplicate": self.n_duplicate, "n_distinct": self.n_distinct,
                "fitted": self.fitted, "reason": self.reason, "metrics": self.metrics}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> FusionModel:
        if params.get("format") != PARAMS_FORMAT:
            raise ValueError(f"unknown fusion params format {params.get('format')!r}")
        model = cls(weights={str(k): float(v) for k, v in params["weights"].items()},
                    strong=float(params["strong"]), medium=float(params["medium"]),
                    weak=float(params["weak"]), n_duplicate=int(params["n_duplicate"]),
                    n_distinct=int(params["n_distinct"]), fitted=bool(params["fitted"]),
                    reason=str(params["reason"]), metrics=dict(params.get("metrics") or {}))
        if "version" in params and params["version"] != model.version:
            raise ValueError(f"fusion params say version {params['version']!r} but hash to "
                             f"{model.version!r}")
        return model


def fit_from_settings(examples: Sequence[Example], settings: Settings, fusion: Fusion) -> FusionModel:
    """fit_fusion with the configured weights and content signals of `fusion`, and the
    tiers, minimum and prior strength of `settings`."""
    return fit_fusion(examples, fusion.weights,
                      (settings.tier_strong, settings.tier_medium, settings.tier_weak),
                      content=fusion.media, min_labels=settings.fusion_min_labels,
                      prior_strength=settings.fusion_prior_strength)


def fit_fusion(examples: Sequence[Example], default_weights: Mapping[str, float],
               tiers: tuple[float, float, float], *, content: Collection[str],
               min_labels: int = 20, prior_strength: float = 4.0) -> FusionModel:
    """Fit fusion weights and thresholds to labelled pairs (see the module docstring).

    `examples`: (signals, is_duplicate) with is_duplicate a bool; `tiers`: the default
    (strong, medium, weak) thresholds. Returns the defaults unchanged, fitted=False, while
    either class has fewer than `min_labels` labels. `content`: the content signals (the
    best of them is a floor of the fused score, see score/fusion.py)."""
    strong0, medium0, weak0 = (float(t) for t in tiers)
    if not strong0 >= medium0 >= weak0:
        raise ValueError(f"default tiers not ordered strong >= medium >= weak: {tiers}")
    if prior_strength <= 0:
        raise ValueError("prior_strength must be positive")
    defaults = {k: float(v) for k, v in default_weights.items()}
    if any(v < 0 or not math.isfinite(v) for v in defaults.values()):
        raise ValueError("default weights must be finite and non-negative")
    signals, y = _clean(examples)
    n_dup, n_dis = int(y.sum()), int(len(y) - y.sum())
    old = {"strong": strong0, "medium": medium0, "weak": weak0}
    old_scores = np.array([fuse(s, defaults, content) for s in signals])
    metrics: dict[str, Any] = {"in_sample": True, "old": _report(old_scores, y, old)}

    if n_dup < min_labels or n_dis < min_labels:
        reason = (f"not enough labels (duplicate {n_dup}, distinct {n_dis}; "
                  f"need {min_labels} of each)")
        return FusionModel(dict(defaults), strong0, medium0, weak0, n_dup, n_dis,
                           False, reason, metrics)

    weights, fit_info = _fit_weights(signals, y, defaults, content, prior_strength)
    scores = np.array([fuse(s, weights, content) for s in signals])
    strong, medium, weak, notes = _thresholds(scores, y, strong0, medium0, weak0)
    new = {"strong": strong, "medium": medium, "weak": weak}
    metrics["new"] = _report(scores, y, new)
    metrics["fit"] = fit_info
    metrics["duplicate"] = _moments(scores[y])
    metrics["distinct"] = _moments(scores[~y])
    reason = "; ".join([f"fitted on {n_dup} duplicate and {n_dis} distinct labels"] + notes)
    return FusionModel(weights, strong, medium, weak, n_dup, n_dis, True, reason, metrics)


# --- data -------------------------------------------------------------------------------


def _clean(examples: Sequence[Example]) -> tuple[list[dict[str, float]], np.ndarray]:
    """Signals without missing values (None, NaN dropped), labels as a bool array."""
    signals, labels = [], []
    for i, (sig, decision) in enumerate(examples):
        if not isinstance(decision, (bool, np.bool_)):
            raise TypeError(f"example {i}: decision must be a bool (True = duplicate), "
                            f"got {decision!r}")
        clean = {}
        for k, v in sig.items():
            if v is None:
                continue
            v = float(v)
            if math.isnan(v):
                continue
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"example {i}: signal {k}={v} outside [0, 1]")
            clean[k] = v
        signals.append(clean)
        labels.append(bool(decision))
    return signals, np.asarray(labels, dtype=bool)


# --- weights ----------------------------------------------------------------------------


def _fit_weights(signals: list[dict[str, float]], y: np.ndarray, defaults: dict[str, float],
                 content_signals: Collection[str], prior_strength: float) -> tuple[dict[str, float], dict[str, Any]]:
    # scipy loads here, where a fit runs, not with the module: every command reads the
    # fitted model (FusionModel), few fit one, and scipy.optimize takes 0.1 s to import.
    from scipy.optimize import minimize
    from scipy.special import expit

    keys = sorted(k for k, w in defaults.items()
                  if w > 0 and any(k in s for s in signals))
    weights = dict(defaults)
    if len(keys) < 2:  # one signal (or none): its weight cannot change any fused score
        return weights, {"fitted_signals": keys, "note": "fewer than two signals present"}
    x = np.array([[s.get(k, np.nan) for k in keys] for s in signals], dtype=float)
    present = ~np.isnan(x)
    xz = np.where(present, x, 0.0)
    content = np.array([k in content_signals for k in keys])
    best = np.where(present & content, xz, -np.inf).max(axis=1)
    best = np.where(np.isfinite(best), best, 0.0)  # fuse: best content defaults to 0
    # fuse leaves structure out of the mean of a pair whose content disagrees
    # (best content < STRUCTURE_NEEDS): those values count for nothing, as if missing.
    quiet = (present & content).any(axis=1) & (best < STRUCTURE_NEEDS)
    present &= ~(quiet[:, None] & ~content[None, :])
    xz = np.where(present, x, 0.0)
    # fuse scores 0 where a pair's content signals all weigh 0 (structure never decides alone)
    silenced = np.array([any(k in content_signals for k in s)
                         and not any(k in content_signals and defaults.get(k, 0) > 0 for k in s)
                         for s in signals], dtype=bool)
    any_present = present.any(axis=1) & ~silenced
    yf = y.astype(float)
    w0 = np.array([defaults[k] for k in keys])
    log_w0 = np.log(w0)
    total = w0.sum()
    lam = float(prior_strength)

    def unpack(params: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
        theta, a, b = params[:-2], params[-2], params[-1]
        log_w = theta - np.logaddexp.reduce(theta) + math.log(total)
        return log_w, np.exp(log_w), a, b

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        log_w, w, a, b = unpack(params)
        denom = present @ w
        safe = np.where(any_present, denom, 1.0)
        mean = (xz @ w) / safe
        on_mean = any_present & (mean >= best)
        f = np.where(any_present, np.where(on_mean, mean, best), 0.0)
        z = a * f + b
        nll = float(np.sum(np.logaddexp(0.0, z) - yf * z))
        r = log_w - log_w0
        value = nll + 0.5 * lam * float(r @ r)
        dz = expit(z) - yf
        # d mean_i / d w_k = present_ik (x_ik - mean_i) / denom_i, only where mean wins
        coef = np.where(on_mean, dz * a / safe, 0.0)
        g_w = ((present * (xz - mean[:, None])) * coef[:, None]).sum(axis=0)
        share = w / total
        g_theta = g_w * w - share * float(g_w @ w) + lam * (r - share * r.sum())
        grad = np.concatenate([g_theta, [float(dz @ f), float(dz.sum())]])
        return value, grad

    start = np.concatenate([log_w0, [1.0, 0.0]])
    bounds = ([(t - _MAX_LOG_RATIO, t + _MAX_LOG_RATIO) for t in log_w0]
              + [(0.0, _MAX_SLOPE), (-_MAX_SLOPE, _MAX_SLOPE)])
    value0, _ = objective(start)
    res = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 500})
    info: dict[str, Any] = {"fitted_signals": keys, "converged": bool(res.success),
                            "iterations": int(res.nit), "message": str(res.message)}
    if not np.all(np.isfinite(res.x)) or not res.fun <= value0:
        info["note"] = "optimiser did not improve on the defaults; defaults kept"
        return weights, info
    _, w, a, b = unpack(res.x)
    for k, v in zip(keys, w):  # never rounded to 0, which would leave the signal out of fusion
        weights[k] = max(round(float(v), WEIGHT_DECIMALS), 10.0 ** -WEIGHT_DECIMALS)
    info.update(slope=round(float(a), 4), intercept=round(float(b), 4),
                objective_start=round(float(value0), 4), objective=round(float(res.fun), 4))
    return weights, info


# --- thresholds -------------------------------------------------------------------------


def _thresholds(scores: np.ndarray, y: np.ndarray, strong0: float, medium0: float,
                weak0: float) -> tuple[float, float, float, list[str]]:
    notes = []
    dup, dis = scores[y], scores[~y]
    weak = weak0
    # strong: above nearly all labelled distinct pairs
    spread = _ceil(dis.mean() + 2 * dis.std(ddof=1))
    allowed = math.ceil(DISTINCT_TAIL * len(dis)) - 1  # distinct pairs at/above: < 1%
    tail = _just_above(np.sort(dis)[::-1][allowed])
    strong = max(spread, tail)
    if strong > 1.0:
        notes.append("strong capped at 1.0: labelled distinct pairs reach the top score")
        strong = 1.0
    if strong < strong0:
        notes.append(f"strong kept at the configured {strong0} (labels never loosen auto-merging)")
        strong = strong0
    # medium: below nearly all labelled duplicates
    medium = _floor(dup.mean() - 2 * dup.std(ddof=1))
    if medium < weak:
        notes.append(f"medium floored at the weak threshold {weak}")
        medium = weak
    if medium > strong:
        medium = strong
    return round(strong, 3), round(medium, 3), round(weak, 3), notes


def _ceil(x: float) -> float:
    return math.ceil(round(x / THRESHOLD_STEP, 6)) * THRESHOLD_STEP


def _floor(x: float) -> float:
    return math.floor(round(x / THRESHOLD_STEP, 6)) * THRESHOLD_STEP


def _just_above(x: float) -> float:
    return _floor(x) + THRESHOLD_STEP


# --- metrics ----------------------------------------------------------------------------


def _report(scores: np.ndarray, y: np.ndarray, thresholds: Mapping[str, float]) -> dict:
    out: dict[str, Any] = {"thresholds": dict(thresholds), "auc": _auc(scores, y)}
    n_dup = int(y.sum())
    for tier, t in thresholds.items():
        flagged = scores >= t
        hits = int((flagged & y).sum())
        out[tier] = {"flagged": int(flagged.sum()),
                     "precision": _ratio(hits, int(flagged.sum())),
                     "recall": _ratio(hits, n_dup)}
    return out


def _moments(x: np.ndarray) -> dict[str, float | None]:
    if len(x) == 0:
        return {"mean": None, "sd": None}
    return {"mean": round(float(x.mean()), 4),
            "sd": round(float(x.std(ddof=1)), 4) if len(x) > 1 else None}


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _auc(scores: np.ndarray, y: np.ndarray) -> float | None:
    """ROC AUC by ranks (ties count a half)."""
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if not n_pos or not n_neg:
        return None
    from scipy.stats import rankdata  # (imported where used: see _fit_weights)

    u = rankdata(scores)[y].sum() - n_pos * (n_pos + 1) / 2
    return round(float(u / (n_pos * n_neg)), 4)
