"""Every threshold, weight and limit, with its default written once.

Global settings are the fields of `Settings`; each signal's own (its fusion weight, its
calibration, radius and limits) are a `SignalSettings` subclass in the signal's file
(signals/<name>.py), splink's settings-as-data. A deployment overrides any of them in
`<home>/config.toml`: global keys at the top level, a signal's under `[signals.<name>]`;
and by environment variables, MMDEDUP_<FIELD> and MMDEDUP_<SIGNAL>_<FIELD>.
Nothing else in the package hard-codes a number a user might want to tune.

Every field declares its allowed type and range next to its default (`setting(default,
check)`), and is checked wherever settings are built (`__post_init__`): from config.toml,
the environment or Python. A value out of range is a `SettingsError` naming where it came
from, the key, the value and what is allowed, never a crash or a silent no-op later.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import numbers
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Mapping, Protocol, Sequence, TypeVar

DEFAULT_HOME = ".mmdedup"
log = logging.getLogger("mmdedup")

# Raw similarity -> score knots, interpolated linearly (score/calibration.py).
Calibration = tuple[tuple[float, float], ...]


class SettingsError(ValueError):
    """A setting of the wrong type or out of its range, or a config file that cannot be
    read: one line naming where the value came from (the file, the environment variable or
    the class built in Python), the key, the value and what is allowed. A ValueError, so
    the CLI prints it as it prints every error a user can fix."""

    def __init__(self, message: str, invalid: Invalid | None = None) -> None:
        super().__init__(message)
        self.invalid = invalid  # what was wrong, for a caller that knows better where it came from


class Invalid(Exception):
    """What a check found wrong: the keys, their values, and what is allowed."""

    def __init__(self, keys: Sequence[str], values: Sequence[Any], expected: str) -> None:
        super().__init__(expected)
        self.keys, self.values, self.expected = tuple(keys), tuple(values), expected

    def error(self, where: str, prefix: str = "") -> SettingsError:
        shown = ", ".join(f"{prefix}{k} = {_show(v)}" for k, v in zip(self.keys, self.values))
        return SettingsError(f"{where}: {shown}: expected {self.expected}", self)


def _show(value: Any) -> str:
    """A value as a config file would write it (strings quoted, lists in brackets)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True).replace("NaN", "nan")
    except (TypeError, ValueError):
        return repr(value)


class Check(Protocol):
    """A setting's type and range: `coerce` returns the value as stored (a TOML list as a
    tuple, an integer where a number is expected as a float) or raises ValueError or
    TypeError; `parse` reads an environment variable's text; `describe` is what the error
    and the README say is allowed."""

    def coerce(self, value: Any) -> Any: ...

    def parse(self, text: str) -> Any: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Number:
    """An integer (`kind` int) or a number (float), finite, within the bounds given."""

    kind: type = float
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo itself not allowed
    hi_open: bool = False

    def coerce(self, value: Any) -> Any:
        wanted = numbers.Integral if self.kind is int else numbers.Real
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise TypeError(value)
        v = self.kind(value)
        if not math.isfinite(v):
            raise ValueError(value)
        if self.lo is not None and (v < self.lo or (self.lo_open and v == self.lo)):
            raise ValueError(value)
        if self.hi is not None and (v > self.hi or (self.hi_open and v == self.hi)):
            raise ValueError(value)
        return v

    def parse(self, text: str) -> Any:
        return self.kind(text)

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if self.lo is not None and self.hi is not None:
            return (f"{what} in {'(' if self.lo_open else '['}{self.lo:g}, "
                    f"{self.hi:g}{')' if self.hi_open else ']'}")
        if self.lo is not None:
            return f"{what} {'>' if self.lo_open else '>='} {self.lo:g}"
        if self.hi is not None:
            return f"{what} {'<' if self.hi_open else '<='} {self.hi:g}"
        return what


