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
# box averaging. The codes read a grey picture (a JPEG decodes its brightness alone); CLIP,
# when it is on, a colour one decoded to the same size (LoadedItem.pictures), so the codes
# are the same with CLIP on or off.
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
# Anchored chains: a crop taken from one side or one corner (a caption bar cut off the
# bottom, 10% off the left and the bottom) keeps an edge of the picture where the centre
# chain assumes the middle stays; each picture also carries chains anchored at its four
# corners (both sides shrunk towards the corner) and its four edges (one side shrunk
# towards that edge), at the same SCALES but the whole. Region of an anchor: (columns,
# rows), each "low" (kept from the left or top), "high" (from the right or bottom) or
# "full". A chain is compared only with the other picture's chain of the same anchor.
ANCHORS = (("low", "low"), ("high", "low"), ("low", "high"), ("high", "high"),
           ("full", "low"), ("full", "high"), ("low", "full"), ("high", "full"))
ANCHOR_SHIFTS = (1, 2)  # |shift| of the anchored alignments (a 5% or 10% one-sided crop)
# Bits added to an anchored alignment's mean: its eight chains are more chances for two
# low-detail pictures to agree by accident than the one centre chain. And an anchored
# alignment counts only within ANCHOR_REACH bits (penalty included): a one-sided crop
# lines up closely, while further out its many chances only add pairs of different
# pictures to the weak tier.
ANCHOR_PENALTY = 4.0
ANCHOR_REACH = 11.0
INDEXED_ANCHOR = len(SCALES) - 1  # the innermost scale of each anchored chain is indexed
# The whole pictures' codes alone also count, WHOLE_PENALTY bits added: a copy whose centre
# moved more than its whole (a small picture rotated about a subject in its middle) is
# still near by its whole; one pair of codes is weaker evidence than an alignment's three.
WHOLE_PENALTY = 4

HASH_SIZE = 8  # 8x8 bits = 64
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
    f"img4-phash{HASH_SIZE}x{PHASH_SIDE}+dhash{HASH_SIZE}"
    f"-scales{'/'.join(f'{f:g}' for f in SCALES)}-shift{SHIFT}-best{BEST_OF}-whole{WHOLE_PENALTY}"
    f"-trim{TRIM_TOLERANCE}/{TRIM_SHARE:g}+{TRIM_FRINGE}@{TRIM_FRINGE_TOLERANCE}/{TRIM_FRINGE_SHARE:g}"
    f"x{TRIM_PASSES}-anchors{len(ANCHORS)}@{'/'.join(map(str, ANCHOR_SHIFTS))}+{ANCHOR_PENALTY:g}<{ANCHOR_REACH:g}"
    f"-short{WORK_SIDE}-lanczosmat-d8query"
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
               grey: bool = False) -> Image.Image:
    """Decode one encoded image to an upright 8-bit RGB picture, or raise `ImageError`.

    The canvas size is read from the header and refused over `max_pixels` before any pixel
    is decoded, so a small file declaring a huge canvas (a decompression bomb) costs
    nothing. Then: the first frame of an animation (what a feed shows as the still), the
    EXIF orientation applied (a phone's sideways JPEG is the upright photo), transparency
    flattened onto white (how pages show it), and every mode brought to RGB by its meaning,
    not its bytes (16-bit and float greys scaled, not clipped; palettes and CMYK converted).
    `draft_side` lets JPEGs decode directly at a reduced scale no smaller than that.
    `grey`: an 8-bit grey picture instead (L, by the same meaning of every mode); a JPEG
    then decodes its brightness alone, without the colour planes (a third faster).
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
                im.draft("L" if grey and im.mode != "CMYK" else im.mode, (draft_side, draft_side))
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
        if grey:
            return im if im.mode == "L" else _to_rgb(im).convert("L")
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


def _span(n: int, fraction: float, kind: str) -> tuple[int, int, int]:
    """(start, end, length) of `fraction` of n pixels kept from the start ("low"), the end
    ("high") or the whole ("full")."""
    if kind == "full":
        return 0, n, n
    m = max(1, round(n * fraction))
    return (0, m, m) if kind == "low" else (n - m, n, m)


def _anchor_moves() -> np.ndarray:
    """int (8, len(ANCHORS)): the anchor that anchor a of a picture becomes in its dihedral
    variant v (DIHEDRAL order), found by putting the anchor's cell of a 3x3 grid through
    `_dihedral` itself, so the two cannot disagree."""
    cell = {"low": 0, "full": 1, "high": 2}
    where = {(cell[r], cell[c]): a for a, (c, r) in enumerate(ANCHORS)}
    moves = np.zeros((8, len(ANCHORS)), np.int64)
    for a, (c, r) in enumerate(ANCHORS):
        grid = np.zeros((1, 3, 3))
        grid[0, cell[r], cell[c]] = 1
        for v, g in enumerate(_dihedral(grid, grid.transpose(0, 2, 1))[0]):
            row, col = np.argwhere(g)[0]
            moves[v, a] = where[(int(row), int(col))]
    return moves


def work_size(img: Image.Image, side: int | None = None) -> Image.Image:
    """The picture brought down to a short side of `side` (WORK_SIDE) to twice that, by
    box averaging over whole pixels: what a JPEG's draft decoding gives, for every format."""
    factor = min(img.size) // (side or WORK_SIDE)
    return img.reduce(factor) if factor >= 2 else img


