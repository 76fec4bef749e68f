"""Images: bytes -> a clean RGB picture -> 64-bit perceptual codes, and codes -> similarity.

Posts reuse pictures re-compressed, resized, cropped, mirrored, padded or watermarked. A
64-bit pHash (the DCT of a 32x32 grey thumbnail, its 8x8 lowest frequencies compared with
their median) survives re-compression, resizing, brightness, greyscale and small overlays,
and compares with one XOR and a popcount, so it is the image code the store indexes. What it
does not survive is handled around it, each step kept only because the image bench
(scripts/bench/image_quality.py, docs/benchmarks.md) showed it pays:

- uniform borders (padding, letterbox bars) move every DCT coefficient: `trim_borders`
  cuts them off before hashing, on both sides of a comparison;
- a mirrored or rotated copy is a different pHash: the store keeps ONE code per image (the
  picture as posted) and the query is hashed eight ways (`phash_codes`, the flips and
  quarter turns), so the index stays one row per image and only queries pay, 8 lookups;
- a crop shifts and rescales the content, and a rotation's corners or a corner logo
  change the edges: each picture carries a pHash of its middle at several `SCALES` (the
  whole, then the middle 95%, 90%, 85% and 80% of each side, each about a 5% crop of the
  one before). A copy cropped by 5% lines up with its original one scale along, so two
  pictures are compared along a few alignments of their scale chains (`image_distance`):
  the pairs of codes one shift apart, and a distance that is the mean of the `BEST_OF`
  closest pairs of the best alignment. One pair of 64-bit codes agreeing by chance is
  common among low-detail pictures (flat graphics, slides) and among the many pairings
  the eight variants and the centres make; three pairs of one alignment agreeing is not,
  so the mean spreads different pictures away from copies that a single best pairing
  (the earlier rule: the minimum over full and centre codes) brought together;
- a pHash reads neither colour nor contrast, so pictures alike in grey but not in colour
  (a layout in another colour theme, flat graphics) or a flat one and a detailed one can
  share codes: each picture also carries its tone (`TONE_FLOOR`), and a pair whose tones
  part it is held to the weak band;
- dHash (brightness gradients of a 9x8 thumbnail) is computed and stored as a second,
  independent code for review and for later use, but is not part of the signal: in the
  bench it brings different photos to 8 bits apart, and confirming borderline pHash
  distances with it found one more watermarked copy of 231, not worth a second rule.
  PDQ (Meta's 256-bit hash, pdqhash on PyPI, builds from source) was measured too and
  did worse than pHash on every edit of the bench, so it is not used.

Everything here is pure and batch-first: a list of encoded images in, uint64 arrays out.
Decoding, trimming and the thumbnails are the per-image steps (Pillow's decoder, bounded
by a pixel limit checked before any pixel is decoded; the thumbnails are Pillow's Lanczos
resize as matrix products, `_thumbnails`); the thumbnails of the whole batch are hashed
together in numpy, with imagehash's `phash` and `dhash` bits (tests hold `phash_codes` and
`dhash_codes` to them). A bad image never stops the batch: its row carries an
`ImageError` with a short machine-readable reason.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .simhash import hamming

# Decoding is bounded by a pixel limit every caller passes (Settings.max_image_pixels).
# The codes read 32x32 and 9x8 thumbnails, so a picture is worked on small: brought down to
# a short side of WORK_SIDE to 2 x WORK_SIDE pixels before trimming and hashing. A JPEG is
# decoded straight to that size (draft mode: libjpeg's scaled IDCT, 1/2 to 1/8), which
# saves most of the decoding; any other format is decoded whole and reduced by whole-pixel
# box averaging. The codes read a grey picture and the tone its colour (a JPEG decodes as
# YCbCr, without the conversion to RGB); CLIP, when it is on, an RGB one decoded to the
# same size (LoadedItem.pictures), so the codes are the same with CLIP on or off.
WORK_SIDE = 320

# Pillow frees every picture's memory block when the picture goes and asks the C library
# for a new one for the next; blocks the size of a work-size picture are mapped fresh each
# time, and faulting their pages in cost about a sixth of a picture ingest. Keeping a few
# freed blocks for reuse (Pillow's own setting, PILLOW_BLOCKS_MAX, which a user's
# environment still decides where it is set) avoids that.
PILLOW_BLOCKS = 8
if "PILLOW_BLOCKS_MAX" not in os.environ and Image.core.get_blocks_max() < PILLOW_BLOCKS:
    Image.core.set_blocks_max(PILLOW_BLOCKS)

# Border trimming (see border_box): a row or column at an edge is border while at least
# TRIM_SHARE of its pixels lie within TRIM_TOLERANCE (per channel, 0..255) of that edge's
# colour; then up to TRIM_FRINGE lines of looser agreement: JPEG ringing where the bar
# meets the picture, which chroma subsampling spreads over a 16-pixel block.
TRIM_TOLERANCE = 6
TRIM_SHARE = 0.99
TRIM_FRINGE = 8
TRIM_FRINGE_TOLERANCE = 32
TRIM_FRINGE_SHARE = 0.9
TRIM_MIN_SIDE = 8  # a trim that would leave fewer pixels than this on a side is not done
# A border found, the picture inside it is trimmed again, up to TRIM_PASSES passes in all:
# padding around a picture that has a flat margin of its own (a slide's background) stops
# at the margin's colour, where the unpadded original loses its margin to the trim.
TRIM_PASSES = 3

# The scale chain: each picture has a pHash of the middle SCALES[k] of each side of its
# trimmed picture; neighbours differ by about a 5% crop. Two pictures are compared along
# alignments that pair scale k of one with scale k + shift of the other, |shift| <= SHIFT
# (a crop of up to about 10% on either side), the distance of an alignment being the mean
# of its BEST_OF closest pairs (so a watermark or a rotation's corners, which spoil the
# outer scales, cost little). The index holds the codes of the INDEXED scales: every
# alignment pairs one of them with some scale of the other picture.
SCALES = (1.0, 0.95, 0.9, 0.85, 0.8)
SHIFT = 2
BEST_OF = 3
INDEXED = (0, len(SCALES) - 1)  # the whole and the innermost (least spoilt by edges)
# Anchored chains: a crop's cut is split between the two sides of each axis in any share
# (a caption bar cut off the bottom, 10% off the left and the bottom, 3% off the left and
# 9% off the right), where the centre chain assumes the middle stays. The part of a copy
# cut at a share p (of the cut) from the left keeps the same share p of the room beside
# every smaller part of it: the copy's region of size s at place p is the original's of
# size 0.88 s at place p, so chains placed at the same p line up one or two scales along
# whatever the cut. Each picture also carries chains at PLACES of each axis (0: kept from
# the left or top, 1: from the right or bottom, "full": that axis not shrunk), at the same
# SCALES but the whole: a grid a quarter of the room apart each way (the centre, place
# (0.5, 0.5), is the centre chain itself), and the four edges (one axis shrunk towards
# that edge). Region of an anchor: (columns, rows). A chain is compared only with the
# other picture's chain of the same anchor.
PLACES = (0.0, 0.25, 0.5, 0.75, 1.0)
ANCHORS = tuple((c, r) for r in PLACES for c in PLACES if (c, r) != (0.5, 0.5)) + (
    ("full", 0.0), ("full", 1.0), (0.0, "full"), (1.0, "full"))
# The anchors whose innermost code the index holds (the corners and the edges): a crop
# cut elsewhere in between is found by the centre codes' wider search.
INDEXED_ANCHORS = tuple(a for a, (c, r) in enumerate(ANCHORS)
                        if c in ("full", 0.0, 1.0) and r in ("full", 0.0, 1.0))
# The variants (DIHEDRAL columns) in which a chain placed between the corners and edges is
# compared: the picture as posted and mirrored. Those twenty chains in all eight variants
# are four times the corners' and edges' chances for two different pictures to line up
# by accident (the calibration's different tiles at strong doubled), and a copy both
# turned sideways and cropped off-centre is rare; a turned one is still paired by its
# centre chain and its corners.
BETWEEN_VARIANTS = (0, 1)
ANCHOR_SHIFTS = (1, 2)  # |shift| of the anchored alignments (a crop of about 5% or 10%)
# Bits added to an anchored alignment's mean: its many chains are more chances for two
# low-detail pictures to agree by accident than the one centre chain. And an anchored
# alignment counts only within ANCHOR_REACH bits (penalty included): a crop at its place
# lines up closely, while further out its many chances only add pairs of different
# pictures to the weak tier.
ANCHOR_PENALTY = 4.0
ANCHOR_REACH = 11.0
INDEXED_ANCHOR = len(SCALES) - 1  # the innermost scale of an INDEXED_ANCHORS chain is indexed
# The whole pictures' codes alone also count, WHOLE_PENALTY bits added: a copy whose centre
# moved more than its whole (a small picture rotated about a subject in its middle) is
# still near by its whole; one pair of codes is weaker evidence than an alignment's three.
WHOLE_PENALTY = 4
# Tone: what a pHash throws away. It compares DCT coefficients with their median, so it
# reads neither colour nor contrast: a red retina on black and a white cup on brown wood
# in the same layout, a flat grey sky and a star field, two flat graphics of different
# colours can share codes as closely as an edited copy does. Each picture also carries
# its colour (the chroma of its trimmed picture on a TONE_GRID x TONE_GRID grid: each
# cell's Cb and Cr off grey, over its brightness plus TONE_DARK, so a brightened copy
# keeps it and a dark cell's noise counts little) and its contrast (the spread of its
# innermost thumbnail). A copy's saturation may have been changed (a filter, a contrast
# edit), so the query's grid is scaled by the gain, 1/COLOUR_GAIN to COLOUR_GAIN, that
# fits the stored one best; a pair whose colours still differ by more than COLOUR_APART
# (the mean over the cells of |dCb| + |dCr|, the closest of the eight variants), both
# pictures colourful (mean chroma at least COLOURFUL: a grey copy or a dark field has no
# colour to compare), or whose contrasts differ more than CONTRAST_APART times, is no
# closer than TONE_FLOOR bits: still shown, for a person to judge (a copy whose hues were
# shifted lands there too), never merged unseen.
TONE_GRID = 2
TONE_DARK = 16.0
COLOURFUL = 8.0
COLOUR_GAIN = 2.0
COLOUR_APART = 16.0
CONTRAST_APART = 4.0
TONE_FLOOR = 12.0

HASH_SIZE = 8  # 8x8 bits = 64
HASH_CHUNK = 64  # pictures whose thumbnails are hashed at once (see codes_of)
PHASH_SIDE = HASH_SIZE * 4  # imagehash's highfreq_factor=4: a 32x32 thumbnail

# The eight symmetries of the square, in the order of the columns of ImageCodes' arrays,
# with the PIL transpose that produces each from the picture as posted (None: itself).
DIHEDRAL = ("identity", "mirror", "flip", "rot180", "transpose", "rot90", "rot270", "transverse")
PIL_DIHEDRAL = (
    None,
    Image.Transpose.FLIP_LEFT_RIGHT,
    Image.Transpose.FLIP_TOP_BOTTOM,
    Image.Transpose.ROTATE_180,
    Image.Transpose.TRANSPOSE,
    Image.Transpose.ROTATE_90,
    Image.Transpose.ROTATE_270,
    Image.Transpose.TRANSVERSE,
)

IMAGE_VERSION = (
    f"img6-phash{HASH_SIZE}x{PHASH_SIDE}+dhash{HASH_SIZE}"
    f"-scales{'/'.join(f'{f:g}' for f in SCALES)}-shift{SHIFT}-best{BEST_OF}-whole{WHOLE_PENALTY}"
    f"-trim{TRIM_TOLERANCE}/{TRIM_SHARE:g}+{TRIM_FRINGE}@{TRIM_FRINGE_TOLERANCE}/{TRIM_FRINGE_SHARE:g}"
    f"x{TRIM_PASSES}-anchors{len(PLACES)}x{len(PLACES)}+4v{len(BETWEEN_VARIANTS)}@{'/'.join(map(str, ANCHOR_SHIFTS))}+{ANCHOR_PENALTY:g}<{ANCHOR_REACH:g}"
    f"-short{WORK_SIDE}-lanczosmat-d8query"
    f"-tone{TONE_GRID}+{TONE_DARK:g}:{COLOURFUL:g}/{COLOUR_APART:g}g{COLOUR_GAIN:g}x{CONTRAST_APART:g}>{TONE_FLOOR:g}"
)


class ImageError(ValueError):
    """An image we cannot read, with a short `reason` ("not_an_image", "too_large",
    "corrupt_image", "unsupported_image") the ingest records per item, and a human
    `detail`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------