@dataclass(frozen=True)
class Choice:
    """One of a few words."""

    options: tuple[str, ...]

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, str) or value not in self.options:
            raise ValueError(value)
        return value

    def parse(self, text: str) -> Any:
        return text

    def describe(self) -> str:
        return "one of " + ", ".join(_show(o) for o in self.options)


@dataclass(frozen=True)
class Flag:
    """true or false (in the environment also 1/0, yes/no, on/off)."""

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, bool):
            raise TypeError(value)
        return value

    def parse(self, text: str) -> Any:
        word = text.strip().lower()
        if word in ("true", "1", "yes", "on"):
            return True
        if word in ("false", "0", "no", "off"):
            return False
        raise ValueError(text)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Words:
    """One or more words, in the order given (repeats dropped), each one of `options`
    where the setting names its choices; in the environment comma-separated."""

    options: tuple[str, ...] | None = None

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or not value or any(
                not isinstance(w, str) or not w or (self.options is not None and w not in self.options)
                for w in value):
            raise ValueError(value)
        return tuple(dict.fromkeys(value))

    def parse(self, text: str) -> Any:
        return [t.strip() for t in text.split(",")]

    def describe(self) -> str:
        if self.options is None:
            return "a list of one or more words"
        return "a list of one or more of " + ", ".join(_show(t) for t in self.options)


def toml_value(text: str) -> Any:
    """An environment variable's text read as a TOML value (an inline table, an array)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(text) from exc


@dataclass(frozen=True)
class Name:
    """A meta field's name, or "" for none."""

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, str) or value != value.strip():
            raise ValueError(value)
        return value

    def parse(self, text: str) -> Any:
        return text

    def describe(self) -> str:
        return 'a field name (or "" for none)'


@dataclass(frozen=True)
class StoreUrl:
    """The URL of a Redis server and database, or "" for none."""

    schemes: tuple[str, ...] = ("redis://", "rediss://", "unix://")

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, str) or (value and not value.startswith(self.schemes)):
            raise ValueError(value)
        return value

    def parse(self, text: str) -> Any:
        return text

    def describe(self) -> str:
        return '"" (none) or a Redis URL (redis://HOST:PORT/DB, rediss://..., unix://PATH)'


FOREVER = math.inf
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def seconds_of(duration: Any) -> float:
    """A duration written as a number and a unit (s, m, h, d, w: "90d", "36h", "1.5w") or
    "forever", in seconds (math.inf for forever)."""
    if duration == "forever":
        return FOREVER
    if not isinstance(duration, str) or len(duration) < 2 or duration[-1] not in _UNITS:
        raise ValueError(duration)
    amount = float(duration[:-1])  # (ValueError for "xd")
    if not amount > 0 or math.isinf(amount):
        raise ValueError(duration)
    return amount * _UNITS[duration[-1]]


@dataclass(frozen=True)
class Window:
    """A content class's comparison window and retention, in seconds (math.inf: forever)."""

    window: float = FOREVER
    keep: float = FOREVER


@dataclass(frozen=True)
class Windows:
    """{class: {window = DURATION, keep = DURATION}}: each duration a number and a unit
    (s, m, h, d, w) or "forever" (the default of both); keep at least the window. The
    class "*" stands for every class not listed, and for items without one."""

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(value)
        out = {}
        for name, table in value.items():
            if isinstance(table, Window):
                out[str(name)] = table
                continue
            if not isinstance(name, str) or not name or not isinstance(table, Mapping) \
                    or set(table) - {"window", "keep"}:
                raise ValueError(value)
            made = Window(seconds_of(table.get("window", "forever")), seconds_of(table.get("keep", "forever")))
            if made.keep < made.window:
                raise ValueError(value)
            out[name] = made
        return out

    def parse(self, text: str) -> Any:
        return toml_value(text)

    def describe(self) -> str:
        return ('a table of classes ("*": every other class, and items without one), each '
                '{ window = DURATION, keep = DURATION }, a duration being a number and a unit '
                '(s, m, h, d, w) or "forever", keep at least the window')


