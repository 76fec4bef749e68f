"""Every threshold, weight and limit, with its default written once.

A deployment overrides any of them in `<home>/config.toml` (top-level keys named like the
fields below); nothing else in the package hard-codes a number a user might want to tune.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HOME = ".mmdedup"


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

    # Every `*_calibration` map: raw similarity -> score on the common scale, by linear
    # interpolation between (raw, score) knots. `python scripts/calibrate_signals.py` fits
    # them on labelled benchmark pairs, one definition for all: score = P(duplicate | raw)
    # when 1% of the pairs compared are duplicates (isotonic regression), knots where it
    # crosses 0.1, 0.5 and the tiers; a fitted map replaces a default only where it is at
    # least as good on those pairs (docs/benchmarks.md, "Signal calibration").
    # Text signal. Raw similarity: the larger of the weighted Jaccard of TF-IDF terms and
    # the Jaccard of word 3-grams. Checked, not replaced, by the fit: on the labelled text
    # sets (topical notices included) it has precision 1.0 at medium and strong, and it
    # keeps a review band (raw 0.55-0.65) that the isotonic fit, on synthetic sets that
    # separate cleanly, squeezes to 0.005 (docs/benchmarks.md, "Signal calibration").
    text_calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0), (0.3, 0.5), (0.45, 0.7), (0.55, 0.8), (0.65, 0.9), (1.0, 1.0))
    # Candidates: LSH over the first `text_lsh_perms` positions of the weighted MinHash,
    # bands and rows chosen for weighted Jaccard >= `text_lsh_threshold` (88 positions give
    # 22 bands of 4 rows, 185 bytes a document: with the Hamming index, inside a 300-byte
    # budget at a million documents), and SimHash codes within `text_simhash_radius` bits.
    text_lsh_threshold: float = 0.4
    text_lsh_perms: int = 88
    text_simhash_radius: int = 3
    # TF-IDF: jieba's IDF prior until this many texts, then corpus frequencies, frozen anew
    # (and everything re-signed) each time the corpus has grown by this factor.
    tfidf_min_docs: int = 200
    tfidf_refresh_growth: float = 8.0

    # Learned word weights (learn/weights.py): multiplier = exp(step * net label evidence),
    # bounded; a word at the floor leaves the sketches. 3 net labels reach either bound.
    word_weight_min: float = 0.1
    word_weight_max: float = 20.0
    word_weight_step: float = 1.0
    # A retrain holds a lock in the database; one older than this was left by a crashed run.
    retrain_lock_seconds: int = 6 * 3600

    # Image signal: pHash distance in bits -> score; candidates within `image_radius`.
    # Set by hand; the fit agrees on weak and medium (12 bits is medium, 14 below the
    # tiers: distances are even, each pHash sets the 32 bits above its median) and would
    # make 10 bits strong, losing precision there, so this map stays.
    image_calibration: tuple[tuple[float, float], ...] = (
        (0.0, 1.0), (4.0, 0.95), (8.0, 0.9), (12.0, 0.8), (14.0, 0.6), (24.0, 0.2), (32.0, 0.0))
    image_radius: int = 12

    # Video signal: frames sampled on content (about 1 a second plus scene cuts), matched
    # within this radius in temporal order; the aligned share of frames -> score (true
    # copies align >= 0.89 in the benchmark, different videos of the same photos <= 0.34).
    # A stored video becomes a candidate once this many of a new video's frames hit it.
    video_frame_radius: int = 12
    video_min_frame_hits: int = 2
    # fitted by `python scripts/calibrate_signals.py --seed 1`
    video_calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0), (0.39, 0.1), (0.617, 0.5), (0.73, 0.7), (0.786, 0.8), (0.843, 0.9),
        (1.0, 1.0))
    max_video_seconds: int = 3600

    # CLIP (open_clip, model from the registry): on when its weights are on this machine
    # (a checkpoint, or the tag's weights in the model cache); `clip_download` lets the
    # tag download them once. Cosine -> score; without calibration on real weights the
    # signal only moves the fused mean (see fusion_weights), it never decides alone.
    clip_download: bool = False
    clip_neighbours: int = 10
    clip_min_cosine: float = 0.85
    clip_calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0), (0.85, 0.5), (0.92, 0.7), (0.96, 0.85), (1.0, 1.0))
    # CLIP text-to-image in queries (`clip_text`): a query text through CLIP's text tower,
    # searched among the pictures' and keyframes' CLIP vectors (this many nearest, at
    # least this cosine). Text-image cosines run far lower than image-image ones (about
    # 0.2-0.35 for a caption that fits, with ViT-B-32), hence a map of its own. UNCALIBRATED:
    # set by hand without real weights (no labelled caption pairs can be scored here); it
    # stays below the weak tier, so a caption match orders query results and never
    # claims a duplicate.
    # In a query's fused score it weighs `clip_text_weight` beside `fusion_weights` (it
    # never scores pairs, so it is not among them).
    clip_text_neighbours: int = 50
    clip_text_min_cosine: float = 0.15
    clip_text_weight: float = 0.1
    clip_text_calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0), (0.15, 0.05), (0.25, 0.3), (0.35, 0.6), (1.0, 0.6))

    # Semantic text signal (sentence embeddings): "auto" = on where a GPU is present, "on",
    # "off". Cosine -> score; only near-paraphrases (cosine >= 0.88) reach the weak tier.
    # Set by hand: fitted on templated paraphrases and one-word-changed hard negatives
    # (scripts/calibrate_signals.py), MiniLM alone would never reach the weak tier, which
    # loses recall, so this map stays until it is fitted on real labelled pairs.
    semantic: str = "auto"
    semantic_neighbours: int = 10
    semantic_min_cosine: float = 0.85
    semantic_calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0), (0.8, 0.4), (0.88, 0.7), (0.93, 0.8), (0.97, 0.9), (1.0, 1.0))

    # Review (`mmdedup review`): the queue holds pairs of these tiers, in this order (each
    # most uncertain first: medium and weak highest score first, strong lowest first); a
    # session holds the pair it shows, and a hold lapses after this many minutes (so the
    # pairs of a session that crashed come back to the queue).
    review_tiers: tuple[str, ...] = ("medium",)
    review_claim_minutes: float = 30.0

    fusion_weights: dict[str, float] = field(
        default_factory=lambda: {"text": 0.5, "image": 0.3, "video": 0.3, "semantic": 0.2,
                                 "clip": 0.1, "dom": 0.2}
    )
    # Fitting fusion weights and thresholds to the labels (learn/fusion_fit.py): nothing is
    # fitted until both duplicate and distinct have this many labels; the prior strength is
    # the precision of the pull of each log-weight toward its default above (higher: the
    # labels move the weights less).
    fusion_min_labels: int = 20
    fusion_prior_strength: float = 4.0

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


# Field types an MMDEDUP_<FIELD> variable can set (annotations are strings here).
_ENV_TYPES = {"int": int, "float": float, "str": str}


def load_settings(home: Path) -> Settings:
    """Defaults, overridden by `<home>/config.toml` and then by MMDEDUP_<FIELD> variables."""
    values: dict[str, object] = {}
    path = home / "config.toml"
    if path.exists():
        with path.open("rb") as fh:
            values.update(tomllib.load(fh))
    known = {f.name: f for f in dataclasses.fields(Settings)}
    unknown = set(values) - set(known)
    if unknown:
        raise ValueError(f"{path}: unknown settings {', '.join(sorted(unknown))}")
    for name, f in known.items():
        env = os.environ.get(f"MMDEDUP_{name.upper()}")
        parse = _ENV_TYPES.get(f.type)
        if env is not None and parse is not None:
            values[name] = parse(env)
    return Settings(**values)  # type: ignore[arg-type]