def load_image(data: bytes, max_pixels: int, *, draft_side: int | None = None,
               codes: bool = False) -> Image.Image:
    """Decode one encoded image to an upright 8-bit RGB picture, or raise `ImageError`.

    The canvas size is read from the header and refused over `max_pixels` before any pixel
    is decoded, so a small file declaring a huge canvas (a decompression bomb) costs
    nothing. Then: the first frame of an animation (what a feed shows as the still), the
    EXIF orientation applied (a phone's sideways JPEG is the upright photo), transparency
    flattened onto white (how pages show it), and every mode brought to RGB by its meaning,
    not its bytes (16-bit and float greys scaled, not clipped; palettes and CMYK converted).
    `draft_side` lets JPEGs decode directly at a reduced scale no smaller than that.
    `codes`: for the codes (`load_picture`): a grey picture stays grey (L); a colour JPEG
    decodes as YCbCr, its brightness plane the grey one a JPEG's grey decoding gives,
    without the conversion to RGB; any other picture is RGB.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"image must be bytes, not {type(data).__name__}")
    if len(data) == 0:
        raise ImageError("not_an_image", "the data is empty (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data if isinstance(data, bytes) else bytes(data)))
            width, height = im.size
            if width <= 0 or height <= 0:
                raise ImageError("corrupt_image", f"{width}x{height} canvas")
            if width * height > max_pixels:
                raise ImageError("too_large", f"{width}x{height} pixels, over the limit of "
                                 f"{max_pixels}")
            # Pillow opens an animation (GIF, APNG, WebP) at its first frame; asking for
            # n_frames would walk every frame of a possibly hostile file, so we do not.
            if draft_side and im.format == "JPEG" and im.mode in ("RGB", "L", "CMYK"):
                im.draft("YCbCr" if codes and im.mode == "RGB" else im.mode, (draft_side, draft_side))
            im.load()
    except ImageError:
        raise
    except UnidentifiedImageError as exc:
        raise ImageError("not_an_image", "not a recognised image format") from exc
    except Image.DecompressionBombError as exc:
        raise ImageError("too_large", str(exc)) from exc
    except MemoryError as exc:
        raise ImageError("too_large", "not enough memory to decode the image") from exc
    except Exception as exc:  # noqa: BLE001 - Pillow's plugins raise many types on bad bytes
        raise ImageError("corrupt_image", f"{type(exc).__name__}: {exc}") from exc
    try:
        im = _upright(im)
        if codes and im.mode in ("L", "YCbCr"):
            return im
        return _to_rgb(im)
    except ImageError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ImageError("unsupported_image", f"mode {im.mode}: {type(exc).__name__}: {exc}") from exc


def _upright(im: Image.Image) -> Image.Image:
    """The EXIF orientation applied; an unreadable EXIF block leaves the picture as stored."""
    try:
        return ImageOps.exif_transpose(im)
    except Exception:  # noqa: BLE001 - malformed EXIF must not cost the picture
        return im


def _to_rgb(im: Image.Image) -> Image.Image:
    mode = im.mode
    if mode == "RGB":
        return im
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        return Image.fromarray(_scale_to_u8(np.asarray(im)), "L").convert("RGB")
    if mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    elif mode == "PA":
        im = im.convert("RGBA")
    elif mode in ("LA", "La", "RGBa"):
        im = im.convert("RGBA")
    if im.mode == "RGBA":
        white = Image.new("RGBA", im.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, im).convert("RGB")
    # 1, L, CMYK, YCbCr, LAB, HSV and whatever else Pillow can convert.
    return im.convert("RGB")


def _scale_to_u8(arr: np.ndarray) -> np.ndarray:
    """Grey values of any depth to 0..255 by their evident range: 0..1 floats, 8-bit values
    stored wide, 16-bit values, else the image's own min..max."""
    a = np.nan_to_num(arr.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
    if lo >= 0.0 and hi <= 1.0 and arr.dtype.kind == "f":
        a = a * 255.0
    elif lo >= 0.0 and hi <= 255.0:
        pass
    elif lo >= 0.0 and hi <= 65535.0:
        a = a / 257.0
    else:
        a = (a - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(a)
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------------------
# Borders
# --------------------------------------------------------------------------------------


def border_box(img: Image.Image, tolerance: int = TRIM_TOLERANCE, share: float = TRIM_SHARE,
               fringe: int = TRIM_FRINGE) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the picture inside its uniform borders.

    Each edge has its own border colour (the median of its outermost row or column), so
    black letterbox bars above and white padding to the sides are both found. A side is
    cut inward while its rows (columns) stay within `tolerance` of that colour in at least
    `share` of their pixels: tight, because a natural flat background (a wall, a sky, a
    microscope slide) drifts in brightness where padding does not, and trimming such a
    background by different amounts in two copies would cost more bits than it saves.
    Where a border was found, up to `fringe` more lines go while they are within
    TRIM_FRINGE_TOLERANCE in TRIM_FRINGE_SHARE of their pixels: the JPEG ringing and
    resampling blur where the bar meets the picture. When the cut would leave fewer than
    TRIM_MIN_SIDE pixels (a blank or nearly blank picture), the whole frame is kept:
    trimming never empties. Where a border was cut, the picture inside is trimmed again
    (TRIM_PASSES in all): padding around a flat margin.
    """
    return _border_box(np.asarray(img.convert("L"), dtype=np.int16), tolerance, share, fringe)


def _border_box(arr: np.ndarray, tolerance: int = TRIM_TOLERANCE, share: float = TRIM_SHARE,
                fringe: int = TRIM_FRINGE) -> tuple[int, int, int, int]:
    """`border_box` of a grey picture as an int16 array (h, w)."""
    h, w = arr.shape
    full = (0, 0, w, h)
    if h < TRIM_MIN_SIDE or w < TRIM_MIN_SIDE:
        return full

    def leading(flags: np.ndarray) -> int:
        return len(flags) if flags.all() else int(np.argmin(flags))

    def within(lines: np.ndarray, edge: np.ndarray, tol: int, need: float) -> np.ndarray:
        return (np.abs(lines - edge) <= tol).mean(axis=1) >= need

    def run(lines: np.ndarray, outer: float | None = None) -> tuple[int, float]:
        # lines: (k, m) from the edge inward (a view); how many lead as border, and the
        # border's colour. Read in growing chunks: most pictures have no border and stop
        # at the first line. `outer`: the colour of the border a pass before cut on this
        # side; a second border must differ from it (a margin inside padding), not be the
        # same flat region drifting (a sky, which the first pass stopped in).
        edge = np.median(lines[0])
        if outer is not None and abs(edge - outer) <= TRIM_FRINGE_TOLERANCE:
            return 0, edge
        n, chunk = 0, 4
        while n < len(lines):
            lead = leading(within(lines[n : n + chunk], edge, tolerance, share))
            n += lead
            if lead < chunk:
                break
            chunk *= 2
        if 0 < n < len(lines):
            n += leading(within(lines[n : n + fringe], edge, TRIM_FRINGE_TOLERANCE,
                                TRIM_FRINGE_SHARE))
        return min(n, len(lines)), edge

    box = full
    cut: list[float | None] = [None] * 4  # the colour of each side's last border, once cut
    for _ in range(TRIM_PASSES):
        x0, y0, x1, y1 = box
        part = arr[y0:y1, x0:x1]
        cols = part.T
        sides = [run(lines, cut[j]) for j, lines in enumerate((part, part[::-1], cols, cols[::-1]))]
        (top, _), (bottom, _), (left, _), (right, _) = sides
        if not top + bottom + left + right or (y1 - y0 - top - bottom < TRIM_MIN_SIDE
                                               or x1 - x0 - left - right < TRIM_MIN_SIDE):
            break
        cut = [edge if n else c for (n, edge), c in zip(sides, cut)]
        box = (x0 + left, y0 + top, x1 - right, y1 - bottom)
    return box


def trim_borders(img: Image.Image, tolerance: int = TRIM_TOLERANCE,
                 share: float = TRIM_SHARE) -> Image.Image:
    """The picture without its uniform borders (padding, letterbox bars); see `border_box`."""
    box = border_box(img, tolerance, share)
    return img if box == (0, 0, *img.size) else img.crop(box)


def centre_region(img: Image.Image, fraction: float = SCALES[-1]) -> Image.Image:
    """The middle `fraction` of each side: what a crop of the picture's edges leaves."""
    left, _, cw = _middle(img.size[0], fraction)
    top, _, ch = _middle(img.size[1], fraction)
    return img.crop((left, top, left + cw, top + ch))


def _middle(n: int, fraction: float) -> tuple[int, int, int]:
    """(start, end, length) of the middle `fraction` of n pixels."""
    m = max(1, round(n * fraction))
    return (n - m) // 2, (n - m) // 2 + m, m


def _span(n: int, fraction: float, kind: float | str) -> tuple[int, int, int]:
    """(start, end, length) of `fraction` of n pixels at place `kind` (0: kept from the
    start, 1: from the end, 0.5: the middle, as `_middle`; the share of the room left
    before it), or the whole ("full")."""
    if kind == "full":
        return 0, n, n
    if kind == 0.5:
        return _middle(n, fraction)
    m = max(1, round(n * fraction))
    start = round(kind * (n - m))
    return start, start + m, m


def _anchor_moves() -> np.ndarray:
    """int (8, len(ANCHORS)): the anchor that anchor a of a picture becomes in its dihedral
    variant v (DIHEDRAL order), found by putting the anchor's cells of a grid (one cell a
    place, every cell of a "full" axis) through `_dihedral` itself, so the two cannot
    disagree."""
    n = len(PLACES)

    def cells(kind: float | str) -> list[int]:
        return list(range(n)) if kind == "full" else [PLACES.index(kind)]

    def kind(used: np.ndarray) -> float | str:
        return "full" if used.all() else PLACES[int(np.argmax(used))]

    where = {a: i for i, a in enumerate(ANCHORS)}
    moves = np.zeros((8, len(ANCHORS)), np.int64)
    for a, (c, r) in enumerate(ANCHORS):
        grid = np.zeros((1, n, n))
        grid[0][np.ix_(cells(r), cells(c))] = 1
        for v, g in enumerate(_dihedral(grid, grid.transpose(0, 2, 1))[0]):
            moves[v, a] = where[(kind(g.any(axis=0)), kind(g.any(axis=1)))]
    return moves


def work_size(img: Image.Image, side: int | None = None) -> Image.Image:
    """The picture brought down to a short side of `side` (WORK_SIDE) to twice that, by
    box averaging over whole pixels: what a JPEG's draft decoding gives, for every format."""
    factor = min(img.size) // (side or WORK_SIDE)
    return img.reduce(factor) if factor >= 2 else img


def load_picture(data: bytes, max_pixels: int, *, codes: bool = False) -> Image.Image:
    """An encoded picture decoded at work size (`load_image`, then `work_size`): what CLIP
    reads, and, `codes`, what the codes read: a grey picture (L), or a colour one as YCbCr
    (a JPEG as it decodes; any other format's grey plane made before the reduction, the
    grey the codes have always read, beside the Cb and Cr of the reduced picture)."""
    im = load_image(data, max_pixels, draft_side=WORK_SIDE, codes=codes)
    if codes and im.mode == "RGB":
        _, cb, cr = work_size(im).convert("YCbCr").split()
        return Image.merge("YCbCr", (work_size(im.convert("L")), cb, cr))
    return work_size(im)


def prepare(img: Image.Image) -> Image.Image:
    """What the codes are computed from: at work size, borders trimmed."""
    return trim_borders(work_size(img))


# --------------------------------------------------------------------------------------
# Codes
# --------------------------------------------------------------------------------------


def _dihedral(p: np.ndarray, pt: np.ndarray) -> np.ndarray:
    """(n, 8, ...) stack of the eight symmetries, in DIHEDRAL order, of thumbnails `p`
    (n, h, w) given also `pt` (n, w, h): the thumbnails of the transposed pictures.

    `pt` is passed separately so a non-square thumbnail (dHash's 9x8) is resized in its own
    orientation; for pHash's square one it is simply p transposed. Resizing commutes with
    flips, so flipping a thumbnail equals thumbnailing the flipped picture (up to rounding).
    """
    return np.stack([
        p, p[:, :, ::-1], p[:, ::-1, :], p[:, ::-1, ::-1],
        pt, pt[:, ::-1, :], pt[:, :, ::-1], pt[:, ::-1, ::-1],
    ], axis=1)


def _pack_bits(bits: np.ndarray) -> np.ndarray:
    """(..., 8, 8) booleans -> (...) uint64, first bit the most significant: the same integer
    as int(str(imagehash.ImageHash), 16)."""
    flat = bits.reshape(*bits.shape[:-2], 64)
    packed = np.packbits(flat, axis=-1)  # (..., 8) uint8, big-endian bit order
    return packed.view(">u8")[..., 0].astype(np.uint64)


def _dct_rows(n: int, k: int) -> np.ndarray:
    """The first k rows of scipy.fftpack's unnormalised n-point DCT-II matrix."""
    return 2.0 * np.cos(np.pi * np.arange(k)[:, None] * (2 * np.arange(n)[None, :] + 1) / (2 * n))


# The 8x8 low block of a 32x32 thumbnail's 2-D DCT is D8 @ T @ D8.T: two small matrix
# products, the same numbers as scipy.fftpack.dct on both axes then the top-left block,
# without importing scipy (0.15 s of every command that hashes a picture).
_D8 = _dct_rows(PHASH_SIDE, HASH_SIZE)


def _grey_thumb(grey: Image.Image, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(grey.resize(size, Image.Resampling.LANCZOS))


# A flip of a thumbnail negates the odd frequencies of its DCT along that axis, and a
# transpose transposes the low block: the eight variants' pHashes come from one DCT of each
# thumbnail, in _dihedral's order, instead of a DCT of each of eight flipped copies.
_ODD = (-1.0) ** np.arange(HASH_SIZE)


def _phash_of_thumbs(p: np.ndarray) -> np.ndarray:
    """uint64 (n, 8): pHash of (n, 32, 32) thumbnails under the eight symmetries."""
    low = _D8 @ p @ _D8.T
    lt = low.transpose(0, 2, 1)
    rows, cols = _ODD[:, None], _ODD[None, :]
    variants = np.stack([low, low * cols, low * rows, low * rows * cols,
                         lt, lt * rows, lt * cols, lt * rows * cols], axis=1)
    med = np.median(variants.reshape(*variants.shape[:-2], -1), axis=-1)
    return _pack_bits(variants > med[..., None, None])


def _dhash_of_thumbs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """uint64 (n, 8): dHash of (n, 8, 9) thumbnails `a`, given the (n, 9, 8) ones `b` of the
    same pictures. The transposed pictures' 9x8 thumbnails are the 8x9 ones transposed;
    flips keep every grid 9 wide, and each pixel is then compared with its left neighbour."""
    d = _dihedral(a, b.transpose(0, 2, 1))
    return _pack_bits(d[..., 1:] > d[..., :-1])


def phash_codes(grey: Sequence[Image.Image]) -> np.ndarray:
    """uint64 (n, 8): the pHash of each grey picture under the eight symmetries."""
    if not grey:
        return np.zeros((0, 8), np.uint64)
    return _phash_of_thumbs(np.stack([_grey_thumb(g, (PHASH_SIDE, PHASH_SIDE)) for g in grey])
                            .astype(np.float64))


def dhash_codes(grey: Sequence[Image.Image]) -> np.ndarray:
    """uint64 (n, 8): the dHash (imagehash.dhash: is each pixel of a 9x8 thumbnail brighter
    than its left neighbour) of each grey picture under the eight symmetries."""
    if not grey:
        return np.zeros((0, 8), np.uint64)
    a = np.stack([_grey_thumb(g, (HASH_SIZE + 1, HASH_SIZE)) for g in grey]).astype(np.int16)
    b = np.stack([_grey_thumb(g, (HASH_SIZE, HASH_SIZE + 1)) for g in grey]).astype(np.int16)
    return _dhash_of_thumbs(a, b)


@lru_cache(maxsize=512)
def _lanczos(n_out: int, n_in: int) -> np.ndarray:
    """float32 (n_out, n_in): Pillow's Lanczos resampling of one axis as a matrix (the same
    support, centres and normalised weights as its precompute_coeffs)."""
    scale = n_in / n_out
    stretch = max(scale, 1.0)
    centre = (np.arange(n_out) + 0.5) * scale
    src = np.arange(n_in)
    x = (src[None, :] + 0.5 - centre[:, None]) / stretch
    w = np.sinc(x) * np.sinc(x / 3.0)
    lo = np.maximum(np.floor(centre - 3.0 * stretch + 0.5), 0)
    hi = np.floor(centre + 3.0 * stretch + 0.5)
    w[(np.abs(x) >= 3.0) | (src[None, :] < lo[:, None]) | (src[None, :] >= hi[:, None])] = 0.0
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


# OpenBLAS runs a product of fewer than 4 x 65536 multiply-adds on the calling thread.
_ONE_THREAD_MACS = 200_000
_STRIP_BYTES = 96 * 1024  # a strip of the picture cast to float32 at a time (see _product)


def _product(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """float32 a @ m, `a` of any numeric type, as a batch of products of a few rows of `a`
    each, cast to float32 a strip at a time.

    OpenBLAS spreads one product the size of a picture's over every core, and on a busy
    machine those threads cost several times the work in CPU seconds; products under its
    threading threshold (_ONE_THREAD_MACS) run on the calling thread, with no setting to
    change and no thread-pool library to load; where even one row of `a` times `m` is over
    it (a wide picture times every thumbnail's columns), `m` is taken a block of columns at
    a time. The strips are small for the same reason of cost: a float32 copy of the whole picture is large enough for the C library to map
    fresh pages for it on every picture, and faulting them in cost as much as the product."""
    n, k = a.shape
    p = m.shape[1]
    if k * p > _ONE_THREAD_MACS and p > 1:  # even one row is over: a block of columns at a time
        width = max(1, _ONE_THREAD_MACS // k)
        return np.concatenate([_product(a, np.ascontiguousarray(m[:, c:c + width]))
                               for c in range(0, p, width)], axis=1)
    rows = max(1, _ONE_THREAD_MACS // max(1, k * p))
    if rows >= n:
        return a.astype(np.float32) @ m
    strip = rows * max(1, _STRIP_BYTES // (4 * k * rows))
    out = np.empty((-(-n // rows) * rows, p), np.float32)
    for start in range(0, n, strip):
        block = a[start:start + strip].astype(np.float32)
        if len(block) % rows:
            block = np.concatenate([block, np.zeros((-len(block) % rows, k), np.float32)])
        np.matmul(block.reshape(-1, rows, k), m, out=out[start:start + len(block)].reshape(-1, rows, p))
    return out[:n]


# The places other than the middle, each with a block of horizontal weights a scale
# (the middle's are the centre chain's).
_SIDE_PLACES = tuple(p for p in PLACES if p != 0.5)
_BLOCKS = len(SCALES) + len(_SIDE_PLACES) * (len(SCALES) - 1)
# the anchors by the place of their rows (ANCHORS' order): each group's vertical passes
_BY_ROWS = {r: tuple(a for a, (_, rr) in enumerate(ANCHORS) if rr == r)
            for r in dict.fromkeys(r for _, r in ANCHORS)}


@lru_cache(maxsize=64)
def _columns(w: int) -> np.ndarray:
    """float32 (w, 32 * _BLOCKS + 17): the horizontal Lanczos weights of every thumbnail of
    a picture `w` wide (see _thumbnails), side by side: the centres, then the scales but
    the whole at each of _SIDE_PLACES, then dHash's two."""
    side, n = PHASH_SIDE, HASH_SIZE
    cols = np.zeros((w, _BLOCKS * side + 2 * n + 1), np.float32)
    for i, f in enumerate(SCALES):
        lo, hi, m = _middle(w, f)
        cols[lo:hi, i * side:(i + 1) * side] = _lanczos(side, m).T
    for place in _SIDE_PLACES:
        for i, f in enumerate(SCALES[1:], start=1):
            lo, hi, m = _span(w, f, place)
            b = _column_block(place, i)
            cols[lo:hi, b * side:(b + 1) * side] = _lanczos(side, m).T
    k = _BLOCKS
    cols[:, k * side:k * side + n + 1] = _lanczos(n + 1, w).T
    cols[:, k * side + n + 1:] = _lanczos(n, w).T
    return cols


def _column_block(kind: float | str, i: int) -> int:
    """Which block of 32 columns of `_columns` holds scale SCALES[i] (i >= 1) at place
    `kind` (the whole, for "full")."""
    if kind == "full":
        return 0
    if kind == 0.5:
        return i
    return len(SCALES) + _SIDE_PLACES.index(kind) * (len(SCALES) - 1) + i - 1


def _to_levels(t: np.ndarray) -> np.ndarray:
    """Rounded and clipped to 0..255 in place, as Pillow's 8-bit result of a pass is."""
    np.rint(t, out=t)
    return np.clip(t, 0.0, 255.0, out=t)


def _thumbnails(grey: np.ndarray, box: tuple[int, int, int, int]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The thumbnails the codes read, of one work-size grey picture (uint8 (h, w)) inside
    its border box: (len(SCALES), 32, 32) of the middle SCALES[k] of each side,
    (len(ANCHORS), len(SCALES) - 1, 32, 32) of each anchored region (`ANCHORS`), and dHash's 8x9 (rows x columns) and 9x8, each as Pillow's Lanczos resize makes it, up to
    its rounding (rounded and clipped to 0..255 after each pass, as its 8-bit result is:
    dHash compares neighbours, and Pillow's equal ones must stay equal).

    Pillow resizes of a picture this size cost more than decoding it; as matrices, every
    thumbnail's horizontal pass is one product over the picture's rows (a centre's columns
    are weights that are zero outside it), and the vertical passes are small."""
    left, top, right, bottom = box
    g = grey[top:bottom, left:right]
    h, w = g.shape
    side, n, k = PHASH_SIDE, HASH_SIZE, _BLOCKS
    across = _to_levels(_product(g, _columns(w)))
    scales = []
    for i, f in enumerate(SCALES):
        lo, hi, m = _middle(h, f)
        scales.append(_to_levels(_product(_lanczos(side, m), across[lo:hi, i * side:(i + 1) * side])))
    anchored = np.empty((len(ANCHORS), len(SCALES) - 1, side, side), np.float32)
    # one vertical pass for all the anchors whose rows are the same, their columns side by side
    for rows, anchors in _BY_ROWS.items():
        for i, f in enumerate(SCALES[1:], start=1):
            lo, hi, m = _span(h, f, rows)
            cols = np.concatenate([np.arange(b * side, (b + 1) * side)
                                   for b in (_column_block(ANCHORS[a][0], i) for a in anchors)])
            out = _to_levels(_product(_lanczos(side, m), across[lo:hi, cols]))
            anchored[list(anchors), i - 1] = out.reshape(side, len(anchors), side).transpose(1, 0, 2)
    wide = _product(_lanczos(n, h), across[:, k * side:k * side + n + 1])
    tall = _product(_lanczos(n + 1, h), across[:, k * side + n + 1:])
    return np.stack(scales), anchored, _to_levels(wide), _to_levels(tall)


@dataclass
class ImageCodes:
    """Codes of a batch of images, row i for image i.

    `scales` is uint64 (n, len(SCALES), 8): the pHash of the middle SCALES[k] of each side
    of the trimmed picture (k = 0: the whole); `dhash` uint64 (n, 8). The last axis: column
    0 is the code of the picture as given, the one the store indexes; columns 1..7 the same
    code of its mirrored and rotated variants (DIHEDRAL order), which only queries use.
    `anchored` uint64 (n, len(ANCHORS), len(SCALES) - 1, 8): the chains placed at the
    corners, the edges and between (`ANCHORS`), scales SCALES[1:], column v the code of
    the region placed at ANCHORS[a] in the picture as given, seen in variant v.
    `chroma` float32 (n, TONE_GRID, TONE_GRID, 2) and `contrast` float32 (n,): the
    picture's tone as given (see TONE_FLOOR), NaN where unknown (never apart). Rows whose
    image failed carry zeros and their `ImageError` in `errors`; `ok` masks them out.
    """

    scales: np.ndarray
    dhash: np.ndarray
    errors: list[ImageError | None] = field(default_factory=list)
    version: str = IMAGE_VERSION
    anchored: np.ndarray | None = None
    chroma: np.ndarray | None = None
    contrast: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.scales)
        if self.anchored is None:  # codes made without them: no anchored chain compares
            self.anchored = np.zeros((n, len(ANCHORS), len(SCALES) - 1, 8), np.uint64)
        if self.chroma is None:
            self.chroma = np.full((n, TONE_GRID, TONE_GRID, 2), np.nan, np.float32)
        if self.contrast is None:
            self.contrast = np.full(n, np.nan, np.float32)

    @property
    def phash(self) -> np.ndarray:
        """uint64 (n, 8): the pHash of the whole trimmed picture (imagehash's)."""
        return self.scales[:, 0]

    @property
    def ok(self) -> np.ndarray:
        return np.array([e is None for e in self.errors], dtype=bool)

    def __len__(self) -> int:
        return len(self.scales)

    def take(self, rows) -> ImageCodes:
        rows = np.asarray(rows)
        return ImageCodes(self.scales[rows], self.dhash[rows],
                          [self.errors[int(r)] for r in np.atleast_1d(rows)], self.version,
                          self.anchored[rows], self.chroma[rows], self.contrast[rows])


def _grey(small: Image.Image) -> Image.Image:
    """The grey plane the codes read: a YCbCr picture's brightness plane (a JPEG's grey
    decoding, or the grey `load_picture` made), or a colour one converted."""
    if small.mode == "L":
        return small
    return small.getchannel(0) if small.mode == "YCbCr" else small.convert("L")


def _chroma(small: Image.Image, box: tuple[int, int, int, int]) -> np.ndarray:
    """float32 (TONE_GRID, TONE_GRID, 2): each cell's Cb and Cr off grey over its
    brightness plus TONE_DARK, of a work-size picture (L, YCbCr or RGB) inside its border
    box; zeros for a grey picture."""
    if small.mode == "L":
        return np.zeros((TONE_GRID, TONE_GRID, 2), np.float32)
    ycc = small if small.mode == "YCbCr" else small.convert("YCbCr")
    cells = np.asarray(ycc.crop(box).resize((TONE_GRID, TONE_GRID), Image.Resampling.BOX), np.float32)
    return (cells[..., 1:] - 128.0) * (128.0 / (cells[..., :1] + TONE_DARK))


def codes_of(images: Sequence[Image.Image | None],
             errors: list[ImageError | None] | None = None) -> ImageCodes:
    """Codes of decoded pictures, grey, YCbCr or RGB (None for a failed one): each brought
    to work size, its grey plane's borders found (`border_box`), its thumbnails made from
    that one array (`_thumbnails`), and its tone read. `image_codes` is the entry point for
    encoded bytes."""
    n = len(images)
    errors = list(errors) if errors is not None else [None] * n
    good = [i for i, im in enumerate(images) if im is not None and errors[i] is None]
    scales = np.zeros((n, len(SCALES), 8), np.uint64)
    anchored = np.zeros((n, len(ANCHORS), len(SCALES) - 1, 8), np.uint64)
    dhash = np.zeros((n, 8), np.uint64)
    chroma = np.full((n, TONE_GRID, TONE_GRID, 2), np.nan, np.float32)
    contrast = np.full(n, np.nan, np.float32)
    # HASH_CHUNK pictures at a time: a picture's 117 thumbnails are about 1 MB of float64,
    # so a large batch at once would not fit in memory
    for start in range(0, len(good), HASH_CHUNK):
        rows, thumbs = [], []
        for i in good[start:start + HASH_CHUNK]:
            try:
                small = work_size(images[i])
                grey = np.asarray(_grey(small))
                box = _border_box(grey.astype(np.int16))
                thumbs.append(_thumbnails(grey, box))
                chroma[i] = _chroma(small, box)
                rows.append(i)
            except Exception as exc:  # noqa: BLE001 - a decoded picture can still fail lazily
                errors[i] = ImageError("corrupt_image", f"{type(exc).__name__}: {exc}")
        if not rows:
            continue
        sc, an, wide, tall = (np.stack(t).astype(np.float64) for t in zip(*thumbs))
        scales[rows] = _phash_of_thumbs(sc.reshape(-1, PHASH_SIDE, PHASH_SIDE)).reshape(len(rows), len(SCALES), 8)
        anchored[rows] = _phash_of_thumbs(an.reshape(-1, PHASH_SIDE, PHASH_SIDE)).reshape(
            len(rows), len(ANCHORS), len(SCALES) - 1, 8)
        dhash[rows] = _dhash_of_thumbs(wide, tall)
        contrast[rows] = sc[:, -1].std(axis=(1, 2))
    return ImageCodes(scales, dhash, errors=errors, anchored=anchored, chroma=chroma, contrast=contrast)


def image_codes(images: list[bytes], max_pixels: int) -> ImageCodes:
    """Codes of a batch of encoded images; a bad one gets its error, the rest go on."""
    pictures: list[Image.Image | None] = []
    errors: list[ImageError | None] = []
    for data in images:
        try:
            pictures.append(load_picture(data, max_pixels, codes=True))
            errors.append(None)
        except ImageError as exc:
            pictures.append(None)
            errors.append(exc)
    return codes_of(pictures, errors)


# --------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------


def _alignments() -> list[tuple[np.ndarray, np.ndarray]]:
    """(query scales, stored scales) of each alignment: scale k against k + shift."""
    k = len(SCALES)
    out = []
    for shift in range(-SHIFT, SHIFT + 1):
        q = np.array([i for i in range(k) if 0 <= i + shift < k])
        out.append((q, q + shift))
    return out


_ALIGNED = _alignments()
_ANCHOR_ALIGNED = [(q, s) for (q, s), shift in zip(_ALIGNED, range(-SHIFT, SHIFT + 1))
                   if abs(shift) in ANCHOR_SHIFTS]
# _FROM[v, b]: the query's anchor whose variant-v code is of the region its variant v has
# at anchor b (the inverse of _anchor_moves for each variant)
_FROM = np.argsort(_anchor_moves(), axis=1)


_BLOCK = 1 << 22  # Hamming distances image_distance holds at once


def _chain_distance(query: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """float (nq, ns): `image_distance` of query chains (nq, K, 8) against stored ones as
    given (ns, K)."""
    # (nq, ns, kq, ks, 8): every scale of the query, each variant, against every stored scale
    h = hamming(query[:, None, :, None, :], stored[None, :, None, :, None])
    dist = h[:, :, 0, 0, :].min(axis=2) + float(WHOLE_PENALTY)
    for q, s in _ALIGNED:
        pairs = np.sort(h[:, :, q, s, :], axis=2)[:, :, :BEST_OF]
        dist = np.minimum(dist, pairs.mean(axis=2).min(axis=2))
    return dist


def _anchored_distance(qwhole: np.ndarray, qanch: np.ndarray, swhole: np.ndarray,
                       sanch: np.ndarray, anchors: Sequence[int] = range(len(ANCHORS))) -> np.ndarray:
    """float (nq, ns): the best anchored alignment (`ANCHOR_SHIFTS`) of query chains
    (whole (nq, 8), anchored (nq, A, K - 1, 8)) against stored ones as given (whole (ns,),
    anchored (ns, A, K - 1)), over the chains of `anchors` (all), plus ANCHOR_PENALTY; 64
    past ANCHOR_REACH or where either side has none."""
    nq, ns = len(qwhole), len(swhole)
    dist = np.full((nq, ns), np.inf)
    every, between = np.arange(8), np.array(BETWEEN_VARIANTS)
    for b in anchors:
        # the query's chain at anchor b of each of its variants compared there: (nq, K, v)
        variants = every if b in INDEXED_ANCHORS else between
        q = np.concatenate([qwhole[:, None, variants],
                            qanch[:, _FROM[variants, b], :, variants].transpose(1, 2, 0)], axis=1)
        s = np.concatenate([swhole[:, None], sanch[:, b]], axis=1)  # (ns, K)
        h = hamming(q[:, None, :, None, :], s[None, :, None, :, None])
        for qi, si in _ANCHOR_ALIGNED:
            pairs = np.sort(h[:, :, qi, si, :], axis=2)[:, :, :BEST_OF]
            dist = np.minimum(dist, pairs.mean(axis=2).min(axis=2))
    dist += ANCHOR_PENALTY
    dist[dist > ANCHOR_REACH] = 64
    dist[~qanch.any(axis=(1, 2, 3)), :] = 64
    dist[:, ~sanch.any(axis=(1, 2))] = 64
    return dist


def _tone_apart(qchroma: np.ndarray, qcontrast: np.ndarray, schroma: np.ndarray,
                scontrast: np.ndarray) -> np.ndarray:
    """bool (nq, ns): the pairs whose colours or contrasts say they are different pictures
    (TONE_FLOOR), of query tones (chroma (nq, g, g, 2), contrast (nq,)) against stored
    ones. The query's colour grid is compared in its eight variants, each scaled by the
    gain that fits the stored grid best (COLOUR_GAIN), the closest counting; NaN (tone
    unknown) is never apart."""
    x = _dihedral(qchroma, qchroma.transpose(0, 2, 1, 3)).reshape(len(qchroma), 8, -1)
    y = schroma.reshape(len(schroma), -1)
    fit = np.einsum("qvm,sm->qsv", x, y) / np.maximum((x * x).sum(axis=-1), 1e-6)[:, None, :]
    gain = np.clip(fit, 1.0 / COLOUR_GAIN, COLOUR_GAIN)
    left = np.abs(y[None, :, None, :] - gain[..., None] * x[:, None, :, :]).sum(axis=-1)
    colour = left.min(axis=2) / (TONE_GRID * TONE_GRID)

    def colourful(c: np.ndarray) -> np.ndarray:
        return np.hypot(c[..., 0], c[..., 1]).mean(axis=(1, 2)) >= COLOURFUL

    apart = (colour > COLOUR_APART) & colourful(qchroma)[:, None] & colourful(schroma)[None, :]
    low = np.minimum(qcontrast[:, None], scontrast[None, :]) + 1.0
    high = np.maximum(qcontrast[:, None], scontrast[None, :]) + 1.0
    return apart | (high > CONTRAST_APART * low)


def tone_apart(query: ImageCodes, stored: ImageCodes) -> np.ndarray:
    """bool (nq, ns): the pairs of pictures whose tones part them (TONE_FLOOR)."""
    return _tone_apart(query.chroma, query.contrast, stored.chroma, stored.contrast)


def image_distance(query: ImageCodes, stored: ImageCodes, *, centre: bool = True) -> np.ndarray:
    """float (nq, ns): the distance between query image i and stored image j, in bits
    (0..64, in thirds: a mean of BEST_OF Hamming distances).

    The smallest, over the query's eight dihedral variants and the alignments of the two
    scale chains (scale k of the query against k + shift of the stored picture), of the
    mean of the BEST_OF closest pairs of codes of that alignment: a crop lines up one
    or two scales along, a rotation's corners or a corner logo spoil the outer scales of
    the alignment, which the best three leave out; or the whole pictures' codes alone plus
    WHOLE_PENALTY, if smaller; or the same along the chains placed at a corner, an edge or
    between (`ANCHORS`: a crop cut unevenly), ANCHOR_PENALTY added, up to ANCHOR_REACH;
    and no closer than TONE_FLOOR where the two pictures' tones are apart (`_tone_apart`).
    Without `centre`, the whole pictures' codes alone (the smallest over the variants, no
    penalty, no tone: plain pHash). Rows or columns of failed images are 64.
    Only the stored pictures' column 0 is read: the store keeps nothing else."""
    if not centre:
        dist = hamming(query.phash[:, None, :], stored.phash[None, :, 0, None]).min(axis=2)
        dist = dist.astype(np.float64)
    else:
        dist = np.empty((len(query), len(stored)))
        # a block of query rows at a time: (rows, ns, kq, ks, 8) distances each
        step = max(1, _BLOCK // max(1, len(stored) * len(SCALES) ** 2 * 8))
        sanch = stored.anchored[:, :, :, 0]
        for start in range(0, len(query), step):
            rows = slice(start, start + step)
            near = np.minimum(
                _chain_distance(query.scales[rows], stored.scales[:, :, 0]),
                _anchored_distance(query.scales[rows, 0], query.anchored[rows], stored.scales[:, 0, 0], sanch))
            apart = _tone_apart(query.chroma[rows], query.contrast[rows], stored.chroma, stored.contrast)
            dist[rows] = np.where(apart, np.maximum(near, TONE_FLOOR), near)
    dist[~query.ok, :] = 64
    dist[:, ~stored.ok] = 64
    return np.minimum(dist, 64)


# The distance (0..64 bits, as image_distance computes it, in steps of 2/3) -> score on
# fusion's common 0..1 scale, interpolated linearly between the (distance, score) points
# of the image signal's `calibration` (signals/image.py), whose `radius` bounds the codes
# the index search returns. Where the benches put copies and different pictures, and so
# the tiers, is in docs/benchmarks.md (image_tiers.py).