@dataclass(frozen=True)
class Knots:
    """Calibration knots: two or more [raw, score] pairs, raw strictly increasing (so the
    interpolation is a function) within the raw similarity's range, score in [0, 1]."""

    lo: float | None = None
    hi: float | None = None

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or len(value) < 2:
            raise ValueError(value)
        knots = []
        for knot in value:
            if not isinstance(knot, (list, tuple)) or len(knot) != 2:
                raise ValueError(value)
            raw, score = (Number(float).coerce(x) for x in knot)
            if knots and raw <= knots[-1][0]:
                raise ValueError(value)
            if (self.lo is not None and raw < self.lo) or (self.hi is not None and raw > self.hi) \
                    or not 0.0 <= score <= 1.0:
                raise ValueError(value)
            knots.append((raw, score))
        return tuple(knots)

    def parse(self, text: str) -> Any:
        return toml_value(text)

    def describe(self) -> str:
        within = (f" within [{self.lo:g}, {self.hi:g}]"
                  if self.lo is not None and self.hi is not None else "")
        return f"two or more [raw, score] pairs, raw increasing{within}, score in [0, 1]"


def setting(default: Any, check: Check) -> Any:
    """A field with its default and its allowed type and range, declared together (a test
    walks every field of the settings for its check)."""
    return field(default=default, metadata={"check": check})


def declared_check(kind: type, name: str) -> Check | None:
    """A field's check: its own, else the one a base class declared for that name (a
    signal's settings that only change a default, say `weight`, keep the base's check)."""
    for klass in kind.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and "check" in f.metadata:
            return f.metadata["check"]
    return None


def check_of(kind: type, name: str) -> Check | None:
    """The declared check, else (a plugin's settings that declare none) the type of the
    field's default."""
    declared = declared_check(kind, name)
    if declared is not None:
        return declared
    default = kind.__dataclass_fields__[name].default
    if isinstance(default, bool):
        return Flag()
    if isinstance(default, (int, float)):
        return Number(type(default))
    return None


# Where every set of settings is checked: each field against its own check, then the
# class's CROSS_CHECKS, (keys, holds(*values), what is expected).
Cross = tuple[tuple[str, ...], Callable[..., bool], str]


def _validate(obj: Any) -> None:
    try:
        for f in dataclasses.fields(obj):
            check = check_of(type(obj), f.name)
            if check is None:
                continue
            value = getattr(obj, f.name)
            try:
                fixed = check.coerce(value)
            except (TypeError, ValueError):
                raise Invalid((f.name,), (value,), check.describe()) from None
            object.__setattr__(obj, f.name, fixed)  # frozen: the one place a value is normalised
        for keys, holds, expected in obj.CROSS_CHECKS:
            values = [getattr(obj, k) for k in keys]
            if not holds(*values):
                raise Invalid(keys, values, expected)
    except Invalid as bad:
        raise bad.error(type(obj).__name__) from None


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

    # 0 leaves the signal out of the fused score (score/fusion.py); at least one content
    # signal must weigh more (load_settings).
    weight: float = setting(0.0, Number(float, lo=0))
    calibration: Calibration = setting(((0.0, 0.0), (1.0, 1.0)), Knots())
    # Top-level keys of older configs this signal still reads, each with a deprecation
    # message: old key -> field.
    LEGACY: ClassVar[Mapping[str, str]] = {}
    CROSS_CHECKS: ClassVar[tuple[Cross, ...]] = ()

    def __post_init__(self) -> None:
        _validate(self)


S = TypeVar("S", bound=SignalSettings)

TIERS = ("strong", "medium", "weak")
# What `canonical_rule` may name, each implemented in score/canonical.py.
CANONICAL_CRITERIA = ("earliest_published", "longest_text", "largest_pictures", "longest_video",
                      "earliest_ingested")

