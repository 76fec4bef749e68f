"""Image near-duplicate quality: mmdedup's image codes against plain imagehash pHash.

Originals: real photographs that ship inside scikit-image (`skimage.data`, no download),
the large Hubble field cut into four disjoint quarters; 21 distinct pictures in all,
greyscale and colour, among them near-textures (brick, grass, gravel) that make hard
negatives. Each original is stored as a PNG; each edit below is a repost of it (a JPEG
at quality 85 unless said otherwise):

    resize50   half the size           jpeg20     JPEG at quality 20
    crop5      5% of width and height cut off, split at random between the two sides
    crop12     12% likewise            rotate3    3 degrees, black corners
    mirror     left-right flip         bright30   brightness +30%
    grey       greyscale               watermark  a line of text and a translucent logo
    border     white padding, 8% a side           letterbox  black bars to a square

Methods, all on the same bytes:

    baseline       imagehash.phash of the decoded image, Hamming distance
    phash          mmdedup: load_image (EXIF, modes) -> trim_borders -> pHash; the query
                   hashed in its eight dihedral variants against the one stored code
    phash+centre   the same, along the scale chain (SCALES: the whole and four centres),
                   the mean of the closest three pairs of an alignment: image_distance()
    dhash          mmdedup's dHash, trimmed, dihedral query
    pdq            Meta's PDQ (256 bits, pdqhash package, only when installed), on the
                   trimmed picture, dihedral query; threshold 31 of 256 (PDQ's own)

Pairs: every edited copy against every original; positives are an edit and its own
original, negatives an edit and any other original. Precision and recall per edit at a
fixed distance threshold per method; the distance distributions (largest distance of a
true pair per edit, smallest between different photos); hashing cost (CPU and wall
milliseconds a picture, best of three, one process) of image_codes against
imagehash.phash alone on the same bytes, and of image_distance a pair of pictures.

    python scripts/bench/image_quality.py [--threshold 12] [--seed 1]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
import warnings

import imagehash
import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFont

from mmdedup.config import Settings
from mmdedup.signals.image import ImageSettings, ImageSignal
from mmdedup.extract import image as mi
from mmdedup.extract.simhash import hamming

SETTINGS = Settings()
MAX_PIXELS = SETTINGS.max_image_pixels  # the decoding limit, as the ingest passes it

EDITS = ("resize50", "jpeg20", "crop5", "crop12", "rotate3", "mirror", "bright30", "grey",
         "watermark", "border", "letterbox")


# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


def originals() -> list[tuple[str, Image.Image]]:
    """Distinct photographs from skimage.data, as RGB pictures."""
    import skimage.data as data

    def rgb(a: np.ndarray) -> Image.Image:
        if a.dtype != np.uint8:
            a = (a * 255).astype(np.uint8) if a.dtype.kind == "f" else a.astype(np.uint8) * 255
        return Image.fromarray(a).convert("RGB")

    out = []
    for name in ("astronaut", "camera", "chelsea", "clock", "coffee", "coins", "rocket",
                 "immunohistochemistry", "moon", "cell", "page", "text", "brick", "grass",
                 "gravel"):
        out.append((name, rgb(getattr(data, name)())))
    out.append(("motorcycle", rgb(data.stereo_motorcycle()[0])))
    retina = rgb(data.retina())
    out.append(("retina", retina.resize((retina.width // 2, retina.height // 2), Image.LANCZOS)))
    hubble = rgb(data.hubble_deep_field())
    w, h = hubble.size
    for i, (x, y) in enumerate(((0, 0), (w // 2, 0), (0, h // 2), (w // 2, h // 2))):
        out.append((f"hubble{i}", hubble.crop((x, y, x + w // 2, y + h // 2))))
    return out


def encode(img: Image.Image, fmt: str = "JPEG", quality: int = 85) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **({"quality": quality} if fmt == "JPEG" else {}))
    return buf.getvalue()


def crop(img: Image.Image, share: float, rng: random.Random) -> Image.Image:
    w, h = img.size
    cw, ch = round(w * share), round(h * share)
    left, top = rng.randint(0, cw), rng.randint(0, ch)
    return img.crop((left, top, w - (cw - left), h - (ch - top)))


def watermark(img: Image.Image) -> Image.Image:
    w, h = img.size
    layer = Image.new("RGBA", img.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    size = max(10, h // 14)
    font = ImageFont.load_default(size=size)
    draw.text((w * 0.05, h - 1.6 * size), "(c) reposted-by-news.example", font=font,
              fill=(255, 255, 255, 200), stroke_width=1, stroke_fill=(0, 0, 0, 160))
    s = min(w, h) // 6
    draw.rounded_rectangle((w - s - 8, 8, w - 8, 8 + s), radius=s // 5, fill=(230, 30, 30, 140))
    draw.text((w - s, 8 + s // 3), "LOGO", font=ImageFont.load_default(size=s // 4),
              fill=(255, 255, 255, 220))
    return Image.alpha_composite(img.convert("RGBA"), layer).convert("RGB")


def pad(img: Image.Image, left: int, top: int, right: int, bottom: int, colour) -> Image.Image:
    out = Image.new("RGB", (img.width + left + right, img.height + top + bottom), colour)
    out.paste(img, (left, top))
    return out


def edit(img: Image.Image, name: str, rng: random.Random) -> bytes:
    w, h = img.size
    if name == "resize50":
        return encode(img.resize((w // 2, h // 2), Image.LANCZOS))
    if name == "jpeg20":
        return encode(img, quality=20)
    if name == "crop5":
        return encode(crop(img, 0.05, rng))
    if name == "crop12":
        return encode(crop(img, 0.12, rng))
    if name == "rotate3":
        return encode(img.rotate(3, resample=Image.BICUBIC, fillcolor=(0, 0, 0)))
    if name == "mirror":
        return encode(img.transpose(Image.Transpose.FLIP_LEFT_RIGHT))
    if name == "bright30":
        return encode(ImageEnhance.Brightness(img).enhance(1.3))
    if name == "grey":
        return encode(img.convert("L"))
    if name == "watermark":
        return encode(watermark(img))
    if name == "border":
        b = round(0.08 * max(w, h))
        return encode(pad(img, b, b, b, b, (255, 255, 255)))
    if name == "letterbox":
        side = max(w, h)
        return encode(pad(img, (side - w) // 2, (side - h) // 2, side - w - (side - w) // 2,
                          side - h - (side - h) // 2, (0, 0, 0)))
    raise ValueError(name)


# --------------------------------------------------------------------------------------
# Methods: distances of (queries x originals)
# --------------------------------------------------------------------------------------


def baseline_codes(blobs: list[bytes]) -> np.ndarray:
    out = np.zeros(len(blobs), np.uint64)
    for i, b in enumerate(blobs):
        out[i] = np.uint64(int(str(imagehash.phash(Image.open(io.BytesIO(b)))), 16))
    return out


def pdq_codes(blobs: list[bytes]) -> np.ndarray | None:
    """bool (n, 8, 256): PDQ of each trimmed picture under pdqhash's eight dihedral variants
    (its own order; only the set matters for a best-of-eight distance)."""
    try:
        import pdqhash
    except ImportError:
        return None
    out = np.zeros((len(blobs), 8, 256), bool)
    for i, b in enumerate(blobs):
        pic = mi.prepare(mi.load_image(b, MAX_PIXELS, draft_side=mi.WORK_SIDE))
        vectors, _ = pdqhash.compute_dihedral(np.asarray(pic))
        out[i] = np.stack(vectors).astype(bool)
    return out


def distances(queries: list[bytes], stored: list[bytes]) -> dict[str, np.ndarray]:
    """method -> int (nq, ns) distance matrix."""
    q, s = mi.image_codes(queries, MAX_PIXELS), mi.image_codes(stored, MAX_PIXELS)
    assert q.ok.all() and s.ok.all(), [e for e in q.errors + s.errors if e]
    base_q, base_s = baseline_codes(queries), baseline_codes(stored)
    out = {"baseline": hamming(base_q[:, None], base_s[None, :]).astype(int)}
    out["phash"] = mi.image_distance(q, s, centre=False)
    out["phash+centre"] = mi.image_distance(q, s, centre=True)
    out["dhash"] = hamming(q.dhash[:, None, :], s.dhash[None, :, 0:1]).min(axis=2).astype(int)
    pq, ps = pdq_codes(queries), pdq_codes(stored)
    if pq is not None:
        d = (pq[:, None, :, :] != ps[None, :, 0:1, :]).sum(axis=3).min(axis=2)
        out["pdq"] = d.astype(int)
    return out


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threshold", type=int, default=ImageSettings().radius,
                    help="match at Hamming distance <= this (64-bit codes; PDQ uses 31/256)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = random.Random(args.seed)

    pics = originals()
    stored = [encode(p, "PNG") for _, p in pics]
    queries, q_edit, q_orig = [], [], []
    for e in EDITS:
        for j, (_, p) in enumerate(pics):
            queries.append(edit(p, e, rng))
            q_edit.append(e)
            q_orig.append(j)
    q_edit, q_orig = np.array(q_edit), np.array(q_orig)
    n = len(pics)

    dist = distances(queries, stored)
    # originals against each other (as queries, dihedral): the closest different photos
    orig = distances(stored, stored)
    thresholds = {m: (31 if m == "pdq" else args.threshold) for m in dist}
    methods = list(dist)
    truth = q_orig[:, None] == np.arange(n)[None, :]

    print(f"# Image quality: {n} originals x {len(EDITS)} edits = {len(queries)} queries "
          f"against {n} stored originals\n")
    print(f"Match: distance <= {args.threshold} of 64 bits (pdq: <= 31 of 256). "
          "P = precision, R = recall over (edit, every original) pairs.\n")
    print("| edit | " + " | ".join(f"{m} P/R" for m in methods) + " |")
    print("|---|" + "---|" * len(methods))
    rows = list(EDITS) + ["all"]
    for e in rows:
        sel = np.ones(len(queries), bool) if e == "all" else q_edit == e
        cells = []
        for m in methods:
            hit = dist[m][sel] <= thresholds[m]
            tp = int((hit & truth[sel]).sum())
            fp = int((hit & ~truth[sel]).sum())
            prec = tp / (tp + fp) if tp + fp else float("nan")
            rec = tp / int(truth[sel].sum())
            cells.append(f"{prec:.2f} / {rec:.2f}" + (f" ({fp} FP)" if fp else ""))
        print(f"| {e} | " + " | ".join(cells) + " |")

    print("\nDistances: largest distance of a true pair per edit (median in brackets), and "
          "the smallest distance between different photos.\n")
    print("| edit | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    for e in EDITS:
        sel = q_edit == e
        cells = []
        for m in methods:
            d = dist[m][sel][truth[sel]]
            cells.append(f"{d.max():.3g} ({np.median(d):.3g})")
        print(f"| {e} | " + " | ".join(cells) + " |")
    off = ~np.eye(n, dtype=bool)
    print("| min, edit vs other original | " + " | ".join(
        f"{dist[m][~truth].min():.3g}" for m in methods) + " |")
    print("| min, original vs other original | " + " | ".join(
        f"{orig[m][off].min():.3g}" for m in methods) + " |")
    print("| 1st percentile, different photos | " + " | ".join(
        f"{np.percentile(np.concatenate([dist[m][~truth], orig[m][off]]), 1):.0f}"
        for m in methods) + " |")

    # Speed: decode + hash, one process, the same bytes, best of three; CPU beside wall
    # (the machines are shared). Then the comparison of every pair of those pictures.
    blobs = stored + queries

    def best(fn) -> tuple[float, float, object]:
        runs = []
        for _ in range(3):
            c0, w0 = time.process_time(), time.perf_counter()
            out = fn()
            runs.append((time.process_time() - c0, time.perf_counter() - w0))
        return (*min(runs), out)

    ours_cpu, ours_wall, codes = best(lambda: mi.image_codes(blobs, MAX_PIXELS))
    base_cpu, base_wall, _ = best(lambda: baseline_codes(blobs))
    c0 = time.process_time()
    mi.image_distance(codes, codes)
    pair_cpu = time.process_time() - c0
    per = 1000 / len(blobs)
    print(f"\nSpeed ({len(blobs)} images, {sum(map(len, blobs)) / 1e6:.1f} MB encoded, "
          "decode included, best of three):\n")
    print("| method | ms CPU a picture | ms wall a picture |\n|---|---|---|")
    print(f"| mmdedup image_codes (every chain, 8 variants each) | {ours_cpu * per:.1f} | {ours_wall * per:.1f} |")
    print(f"| imagehash.phash alone | {base_cpu * per:.1f} | {base_wall * per:.1f} |")
    print(f"| ratio | {ours_cpu / base_cpu:.1f}x | {ours_wall / base_wall:.1f}x |")
    print(f"\nimage_distance, all {len(blobs) ** 2:,} pairs: {pair_cpu * 1e6 / len(blobs) ** 2:.1f} "
          f"microseconds of CPU a pair; a stored signature {len(ImageSignal.pack(codes.take([0]))):,} bytes a picture.")
    print(f"\nIMAGE_VERSION = {mi.IMAGE_VERSION}")
    print(f"Command: python scripts/bench/image_quality.py --threshold {args.threshold} "
          f"--seed {args.seed}", file=sys.stdout)


if __name__ == "__main__":
    main()
