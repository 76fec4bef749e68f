"""Every threshold, weight and limit, with its default written once.

Global settings are the fields of `Settings`; each signal's own (its fusion weight, its
calibration, radius and limits) are a `SignalSettings` subclass in the signal's file
(signals/<name>.py), splink's settings-as-data. A deployment overrides any of them in
`<home>/config.toml`: global keys at the top level, a signal's under `[signals.<name>]`;
and numbers by environment variables, MMDEDUP_<FIELD> and MMDEDUP_<SIGNAL>_<FIELD>.
Nothing else in the package hard-codes a number a user might want to tune.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, TypeVar

DEFAULT_HOME = ".mmdedup"
log = logging.getLogger("mmdedup")

# Raw similarity -> score knots, interpolated linearly (score/calibration.py).
Calibration = tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class SignalSettings:
    """What every signal has; a signal's settings subclass this with its own defaults.

    Every `calibration` maps raw similarity to the common scale by linear interpolation
    between (raw, score) knots. `python scripts/calibrate_signals.py` fits them on
    labelled benchmark pairs, one definition for all: score = P(duplicate | raw) when 1% of
    the pairs compared are duplicates (isotonic regression), knots where it crosses 0.1,
    0.5 and the tiers; a fitted map replaces a default only where it is at least as good
    on those pairs (docs/benchmarks.md, "Signal calibration"). `weight` is the signal's
    weight in the fused mean (score/fusion.py).
    """

    weight: float = 0.0
    calibration: Calibration = ((0.0, 0.0), (1.0, 1.0))
    # Top-level keys of older configs this signal still reads, each with a deprecation
    # message: old key -> field.
    LEGACY: ClassVar[Mapping[str, str]] = {}


S = TypeVar("S", bound=SignalSettings)


@dataclass(frozen=True)
class Settings:
    # Tiers: strong pairs merge automatically, medium go to review, weak are only logged.
    tier_strong: float = 0.9
    tier_medium: float = 0.8
    tier_weak: float = 0.7

    # Input limits: past these an item fails with a reason instead of exhausting memory.
    max_file_bytes: int = 256 * 1024 * 1024
    max_text_chars: int = 2_000_000
    max_image_pixels: int = 64_000_000
    max_manifest_line_bytes: int = 8 * 1024 * 1024
    max_page_chars: int = 5_000_000
    max_page_depth: int = 200
    max_video_seconds: int = 3600

    # A line of a page's main text is boilerplate of its site (dropped from the text
    # signal) once it appears on at least this many of the site's pages and this share.
    block_min_pages: int = 5
    block_min_share: float = 0.2

    # Ingest commits every `ingest_chunk` items, so a killed run loses at most one chunk.
    # Each commit rewrites the index pages its rows touched (the text and content hashes
    # land on random pages): 2,000 items a commit rather than 500 ingested 100,000 texts
    # 16% faster. Loaded media of a chunk are held in memory: lower it for large files.
    ingest_chunk: int = 2000
    # An exact-duplicate group pairs each new member with at most this many earlier ones
    # (the earliest first); clusters stay whole through union-find, the pairs table bounded.
    max_exact_pairs_per_item: int = 50

    # TF-IDF (the text signal's term weights): jieba's IDF prior until this many texts,
    # then corpus frequencies, frozen anew (and everything re-signed) each time the corpus
    # has grown by this factor.
    tfidf_min_docs: int = 200
    tfidf_refresh_growth: float = 8.0

    # Learned word weights (learn/weights.py): multiplier = exp(step * net label evidence),
    # bounded; a word at the floor leaves the sketches. 3 net labels reach either bound.
    word_weight_min: float = 0.1
    word_weight_max: float = 20.0
    word_weight_step: float = 1.0
    # A retrain holds a lock in the database; one older than this was left by a crashed run.
    retrain_lock_seconds: int = 6 * 3600

    # Review (`mmdedup review`): the queue holds pairs of these tiers, in this order (each
    # most uncertain first: medium and weak highest score first, strong lowest first); a
    # session holds the pair it shows, and a hold lapses after this many minutes (so the
    # pairs of a session that crashed come back to the queue).
    review_tiers: tuple[str, ...] = ("medium",)
    review_claim_minutes: float = 30.0

    # Fitting fusion weights and thresholds to the labels (learn/fusion_fit.py): nothing is
    # fitted until both duplicate and distinct have this many labels; the prior strength is
    # the precision of the pull of each log-weight toward its default above (higher: the
    # labels move the weights less).
    fusion_min_labels: int = 20
    fusion_prior_strength: float = 4.0

    # A cluster's canonical member (score/canonical.py): the criteria in order, each
    # breaking the ties of the one before; a publication time is read from the first of
    # these meta keys that holds one, else from the date the item's page declares.
    canonical_rule: tuple[str, ...] = ("earliest_published", "longest_text", "largest_pictures",
                                       "longest_video", "earliest_ingested")
    canonical_time_keys: tuple[str, ...] = ("published", "published_at", "publish_time",
                                            "pubdate", "date")

    # Each signal's settings by name, filled in by `load_settings` for every registered
    # signal; a signal missing here (Settings() in a test) runs on its defaults.
    signals: Mapping[str, SignalSettings] = field(default_factory=dict)

    def signal(self, name: str, kind: type[S]) -> S:
        found = self.signals.get(name)
        return found if isinstance(found, kind) else kind()

    def with_weights(self, weights: Mapping[str, float], kinds: Mapping[str, type[SignalSettings]]) -> Settings:
        """These settings with the signals' fusion weights replaced (a fitted model)."""
        signals = {name: dataclasses.replace(self.signal(name, kind), weight=float(weights[name]))
                   if name in weights else self.signal(name, kind) for name, kind in kinds.items()}
        return dataclasses.replace(self, signals=signals)

    def tier(self, score: float) -> str | None:
        """The tier a fused score falls in, or None below the weak threshold."""
        if score >= self.tier_strong:
            return "strong"
        if score >= self.tier_medium:
            return "medium"
        if score >= self.tier_weak:
            return "weak"
        return None