COUNT = Number(int, lo=1)
SCORE = Number(float, 0, 1, lo_open=True)  # a score on the common scale, or a share
POSITIVE = Number(float, lo=0, lo_open=True)


@dataclass(frozen=True)
class Settings:
    # Tiers: strong pairs merge automatically, medium go to review, weak are only logged.
    tier_strong: float = setting(0.9, SCORE)
    tier_medium: float = setting(0.8, SCORE)
    tier_weak: float = setting(0.7, SCORE)
    # Pairs are stored down to this fused score, below the weak tier and with no tier (not
    # shown as pairs anywhere), so lowering tier_weak as far as this shows pairs scored
    # before at once, with no re-ingest. 0.5 is where every signal's calibration puts even
    # odds of a duplicate (SignalSettings): below it a pair is more likely distinct.
    pair_floor: float = setting(0.5, Number(float, 0, 1))
    # "adaptive" (pipeline/thresholds.py): each content signal's pairs (by their kind) get
    # a medium tier of their own, the mean less `adaptive_sigmas` standard deviations of
    # the scores of that kind's pairs (weak or above) among the last `adaptive_every`
    # items, never under `adaptive_floor` nor tier_weak, never over tier_strong; recomputed
    # as items arrive, each cut-off kept in the store's history. The strong tier stays
    # fixed: what merges without review is a person's decision.
    thresholds: str = setting("fixed", Choice(("fixed", "adaptive")))
    adaptive_every: int = setting(1000, COUNT)
    adaptive_floor: float = setting(0.6, SCORE)
    adaptive_sigmas: float = setting(2.0, POSITIVE)

    # Input limits: past these an item fails with a reason instead of exhausting memory.
    max_file_bytes: int = setting(256 * 1024 * 1024, COUNT)
    max_text_chars: int = setting(2_000_000, COUNT)
    max_image_pixels: int = setting(64_000_000, COUNT)
    max_manifest_line_bytes: int = setting(8 * 1024 * 1024, COUNT)
    max_page_chars: int = setting(5_000_000, COUNT)
    max_page_depth: int = setting(200, COUNT)
    max_video_seconds: int = setting(3600, COUNT)
    # An item's meta (or a manifest line) nested deeper fails `too_deep`: the JSON readers
    # and writers of Python and the databases recurse per level.
    max_meta_depth: int = setting(64, COUNT)

    # A line of a page's main text is boilerplate of its site (dropped from the text
    # signal) once it appears on at least this many of the site's pages and this share.
    block_min_pages: int = setting(5, Number(int, lo=2))  # at 1 a site's first page is all boilerplate
    block_min_share: float = setting(0.2, SCORE)
    # A line on at least block_min_pages pages of a site at a smaller share recurs: side
    # matter (related-article lists, ads, widgets) that changes from page to page, or an
    # article posted that often. It leaves a page whose other lines keep at least this
    # share of its text (side matter beside an article); a page where nearly every line
    # recurs keeps them (the much-posted article). extract/web.py says why.
    block_min_left: float = setting(0.1, SCORE)
    # Pages come before their site's side matter is known to recur: when lines of a site
    # start to count (common or recurring), its last this many pages stored before are
    # cleaned of them too, and their text signed again and its pairs scored again.
    block_recheck_pages: int = setting(2000, Number(int, lo=0))

    # Ingest commits every `ingest_chunk` items, so a killed run loses at most one chunk.
    # Each commit rewrites the index pages its rows touched (the text and content hashes
    # land on random pages): 2,000 items a commit rather than 500 ingested 100,000 texts
    # 16% faster. A chunk's loaded items (decoded media, texts) are held in memory until it
    # commits, several chunks at once with --workers, so a chunk also closes before its
    # items' files and texts pass `ingest_chunk_bytes` (an item larger than that goes
    # alone): two 200 MB pictures a chunk rather than 2,000.
    ingest_chunk: int = setting(2000, COUNT)
    ingest_chunk_bytes: int = setting(512 * 1024 * 1024, COUNT)
    # The ray engine's task: this many records at most (a manifest's lines, a folder's
    # files), and a chunk's at most. Small enough that a folder of pictures keeps every
    # worker busy; large enough that a task of texts is not mostly Ray's own overhead.
    engine_block: int = setting(256, COUNT)
    # An exact-duplicate group pairs each new member with at most this many earlier ones
    # (the earliest first); clusters stay whole through union-find, the pairs table bounded.
    max_exact_pairs_per_item: int = setting(50, COUNT)
    # A signal's search gives each item at most this many candidates stored before it (the
    # earliest first) and as many after it, and a text band bucket at most this many
    # entries: a page repeated across a crawl costs each copy this many pairs, not one per
    # copy (signals/base.py `capped_pairs`). Runs report what it cut.
    max_candidates_per_item: int = setting(100, COUNT)

    # TF-IDF (the text signal's term weights): jieba's IDF prior until this many texts,
    # then corpus frequencies, frozen anew (and everything re-signed) each time the corpus
    # has grown by this factor. A refresh runs a bounded step after each chunk, spread
    # over most of the growth to the next one (signals/text_refresh.py); in a store of at
    # most `tfidf_refresh_at_once` texts it runs whole after the chunk that reached it.
    tfidf_min_docs: int = setting(200, COUNT)
    tfidf_refresh_growth: float = setting(8.0, Number(float, lo=1, lo_open=True))
    tfidf_refresh_at_once: int = setting(2000, Number(int, lo=0))
    # A refresh point whose new frequencies would change less than this share of a
    # signature's MinHash positions (the mean over the newest 1,000 texts, none of them
    # changed by ten times as much) signs nothing again: the typical pair's estimate
    # would move by at most twice that, under the noise of the estimate itself (its
    # standard error is 0.044 at 0.5 with 128 positions). The active weights stay, and
    # the next point is counted from the texts counted then. A corpus whose words shift
    # (a new site template, a new topic), or a part of it, changes more and is signed
    # again (text_refresh.worth_signing); 0 signs again at every point.
    tfidf_refresh_min_change: float = setting(0.01, Number(float, 0, 1))

    # Learned word weights (learn/weights.py): multiplier = exp(step * net label evidence),
    # bounded; a word at the floor leaves the sketches. 3 net labels reach either bound.
    word_weight_min: float = setting(0.1, Number(float, 0, 1, lo_open=True, hi_open=True))
    word_weight_max: float = setting(20.0, Number(float, lo=1, lo_open=True))
    word_weight_step: float = setting(1.0, POSITIVE)

    # Review (`mmdedup review`): the queue holds pairs of these tiers, in this order (each
    # most uncertain first: medium and weak highest score first, strong lowest first); a
    # session holds the pair it shows, and a hold lapses after this many minutes (so the
    # pairs of a session that crashed come back to the queue).
    review_tiers: tuple[str, ...] = setting(("medium",), Words(TIERS))
    review_claim_minutes: float = setting(30.0, POSITIVE)

    # Fitting fusion weights and thresholds to the labels (learn/fusion_fit.py): nothing is
    # fitted until both duplicate and distinct have this many labels; the prior strength is
    # the precision of the pull of each log-weight toward its default above (higher: the
    # labels move the weights less).
    fusion_min_labels: int = setting(20, Number(int, lo=2))  # a spread needs two of each
    fusion_prior_strength: float = setting(4.0, POSITIVE)

    # A cluster's canonical member (score/canonical.py): the criteria in order, each
    # breaking the ties of the one before; a publication time is read from the first of
    # these meta keys that holds one, else from the date the item's page declares.
    canonical_rule: tuple[str, ...] = setting(CANONICAL_CRITERIA, Words(CANONICAL_CRITERIA))
    canonical_time_keys: tuple[str, ...] = setting(
        ("published", "published_at", "publish_time", "pubdate", "date"), Words())

    # `mmdedup query` on a store that no query server answers starts one in the background
    # (cli/query_server.py), which answers the queries after it without starting Python
    # and opening the store each time, and stops after this many seconds without a query
    # (or when its store folder goes); 0: a query never starts one.
    query_server_idle: float = setting(600.0, Number(float, lo=0))

    # A stream (`ingest -`, `ingest FILE --follow`: pipeline/stream.py) is written in
    # batches of at most `stream_batch` records, each closed at the latest this many
    # seconds after its first record came: the longest an item waits for its decision.
    stream_batch: int = setting(100, COUNT)
    stream_batch_seconds: float = setting(1.0, POSITIVE)
    # A stream's exact repeats of stored items take their original's signatures instead
    # of being signed again, found through a Bloom filter of the window's content keys
    # (pipeline/repeats.py); the decisions are the same either way.
    stream_repeats: bool = setting(True, Flag())

    # Time (pipeline/windows.py): an item's content class is the meta field `class_field`
    # ("" or absent: no class), its time the ISO time in `time_field` (else when it was
    # ingested). Per class, `windows` sets how far apart in time two items may be and
    # still be compared ("window": the later one's class decides), and how long an item
    # is kept ("keep": `mmdedup expire`, and every ingest, deletes older ones). The class
    # "*" stands for every class not listed and for items without one; without it, those
    # are compared and kept forever. Once every class's window is finite ("*" included),
    # an item older than the widest window leaves the candidate indexes (`expire`), so
    # their size follows the window, not the history. E.g. in config.toml:
    #     [windows]
    #     news = { window = "7d", keep = "90d" }
    #     notice = { window = "forever" }
    #     "*" = { window = "30d" }
    class_field: str = setting("", Name())
    time_field: str = setting("", Name())
    windows: Mapping[str, Window] = field(default_factory=dict, metadata={"check": Windows()})
    # A window shared through Redis (index/redis_window.py): the exact keys and the text
    # signal's band keys, SimHash chunk keys and b-bit rows are kept there, once, rather
    # than in each process, so that every stream or batch process on every machine
    # searches the same keys; the store stays the truth, and the window is rebuilt from it
    # when Redis loses it. Each key expires two widest windows after its last write (never
    # without a finite widest window). "": each process keeps its own indexes.
    window_store: str = setting("", StoreUrl())

    # Each signal's settings by name, filled in by `load_settings` for every registered
    # signal; a signal missing here (Settings() in a test) runs on its defaults.
    signals: Mapping[str, SignalSettings] = field(default_factory=dict)
    # {pair kind: medium tier} in force under `thresholds = "adaptive"`, read from the store
    # (not configured): the latest cut-off of each kind that has one.
    adapted: Mapping[str, float] = field(default_factory=dict)

    CROSS_CHECKS: ClassVar[tuple[Cross, ...]] = (
        (("tier_weak", "tier_medium", "tier_strong"), lambda w, m, s: w <= m <= s,
         "tier_weak <= tier_medium <= tier_strong"),
        (("pair_floor", "tier_weak"), lambda f, w: f <= w,
         "pair_floor <= tier_weak (pairs scoring under pair_floor are not stored, so no tier "
         "reaches below it: raise tier_weak, or lower pair_floor, which keeps more pairs from "
         "the next scoring on)"),
    )

    def __post_init__(self) -> None:
        _validate(self)
        for name, value in self.signals.items():
            if not isinstance(value, SignalSettings):
                raise SettingsError(f"Settings: signals[{name!r}] = {value!r}: expected a "
                                    f"SignalSettings (the signal's settings class)")

    def signal(self, name: str, kind: type[S]) -> S:
        found = self.signals.get(name)
        return found if isinstance(found, kind) else kind()

    def with_weights(self, weights: Mapping[str, float], kinds: Mapping[str, type[SignalSettings]]) -> Settings:
        """These settings with the signals' fusion weights replaced (a fitted model)."""
        signals = {name: dataclasses.replace(self.signal(name, kind), weight=float(weights[name]))
                   if name in weights else self.signal(name, kind) for name, kind in kinds.items()}
        return dataclasses.replace(self, signals=signals)

    @property
    def tier_thresholds(self) -> tuple[tuple[str, float | dict[str, float]], ...]:
        """The tiers with their lowest scores, strongest first. A pair's tier is the first
        whose threshold its score reaches (none below the weak one), derived whenever a pair
        is read (store/pairs.py `tier_of`), never stored: a change of tiers applies to every
        stored pair at once. Under adaptive thresholds the medium tier's lowest score is
        {pair kind: score, "*": for the other kinds}."""
        medium: float | dict[str, float] = self.tier_medium
        if self.thresholds == "adaptive" and self.adapted:
            medium = {**self.adapted, "*": self.tier_medium}
        return (("strong", self.tier_strong), ("medium", medium), ("weak", self.tier_weak))

    def tier(self, score: float, kind: str | None = None) -> str | None:
        """The tier a fused score of a pair of `kind` falls in, or None below the weak
        threshold."""
        return next((name for name, lowest in self.tier_thresholds
                     if score >= (lowest.get(kind, lowest["*"]) if isinstance(lowest, dict) else lowest)), None)

    def window_of(self, class_name: str | None) -> Window:
        """A content class's window and retention: its own, else those of "*"."""
        return self.windows.get(class_name or "*") or self.windows.get("*") or Window()

    @property
    def windowed(self) -> bool:
        """Whether any class is compared within a finite window."""
        return any(math.isfinite(w.window) for w in self.windows.values())

    @property
    def widest_window(self) -> float:
        """How far back any item that arrives may be compared (seconds): the widest window
        of any class, "*" included (inf without "*": a class not listed looks back forever)."""
        if "*" not in self.windows:
            return math.inf
        return max(w.window for w in self.windows.values())




