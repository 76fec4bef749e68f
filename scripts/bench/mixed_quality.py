"""Mixed items (title, text, picture): what fusion finds, and with which kind, next to
text-only and image-only scoring of the same items, measured in one run.

Pictures: real photographs from scikit-image (`skimage.data`, the 21 originals of
image_quality.py) and their tiles (2x2, 3x3 and 4x4 grids), kept only where every two kept
pictures are at least `--distinct` bits apart under the image distance (eight dihedral
variants, centre pairings) computed with imagehash's pHash as a fixed reference, so two
different pool pictures are different pictures by construction, and the pool is the same
whatever mmdedup's codes are (`reference_distance`). Texts: Zipf-like words (text_quality.py's vocabulary and exponent), a
quarter of them drawn from the family's 20 topic words, 60-200 words, with a title of 6-10
words.

Each family is five items:

    base   title T, text X, picture P
    img    same picture P (a reposted copy: resized, re-compressed, 5% crop, mirrored,
           brighter, grey, watermark, border or letterbox), a new title and a new text on
           the same topic: "same picture, different caption"
    txt    text X with 2-5% of its words changed, a new title, another picture Q:
           "same text, different picture"
    both   text X with 2-5% of its words changed, a reposted copy of P, title T
    neg    title T, another text on the same topic, another picture R: "both differ"

Ground truth for every pair of items, from the source of its text and of its picture:
both the same -> same-item, only the text -> text-reuse, only the picture -> image-reuse,
neither -> a negative (must not be paired). Within a family that gives (base, both) as
same-item, (base, txt) and (txt, both) as text-reuse, (base, img) and (img, both) as
image-reuse, and (img, txt) plus every pair with `neg` as hard negatives (shared topic,
shared title for base/both/neg); pairs across families are the other negatives.

Three stores through `Platform.ingest(manifest)`, on the same JSONL lines and picture
files: the full items (fusion), the items with title and text only (text-only scoring),
and the items with the picture only (image-only scoring). Every pair at or above the tier
is read from `Platform.pairs()`. For fusion the pair's `kind` is compared with the truth;
the text-only and image-only stores cannot name a kind by themselves, so they are also
combined by the obvious rule (found by both -> same-item, else whichever found it).
Also printed: each truth kind's calls, tiers and signals under fusion; the pairs fusion
misses or miscalls, with the image distance the image signal gives them (computed here
from the same bytes, so a pair within the match radius that was not found is a candidate
miss); which truth pairs `Platform.clusters()` puts in one cluster; and every false pair.

    python scripts/bench/mixed_quality.py [--n 120] [--seed 1] [--distinct 16]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import time
import warnings
from collections import Counter
from itertools import combinations
from pathlib import Path

import imagehash
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from image_quality import edit, encode, originals  # noqa: E402
from text_quality import make_vocab, zipf_words  # noqa: E402

from mmdedup import Platform  # noqa: E402
from mmdedup.config import Settings  # noqa: E402
from mmdedup.signals.image import ImageSettings  # noqa: E402
from mmdedup.extract import image as mi  # noqa: E402
from mmdedup.extract.simhash import hamming  # noqa: E402

KINDS = ("image-reuse", "text-reuse", "same-item")
PICTURE_EDITS = ("resize50", "jpeg20", "crop5", "mirror", "bright30", "grey", "watermark",
                 "border", "letterbox")
ROLES = ("base", "img", "txt", "both", "neg")


# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


# The reference distance's centre (the middle REFERENCE_CENTRE of each side) and the bits
# added to a centre-to-centre distance: what image_distance() computed up to img2, kept
# fixed here so the pool stays the same pictures whatever the codes under test are.
REFERENCE_CENTRE = 0.8
REFERENCE_CENTRE_PENALTY = 2


def reference_distance(blobs: list[bytes]) -> np.ndarray:
    """int (n, n): a fixed picture distance made with the reference imagehash.phash
    instead of mmdedup's own codes: the best over the eight symmetries of one side and
    the pairings of the whole picture and its centre (REFERENCE_CENTRE), with
    REFERENCE_CENTRE_PENALTY on centre to centre. The pool is chosen by it so that it does not move
    with the codes under test: chosen by those, a release that changes a bit here and
    there keeps a different set of pictures, every family draws other ones, and the
    figures of two releases would be of two corpora."""
    def code(img: Image.Image) -> int:
        return int(str(imagehash.phash(img)), 16)

    full, centre = [], []
    for data in blobs:
        pic = Image.open(io.BytesIO(data)).convert("RGB")
        w, h = pic.size
        cw, ch = round(w * REFERENCE_CENTRE), round(h * REFERENCE_CENTRE)
        mid = pic.crop(((w - cw) // 2, (h - ch) // 2, (w - cw) // 2 + cw, (h - ch) // 2 + ch))
        full.append([code(pic if op is None else pic.transpose(op)) for op in mi.PIL_DIHEDRAL])
        centre.append([code(mid if op is None else mid.transpose(op)) for op in mi.PIL_DIHEDRAL])
    f, c = np.array(full, np.uint64), np.array(centre, np.uint64)

    def best(q: np.ndarray, s: np.ndarray) -> np.ndarray:
        return hamming(q[:, None, :], s[None, :, None]).min(axis=2).astype(np.int64)

    return np.minimum.reduce([best(f, f[:, 0]), best(f, c[:, 0]), best(c, f[:, 0]),
                              best(c, c[:, 0]) + REFERENCE_CENTRE_PENALTY])


def picture_pool(distinct: int):
    """Real photos and their grid tiles, greedily kept while at least `distinct` bits from
    every kept one (reference_distance). Returns (pictures [(name, PIL image)], smallest
    distance kept)."""
    cands = []
    for name, pic in originals():
        w, h = pic.size
        cands.append((name, pic))
        for g in (2, 3, 4):
            for i in range(g):
                for j in range(g):
                    tile = pic.crop((i * w // g, j * h // g, (i + 1) * w // g, (j + 1) * h // g))
                    if min(tile.size) >= 64:
                        cands.append((f"{name}-{g}x{g}-{i}{j}", tile))
    dist = reference_distance([encode(p) for _, p in cands])
    dist = np.minimum(dist, dist.T)
    kept: list[int] = []
    for i in range(len(cands)):
        if all(dist[i, k] >= distinct for k in kept):
            kept.append(i)
    sub = dist[np.ix_(kept, kept)]
    closest = int(sub[~np.eye(len(kept), dtype=bool)].min())
    return [cands[i] for i in kept], closest


def corpus(n: int, pool: list, seed: int):
    """Items (manifest dicts without paths), picture bytes per item, truth sources, edits."""
    rng = random.Random(seed)
    rng_np = np.random.default_rng(seed)
    vocab = make_vocab(random.Random(seed))
    order = list(range(len(pool)))
    rng.shuffle(order)

    def words(k: int, topic: list[str]) -> list[str]:
        out = zipf_words(rng_np, vocab, k)
        for pos in np.nonzero(rng_np.random(k) < 0.25)[0]:
            out[pos] = topic[rng.randrange(len(topic))]
        return out

    def changed(text: list[str]) -> tuple[list[str], float]:
        rate = rng.choice((0.02, 0.03, 0.05))
        out = list(text)
        for pos in rng.sample(range(len(out)), max(1, round(rate * len(out)))):
            out[pos] = zipf_words(rng_np, vocab, 1)[0]
        return out, rate

    items, pictures, truth, notes, shown = [], {}, {}, {}, {}
    for f in range(n):
        topic = [vocab[i] for i in rng_np.choice(np.arange(500, len(vocab)), 20, replace=False)]
        title = " ".join(words(rng.randint(6, 10), topic))
        text = words(rng.randint(60, 200), topic)
        (pn, p), (qn, q), (rn, r) = (pool[order[3 * f + k]] for k in range(3))
        tid = lambda k: f"f{f}-{k}"  # noqa: E731
        img_edit, both_edit = rng.choice(PICTURE_EDITS), rng.choice(PICTURE_EDITS)
        txt_text, txt_rate = changed(text)
        both_text, both_rate = changed(text)
        spec = {
            "base": (title, text, encode(p), ("X", "P")),
            "img": (" ".join(words(rng.randint(6, 10), topic)), words(rng.randint(60, 200), topic),
                    edit(p, img_edit, rng), ("Y", "P")),
            "txt": (" ".join(words(rng.randint(6, 10), topic)), txt_text, encode(q), ("X", "Q")),
            "both": (title, both_text, edit(p, both_edit, rng), ("X", "P")),
            "neg": (title, words(rng.randint(60, 200), topic), encode(r), ("Z", "R")),
        }
        for role, (ti, tx, pic, (ts, ps)) in spec.items():
            iid = tid(role)
            items.append({"id": iid, "title": ti, "text": " ".join(tx)})
            pictures[iid] = pic
            truth[iid] = (f"{f}{ts}", f"{f}{ps}")
            shown[iid] = {"P": pn, "Q": qn, "R": rn}[ps]
        notes[tid("img")] = f"picture {img_edit}"
        notes[tid("both")] = f"picture {both_edit}, text {both_rate:.0%}"
        notes[tid("txt")] = f"text {txt_rate:.0%}"
    return items, pictures, truth, notes, shown


def truth_kind(a: str, b: str, truth: dict[str, tuple[str, str]]) -> str | None:
    (ta, pa), (tb, pb) = truth[a], truth[b]
    if ta == tb and pa == pb:
        return "same-item"
    if ta == tb:
        return "text-reuse"
    if pa == pb:
        return "image-reuse"
    return None


def family(i: str) -> str:
    return i.split("-")[0]


# --------------------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------------------


def write_manifests(folder: Path, items: list[dict], pictures: dict[str, bytes]) -> dict[str, Path]:
    (folder / "img").mkdir()
    for iid, data in pictures.items():
        (folder / "img" / f"{iid}.jpg").write_bytes(data)
    variants = {
        "fused": lambda it: {**it, "images": [f"img/{it['id']}.jpg"]},
        "text-only": lambda it: dict(it),
        # no title either: an item without text takes its title as its text
        "image-only": lambda it: {"id": it["id"], "images": [f"img/{it['id']}.jpg"]},
    }
    out = {}
    for name, make in variants.items():
        path = folder / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for it in items:
                fh.write(json.dumps(make(it), ensure_ascii=False) + "\n")
        out[name] = path
    return out


def ingest(folder: Path, manifest: Path, name: str) -> tuple[list[dict], list[dict], str]:
    home = folder / f"home-{name}"
    with Platform.open(home) as platform:
        report = platform.ingest(manifest)
        return platform.pairs("weak"), platform.clusters(), report.summary()


# --------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------


TIER_RANK = {"weak": 0, "medium": 1, "strong": 2}


def at_least(pairs: list[dict], tier: str) -> dict[tuple[str, str], dict]:
    return {tuple(sorted((p["a"], p["b"]))): p for p in pairs
            if TIER_RANK[p["tier"]] >= TIER_RANK[tier]}


def pct(num: int, den: int) -> str:
    return f"{num / den:.1%}" if den else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=120, help="families (5 items each)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--distinct", type=int, default=16,
                    help="bits between any two pool pictures (reference_distance)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    t_start = time.perf_counter()

    pool, closest = picture_pool(args.distinct)
    n = min(args.n, len(pool) // 3)
    items, pictures, truth, notes, shown = corpus(n, pool, args.seed)
    ids = [it["id"] for it in items]

    truth_pairs: dict[tuple[str, str], str] = {}
    hard_neg, other_neg = set(), 0
    for a, b in combinations(ids, 2):
        key = tuple(sorted((a, b)))
        kind = truth_kind(a, b, truth)
        if kind:
            truth_pairs[key] = kind
        elif family(a) == family(b):
            hard_neg.add(key)
        else:
            other_neg += 1
    n_kind = Counter(truth_pairs.values())

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifests = write_manifests(folder, items, pictures)
        found, clusters, summary = {}, {}, {}
        for name, path in manifests.items():
            found[name], clusters[name], summary[name] = ingest(folder, path, name)

    print(f"# Mixed items: {n} families x 5 = {len(items)} items (title, text, one picture); "
          f"{len(pool)} pool pictures from skimage.data, any two >= {args.distinct} bits apart "
          f"(closest {closest})\n")
    print(f"Truth: {n_kind['same-item']} same-item, {n_kind['text-reuse']} text-reuse, "
          f"{n_kind['image-reuse']} image-reuse pairs; {len(hard_neg)} hard negatives "
          f"(same family, both text and picture differ), {other_neg:,} other negatives.\n")
    for name in manifests:
        print(f"- {name} store: {summary[name].split(': ', 1)[1]}")
    print()

    # --- 1. found at all -----------------------------------------------------------------
    print("Found at all (any kind): recall per truth kind, negatives paired, precision "
          "(found pairs that are one of the three kinds).\n")
    print("| method | tier | image-reuse recall | text-reuse recall | same-item recall | "
          "hard negatives paired | other negatives paired | precision |")
    print("|---|---|---|---|---|---|---|---|")
    labels: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    for name in manifests:
        for tier in ("weak", "medium"):
            got = at_least(found[name], tier)
            labels[(name, tier)] = {k: p["kind"] for k, p in got.items()}
            rec = {k: sum(1 for pr, kd in truth_pairs.items() if kd == k and pr in got) for k in KINDS}
            hard = sum(1 for pr in got if pr in hard_neg)
            other = sum(1 for pr in got if pr not in truth_pairs and pr not in hard_neg)
            true = sum(1 for pr in got if pr in truth_pairs)
            method = {"fused": "mmdedup fused (title, text, picture)",
                      "text-only": "text-only (same items, no picture)",
                      "image-only": "image-only (same items, picture only)"}[name]
            print(f"| {method} | >= {tier} | "
                  + " | ".join(f"{pct(rec[k], n_kind[k])} ({rec[k]}/{n_kind[k]})" for k in KINDS)
                  + f" | {hard} of {len(hard_neg)} | {other} of {other_neg:,} | {pct(true, len(got))} |")

    # --- 2. the kind called ----------------------------------------------------------------
    for tier in ("weak", "medium"):
        txt, img = labels[("text-only", tier)], labels[("image-only", tier)]
        rule = {pr: "same-item" for pr in txt.keys() & img.keys()}
        rule.update({pr: "text-reuse" for pr in txt.keys() - img.keys()})
        rule.update({pr: "image-reuse" for pr in img.keys() - txt.keys()})
        labels[("rule", tier)] = rule
    print("\nThe kind called: per kind, precision = found pairs called that kind whose truth is "
          "that kind, recall = truth pairs of that kind found and called that kind.\n")
    print("| method | tier | image-reuse P / R | text-reuse P / R | same-item P / R | "
          "pairs called right |")
    print("|---|---|---|---|---|---|")
    names = {"fused": "mmdedup fused: pair kind", "text-only": "text-only (calls all text-reuse)",
             "image-only": "image-only (calls all image-reuse)",
             "rule": "text-only + image-only stores, kind by which found it"}
    for name in ("fused", "rule", "text-only", "image-only"):
        for tier in ("weak", "medium"):
            lab = labels[(name, tier)]
            cells = []
            for k in KINDS:
                called = [pr for pr, kd in lab.items() if kd == k]
                right = sum(1 for pr in called if truth_pairs.get(pr) == k)
                cells.append(f"{pct(right, len(called))} / {pct(right, n_kind[k])}")
            right_all = sum(1 for pr, kd in lab.items() if truth_pairs.get(pr) == kd)
            print(f"| {names[name]} | >= {tier} | " + " | ".join(cells)
                  + f" | {right_all} of {len(truth_pairs)} |")

    # --- 3. fused: confusion, tiers and signals -----------------------------------------------
    fused = at_least(found["fused"], "weak")
    print("\nmmdedup fused, every truth pair: the kind it was called, its tier, and its signals "
          "(median, min-max over found pairs).\n")
    print("| truth | pairs | called same-item | text-reuse | image-reuse | not found | "
          "strong | medium | weak | text signal | image signal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    groups = {k: [pr for pr, kd in truth_pairs.items() if kd == k] for k in KINDS}
    groups["both differ (hard)"] = sorted(hard_neg)
    for k, prs in groups.items():
        got = [fused[pr] for pr in prs if pr in fused]
        called = Counter(p["kind"] for p in got)
        tiers = Counter(p["tier"] for p in got)

        def spread(sig: str) -> str:
            vals = [p["signals"].get(sig) for p in got if p["signals"].get(sig) is not None]
            if not vals:
                return "-"
            return f"{np.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})"

        print(f"| {k} | {len(prs)} | {called['same-item']} | {called['text-reuse']} | "
              f"{called['image-reuse']} | {len(prs) - len(got)} | {tiers['strong']} | "
              f"{tiers['medium']} | {tiers['weak']} | {spread('text')} | {spread('image')} |")

    # Misses and miscalls of fusion, by the edit behind them, with the image distance the
    # image signal gives the pair (computed here from the same picture bytes): a pair the
    # signal puts within the match radius but that was not found was never a candidate.
    codes = mi.image_codes([pictures[i] for i in ids], Settings().max_image_pixels)
    row = {i: r for r, i in enumerate(ids)}
    radius = ImageSettings().radius

    def bits(a: str, b: str) -> float:
        return round(float(mi.image_distance(codes.take([row[a]]), codes.take([row[b]]))[0, 0]), 2)

    miss: dict[tuple[str, str, str], Counter] = {}
    for pr, k in truth_pairs.items():
        got = fused.get(pr)
        if got is None or got["kind"] != k:
            what = "not found" if got is None else f"called {got['kind']}"
            d = bits(*pr)
            band = f"<= {radius} (the signal matches)" if d <= radius else f"> {radius}"
            edits = miss.setdefault((k, what, band), Counter())
            edits["pairs"] += 1
            for i in pr:
                if i in notes and notes[i].startswith("picture"):
                    edits[notes[i].split(",")[0].split()[1]] += 1
    if miss:
        print("\nFused pairs not found or called another kind, by the image distance the image "
              "signal gives them, with the picture edits behind them (an edit per reposted "
              "copy in the pair):\n")
        print("| truth | outcome | image distance (bits) | pairs | picture edits |")
        print("|---|---|---|---|---|")
        for (k, what, band), edits in sorted(miss.items()):
            n_pairs = edits.pop("pairs")
            print(f"| {k} | {what} | {band} | {n_pairs} | "
                  + ", ".join(f"{e} {c}" for e, c in edits.most_common()) + " |")

    # --- 4. clusters ---------------------------------------------------------------------
    print("\nDuplicate clusters (`Platform.clusters()`: connected components over strong pairs): "
          "pairs of items put in one cluster, by truth.\n")
    print("| store | clusters | items in clusters | image-reuse | text-reuse | same-item | "
          "hard negatives | other negatives |")
    print("|---|---|---|---|---|---|---|---|")
    for name in manifests:
        together = Counter()
        for c in clusters[name]:
            for a, b in combinations(sorted(c["members"]), 2):
                pr = tuple(sorted((a, b)))
                together[truth_pairs.get(pr) or ("hard" if pr in hard_neg else "other")] += 1
        print(f"| {name} | {len(clusters[name])} | {sum(len(c['members']) for c in clusters[name])} | "
              + " | ".join(f"{together[k]} of {n_kind[k]}" for k in KINDS)
              + f" | {together['hard']} of {len(hard_neg)} | {together['other']} of {other_neg:,} |")

    wrong = [(pr, p) for pr, p in fused.items() if pr not in truth_pairs]
    if wrong:
        print("\nFused pairs between items whose text and picture both differ:\n")
        print("| a | b | pictures (pool name; edit) | kind | tier | text | image (bits) |")
        print("|---|---|---|---|---|---|---|")
        for (a, b), p in sorted(wrong):
            pics = "; ".join(f"{shown[i]}" + (f" ({notes[i].split(',')[0]})" if i in notes and "picture" in notes[i] else "")
                             for i in (a, b))
            bits = p.get("details", {}).get("image", {}).get("bits", "")
            print(f"| {a} | {b} | {pics} | {p['kind']} | {p['tier']} | {p['signals'].get('text')} | "
                  f"{p['signals'].get('image')} ({bits}) |")

    print(f"\n({time.perf_counter() - t_start:.0f} s in all.) Command: python "
          f"scripts/bench/mixed_quality.py --n {args.n} --seed {args.seed} --distinct {args.distinct}")


if __name__ == "__main__":
    main()
