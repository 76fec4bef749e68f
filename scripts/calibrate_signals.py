"""Calibrate each signal's raw similarity on labelled benchmark pairs.

Every signal's raw figure (the text Jaccard estimate, the image pHash distance in bits, the
video's aligned share of frames, the semantic cosine) is mapped by a piecewise-linear map
(each signal's `calibration`, signals/<name>.py) onto one common scale where the tier thresholds mean the
same thing for every signal. This script fits those maps on labelled pairs, with one
definition for every signal:

    score(raw) = P(duplicate | raw) when a share `--prior` of the pairs compared are
                 duplicates,

estimated by isotonic regression (monotone in raw) of the pair's label on its raw value,
positives and negatives weighted so that they make up `prior` and 1 - prior of the
weight; each fitted block is shrunk towards the prior by one pseudo-pair (a block of n
pairs keeps n/(n+1) of its own estimate), so a handful of pairs never yields a certainty;
between fitted points, and across a gap in raw values where the benchmark has no pair,
the estimate is interpolated linearly. The fitted curve is then reduced to a handful of
knots: where it crosses 0.1, 0.5, the weak, medium and strong tiers (0.7, 0.8, 0.9 by
default), plus the two ends of the raw range (no similarity -> 0, identical -> 1). The
map passes through the tier crossings exactly, so a pair reaches a tier under the knots
exactly when it does under the fitted curve: a score >= tier_medium means an estimated
precision of at least tier_medium, for every signal, under the stated prior.

Labelled pairs come from the benchmark generators in scripts/bench, seeded:

    text      text_quality.py: 150 originals and their 1%/5%/15%-edited variants against
              every pair from different families (body alone, and wrapped in the 600-word
              site template); the Chinese and English edit sets (reorder, punctuation
              width, source line, 70% truncation, 2% words) against every pair from
              different families (same-topic texts among them); web_quality.py's pages
              (main text, blocks repeated on a site dropped), a body under another
              template or with a new date line or ad block against every other page.
              Raw: text_sketches.similarity()["raw"] under a TF-IDF model counted over each
              corpus, as a store's refresh makes it.
    image     image_quality.py: 21 photographs and 11 edits of each, every edit against
              every original, and the originals against each other; then the photographs
              and their grid tiles (kept while >= 16 bits apart, as mixed_quality.py's
              pool) and the same 11 edits of each, every edit against every kept picture.
              Raw: image_distance() in bits, what the image signal maps.
    video     video_quality.py: 10 source clips and 9 copies of each against the sources
              and copies of other clips, the re-edits of the same photos and the still /
              pan / zoom clips of one photo as hard negatives. Raw: video_match().score at
              the configured frame radius, what the video signal maps.
    semantic  (with --semantic, needs sentence-transformers and the offline MiniLM):
              English sentences and their paraphrases against hard negatives (one word
              changed that changes the meaning: an antonym, a negation, another number,
              another actor) and other sentences. Raw: the cosine of SentenceEncoder vectors.

For each signal it prints the fitted knots next to the current default, precision and
recall of the benchmark pairs at the weak, medium and strong tiers under both maps, and
the exact settings lines of the fitted maps.

    python scripts/calibrate_signals.py [--seed 1] [--prior 0.01] [--signals text,image,video]
                                        [--semantic] [--clips 10] [--at-recall 0.781,0.9]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from mmdedup.config import Settings
from mmdedup.signals import registry

BENCH = Path(__file__).resolve().parent / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

LEVELS = (0.1, 0.5)  # knots besides the tiers: where the score leaves 0, and its midpoint
DEFAULT_PRIOR = 0.01


# --------------------------------------------------------------------------------------
# The fit: one definition for every signal
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signal:
    """How a signal's raw figure runs: `increasing` (higher raw = more alike) and the raw
    range whose ends are pinned (lo -> 0 and hi -> 1 when increasing; lo -> 1 and hi -> 0
    when decreasing, as for a Hamming distance)."""

    name: str
    setting: str
    increasing: bool
    lo: float
    hi: float


SIGNALS = {
    "text": Signal("text", "text_calibration", True, 0.0, 1.0),
    "image": Signal("image", "image_calibration", False, 0.0, 32.0),
    "video": Signal("video", "video_calibration", True, 0.0, 1.0),
    "semantic": Signal("semantic", "semantic_calibration", True, 0.0, 1.0),
}


def fit_curve(raw: np.ndarray, label: np.ndarray, *, increasing: bool = True,
              prior: float = DEFAULT_PRIOR, shrink: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): P(duplicate | raw) at the fitted block ends, sorted by x, for linear
    interpolation between them.

    Isotonic regression of the label on raw, positives weighted to `prior` of the total
    and negatives to the rest; each block's estimate p over n pairs is then shrunk to
    (n * p + shrink * prior) / (n + shrink). Needs pairs of both labels."""
    from sklearn.isotonic import IsotonicRegression

    raw = np.asarray(raw, np.float64)
    label = np.asarray(label, bool)
    n_pos, n_neg = int(label.sum()), int((~label).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"need duplicates and non-duplicates ({n_pos} and {n_neg})")
    weight = np.where(label, prior / n_pos, (1.0 - prior) / n_neg)
    iso = IsotonicRegression(increasing=increasing, y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(raw, label.astype(np.float64), sample_weight=weight)
    x = np.asarray(iso.X_thresholds_, np.float64)
    y = np.asarray(iso.y_thresholds_, np.float64)
    # Pairs per fitted block: a block is a run of equal y (its two ends are kept by sklearn).
    blocks = np.concatenate([[0], np.cumsum(np.abs(np.diff(y)) > 1e-12)])
    order = np.searchsorted(x, raw, side="right") - 1
    order = np.clip(order, 0, len(x) - 1)
    per_block = np.bincount(blocks[order], minlength=blocks.max() + 1)
    n = per_block[blocks].astype(np.float64)
    y = (n * y + shrink * prior) / (n + shrink)
    return x, y


def crossing(x: np.ndarray, y: np.ndarray, level: float, increasing: bool) -> float | None:
    """The raw value where the piecewise-linear curve (x, y) reaches `level`: the smallest
    x with y >= level when increasing, the largest when decreasing; None if never."""
    if not increasing:
        x, y = -x[::-1], y[::-1]
    above = np.nonzero(y >= level)[0]
    if len(above) == 0:
        return None
    i = int(above[0])
    if i == 0:
        at = x[0]
    else:
        x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
        at = x0 + (level - y0) * (x1 - x0) / (y1 - y0)
    return float(at if increasing else -at)


def knots(x: np.ndarray, y: np.ndarray, signal: Signal,
          levels: tuple[float, ...]) -> tuple[tuple[float, float], ...]:
    """The fitted curve (x, y) reduced to knots: the crossing of each level, and the raw
    range's ends pinned (no similarity -> 0, identical -> 1). Crossings are rounded
    towards "less alike" (up for a similarity to 3 decimals, down for a distance to 0.1
    bit), so the knots never admit a pair to a tier that the fitted curve keeps out. Where
    the curve stops short of a level, its most-alike end (its score there) is a knot instead,
    so the map rises to "identical" only past the last labelled pair; where two levels
    cross at one raw value, the higher level is kept."""
    digits = 3 if signal.hi <= 1.0 else 1
    scale = 10 ** digits
    inner: dict[float, float] = {}
    for level in sorted(levels):
        at = crossing(x, y, level, signal.increasing)
        if at is None:
            # never reached: the curve's most-alike end keeps its fitted score there
            top = len(x) - 1 if signal.increasing else 0
            at, level = round(float(x[top]), digits), float(round(y[top], 3))
        else:
            at = (np.ceil(at * scale - 1e-9) if signal.increasing else np.floor(at * scale + 1e-9)) / scale
        if signal.lo < at < signal.hi:
            inner[float(at)] = max(level, inner.get(float(at), 0.0))
    ends = {signal.lo: 0.0, signal.hi: 1.0} if signal.increasing else {signal.lo: 1.0, signal.hi: 0.0}
    pts = sorted({**inner, **ends}.items())
    # the map must stay monotone: a later knot never undoes an earlier level
    out: list[tuple[float, float]] = []
    for px, py in pts:
        if out and ((py < out[-1][1]) if signal.increasing else (py > out[-1][1])):
            continue
        out.append((float(px), float(py)))
    return tuple(out)


def fit_map(raw: np.ndarray, label: np.ndarray, signal: Signal, *, prior: float = DEFAULT_PRIOR,
            tiers: tuple[float, ...] = (0.7, 0.8, 0.9)) -> tuple[tuple[float, float], ...]:
    """Labelled pairs -> the knots of the signal's calibration map (see module doc)."""
    x, y = fit_curve(raw, label, increasing=signal.increasing, prior=prior)
    return knots(x, y, signal, LEVELS + tuple(tiers))


def apply(calibration, raw: np.ndarray) -> np.ndarray:
    xs, ys = zip(*calibration)
    return np.interp(np.asarray(raw, np.float64), xs, ys)


def tier_table(raw: np.ndarray, label: np.ndarray, calibration, tiers: dict[str, float]
               ) -> dict[str, tuple[float, float, int]]:
    """tier -> (precision, recall, false pairs) of the labelled pairs at or above it."""
    score = apply(calibration, raw)
    out = {}
    for name, t in tiers.items():
        hit = score >= t
        tp, fp = int((hit & label).sum()), int((hit & ~label).sum())
        out[name] = (tp / (tp + fp) if tp + fp else float("nan"), tp / max(1, int(label.sum())), fp)
    return out


def at_least_as_good(cur: dict, fit: dict) -> bool:
    """Recall not lower at equal or better precision, at every tier."""
    for name in cur:
        (pc, rc, _), (pf, rf, _) = cur[name], fit[name]
        pc = 1.0 if np.isnan(pc) else pc
        pf = 1.0 if np.isnan(pf) else pf
        if rf < rc - 1e-12 or pf < pc - 1e-12:
            return False
    return True


# --------------------------------------------------------------------------------------
# Labelled pairs from the benchmark generators
# --------------------------------------------------------------------------------------


@dataclass
class Pairs:
    """Labelled pairs of one benchmark set: raw similarity and duplicate label per pair."""

    raw: np.ndarray
    label: np.ndarray
    source: str

    @staticmethod
    def concat(parts: list[Pairs]) -> Pairs:
        return Pairs(np.concatenate([p.raw for p in parts]), np.concatenate([p.label for p in parts]),
                     " + ".join(p.source for p in parts))


def _text_raw(texts: list[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """text_sketches.similarity()["raw"] of text pairs (a[k], b[k]), every text signed under a
    TF-IDF model counted over these texts (what a store's refresh makes)."""
    from mmdedup.extract.term_weights import TfidfModel, count_documents
    from mmdedup.extract.text_sketches import TextSigner, similarity, tokenize_texts

    tokens = tokenize_texts(texts)
    keys, df = count_documents(tokens)
    signer = TextSigner(TfidfModel.from_counts(keys, df, tokens.n_docs))
    sk = signer.sign_tokens(tokens, texts)
    out = np.zeros(len(a))
    for start in range(0, len(a), 50_000):
        sl = slice(start, start + 50_000)
        out[sl] = similarity(sk.take(a[sl]), sk.take(b[sl]))["raw"]
    return out


def _family_pairs(ids: list[str], family: dict[str, int], positives: list[tuple[str, str]]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, label): the positive pairs and every pair across families."""
    pos = {i: k for k, i in enumerate(ids)}
    a, b, lab = [], [], []
    for x, y in positives:
        a.append(pos[x]); b.append(pos[y]); lab.append(True)  # noqa: E702
    fam = np.array([family[i] for i in ids])
    ia, ib = np.triu_indices(len(ids), 1)
    cross = fam[ia] != fam[ib]
    return (np.concatenate([a, ia[cross]]).astype(np.int64),
            np.concatenate([b, ib[cross]]).astype(np.int64),
            np.concatenate([lab, np.zeros(int(cross.sum()), bool)]))


def text_pairs(seed: int) -> list[Pairs]:
    import text_quality as tq

    out = []
    docs, family, positives, template = tq.template_corpus(seed)
    ids = list(docs)
    a, b, lab = _family_pairs(ids, family, positives)
    for wrapped in (False, True):
        texts = [" ".join((template[:300] + docs[i] + template[300:]) if wrapped else docs[i]) for i in ids]
        out.append(Pairs(_text_raw(texts, a, b), lab, "template corpus" + (" + template" if wrapped else "")))
    for zh in (True, False):
        try:
            rng = random.Random(seed)
            bases = tq.zh_docs(rng) if zh else tq.en_docs()
        except Exception as exc:  # noqa: BLE001 - an optional set: say so and go on
            print(f"({'Chinese' if zh else 'English'} edit set skipped: {exc})", file=sys.stderr)
            continue
        join = "" if zh else " "
        texts: dict[str, str] = {}
        fam: dict[str, int] = {}
        pos: list[tuple[str, str]] = []
        for i, sentences in enumerate(bases):
            texts[f"d{i}"] = join.join(sentences)
            fam[f"d{i}"] = i
            if i >= len(bases) // 2:
                continue
            for kind, variant in tq.edits(sentences, rng, zh).items():
                texts[f"d{i}-{kind}"] = variant
                fam[f"d{i}-{kind}"] = i
                pos.append((f"d{i}", f"d{i}-{kind}"))
        ids = list(texts)
        a, b, lab = _family_pairs(ids, fam, pos)
        out.append(Pairs(_text_raw([texts[i] for i in ids], a, b), lab,
                         "Chinese edits" if zh else "English edits"))
    out.append(notice_pairs(seed))
    return out


def notice_pairs(seed: int) -> Pairs:
    """Topical hard negatives: government and council notices built from one set of
    sentences (scripts/bench/learning.py), where different notices share much of their
    wording. Positives: reposts (new date, outlet and editor lines) and held-out copies.
    The decisive-word pairs are left out: no text similarity can tell them apart; the
    review loop's word weights do."""
    import learning

    data = learning.build(seed, 12, 40)
    texts = {i["id"]: i["text"] for i in data["items"]}
    decisive = {x for key in ("decisive_train", "decisive_test") for pair in data[key] for x in pair}
    ids = [i for i in texts if i not in decisive]
    fam = {i: n for n, i in enumerate(ids)}
    pos = [pair for key in ("repost_train", "repost_test", "held_out") for pair in data[key]]
    for x, y in pos:
        fam[y] = fam[x]
    a, b, lab = _family_pairs(ids, fam, pos)
    return Pairs(_text_raw([texts[i] for i in ids], a, b), lab, "notices (topical negatives)")


def image_pairs(seed: int, distinct: int = 16) -> list[Pairs]:
    """image_quality.py's 21 photographs, each edited 11 ways, every edit against every
    original; then a harder set: the photographs and their 2x2, 3x3 and 4x4 grid tiles,
    kept while at least `distinct` bits from every kept one (as mixed_quality.py builds its
    pool), each edited the same 11 ways, every edit against every kept picture. A tile's
    edit lands near another tile far more often than a whole photo's does."""
    import image_quality as iq
    import mixed_quality
    from mmdedup.extract import image as mi

    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    pics = iq.originals()

    def edited(pool: list) -> tuple[list[bytes], np.ndarray]:
        queries, owner = [], []
        for e in iq.EDITS:
            for j, (_, p) in enumerate(pool):
                queries.append(iq.edit(p, e, rng))
                owner.append(j)
        return queries, np.array(owner)

    max_pixels = Settings().max_image_pixels  # as the ingest passes it
    stored = [iq.encode(p, "PNG") for _, p in pics]
    s = mi.image_codes(stored, max_pixels)
    queries, owner = edited(pics)
    d = mi.image_distance(mi.image_codes(queries, max_pixels), s)  # the image signal's distance
    truth = owner[:, None] == np.arange(len(pics))[None, :]
    out = [Pairs(d.ravel().astype(np.float64), truth.ravel(), "edits vs originals")]
    o = mi.image_distance(s, s)
    ia, ib = np.triu_indices(len(pics), 1)
    out.append(Pairs(o[ia, ib].astype(np.float64), np.zeros(len(ia), bool), "originals vs each other"))

    pool, _ = mixed_quality.picture_pool(distinct)  # the mixed benchmark's pictures
    queries, owner = edited(pool)
    d = mi.image_distance(mi.image_codes(queries, max_pixels),
                          mi.image_codes([iq.encode(p) for _, p in pool], max_pixels))
    truth = owner[:, None] == np.arange(len(pool))[None, :]
    out.append(Pairs(d.ravel().astype(np.float64), truth.ravel(),
                     f"tiles: edits vs {len(pool)} pictures >= {distinct} bits apart"))
    return out


def video_pairs(seed: int, clips: int, radius: int) -> list[Pairs]:
    import video_quality as vq
    from mmdedup.extract.video import video_frames, video_match

    settings = Settings()  # the limits as the ingest passes them
    limits = {"max_seconds": settings.max_video_seconds, "max_bytes": settings.max_file_bytes}
    rng = np.random.default_rng(seed)
    pics = vq.photos()
    order = rng.permutation(len(pics))
    sigs = {}
    for c in range(clips):
        a, b = pics[order[2 * c]], pics[order[2 * c + 1]]
        secs = float(rng.uniform(12, 16))
        frames = vq.clip_frames(a, b, secs, rng)
        source = vq.encode(frames)
        sigs[(c, "source")] = video_frames(source, **limits)
        for v in vq.VARIANTS:
            sigs[(c, v)] = video_frames(vq.variant(v, frames, source), **limits)
        sigs[(c, "re-edit")] = video_frames(vq.encode(vq.clip_frames(a, b, secs, rng)), **limits)
    hard = {k: video_frames(blob, **limits) for k, blob in vq.hard_negatives(pics[order[2 * clips]], 10.0).items()}

    def score(x, y) -> float:
        return video_match(x, y, radius).score

    pos = [score(sigs[(c, "source")], sigs[(c, v)]) for c in range(clips) for v in vq.VARIANTS]
    neg = [score(sigs[(c, "source")], sigs[(d, v)]) for c in range(clips) for d in range(clips)
           if d != c for v in vq.VARIANTS]
    neg += [score(sigs[(c, "source")], sigs[(d, "source")]) for c, d in combinations(range(clips), 2)]
    hardneg = [score(sigs[(c, "source")], sigs[(c, "re-edit")]) for c in range(clips)]
    hardneg += [score(hard[x], hard[y]) for x, y in combinations(list(hard), 2)]
    return [Pairs(np.array(pos + neg), np.array([True] * len(pos) + [False] * len(neg)),
                  "copies vs other clips"),
            Pairs(np.array(hardneg), np.zeros(len(hardneg), bool), "same photos, other video")]


def web_pairs(seed: int) -> list[Pairs]:
    """web_quality.py's pages: main text (blocks repeated on a site dropped, as the product
    does) of every page pair; duplicates share a body (other template, date, ad block)."""
    import web_quality as wq
    from mmdedup.extract import web

    settings = Settings()  # the limits and block thresholds as the ingest passes them
    pages, _ = wq.build_corpus(seed, 120, 40)
    body = np.array([p[2] for p in pages])
    site = [p[4] for p in pages]
    extracted = [web.extract_page(p[1], max_bytes=settings.max_file_bytes, max_chars=settings.max_page_chars,
                                  max_depth=settings.max_page_depth) for p in pages]
    stats = web.BlockStats()
    for s, sig in zip(site, extracted):
        stats.add(str(s), web.block_hashes(sig.text))
    texts = [web.drop_repeated(sig.text, stats.checker(str(s), settings.block_min_pages, settings.block_min_share),
                               settings.block_min_left)
             for s, sig in zip(site, extracted)]
    a, b = np.triu_indices(len(pages), 1)
    return [Pairs(_text_raw(texts, a.astype(np.int64), b.astype(np.int64)), body[a] == body[b],
                  "web pages, main text")]


# Semantic: English events, each told three ways (paraphrases); a twin of each event with
# one meaning-bearing slot changed (an antonym or reversal, another number, another actor,
# place or object; never only the day) is its hard negative.
EVENTS = [
    {"slots": {"actor": ["the city council", "the school board", "the regional parliament", "the shareholders"],
               "act": ["approve", "reject"],
               "obj": ["build a new stadium", "close the old hospital", "raise bus fares", "expand the airport"],
               "day": ["Monday", "Tuesday", "Friday"]},
     "twin": ["act", "actor", "obj"],
     "say": {"approve": ("approved", "voted in favour of", "approved"),
             "reject": ("rejected", "voted against", "turned down")},
     "forms": ["{Actor} {v0} the plan to {obj} on {day}.",
               "On {day}, {actor} {v1} the proposal to {obj}.",
               "A plan to {obj} was {v2} by {actor} on {day}."]},
    {"slots": {"a": ["Arsenal", "Lyon", "Porto", "Celtic", "Ajax"], "b": ["Benfica", "Napoli", "Sevilla", "Leeds"],
               "score": ["2-1", "3-0", "1-0", "4-2"], "day": ["Saturday", "Sunday", "Wednesday"]},
     "twin": ["a", "b", "score"],
     "forms": ["{a} beat {b} {score} on {day}.",
               "{b} lost {rscore} to {a} on {day}.",
               "On {day}, {a} won {score} against {b}."]},
    {"slots": {"company": ["Siemens", "Toyota", "Unilever", "Nokia"], "dir": ["rise", "fall"],
               "pct": ["8", "12", "15", "30"], "quarter": ["first", "second", "third", "fourth"]},
     "twin": ["dir", "pct", "company"],
     "say": {"rise": ("rise", "rose", "grew"), "fall": ("fall", "fell", "shrank")},
     "forms": ["{company} reported a {pct} percent {v0} in profit for the {quarter} quarter.",
               "Profit at {company} {v1} {pct}% in the {quarter} quarter.",
               "{company}'s {quarter}-quarter profit {v2} by {pct} percent."]},
    {"slots": {"n": ["40", "120", "300", "75"], "town": ["Bristol", "Lyon", "Graz", "Utrecht", "Leeds"],
               "cause": ["rain", "snow"]},
     "twin": ["n", "town", "cause"],
     "say": {"rain": ("rain", "downpours", "rain"), "snow": ("snow", "snowfall", "snow")},
     "forms": ["Heavy {v0} damaged {n} homes in {town} overnight.",
               "Overnight {v1} left {n} houses in {town} damaged.",
               "In {town}, {n} homes were damaged after heavy {v2} overnight."]},
    {"slots": {"n": ["two", "three", "four"], "place": ["jewellery shop", "bank", "petrol station"],
               "town": ["Leeds", "Porto", "Graz", "Bristol"], "act": ["arrested", "released"]},
     "twin": ["act", "n", "town"],
     "say": {"arrested": ("arrested", "were detained by police", "detained"),
             "released": ("released", "were freed by police", "let go of")},
     "forms": ["Police {v0} {n} men after a robbery at a {place} in {town}.",
               "{N} men {v1} following a {place} robbery in {town}.",
               "After a robbery at a {place} in {town}, police {v2} {n} men."]},
    {"slots": {"agency": ["NASA", "ESA", "ISRO", "JAXA"], "thing": ["weather", "mapping", "communications"],
               "site": ["Florida", "French Guiana", "Sriharikota"], "act": ["launch", "postpone"],
               "day": ["Monday", "Thursday", "Friday"]},
     "twin": ["act", "agency", "thing"],
     "say": {"launch": ("launched", "was sent into orbit", "put"),
             "postpone": ("postponed the launch of", "had its launch delayed", "delayed")},
     "forms": ["{Agency} {v0} a {thing} satellite from {site} on {day}.",
               "A {thing} satellite {v1} by {agency} from {site} on {day}.",
               "On {day}, {agency} {v2} a {thing} satellite, {tail} from {site}."]},
]


def _render(event: dict, meaning: dict[str, str], form: int) -> str:
    values = dict(meaning)
    key = next((k for k in ("act", "dir", "cause") if k in meaning), None)
    if key is not None and "say" in event:
        for i, word in enumerate(event["say"][meaning[key]]):
            values[f"v{i}"] = word
    if "score" in values:
        values["rscore"] = "-".join(values["score"].split("-")[::-1])
    if "tail" in event["forms"][form]:
        values["tail"] = "lifting off" if meaning.get("act") == "launch" else "which was to lift off"
        if meaning.get("act") == "launch":
            values["v2"] = "put into orbit"
    text = event["forms"][form].format(**values, **{k.capitalize(): v[0].upper() + v[1:]
                                                    for k, v in values.items()})
    return text[0].upper() + text[1:]


def semantic_sentences(seed: int, per_event: int = 6) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(sentences, meaning id, event id): each meaning told in every form of its event,
    and each sampled meaning with a twin that differs in one slot."""
    rng = random.Random(seed)
    sentences, meaning_of, event_of = [], [], []
    mid = 0
    for e, event in enumerate(EVENTS):
        seen: set[tuple] = set()
        for _ in range(per_event):
            meaning = {k: rng.choice(v) for k, v in event["slots"].items()}
            if meaning.get("a") == meaning.get("b") and "a" in meaning:
                continue
            slot = rng.choice(event["twin"])
            twin = dict(meaning)
            twin[slot] = rng.choice([v for v in event["slots"][slot] if v != meaning[slot]])
            if "a" in twin and twin["a"] == twin.get("b"):
                twin["a"], twin["b"] = meaning["b"], meaning["a"]  # the other side won
            for m in (meaning, twin):
                key = tuple(sorted(m.items()))
                if key in seen:
                    continue
                seen.add(key)
                for form in range(len(event["forms"])):
                    sentences.append(_render(event, m, form))
                    meaning_of.append(mid)
                    event_of.append(e)
                mid += 1
    return sentences, np.array(meaning_of), np.array(event_of)


def semantic_pairs(seed: int) -> list[Pairs]:
    from mmdedup.extract.embed import SentenceEncoder

    sentences, meaning, event = semantic_sentences(seed)
    vectors = SentenceEncoder().encode(sentences)
    a, b = np.triu_indices(len(sentences), 1)
    cosine = np.einsum("ij,ij->i", vectors[a], vectors[b]).astype(np.float64)
    same = meaning[a] == meaning[b]
    hard = (event[a] == event[b]) & ~same
    return [Pairs(np.concatenate([cosine[same], cosine[hard]]),
                  np.concatenate([np.ones(int(same.sum()), bool), np.zeros(int(hard.sum()), bool)]),
                  "paraphrases vs same-event sentences"),
            Pairs(cosine[event[a] != event[b]], np.zeros(int((event[a] != event[b]).sum()), bool),
                  "other events")]


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def current_map(settings: Settings, setting: str) -> tuple:
    """The map in force named "<signal>_<field>" ("text_calibration": the text signal's
    `calibration`, "clip_text_calibration": the clip signal's `text_calibration`)."""
    for name, kind in registry.settings_types().items():
        if setting.startswith(name + "_"):
            return getattr(settings.signal(name, kind), setting[len(name) + 1:])
    raise KeyError(setting)


def fmt_map(calibration) -> str:
    return ", ".join(f"({x:g}, {y:g})" for x, y in calibration)


def config_lines(signal: Signal, calibration, command: str) -> str:
    """The setting as the signal's settings class writes it (signals/<name>.py): a comment
    naming the command, the knots."""
    pts = [f"({float(x)!r}, {float(y)!r})" for x, y in calibration]
    field_name = signal.setting[len(signal.name) + 1:]
    lines = [f"    # fitted by `{command}`",
             f"    {field_name}: Calibration = ("]
    line = "       "
    for i, p in enumerate(pts):
        piece = " " + p + (")" if i == len(pts) - 1 else ",")
        if len(line) + len(piece) > 92:
            lines.append(line)
            line = "       "
        line += piece
    lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prior", type=float, default=DEFAULT_PRIOR,
                    help="share of compared pairs that are duplicates (the base rate)")
    ap.add_argument("--signals", default="text,image,video,semantic")
    ap.add_argument("--clips", type=int, default=10, help="video clips (at most 10)")
    ap.add_argument("--at-recall", default="",
                    help="comma-separated recalls: the raw threshold that reaches each and the "
                         "other pairs within it (the raw figure itself, apart from any map: to "
                         "set it beside an earlier revision's tier at that tier's recall)")
    args = ap.parse_args(argv)
    recalls = [float(r) for r in args.at_recall.split(",") if r.strip()]
    warnings.simplefilter("ignore")
    settings = Settings()
    tiers = {"weak": settings.tier_weak, "medium": settings.tier_medium, "strong": settings.tier_strong}
    wanted = [s.strip() for s in args.signals.split(",") if s.strip()]
    makers = {
        "text": lambda: text_pairs(args.seed) + web_pairs(args.seed),
        "image": lambda: image_pairs(args.seed),
        "video": lambda: video_pairs(args.seed, args.clips,
                                     settings.signal("video", registry.settings_types()["video"]).frame_radius),
        "semantic": lambda: semantic_pairs(args.seed),
    }
    print(f"# Signal calibration (seed {args.seed}, prior {args.prior:g}: score = P(duplicate | raw) "
          f"when {args.prior:.0%} of compared pairs are duplicates)\n")
    fitted: dict[str, tuple] = {}
    verdicts: dict[str, bool] = {}
    for name in wanted:
        signal = SIGNALS[name]
        t0 = time.perf_counter()
        try:
            parts = makers[name]()
        except ImportError as exc:
            print(f"## {name}: skipped ({exc})\n")
            continue
        data = Pairs.concat(parts)
        current = current_map(settings, signal.setting)
        fit = fit_map(data.raw, data.label, signal, prior=args.prior, tiers=tuple(tiers.values()))
        fitted[name] = fit
        pos, neg = data.raw[data.label], data.raw[~data.label]
        edge = (neg.max(), pos.min()) if signal.increasing else (neg.min(), pos.max())
        print(f"## {name} ({time.perf_counter() - t0:.0f} s)\n")
        print(f"{int(data.label.sum()):,} duplicate and {int((~data.label).sum()):,} other pairs: "
              + "; ".join(f"{p.source} {int(p.label.sum()):,} / {int((~p.label).sum()):,}" for p in parts)
              + f". Raw {'(higher = more alike)' if signal.increasing else '(bits: lower = more alike)'}: "
              f"{'most alike non-duplicate' if signal.increasing else 'closest non-duplicate'} "
              f"{edge[0]:.4g}, {'least alike duplicate' if signal.increasing else 'farthest duplicate'} "
              f"{edge[1]:.4g}.\n")
        print("| map | knots (raw, score) |\n|---|---|")
        print(f"| current | {fmt_map(current)} |")
        print(f"| fitted | {fmt_map(fit)} |\n")
        print("| tier | current P / R (false) | fitted P / R (false) | raw at tier: current | fitted |")
        print("|---|---|---|---|---|")
        cur, new = tier_table(data.raw, data.label, current, tiers), tier_table(data.raw, data.label, fit, tiers)
        for tier, t in tiers.items():
            (pc, rc, fc), (pf, rf, ff) = cur[tier], new[tier]
            rc_at = raw_at(current, t, signal.increasing)
            rf_at = raw_at(fit, t, signal.increasing)
            print(f"| {tier} (>= {t:g}) | {_p(pc)} / {rc:.3f} ({fc}) | {_p(pf)} / {rf:.3f} ({ff}) | "
                  f"{rc_at:.4g} | {rf_at:.4g} |")
        if recalls:
            print("\n| recall asked | raw threshold | other pairs within | recall there |\n|---|---|---|---|")
            for r, threshold, others, got in operating_points(data.raw, data.label, signal.increasing, recalls):
                print(f"| {r:g} | {threshold:.4g} | {others:,} | {got:.3f} |")
        verdicts[name] = at_least_as_good(cur, new)
        print(f"\nFitted map at least as good on these pairs (recall not lower at equal or better "
              f"precision, every tier): {'yes' if verdicts[name] else 'NO'}\n")
    if fitted:
        command = (f"python scripts/calibrate_signals.py --seed {args.seed}"
                   + ("" if args.prior == DEFAULT_PRIOR else f" --prior {args.prior:g}"))
        good = [n for n in fitted if verdicts[n]]
        print("Fitted maps at least as good as the defaults, as settings lines:\n")
        for name in good:
            print(config_lines(SIGNALS[name], fitted[name], command))
        if len(good) < len(fitted):
            print("\nFitted maps NOT at least as good (the defaults stay; for comparison):\n")
            for name in (n for n in fitted if n not in good):
                print(config_lines(SIGNALS[name], fitted[name], command))
    return 0


def operating_points(raw: np.ndarray, label: np.ndarray, increasing: bool, recalls: list[float]
                     ) -> list[tuple[float, float, int, float]]:
    """(recall asked, the loosest raw threshold reaching it, the non-duplicate pairs within
    that threshold, the recall there) for each recall."""
    pos = np.sort(raw[label])
    if increasing:
        pos = pos[::-1]
    out = []
    for r in recalls:
        threshold = float(pos[min(len(pos), max(1, int(np.ceil(r * len(pos))))) - 1])
        within = raw >= threshold if increasing else raw <= threshold
        out.append((r, threshold, int((within & ~label).sum()), float(within[label].mean())))
    return out


def _p(precision: float) -> str:
    return "-" if np.isnan(precision) else f"{precision:.3f}"


def raw_at(calibration, score: float, increasing: bool) -> float:
    """The raw value where the map reaches `score` (the tier's raw threshold)."""
    xs, ys = (np.asarray(v, np.float64) for v in zip(*calibration))
    return crossing(xs, ys, score, increasing) if crossing(xs, ys, score, increasing) is not None else float("nan")


if __name__ == "__main__":
    raise SystemExit(main())