def load_picture(data: bytes, max_pixels: int, *, grey: bool = False) -> Image.Image:
    """An encoded picture decoded at work size (`load_image`, then `work_size`): what CLIP
    reads, and, `grey`, what the codes read."""
    return work_size(load_image(data, max_pixels, draft_side=WORK_SIDE, grey=grey))


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


def _phash_bits(thumbs: np.ndarray) -> np.ndarray:
    """pHash bits of (..., 32, 32) grey thumbnails, as imagehash.phash computes them."""
    low = _D8 @ thumbs @ _D8.T
    med = np.median(low.reshape(*low.shape[:-2], -1), axis=-1)
    return low > med[..., None, None]


def _grey_thumb(grey: Image.Image, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(grey.resize(size, Image.Resampling.LANCZOS))


def _phash_of_thumbs(p: np.ndarray) -> np.ndarray:
    """uint64 (n, 8): pHash of (n, 32, 32) thumbnails under the eight symmetries."""
    return _pack_bits(_phash_bits(_dihedral(p, p.transpose(0, 2, 1))))


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
    change and no thread-pool library to load. The strips are small for the same reason
    of cost: a float32 copy of the whole picture is large enough for the C library to map
    fresh pages for it on every picture, and faulting them in cost as much as the product."""
    n, k = a.shape
    p = m.shape[1]
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


@lru_cache(maxsize=64)
def _columns(w: int) -> np.ndarray:
    """float32 (w, 32 * (3 * len(SCALES) - 2) + 17): the horizontal Lanczos weights of every
    thumbnail of a picture `w` wide (see _thumbnails), side by side."""
    side, n = PHASH_SIDE, HASH_SIZE
    k = len(SCALES) * 3 - 2  # the centres, then the kept-from-the-left, then from the right
    cols = np.zeros((w, k * side + 2 * n + 1), np.float32)
    for i, f in enumerate(SCALES):
        lo, hi, m = _middle(w, f)
        cols[lo:hi, i * side:(i + 1) * side] = _lanczos(side, m).T
    for j, (kind, f) in enumerate((kind, f) for kind in ("low", "high") for f in SCALES[1:]):
        lo, hi, m = _span(w, f, kind)
        i = len(SCALES) + j
        cols[lo:hi, i * side:(i + 1) * side] = _lanczos(side, m).T
    cols[:, k * side:k * side + n + 1] = _lanczos(n + 1, w).T
    cols[:, k * side + n + 1:] = _lanczos(n, w).T
    return cols


def _column_block(kind: str, i: int) -> int:
    """Which block of 32 columns of `_columns` holds scale SCALES[i] (i >= 1) of `kind`."""
    if kind == "full":
        return 0
    return len(SCALES) + (0 if kind == "low" else len(SCALES) - 1) + i - 1


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
    side, n, k = PHASH_SIDE, HASH_SIZE, len(SCALES) * 3 - 2
    across = _to_levels(_product(g, _columns(w)))
    scales = []
    for i, f in enumerate(SCALES):
        lo, hi, m = _middle(h, f)
        scales.append(_to_levels(_product(_lanczos(side, m), across[lo:hi, i * side:(i + 1) * side])))
    anchored = np.empty((len(ANCHORS), len(SCALES) - 1, side, side), np.float32)
    for a, (cols, rows) in enumerate(ANCHORS):
        for i, f in enumerate(SCALES[1:], start=1):
            lo, hi, m = _span(h, f, rows)
            b = _column_block(cols, i)
            anchored[a, i - 1] = _to_levels(_product(_lanczos(side, m), across[lo:hi, b * side:(b + 1) * side]))
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
    `anchored` uint64 (n, len(ANCHORS), len(SCALES) - 1, 8): the chains anchored at the
    corners and edges (`ANCHORS`), scales SCALES[1:], column v the code of the region
    anchored at ANCHORS[a] in the picture as given, seen in variant v. Rows whose image failed carry zeros and their `ImageError` in `errors`; `ok` masks
    them out.
    """

    scales: np.ndarray
    dhash: np.ndarray
    errors: list[ImageError | None] = field(default_factory=list)
    version: str = IMAGE_VERSION
    anchored: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.anchored is None:  # codes made without them: no anchored chain compares
            self.anchored = np.zeros((len(self.scales), len(ANCHORS), len(SCALES) - 1, 8), np.uint64)

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
                          self.anchored[rows])