def tiers_at_least(min_tier: str) -> tuple[str, ...]:
    """The tiers at or above `min_tier` (strong is the highest)."""
    if min_tier not in TIERS:
        raise ValueError(f"unknown tier {min_tier!r}; expected one of {', '.join(TIERS)}")
    return TIERS[: TIERS.index(min_tier) + 1]


# Settings fields that config.toml and the environment do not set: each signal's settings
# (read from [signals.<name>] tables into their own classes) and the adaptive medium tiers
# (read from the store).
NOT_CONFIGURED = ("signals", "adapted")


def load_settings(home: Path, signal_kinds: Mapping[str, type[SignalSettings]],
                  content: Collection[str] = ()) -> Settings:
    """Defaults, overridden by `<home>/config.toml` and then by environment variables:
    MMDEDUP_<FIELD> for a global setting, MMDEDUP_<SIGNAL>_<FIELD> for a signal's.
    `signal_kinds`: each registered signal's settings class, by name; `content`: the
    content signals, at least one of which must have a weight above 0. Raises
    SettingsError naming the file or variable of a bad value."""
    path = home / "config.toml"
    values = _read_toml(path)
    tables = values.pop("signals", {})
    if not isinstance(tables, dict):
        raise SettingsError(f"{path}: `signals` must be a table of [signals.<name>] tables")
    unknown = set(tables) - set(signal_kinds)
    if unknown:
        raise SettingsError(f"{path}: unknown signal(s) {', '.join(sorted(unknown))} under [signals]; "
                            f"known: {', '.join(signal_kinds)}")
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise SettingsError(f"{path}: [signals.{name}] must be a table of settings, "
                                f"not {_show(table)}")
    _read_legacy(path, values, tables, signal_kinds)
    known = {f.name for f in dataclasses.fields(Settings) if f.name not in NOT_CONFIGURED}
    unknown = set(values) - known
    if unknown:
        raise SettingsError(f"{path}: unknown settings {', '.join(sorted(unknown))}")
    sources = {name: str(path) for name in values}
    for name in known:
        _from_env(f"MMDEDUP_{name.upper()}", Settings, name, "", values, sources)
    signals = {}
    for name, kind in signal_kinds.items():
        prefix = f"[signals.{name}] "
        table = dict(tables.get(name) or {})
        fields = [f.name for f in dataclasses.fields(kind)]
        unknown = set(table) - set(fields)
        if unknown:
            raise SettingsError(f"{path}: [signals.{name}] has unknown key(s) {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(fields)}")
        table_sources = {key: str(path) for key in table}
        for field_name in fields:
            _from_env(f"MMDEDUP_{name.upper()}_{field_name.upper()}", kind, field_name, prefix,
                      table, table_sources)
        signals[name] = _build(kind, table, table_sources, prefix)
        sources.update({f"{prefix}{k}": v for k, v in table_sources.items()})
    settings = _build(Settings, values, sources, "", signals=signals)
    _check_content_weights(settings, content, sources, path)
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _build(kind: type, values: dict[str, Any], sources: Mapping[str, str], prefix: str,
           **extra: Any) -> Any:
    """`kind(**values)`, its error saying where the bad values were set."""
    try:
        return kind(**values, **extra)
    except SettingsError as exc:
        if exc.invalid is None:
            raise
        where = sorted({sources[k] for k in exc.invalid.keys if k in sources}) or [kind.__name__]
        raise exc.invalid.error(", ".join(where), prefix) from None


