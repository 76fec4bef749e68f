"""Pictures through the product: the tier an edited copy reaches, and flat graphics.

image_quality.py measures the image codes at a fixed distance; what a user gets is the
tier of the pair the product writes (`Platform.ingest` -> `Platform.pairs`), after the
image signal's distance and its calibration. Two cases, each ingested as picture-only
items into a fresh store:

photos   image_quality.py's 21 photographs (PNG) and their 11 edits each (the same
         seeded edits). Per edit: the share of (copy, its original) pairs the product
         writes strong (>= 0.9, merged), at least medium (>= 0.8, review) and at least
         weak; and the pairs between different photographs at medium or strong.
flat     `--flat` generated 640x480 pictures of random shapes on flat or gradient
         backgrounds (PIL + numpy: the kind of low-detail picture slides, diagrams and
         screenshots are made of), and `--copies` edited copies of distinct ones, the
         edits of image_quality.py but crop12 in turn. Counted: copies paired with their
         original (at >= weak, >= medium, strong), and medium or strong pairs between
         pictures of different originals (a copy against another original counts too).

Baseline, measured in the same run on the same bytes: plain imagehash.phash, Hamming
distance, its pairs called at <= 12 bits (the product's match radius) and strong at
<= 8 bits (where the product's calibration puts strong); all pairs are compared.

    python scripts/bench/image_tiers.py [--flat 2000] [--copies 200] [--seed 1]
                                         [--skip-photos] [--skip-flat]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).parent))
from image_quality import EDITS, baseline_codes, edit, encode, originals  # noqa: E402

from mmdedup import Platform  # noqa: E402
from mmdedup.extract import image as mi  # noqa: E402
from mmdedup.extract.simhash import hamming  # noqa: E402

TIER_RANK = {"weak": 0, "medium": 1, "strong": 2}
FLAT_EDITS = tuple(e for e in EDITS if e != "crop12")
SIZE = (640, 480)


# --------------------------------------------------------------------------------------
# Flat graphics
# --------------------------------------------------------------------------------------


def background(w: int, h: int, rng: random.Random) -> Image.Image:
    """A flat colour, or a linear (any angle) or radial gradient between two colours."""
    kind = rng.choice(("flat", "linear", "radial"))
    c0 = np.array([rng.randrange(256) for _ in range(3)], np.float32)
    if kind == "flat":
        return Image.new("RGB", (w, h), tuple(int(v) for v in c0))
    c1 = np.array([rng.randrange(256) for _ in range(3)], np.float32)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    if kind == "linear":
        a = rng.uniform(0, 2 * np.pi)
        t = x * np.cos(a) + y * np.sin(a)
    else:
        t = np.hypot(x - rng.uniform(0, w), y - rng.uniform(0, h))
    t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
    return Image.fromarray((c0 + (c1 - c0) * t[..., None]).astype(np.uint8), "RGB")


def flat_graphic(rng: random.Random, w: int = SIZE[0], h: int = SIZE[1]) -> Image.Image:
    """A background and 3 to 10 filled shapes (rectangles, ellipses, polygons, thick lines)
    of random colours, each 5-50% of the picture's width and height."""
    img = background(w, h, rng)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(3, 10)):
        colour = tuple(rng.randrange(256) for _ in range(3))
        kind = rng.choice(("rect", "ellipse", "poly", "line"))
        sw, sh = rng.uniform(0.05, 0.5) * w, rng.uniform(0.05, 0.5) * h
        x0, y0 = rng.uniform(0, w - sw), rng.uniform(0, h - sh)
        if kind == "rect":
            draw.rectangle((x0, y0, x0 + sw, y0 + sh), fill=colour)
        elif kind == "ellipse":
            draw.ellipse((x0, y0, x0 + sw, y0 + sh), fill=colour)
        elif kind == "poly":
            draw.polygon([(rng.uniform(x0, x0 + sw), rng.uniform(y0, y0 + sh))
                          for _ in range(rng.randint(3, 5))], fill=colour)
        else:
            draw.line([(x0, y0), (x0 + sw, y0 + sh)], fill=colour, width=rng.randint(2, 12))
    return img


# --------------------------------------------------------------------------------------
# Through the product
# --------------------------------------------------------------------------------------


def product_pairs(blobs: list[bytes], folder: Path) -> dict[tuple[int, int], str]:
    """(i, j) with i < j -> the tier of every pair the product writes at >= weak, for
    picture-only items made of `blobs`."""
    (folder / "img").mkdir(parents=True)
    for i, data in enumerate(blobs):
        (folder / "img" / f"{i}.jpg").write_bytes(data)
    with Platform.open(folder / "home") as platform:
        platform.ingest([{"id": str(i), "images": [f"{i}.jpg"]} for i in range(len(blobs))],
                        root=folder / "img")
        out = {}
        for p in platform.iter_pairs("weak"):
            a, b = sorted((int(p["a"]), int(p["b"])))
            out[(a, b)] = p["tier"]
    return out


def baseline_tiers(blobs: list[bytes], medium: int = 12, strong: int = 8
                   ) -> dict[tuple[int, int], str]:
    """The baseline's pairs: imagehash.phash within `medium` bits, strong within `strong`."""
    codes = baseline_codes(blobs)
    d = hamming(codes[:, None], codes[None, :])
    a, b = np.nonzero(np.triu(d <= medium, 1))
    return {(int(i), int(j)): "strong" if d[i, j] <= strong else "medium" for i, j in zip(a, b)}