def codes_of(images: Sequence[Image.Image | None],
             errors: list[ImageError | None] | None = None) -> ImageCodes:
    """Codes of decoded pictures, grey or RGB (None for a failed one): each brought to work size,
    grey, its borders found (`border_box`), and its thumbnails made from that one array
    (`_thumbnails`). `image_codes` is the entry point for encoded bytes."""
    n = len(images)
    errors = list(errors) if errors is not None else [None] * n
    good = [i for i, im in enumerate(images) if im is not None and errors[i] is None]
    thumbs = []
    for i in good:
        try:
            small = work_size(images[i])
            grey = np.asarray(small if small.mode == "L" else small.convert("L"))
            thumbs.append(_thumbnails(grey, _border_box(grey.astype(np.int16))))
        except Exception as exc:  # noqa: BLE001 - a decoded picture can still fail lazily
            errors[i] = ImageError("corrupt_image", f"{type(exc).__name__}: {exc}")
    good = [i for i in good if errors[i] is None]
    scales = np.zeros((n, len(SCALES), 8), np.uint64)
    anchored = np.zeros((n, len(ANCHORS), len(SCALES) - 1, 8), np.uint64)
    dhash = np.zeros((n, 8), np.uint64)
    if good:
        sc, an, wide, tall = (np.stack(t).astype(np.float64) for t in zip(*thumbs))
        scales[good] = _phash_of_thumbs(sc.reshape(-1, PHASH_SIDE, PHASH_SIDE)).reshape(len(good), len(SCALES), 8)
        anchored[good] = _phash_of_thumbs(an.reshape(-1, PHASH_SIDE, PHASH_SIDE)).reshape(
            len(good), len(ANCHORS), len(SCALES) - 1, 8)
        dhash[good] = _dhash_of_thumbs(wide, tall)
    return ImageCodes(scales, dhash, errors=errors, anchored=anchored)


def image_codes(images: list[bytes], max_pixels: int) -> ImageCodes:
    """Codes of a batch of encoded images; a bad one gets its error, the rest go on."""
    pictures: list[Image.Image | None] = []
    errors: list[ImageError | None] = []
    for data in images:
        try:
            pictures.append(load_picture(data, max_pixels, grey=True))
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
                       sanch: np.ndarray) -> np.ndarray:
    """float (nq, ns): the best anchored alignment (`ANCHOR_SHIFTS`) of query chains
    (whole (nq, 8), anchored (nq, A, K - 1, 8)) against stored ones as given (whole (ns,),
    anchored (ns, A, K - 1)), plus ANCHOR_PENALTY; 64 past ANCHOR_REACH or where either
    side has none."""
    nq, ns = len(qwhole), len(swhole)
    dist = np.full((nq, ns), np.inf)
    variants = np.arange(8)
    for b in range(len(ANCHORS)):
        # the query's chain at anchor b of each of its variants: (nq, K, 8)
        q = np.concatenate([qwhole[:, None, :], qanch[:, _FROM[:, b], :, variants].transpose(1, 2, 0)], axis=1)
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


def image_distance(query: ImageCodes, stored: ImageCodes, *, centre: bool = True) -> np.ndarray:
    """float (nq, ns): the distance between query image i and stored image j, in bits
    (0..64, in thirds: a mean of BEST_OF Hamming distances).

    The smallest, over the query's eight dihedral variants and the alignments of the two
    scale chains (scale k of the query against k + shift of the stored picture), of the
    mean of the BEST_OF closest pairs of codes of that alignment: a crop lines up one
    or two scales along, a rotation's corners or a corner logo spoil the outer scales of
    the alignment, which the best three leave out; or the whole pictures' codes alone plus
    WHOLE_PENALTY, if smaller; or the same along the chains anchored at a corner or an
    edge (`ANCHORS`: a crop from one side), ANCHOR_PENALTY added, up to ANCHOR_REACH.
    Without `centre`, the whole pictures' codes alone (the
    smallest over the variants, no penalty). Rows or columns of failed images are 64.
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
            dist[rows] = np.minimum(
                _chain_distance(query.scales[rows], stored.scales[:, :, 0]),
                _anchored_distance(query.scales[rows, 0], query.anchored[rows], stored.scales[:, 0, 0], sanch))
    dist[~query.ok, :] = 64
    dist[:, ~stored.ok] = 64
    return np.minimum(dist, 64)


# The distance (0..64 bits, as image_distance computes it, in steps of 2/3) -> score on
# fusion's common 0..1 scale, interpolated linearly between the (distance, score) points
# of the image signal's `calibration` (signals/image.py), whose `radius` bounds the codes
# the index search returns. Where the benches put copies and different pictures, and so
# the tiers, is in docs/benchmarks.md (image_tiers.py).