def _check_content_weights(settings: Settings, content: Collection[str],
                           sources: Mapping[str, str], path: Path) -> None:
    """At least one content signal must count in the fused score: without one, structural
    signals (dom) would decide alone, or nothing would ever pair."""
    weights = [settings.signals[name].weight for name in content if name in settings.signals]
    if not content or any(w > 0 for w in weights):
        return
    keys = [f"[signals.{name}] weight" for name in content]
    where = sorted({sources[k] for k in keys if k in sources}) or [str(path)]
    raise Invalid(keys, [0.0] * len(keys), "a weight above 0 on at least one content signal "
                  f"({', '.join(content)})").error(", ".join(where))


def _read_legacy(path: Path, values: dict[str, Any], tables: dict[str, Any],
                 signal_kinds: Mapping[str, type[SignalSettings]]) -> None:
    """Move top-level keys of older configs into their signal's table, saying so once."""
    if values.pop("retrain_lock_seconds", None) is not None:
        log.warning("%s: `retrain_lock_seconds` is no longer used (a retrain's lock dies with its "
                    "process): remove it", path)
    weights = values.pop("fusion_weights", None)
    if weights is not None:
        log.warning("%s: `fusion_weights` is deprecated: set `weight` under [signals.<name>]", path)
        if not isinstance(weights, dict):
            raise SettingsError(f"{path}: fusion_weights = {_show(weights)}: expected a table of "
                                f"weights by signal name (better: `weight` under [signals.<name>])")
        for name, weight in weights.items():
            if name in signal_kinds:
                tables.setdefault(name, {}).setdefault("weight", weight)
    for name, kind in signal_kinds.items():
        for old, new in kind.LEGACY.items():
            if old in values:
                log.warning("%s: `%s` is deprecated: write it as `%s` under [signals.%s]",
                            path, old, new, name)
                tables.setdefault(name, {}).setdefault(new, values.pop(old))


def _from_env(variable: str, kind: type, name: str, prefix: str, into: dict[str, Any],
              sources: dict[str, str]) -> None:
    """A value from the environment, read as its field's check reads text."""
    raw = os.environ.get(variable)
    check = check_of(kind, name)
    if raw is None or check is None:
        return
    try:
        into[name] = check.parse(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"environment variable {variable}: {prefix}{name} = {_show(raw)}: "
                            f"expected {check.describe()}") from None
    sources[name] = f"environment variable {variable}"