def at_least(tier: str | None, floor: str) -> bool:
    return tier is not None and TIER_RANK[tier] >= TIER_RANK[floor]


def share(num: int, den: int) -> str:
    return f"{num / den:.0%} ({num}/{den})" if den else "n/a"


def photos(seed: int) -> None:
    rng = random.Random(seed)
    pics = originals()
    blobs = [encode(p, "PNG") for _, p in pics]
    owner, kind = list(range(len(pics))), [None] * len(pics)
    for e in EDITS:  # the order and seed of image_quality.py: the same edited bytes
        for j, (_, p) in enumerate(pics):
            blobs.append(edit(p, e, rng))
            owner.append(j)
            kind.append(e)
    with tempfile.TemporaryDirectory() as tmp:
        got = product_pairs(blobs, Path(tmp))
    base = baseline_tiers(blobs)
    n = len(pics)
    print(f"## Photos: {n} originals and {len(blobs) - n} edited copies, picture-only items\n")
    print("Per edit, the share of (copy, its original) pairs: strong, at least medium, at least "
          "weak (mmdedup through Platform.pairs), and the baseline's strong and >= medium.\n")
    print("| edit | mmdedup strong | mmdedup >= medium | mmdedup >= weak | "
          "imagehash.phash strong (<= 8) | imagehash.phash >= medium (<= 12) |")
    print("|---|---|---|---|---|---|")
    for e in EDITS:
        rows = [i for i in range(n, len(blobs)) if kind[i] == e]
        key = [(owner[i], i) for i in rows]
        cells = [share(sum(at_least(got.get(k), t) for k in key), len(key))
                 for t in ("strong", "medium", "weak")]
        cells += [share(sum(at_least(base.get(k), t) for k in key), len(key))
                  for t in ("strong", "medium")]
        print(f"| {e} | " + " | ".join(cells) + " |")
    for name, pairs in (("mmdedup", got), ("imagehash.phash", base)):
        false = Counter(t for (a, b), t in pairs.items() if owner[a] != owner[b])
        print(f"\n{name}: pairs between different photographs: {false['strong']} strong, "
              f"{false['medium']} medium, {false['weak']} weak.", end="")
    print("\n")


def flat(count: int, copies: int, seed: int) -> None:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    pics = [flat_graphic(rng) for _ in range(count)]
    blobs = [encode(p, quality=90) for p in pics]
    owner = list(range(count))
    kinds = []
    for k, j in enumerate(rng.sample(range(count), min(copies, count))):
        e = FLAT_EDITS[k % len(FLAT_EDITS)]
        blobs.append(edit(pics[j], e, rng))
        owner.append(j)
        kinds.append(e)
    made = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        got = product_pairs(blobs, Path(tmp))
        ingest_s = time.perf_counter() - t1
    base = baseline_tiers(blobs)
    copy_rows = list(range(count, len(blobs)))
    print(f"## Flat graphics: {count} generated {SIZE[0]}x{SIZE[1]} pictures of random shapes "
          f"and gradients, {len(copy_rows)} edited copies ({', '.join(FLAT_EDITS)} in turn)\n")
    print(f"(made in {made:.0f} s; ingested in {ingest_s:.0f} s)\n")
    print("| method | copies found >= weak | >= medium | strong | "
          "false pairs >= medium | of them strong |")
    print("|---|---|---|---|---|---|")
    for name, pairs in (("mmdedup (Platform.pairs)", got),
                        ("imagehash.phash (medium <= 12, strong <= 8 bits)", base)):
        key = [(owner[i], i) for i in copy_rows]
        found = [share(sum(at_least(pairs.get(k), t) for k in key), len(key))
                 for t in ("weak", "medium", "strong")]
        false = Counter(t for (a, b), t in pairs.items() if owner[a] != owner[b])
        print(f"| {name} | " + " | ".join(found)
              + f" | {false['medium'] + false['strong']} | {false['strong']} |")
    print("\nCopies missed (not paired with their original at >= medium), by edit:")
    missed = Counter(kinds[i - count] for i in copy_rows
                     if not at_least(got.get((owner[i], i)), "medium"))
    print("mmdedup: " + (", ".join(f"{e} {c}" for e, c in missed.most_common()) or "none"))
    missed = Counter(kinds[i - count] for i in copy_rows
                     if not at_least(base.get((owner[i], i)), "medium"))
    print("imagehash.phash: " + (", ".join(f"{e} {c}" for e, c in missed.most_common()) or "none"))
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flat", type=int, default=2000, help="distinct flat graphics")
    ap.add_argument("--copies", type=int, default=200, help="edited copies of flat graphics")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-photos", action="store_true")
    ap.add_argument("--skip-flat", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    print(f"# Pictures through the product (IMAGE_VERSION = {mi.IMAGE_VERSION})\n")
    if not args.skip_photos:
        photos(args.seed)
    if not args.skip_flat:
        flat(args.flat, args.copies, args.seed)
    print(f"({time.perf_counter() - start:.0f} s in all.) Command: python "
          f"scripts/bench/image_tiers.py --flat {args.flat} --copies {args.copies} "
          f"--seed {args.seed}" + (" --skip-photos" if args.skip_photos else "")
          + (" --skip-flat" if args.skip_flat else ""))


if __name__ == "__main__":
    main()