TIERS = ("strong", "medium", "weak")


def tiers_at_least(min_tier: str) -> tuple[str, ...]:
    """The tiers at or above `min_tier` (strong is the highest)."""
    if min_tier not in TIERS:
        raise ValueError(f"unknown tier {min_tier!r}; expected one of {', '.join(TIERS)}")
    return TIERS[: TIERS.index(min_tier) + 1]


def load_settings(home: Path, signal_kinds: Mapping[str, type[SignalSettings]]) -> Settings:
    """Defaults, overridden by `<home>/config.toml` and then by environment variables:
    MMDEDUP_<FIELD> for a global setting, MMDEDUP_<SIGNAL>_<FIELD> for a signal's.
    `signal_kinds`: each registered signal's settings class, by name."""
    path = home / "config.toml"
    values: dict[str, Any] = {}
    if path.exists():
        with path.open("rb") as fh:
            values.update(tomllib.load(fh))
    tables = values.pop("signals", {})
    if not isinstance(tables, dict):
        raise ValueError(f"{path}: `signals` must be a table of [signals.<name>] tables")
    unknown = set(tables) - set(signal_kinds)
    if unknown:
        raise ValueError(f"{path}: unknown signal(s) {', '.join(sorted(unknown))} under [signals]; "
                         f"known: {', '.join(signal_kinds)}")
    _read_legacy(path, values, tables, signal_kinds)
    known = {f.name: f for f in dataclasses.fields(Settings) if f.name != "signals"}
    unknown = set(values) - set(known)
    if unknown:
        raise ValueError(f"{path}: unknown settings {', '.join(sorted(unknown))}")
    for name, f in known.items():
        _from_env(f"MMDEDUP_{name.upper()}", f, values)
    signals = {}
    for name, kind in signal_kinds.items():
        table = dict(tables.get(name) or {})
        fields = {f.name: f for f in dataclasses.fields(kind)}
        unknown = set(table) - set(fields)
        if unknown:
            raise ValueError(f"{path}: [signals.{name}] has unknown key(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(fields)}")
        for field_name, f in fields.items():
            _from_env(f"MMDEDUP_{name.upper()}_{field_name.upper()}", f, table)
        signals[name] = kind(**{k: _as_default_type(v, fields[k]) for k, v in table.items()})
    return Settings(**values, signals=signals)


def _read_legacy(path: Path, values: dict[str, Any], tables: dict[str, Any],
                 signal_kinds: Mapping[str, type[SignalSettings]]) -> None:
    """Move top-level keys of older configs into their signal's table, saying so once."""
    weights = values.pop("fusion_weights", None)
    if weights is not None:
        log.warning("%s: `fusion_weights` is deprecated: set `weight` under [signals.<name>]", path)
        for name, weight in dict(weights).items():
            if name in signal_kinds:
                tables.setdefault(name, {}).setdefault("weight", weight)
    for name, kind in signal_kinds.items():
        for old, new in kind.LEGACY.items():
            if old in values:
                log.warning("%s: `%s` is deprecated: write it as `%s` under [signals.%s]",
                            path, old, new, name)
                tables.setdefault(name, {}).setdefault(new, values.pop(old))


def _from_env(variable: str, f: dataclasses.Field, into: dict[str, Any]) -> None:
    """A number or word from the environment, parsed as the field's default is typed."""
    raw = os.environ.get(variable)
    default = f.default
    if raw is None or type(default) not in (int, float, str):
        return
    try:
        into[f.name] = type(default)(raw)
    except ValueError as exc:
        raise ValueError(f"{variable}={raw!r}: expected a {type(default).__name__}") from exc


def _as_default_type(value: Any, f: dataclasses.Field) -> Any:
    """TOML arrays as tuples (calibration knots), integers where a float is expected."""
    if isinstance(value, list):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    if isinstance(value, int) and not isinstance(value, bool) and isinstance(f.default, float):
        return float(value)
    return value
