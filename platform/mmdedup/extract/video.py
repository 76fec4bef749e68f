"""Video: bytes or a file -> sampled frames -> 64-bit perceptual hashes, and a similarity
that survives re-encoding, scaling, trimming, frame-rate changes, mirroring and letterbox.

Short videos are re-posted as copies that are re-encoded (lower bitrate, other codec),
scaled, cut at the start or end, converted to another frame rate, mirrored and padded into
another aspect ratio with black bars. None of that changes what the frames *show*, so a
video's signal is the ordered list of what it shows: a frame sample, each frame hashed
with the 64-bit DCT pHash (the one images get, `imagehash.phash`), plus the hash of its
mirror image.

Sampling. A fixed grid (t = 0, 1, 2 ... s) does not survive trimming: a copy cut by half a
second samples moments that fall between the original's samples, and in a pan those
frames show something else. Sampling on content instead makes the choice of frames a
function of what is on screen, which every copy shares:

- a scene cut (a frame `CUT_BITS` or more from the frame decoded just before it) is kept
  at once: the cut is in every copy, at the same content, whatever the copy's start, and
  the sampling of what follows starts from it again, so copies re-synchronise at cuts;
- a frame that has drifted more than `DRIFT_BITS` from the last kept frame is kept (at
  most every `MIN_GAP` seconds): fast motion is sampled densely, so consecutive kept
  frames are about `DRIFT_BITS` apart at most and any frame of a copy, wherever its
  samples fall, lies within about that of one of them (the match radius covers it);
- otherwise a frame is kept once 1/fps seconds have passed since the last kept frame, if
  it differs from it by more than `PRUNE_BITS` (slow motion still leaves about one frame
  a second, and drift, not the clock, decides when);
- a frame within `PRUNE_BITS` of the last kept one is never kept: a still shot, however
  long, is one frame, so repetition cannot outvote content.

A plain 1 fps grid was measured against this (scripts/bench/video_quality.py, "fixed
grid" rows): it loses trimmed copies whose cut falls between grid points in fast pans.

Frames are then matched by content, never by index or time: `video_similarity` aligns the
two lists monotonically (dynamic programming over the Hamming match matrix, gaps allowed),
so the residual phase of a trimmed copy costs at most a few bits per frame.

Each frame is hashed after its uniform borders (letterbox and pillarbox bars, of any
colour) are cut off, on a small grey thumbnail; blank frames (black, fades, flat colour)
carry no identity and are skipped: every black frame hashes alike, and counting them would
match any two videos that fade to black.

Not every frame around a picture is a uniform bar. A re-post boxes it in a blurred,
enlarged copy of itself or a gradient, or scales it over another video (picture in
picture), or crops a few percent off. So each kept frame carries three more codes. Its inset
code hashes the picture inside what surrounds it, found once for the whole video from its
moving frames (a layout stays put while the picture moves): smooth bars (columns and rows
at the edges with next to no texture, `_smooth_box`), and inside them a box whose sides
are straight edges that stay still while content edges move (`_inset_box`). Its centre
codes hash the middle CENTRE and CENTRE2 of the inset (or frame), which land near the full
frame of a copy cropped by about as much. Two frames match when any code of one is within the
radius of any code of the other.

A crop is not always centred: a copy cut at a corner or a side is shifted by up to half
the cut from the centre code, which on moving content costs more than the radius. So each
kept frame also carries anchored codes: CORNER of each side of the inset (or frame), set
at each place of a grid a quarter of the room apart each way (ANCHORS: the corners, the
sides and between). They match only the other video's frame or inset code, and only one
anchored crop at a time for the whole video: a cropped copy shows the same part of its
source throughout, while another video of the same scene (a pan along another path)
meets a different crop from moment to moment, and adding those up would pair it.

Everything here is pure: bytes or a path in, a `VideoFrames` (numpy arrays) out. Videos are
untrusted input: size, duration and frame size are bounded and every refusal is a
`VideoError` with a short machine-readable reason the ingest records against the item.
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .simhash import hamming

_log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------
# Parameters (the ones that shape a signature are in the version string)
# --------------------------------------------------------------------------------------

HASH_SIZE = 8  # 8x8 low DCT frequencies: 64 bits
THUMB = 32  # imagehash's img_size (hash_size * highfreq_factor 4)
WORK_MIN = 64  # frames are block-averaged down to about this many pixels on the short side
BAR_STD = 1.5  # a border row/column whose grey std is below this (0-255) is a bar
BLANK_STD = 6.0  # a frame whose content std is below this is blank (black, fade, flat)
MIN_CONTENT = 8  # content narrower than this (working pixels) is blank too

DRIFT_BITS = 12  # kept as soon as it is this far from the last kept frame...
MIN_GAP = 0.2  # ...but at most every MIN_GAP seconds (a fast pan: at most 5 frames/s),
CUT_BITS = 24  # except a cut (this far from the frame before it), which is kept at once
PRUNE_BITS = 4  # within this of the last kept frame: near-identical, never kept

MIN_DISTINCT = 3  # ordered matches across this many distinct frames make a full score

EDGE_STEP = 10.0  # a grey step (0-255, across two working pixels) this large is an edge
INSET_STILL = 0.7  # a step in this share of the moving frames is a still edge...
INSET_RISE = 0.2  # ...when that share is this much over the share INSET_INSIDE pixels inside
INSET_INSIDE = (3, 4)  # (into the inset; a coarse texture has steps in most frames too)
INSET_LINE = 0.3  # a column (row) still-edged over this share of the frame is a candidate side
INSET_COVER = 0.6  # a side of an inset is edged over this share of its length...
INSET_MIN = 0.4  # ...and an inset spans this share of the frame's width and height at least
SMOOTH = 0.45  # a bar's texture is under this share of the median column's (row's)
MIN_MOVING = 5  # frames with motion needed before still edges tell an inset
CENTRE = 0.9  # the centre code hashes the middle CENTRE of each side of the picture,
CENTRE2 = 0.95  # the second centre code the middle CENTRE2 (a lighter crop)
CORNER = 0.9  # the anchored codes hash CORNER of each side, set at each of ANCHORS
# Where each anchored crop sits: (x, y) as shares of the room left beside it (0 left/top,
# 1 right/bottom), a quarter apart (half apart leaves crops between them, at 2% of the
# frame off each way, up to 20 bits away on fast pans); the centre is the centre code's.
ANCHORS = tuple((x, y) for y in (0.0, 0.25, 0.5, 0.75, 1.0) for x in (0.0, 0.25, 0.5, 0.75, 1.0)
                if (x, y) != (0.5, 0.5))
# The mirror image's crop at anchor k is the frame's crop at anchor _MIRROR_ANCHOR[k] flipped.
_MIRROR_ANCHOR = tuple(ANCHORS.index((1.0 - x, y)) for x, y in ANCHORS)

# Limits. Size and duration are settings (max_file_bytes, max_video_seconds in config.py),
# which every caller passes; these two are the extractor's own.
MAX_FRAMES = 1000  # kept frames; past this the signature stops (marked partial)
MAX_PIXELS = 8192 * 4320  # one frame (8K); larger is refused before decoding

VIDEO_VERSION_BASE = (
    f"video4-phash{HASH_SIZE * HASH_SIZE}-lanczos{THUMB}-work{WORK_MIN}"
    f"-bar{BAR_STD:g}-blank{BLANK_STD:g}-drift{DRIFT_BITS}-gap{MIN_GAP:g}"
    f"-cut{CUT_BITS}-prune{PRUNE_BITS}"
    f"-inset{EDGE_STEP:g}x{INSET_STILL:g}x{INSET_LINE:g}x{INSET_COVER:g}x{INSET_MIN:g}"
    f"-rise{INSET_RISE:g}@{INSET_INSIDE[0]}+{INSET_INSIDE[1]}"
    f"-smooth{SMOOTH:g}-moving{MIN_MOVING}-centre{CENTRE:g}+{CENTRE2:g}"
    f"-anchored{CORNER:g}x{len(ANCHORS)}"
)


def video_version(fps: float = 1.0) -> str:
    """The signature version for a sampling rate: signatures of different versions are
    never compared (the rate changes which frames are kept)."""
    return f"{VIDEO_VERSION_BASE}-fps{fps:g}"


VIDEO_VERSION = video_version(1.0)


class VideoError(ValueError):
    """A video we refuse to read, with a short `reason` the ingest records per item
    ("empty_video", "unreadable_video", "corrupt_video", "no_video_stream",
    "video_too_long", "video_too_large") and a human `detail`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class VideoFrames:
    """The sampled frames of one video, in temporal order.

    times     seconds from the first decoded frame (float64, n)
    codes     64-bit pHash of each frame, borders cut (uint64, n); bit order as
              int(str(imagehash.phash(...)), 16)
    mirrored  pHash of the same frame flipped left-right (uint64, n)
    crops     content box of each frame as fractions of the frame: top, left, bottom,
              right (float32, n x 4); (0, 0, 1, 1) when there were no bars
    images    the kept frames as RGB PIL images (bars cut, short side at most
              `image_size`) when asked for (keep_images=True), for CLIP vectors; else None
    inner     pHash of the inset each frame shows, when its picture is set in a frame
              whose bars are not uniform (blurred, gradient) or over another video
              (picture in picture); the frame's code when none is found (uint64, n)
    centre    pHash of the middle CENTRE of each side of the inset (or frame), which
              lands near a cropped copy's code (uint64, n); centre2 the same of the
              middle CENTRE2 (a lighter crop)
    anchored  pHashes of CORNER of each side of the inset (or frame), set at each of
              ANCHORS (a grid from corner to corner) (uint64, len(ANCHORS) x
              n): a copy cropped off-centre shows about one of them
    inner_mirrored, centre_mirrored, centre2_mirrored, anchored_mirrored: the same, of
              the frame flipped left-right (anchored_mirrored[k] at ANCHORS[k] of the
              flipped frame)
    partial   True when decoding stopped early (truncated or corrupt data, or
              max_frames reached) and these are the frames decoded so far; `note` says why
    """

    times: np.ndarray
    codes: np.ndarray
    mirrored: np.ndarray
    crops: np.ndarray
    duration: float  # seconds decoded (last frame's time + one frame)
    width: int
    height: int
    fps: float  # the stream's average frame rate (0.0 when unknown)
    decoded: int  # frames decoded
    blank: int  # decoded frames skipped as blank
    partial: bool = False
    note: str = ""
    images: list | None = None
    version: str = VIDEO_VERSION
    inner: np.ndarray | None = None
    inner_mirrored: np.ndarray | None = None
    centre: np.ndarray | None = None
    centre_mirrored: np.ndarray | None = None
    centre2: np.ndarray | None = None
    centre2_mirrored: np.ndarray | None = None
    anchored: np.ndarray | None = None
    anchored_mirrored: np.ndarray | None = None

    def __post_init__(self) -> None:
        # Frames with no inset or centre code of their own (a baseline, a test's frames)
        # stand for themselves.
        for name, like in (("inner", self.codes), ("inner_mirrored", self.mirrored),
                           ("centre", self.codes), ("centre_mirrored", self.mirrored),
                           ("centre2", self.codes), ("centre2_mirrored", self.mirrored)):
            if getattr(self, name) is None:
                setattr(self, name, like)
        for name, like in (("anchored", self.codes), ("anchored_mirrored", self.mirrored)):
            if getattr(self, name) is None:
                setattr(self, name, np.tile(np.asarray(like, np.uint64), (len(ANCHORS), 1)))

    def __len__(self) -> int:
        return len(self.codes)

    def views(self, mirrored: bool = False) -> np.ndarray:
        """(4, n): each frame's code, inset code and two centre codes (of the mirror
        image)."""
        if mirrored:
            return np.stack([self.mirrored, self.inner_mirrored, self.centre_mirrored,
                             self.centre2_mirrored]).astype(np.uint64)
        return np.stack([self.codes, self.inner, self.centre, self.centre2]).astype(np.uint64)

    def distinct(self, radius: int) -> int:
        """How many distinct frames (leaders at `radius`, the match radius): 1 for a still
        video."""
        return int(_leaders(self.inner, radius).max(initial=-1) + 1)


# --------------------------------------------------------------------------------------
# pHash, vectorised
# --------------------------------------------------------------------------------------
# imagehash.phash: grey, Lanczos resize to 32x32, 2-D DCT-II (scipy.fftpack, unnormalised),
# the top-left 8x8 coefficients compared with their median. The DCT of the top-left block
# is D8 @ X @ D8.T with D8 the first eight rows of the 32-point DCT-II matrix, and the
# resize is itself linear (R @ X @ C.T, PIL's Lanczos weights), so the whole hash before
# the median is one small matrix product per frame: (D8 R) X (D8 C).T, with no 32x32
# thumbnail and no 8-bit rounding in between. On a 32x32 thumbnail (R and C the identity),
# `_codes_from_low` of D8 X D8.T is bit-for-bit imagehash.phash (a test holds it to that);
# on frames the result differs from imagehash on the PIL frame by PIL's intermediate
# 8-bit rounding only.
#
# A mirror image is free: flipping a row reverses it, and reversing the input of a
# DCT-II multiplies coefficient k by (-1)^k. The resize weights are symmetric, so the
# mirrored frame's 8x8 block is the frame's with odd columns negated (then its own median).


def _dct_rows(n: int, k: int) -> np.ndarray:
    """The first k rows of scipy.fftpack's unnormalised n-point DCT-II matrix."""
    rows = np.arange(k)[:, None]
    cols = np.arange(n)[None, :]
    return 2.0 * np.cos(np.pi * rows * (2 * cols + 1) / (2 * n))


_D8 = _dct_rows(THUMB, HASH_SIZE)
_MIRROR = np.where(np.arange(HASH_SIZE) % 2 == 0, 1.0, -1.0)[None, :]  # per column


def _lanczos(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3.0, np.sinc(x) * np.sinc(x / 3.0), 0.0)


@lru_cache(maxsize=512)
def _resize_dct(size: int) -> np.ndarray:
    """(8 x size): PIL's Lanczos weights from `size` pixels to 32, then the DCT rows.

    Same coefficients as PIL's precompute_coeffs (support 3 scaled by the reduction,
    pixel centres at +0.5, each row normalised), without its fixed-point rounding.
    """
    scale = size / THUMB
    filterscale = max(scale, 1.0)
    centers = (np.arange(THUMB) + 0.5) * scale
    x = np.arange(size) + 0.5
    w = _lanczos((x[None, :] - centers[:, None]) / filterscale)
    w /= w.sum(axis=1, keepdims=True)
    return _D8 @ w


def _bits_to_codes(bits: np.ndarray) -> np.ndarray:
    """(n, 64) booleans, row-major over the 8x8 block -> uint64, first bit most significant."""
    packed = np.packbits(bits.reshape(len(bits), -1), axis=1)  # big-endian bit order
    return packed.view(">u8").reshape(len(bits)).astype(np.uint64)


def _codes_from_low(low: np.ndarray) -> np.ndarray:
    """(n, 8, 8) low DCT blocks -> uint64 codes (each block against its own median)."""
    flat = low.reshape(len(low), -1)
    med = np.median(flat, axis=1, keepdims=True)
    return _bits_to_codes(flat > med)


def hamming_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit distances between every code of a and every code of b, (len a, len b) uint8."""
    return hamming(np.asarray(a, dtype=np.uint64)[:, None], np.asarray(b, dtype=np.uint64)[None, :])


# --------------------------------------------------------------------------------------
# Frames -> grey working image -> content box -> codes
# --------------------------------------------------------------------------------------
# 8-bit formats whose first plane is luma: read it in place, no conversion.
_LUMA_FIRST = frozenset({
    "yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "yuv440p",
    "yuvj440p", "yuv411p", "yuv410p", "nv12", "nv21", "nv16", "gray", "yuva420p",
})


def _grey(frame: Any) -> tuple[np.ndarray, int]:
    """(working grey image, block factor k): the frame's luma averaged over k x k blocks,
    k chosen so the short side stays near WORK_MIN pixels.

    Small frames are averaged in numpy straight from the decoder's luma plane; large ones
    (k >= 4) go through swscale's area filter, cheaper than numpy on megapixel frames.
    Luma instead of PIL's RGB->L: the weights differ slightly but a pHash compares
    coefficients with their median, so an affine change of grey level changes no bit.
    """
    w, h = frame.width, frame.height
    k = max(1, min(w, h) // WORK_MIN)
    if k >= 4:
        small = frame.reformat(width=w // k, height=h // k, format="gray",
                               interpolation="AREA")
        return small.to_ndarray(), k
    if frame.format.name in _LUMA_FIRST:
        plane = frame.planes[0]
        y = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:h, :w]
    else:  # RGB, palette, 10-bit...: let swscale convert
        y = frame.to_ndarray(format="gray")
        if y.dtype != np.uint8:
            y = (y >> (8 * y.itemsize - 8)).astype(np.uint8)
    if k == 1:
        return y, 1
    return _block_mean(y, k), k


def _block_mean(y: np.ndarray, k: int) -> np.ndarray:
    """Mean over k x k blocks by strided adds (ten times faster than reshape().mean on
    small k; uint16 holds up to 257 samples of 255)."""
    hh, ww = (y.shape[0] // k) * k, (y.shape[1] // k) * k
    x = y[:hh, :ww].astype(np.uint16)
    x = sum(x[:, i::k] for i in range(1, k)) + x[:, 0::k]
    x = sum(x[i::k] for i in range(1, k)) + x[0::k]
    return x.astype(np.float32) * np.float32(1.0 / (k * k))


def _content_box(g: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, left, bottom, right) after cutting uniform border rows and columns, or None
    for a blank frame.

    A row is a bar when its grey level hardly varies along it (std < BAR_STD), whatever the
    colour; bars are cut from each edge inwards until the first row that varies. A copy's
    bars plus the original's own uniform edge (a night sky, a plain wall) are cut to the
    same box as the original's uniform edge alone, so the cut is the same in every copy.
    Rows and columns are cut in turn until nothing changes: a plain wall left and right
    of the picture is uniform down each column only once the letterbox bars above and
    below are gone.
    """
    g = np.asarray(g, dtype=np.float32)
    g2 = g * g
    bar_var = np.float32(BAR_STD * BAR_STD)
    top, left, bottom, right = 0, 0, g.shape[0], g.shape[1]
    for _ in range(4):
        box = (top, left, bottom, right)
        sub, sub2 = g[top:bottom, left:right], g2[top:bottom, left:right]
        span = _span(sub2.mean(axis=1) - np.square(sub.mean(axis=1)) >= bar_var)
        if span is None:
            return None
        top, bottom = top + span[0], top + span[1]
        sub, sub2 = g[top:bottom, left:right], g2[top:bottom, left:right]
        span = _span(sub2.mean(axis=0) - np.square(sub.mean(axis=0)) >= bar_var)
        if span is None:
            return None
        left, right = left + span[0], left + span[1]
        if (top, left, bottom, right) == box or min(bottom - top, right - left) < MIN_CONTENT:
            break
    if bottom - top < MIN_CONTENT or right - left < MIN_CONTENT:
        return None
    if g[top:bottom, left:right].std() < BLANK_STD:
        return None
    return top, left, bottom, right


def _span(varies: np.ndarray) -> tuple[int, int] | None:
    """(first, end) of the lines that vary, or None. A cut edge also loses the line next to
    the bar: a blend of bar and picture (block averaging, chroma and codec blur) that would
    keep the lines across it from looking uniform."""
    idx = np.flatnonzero(varies)
    if len(idx) == 0:
        return None
    first, end = int(idx[0]), int(idx[-1]) + 1
    first, end = first + (first > 0), end - (end < len(varies))
    return (first, end) if end - first >= MIN_CONTENT else None


def _frame_low(g: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The 8x8 low DCT block of the content box, resized as imagehash does."""
    top, left, bottom, right = box
    x = np.asarray(g[top:bottom, left:right], dtype=np.float64)
    return _resize_dct(bottom - top) @ x @ _resize_dct(right - left).T


def _lines(edged: np.ndarray, axis: int) -> list[int]:
    """Candidate sides: the lines (columns for axis 0) edged over INSET_LINE of their
    length that are local maxima, the four strongest, as boundary positions."""
    share = edged.mean(axis=axis)
    if len(share) < 3:
        return []
    peak = (share >= INSET_LINE) & (share >= np.r_[0, share[:-1]]) & (share >= np.r_[share[1:], 0])
    idx = np.flatnonzero(peak)
    return (idx[np.argsort(-share[idx], kind="stable")[:4]] + 1).tolist()


def _inside(share: np.ndarray, axis: int, step: int) -> np.ndarray:
    """The mean step share INSET_INSIDE pixels from each pixel along `axis`, towards higher
    indices (step 1) or lower ones (step -1): what the picture inside a side at that pixel
    shows of its own. +inf where there is no room (no side can be there)."""
    n = share.shape[axis]
    total, count = np.zeros(share.shape), np.zeros(share.shape)
    for d in INSET_INSIDE:
        if d >= n:
            continue
        src = [slice(None)] * share.ndim
        dst = [slice(None)] * share.ndim
        src[axis], dst[axis] = (slice(d, None), slice(0, n - d)) if step > 0 else (slice(0, n - d), slice(d, None))
        total[tuple(dst)] += share[tuple(src)]
        count[tuple(dst)] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.inf)


def _inset_box(steps_x: np.ndarray, steps_y: np.ndarray) -> tuple[int, int, int, int] | None:
    """The box of a picture set inside the frame, found by its straight, still edges, or
    None.

    Bars that are not uniform (a blurred, enlarged copy of the picture; a gradient) and a
    picture in picture (the video scaled over another one) are not cut by `_content_box`.
    What they share is a straight step along the inset's sides that stays put while the
    picture moves. `steps_x` (h x w-2) is the share of moving frames in which the grey
    level jumps by EDGE_STEP or more between working pixels c-1 and c+1 (`steps_y` the
    same down the rows). A pixel is a still edge for a side when that held in INSET_STILL
    of them and in INSET_RISE more of them than INSET_INSIDE pixels further into the
    inset: content edges move with the picture, the inset's sides do not; and a coarse
    texture behind a picture in picture (gravel, foliage on a slow pan) has a step in
    most frames at most pixels, so its rows and columns would pass for sides without the
    rise, and the picture's true side, whose contrast with that texture fails in some
    frames, would not stand out. Each side looks inwards, so the four are found apart
    (left, right, top, bottom). A side is a column (row) still-edged over INSET_COVER of
    the inset's height (width); the sides must enclose INSET_MIN of the frame each way,
    and at least two must be such lines (the others may be the frame's edges): a
    pillarbox has two, a picture in picture four, or two or three when it touches the
    frame's edges (there the frame's edge is the side; no step is asked of it).
    """
    h, w = steps_y.shape[0] + 2, steps_x.shape[1] + 2
    if min(h, w) < 3 * MIN_CONTENT:
        return None
    still_x, still_y = steps_x >= INSET_STILL, steps_y >= INSET_STILL
    # Sides by where their inside is: left (inside to the right), right, top, bottom.
    e_left = still_x & (steps_x - _inside(steps_x, 1, 1) >= INSET_RISE)
    e_right = still_x & (steps_x - _inside(steps_x, 1, -1) >= INSET_RISE)
    e_top = still_y & (steps_y - _inside(steps_y, 0, 1) >= INSET_RISE)
    e_bottom = still_y & (steps_y - _inside(steps_y, 0, -1) >= INSET_RISE)
    lefts, rights = _lines(e_left, 0), _lines(e_right, 0)
    tops, bottoms = _lines(e_top, 1), _lines(e_bottom, 1)
    if len(lefts) + len(rights) + len(tops) + len(bottoms) < 2:
        return None
    best, best_key = None, (1, 0.0)
    for t in [0] + tops:
        for b in [h] + bottoms:
            if b - t < INSET_MIN * h:
                continue
            for lft in [0] + lefts:
                for r in [w] + rights:
                    if r - lft < INSET_MIN * w:
                        continue
                    cover = []
                    if lft:
                        cover.append(e_left[t:b, lft - 1].mean())
                    if r < w:
                        cover.append(e_right[t:b, r - 1].mean())
                    if t:
                        cover.append(e_top[t - 1, lft:r].mean())
                    if b < h:
                        cover.append(e_bottom[b - 1, lft:r].mean())
                    if len(cover) < 2 or min(cover) < INSET_COVER:
                        continue
                    key = (len(cover), float(min(cover)))
                    if key > best_key:
                        best, best_key = (t, lft, b, r), key
    if best is None:
        return None
    t, lft, b, r = best
    # A side at p is the step from p-1 to p+1: p blends inset and surround, left out.
    return t + (t > 0), lft + (lft > 0), b, r


def _smooth_box(texture: np.ndarray) -> tuple[int, int, int, int] | None:
    """The box inside smooth bars: columns (rows) from each edge whose texture (mean
    |second difference| over the moving frames) is under SMOOTH of the median column's.
    A blurred or gradient fill has next to none; a picture's own plain stretch (a sky)
    moves across it, or is cut alike in every copy. None when nothing is cut."""
    h, w = texture.shape[0] + 2, texture.shape[1] + 2
    cols, rows = texture.mean(axis=0), texture.mean(axis=1)
    cs = _span(cols >= SMOOTH * np.median(cols))
    rs = _span(rows >= SMOOTH * np.median(rows))
    if cs is None or rs is None:
        return None
    box = (rs[0] + 1, cs[0] + 1, rs[1] + 1, cs[1] + 1)
    if box == (1, 1, h - 1, w - 1) or box[2] - box[0] < INSET_MIN * h or box[3] - box[1] < INSET_MIN * w:
        return None
    # The frame's outer line is never in the texture: an uncut side keeps it.
    return (box[0] if box[0] > 1 else 0, box[1] if box[1] > 1 else 0,
            box[2] if box[2] < h - 1 else h, box[3] if box[3] < w - 1 else w)


def _inset_of(steps_x: np.ndarray, steps_y: np.ndarray, texture: np.ndarray
              ) -> tuple[int, int, int, int] | None:
    """The picture inside smooth bars (`_smooth_box`), and inside that a picture in
    picture (`_inset_box`); None when neither is found."""
    box = _smooth_box(texture)
    t, lft, b, r = box or (0, 0, steps_x.shape[0], steps_x.shape[1] + 2)
    inner = _inset_box(steps_x[t:b, lft:max(lft, r - 2)], steps_y[t:max(t, b - 2), lft:r])
    if inner is None:
        return box
    return t + inner[0], lft + inner[1], t + inner[2], lft + inner[3]


def _centre_box(box: tuple[int, int, int, int], share: float = 0.0) -> tuple[int, int, int, int]:
    return _anchored_box(box, share or CENTRE, 0.5, 0.5)


def _anchored_box(box: tuple[int, int, int, int], share: float, x: float, y: float
                  ) -> tuple[int, int, int, int]:
    """`share` of each side of box, placed at x, y of the room left (0.5, 0.5: centred)."""
    top, left, bottom, right = box
    dh = 2 * round((bottom - top) * (1 - share) / 2)
    dw = 2 * round((right - left) * (1 - share) / 2)
    t, lft = top + round(dh * y), left + round(dw * x)
    return t, lft, t + bottom - top - dh, lft + right - left - dw


# --------------------------------------------------------------------------------------
# Decoding and sampling
# --------------------------------------------------------------------------------------


def _open(data_or_path: Any, max_bytes: int):
    """(container, size in bytes); every failure a VideoError."""
    import av

    if isinstance(data_or_path, (bytes, bytearray, memoryview)):
        size = len(data_or_path)
        source: Any = io.BytesIO(bytes(data_or_path))
        where = ""  # the caller names the file
    elif isinstance(data_or_path, (str, os.PathLike)):
        name = os.fspath(data_or_path)
        where = f"{name}: "
        try:
            size = os.stat(name).st_size
        except OSError as exc:
            raise VideoError("unreadable_video", f"{where}{exc.strerror or exc}") from exc
        source = name
    else:
        raise TypeError(f"video must be bytes or a path, not {type(data_or_path).__name__}")
    if size == 0:
        raise VideoError("empty_video", f"{where}zero bytes")
    if size > max_bytes:
        raise VideoError("video_too_large", f"{where}{size} bytes > {max_bytes}")
    try:
        container = av.open(source, mode="r")
    except (av.FFmpegError, OSError, EOFError, ValueError, IndexError, RuntimeError) as exc:
        raise VideoError("corrupt_video", f"{where}cannot open: {_why(exc)}") from exc
    return container, size


def _why(exc: Exception) -> str:
    """FFmpeg's message without its errno and the "'<none>'" file name of a stream."""
    return getattr(exc, "strerror", None) or str(exc)


def _video_stream(container: Any):
    """The first real video stream; cover art in an audio file (an attached picture) and
    still-image "video" streams of audio containers do not count."""
    import av

    attached = int(av.stream.Disposition.attached_pic)
    for stream in container.streams.video:
        if int(stream.disposition) & attached:
            continue
        return stream
    kinds = sorted({s.type for s in container.streams}) or ["none"]
    raise VideoError("no_video_stream", f"streams: {', '.join(kinds)}")


def video_frames(
    data_or_path: bytes | str | os.PathLike,
    *,
    fps: float = 1.0,
    max_seconds: float,
    max_bytes: int,
    max_frames: int = MAX_FRAMES,
    max_pixels: int = MAX_PIXELS,
    keep_images: bool = False,
    image_size: int = 256,
) -> VideoFrames:
    """Decode a video (bytes or a path) and sample, hash and prune its frames.

    Every frame is decoded (threaded) and hashed on a small grey thumbnail, because the
    choice of frames to keep is made on content (see the module notes); about one frame
    a second survives for slow content, more for fast motion, one per still shot.

    Raises VideoError: "empty_video" (zero bytes), "unreadable_video" (path not readable),
    "video_too_large" (over max_bytes, or frames over max_pixels), "corrupt_video" (not a
    container we can open, or nothing decodable), "no_video_stream" (audio only),
    "video_too_long" (declared or decoded duration over max_seconds). A truncated or
    damaged file that decodes in part returns the frames decoded, with partial=True and
    a note; one that yields no frame at all raises "corrupt_video".

    `max_seconds` and `max_bytes` have no default: callers pass the configured limits
    (Settings.max_video_seconds, Settings.max_file_bytes), so there is one of each.
    """
    import av

    if fps <= 0:
        raise ValueError("fps must be positive")
    container, _size = _open(data_or_path, max_bytes)
    with container:
        stream = _video_stream(container)
        declared = _declared_seconds(container, stream)
        if declared is not None and declared > max_seconds + 0.5:
            raise VideoError("video_too_long", f"{declared:.1f} s > {max_seconds:g} s")
        ctx = stream.codec_context
        if ctx.width and ctx.height and ctx.width * ctx.height > max_pixels:
            raise VideoError("video_too_large",
                             f"frames of {ctx.width}x{ctx.height} > {max_pixels} pixels")
        stream.thread_type = "AUTO"  # frame + slice threads: all cores decode
        rate = float(stream.average_rate or 0.0)
        sampler = _Sampler(fps, keep_images, image_size)
        t0: float | None = None
        decoded, last_t, note, partial = 0, 0.0, "", False
        width = height = 0
        try:
            for frame in container.decode(stream):
                if frame.width * frame.height > max_pixels:
                    raise VideoError("video_too_large",
                                     f"frames of {frame.width}x{frame.height} > {max_pixels} pixels")
                t = frame.time
                if t is None:
                    t = decoded / rate if rate else float(decoded)
                if t0 is None:
                    t0 = t
                t -= t0
                if t > max_seconds:
                    raise VideoError("video_too_long", f"still decoding at {t:.1f} s > {max_seconds:g} s")
                decoded += 1
                last_t = max(last_t, t)
                width, height = frame.width, frame.height
                sampler.add(frame, t)
                if len(sampler.codes) >= max_frames:
                    partial, note = True, f"stopped at max_frames={max_frames} ({t:.1f} s)"
                    break
        except VideoError:
            raise
        except (av.FFmpegError, OSError, EOFError, ValueError, RuntimeError) as exc:
            if decoded == 0:
                raise VideoError("corrupt_video", f"no frame decodes: {_why(exc)}") from exc
            partial = True
            note = f"decoding failed at {last_t:.2f} s ({exc}); the frames before it are kept"
        if decoded == 0:
            raise VideoError("corrupt_video", "the video stream holds no decodable frame")
        step = 1.0 / rate if rate else 0.0
        duration = last_t + step
        if not partial and declared is not None and duration < 0.9 * declared - 0.5:
            partial = True
            note = (f"decoded {duration:.2f} s of {declared:.2f} s declared "
                    "(truncated or damaged file); the frames decoded are kept")
        if partial:
            _log.info("partial video: %s", note)
    views = sampler.finish()
    return VideoFrames(
        times=np.asarray(sampler.times, dtype=np.float64),
        codes=np.asarray(sampler.codes, dtype=np.uint64),
        mirrored=np.asarray(sampler.mirrored, dtype=np.uint64),
        crops=np.asarray(sampler.crops, dtype=np.float32).reshape(-1, 4),
        duration=float(duration), width=width, height=height, fps=rate,
        decoded=decoded, blank=sampler.blank, partial=partial, note=note,
        images=sampler.images if keep_images else None, version=video_version(fps),
        **views,
    )


def _declared_seconds(container: Any, stream: Any) -> float | None:
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / 1_000_000  # AV_TIME_BASE
    return None


@dataclass
class _Sampler:
    """The keep/prune decision, one decoded frame at a time (see the module notes)."""

    fps: float
    keep_images: bool
    image_size: int
    times: list = field(default_factory=list)
    codes: list = field(default_factory=list)
    mirrored: list = field(default_factory=list)
    crops: list = field(default_factory=list)
    images: list = field(default_factory=list)
    greys: list = field(default_factory=list)  # kept frames' working images and boxes
    blank: int = 0
    prev: int | None = None  # the last decoded frame's code (a cut: far from it)
    # Still edges: per working pixel, how many moving frames had a step there.
    steps_x: np.ndarray | None = None
    steps_y: np.ndarray | None = None
    texture: np.ndarray | None = None  # summed |second differences| of moving frames
    moving: int = 0
    last_moving: int | None = None

    def add(self, frame: Any, t: float) -> None:
        g, k = _grey(frame)
        box = _content_box(g)
        if box is None:
            self.blank += 1
            self.prev = None
            return
        low = _frame_low(g, box)
        code = int(_codes_from_low(low[None])[0])
        prev, self.prev = self.prev, code
        self._count_steps(g, code)
        if self.codes:
            dist = (code ^ self.codes[-1]).bit_count()
            gap = t - self.times[-1]
            cut = prev is not None and (code ^ prev).bit_count() >= CUT_BITS
            keep = dist > PRUNE_BITS and (
                cut or (dist > DRIFT_BITS and gap >= MIN_GAP - 1e-6)
                or gap >= 1.0 / self.fps - 0.02)
            if not keep:
                return
        self.times.append(t)
        self.codes.append(code)
        self.mirrored.append(int(_codes_from_low((low * _MIRROR)[None])[0]))
        self.greys.append((np.asarray(g, dtype=np.float32), box))
        gh, gw = g.shape
        top, left, bottom, right = box
        self.crops.append((top / gh, left / gw, bottom / gh, right / gw))
        if self.keep_images:
            self.images.append(_rgb(frame.to_image(), box, k, self.image_size))

    def _count_steps(self, g: np.ndarray, code: int) -> None:
        """Add the frame's steps to the still-edge counts when the picture moved since the
        last frame counted (a still shot counts once: its edges stand still, like bars)."""
        if self.last_moving is not None and (code ^ self.last_moving).bit_count() <= PRUNE_BITS:
            return
        g = np.asarray(g, dtype=np.float32)
        if self.steps_x is not None and self.steps_x.shape != (g.shape[0], g.shape[1] - 2):
            return  # the frame size changed: the counts hold the first size only
        sx = np.abs(g[:, 2:] - g[:, :-2]) > EDGE_STEP
        sy = np.abs(g[2:] - g[:-2]) > EDGE_STEP
        mid = g[1:-1, 1:-1]
        tex = (np.abs(g[1:-1, 2:] + g[1:-1, :-2] - 2 * mid) + np.abs(g[2:, 1:-1] + g[:-2, 1:-1] - 2 * mid))
        if self.steps_x is None:
            self.steps_x, self.steps_y = sx.astype(np.int32), sy.astype(np.int32)
            self.texture = tex
        else:
            self.steps_x += sx
            self.steps_y += sy
            self.texture += tex
        self.moving += 1
        self.last_moving = code

    def finish(self) -> dict[str, Any]:
        """The inset (one for the video: a layout stays put), and each kept frame's inset,
        centre and anchored codes."""
        inset = None
        if self.moving >= MIN_MOVING:
            inset = _inset_of(self.steps_x / self.moving, self.steps_y / self.moving, self.texture)
        lows = []
        for g, box in self.greys:
            inner = box
            if inset is not None and g.shape == (self.steps_x.shape[0], self.steps_x.shape[1] + 2):
                t, lft, b, r = inset
                t, lft, b, r = max(t, box[0]), max(lft, box[1]), min(b, box[2]), min(r, box[3])
                if b - t >= MIN_CONTENT and r - lft >= MIN_CONTENT:
                    inner = (t, lft, b, r)
            low_in, low_c, low_c2 = (_frame_low(g, inner), _frame_low(g, _centre_box(inner)),
                                     _frame_low(g, _centre_box(inner, CENTRE2)))
            lows.append((low_in, low_in * _MIRROR, low_c, low_c * _MIRROR, low_c2, low_c2 * _MIRROR,
                         *(_frame_low(g, _anchored_box(inner, CORNER, x, y)) for x, y in ANCHORS)))
        views = [_codes_from_low(np.stack([x[i] for x in lows])) if lows else np.zeros(0, np.uint64)
                 for i in range(6)]
        k = len(ANCHORS)
        anchored = np.stack([x[6:] for x in lows]) if lows else np.zeros((0, k, HASH_SIZE, HASH_SIZE))
        n = len(anchored)
        codes = flipped = np.zeros((k, 0), np.uint64)
        if n:
            codes = _codes_from_low(anchored.reshape(n * k, HASH_SIZE, HASH_SIZE)).reshape(n, k).T
            flipped = _codes_from_low((anchored * _MIRROR).reshape(n * k, HASH_SIZE, HASH_SIZE)).reshape(n, k).T
        self.greys = []
        return {"inner": views[0], "inner_mirrored": views[1], "centre": views[2],
                "centre_mirrored": views[3], "centre2": views[4], "centre2_mirrored": views[5],
                "anchored": codes, "anchored_mirrored": flipped[list(_MIRROR_ANCHOR)]}


def _rgb(image: Any, box: tuple[int, int, int, int], k: int, image_size: int):
    """The kept frame in colour for an image encoder (CLIP): bars cut, short side at most
    image_size."""
    from PIL import Image

    top, left, bottom, right = box
    image = image.crop((left * k, top * k, right * k, bottom * k))
    short = min(image.size)
    if short > image_size:
        f = image_size / short
        image = image.resize((max(1, round(image.width * f)), max(1, round(image.height * f))),
                             Image.Resampling.BILINEAR)
    return image


# --------------------------------------------------------------------------------------
# Similarity
# --------------------------------------------------------------------------------------


@dataclass
class VideoMatch:
    """How two videos align: `score` (what video_similarity returns), the frame pairs
    matched in order ((m, 2) int array of indices into a and b), whether b's mirror image
    matched, and how many distinct frames the matches span (the smaller of a's and b's)."""

    score: float
    pairs: np.ndarray
    mirrored: bool
    distinct: int


def _leaders(codes: np.ndarray, radius: int) -> np.ndarray:
    """Greedy clustering: each frame's label is the first earlier frame within radius
    that leads a cluster (itself when none). Labels are 0..clusters-1 in order."""
    n = len(codes)
    labels = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return labels
    near = hamming_matrix(codes, codes) <= radius
    cluster = 0
    for i in range(n):
        if labels[i] < 0:
            labels[near[i] & (labels < 0)] = cluster
            cluster += 1
    return labels


def _monotone_matches(match: np.ndarray) -> np.ndarray:
    """The most rows of `match` (a x b booleans) that can be matched to columns in order
    (column indices non-decreasing down the rows, gaps allowed): (m, 2) pairs.

    g[i, j] = most rows of 0..i matched within columns 0..j; row by row,
    g[i] = cummax(g[i-1] + match[i]), a column may take several consecutive rows (a copy
    sampled more densely in a stretch still matches), a row at most one column.
    """
    a, b = match.shape
    if a == 0 or b == 0:
        return np.zeros((0, 2), dtype=np.int64)
    g = np.empty((a, b), dtype=np.int32)
    prev = np.zeros(b, dtype=np.int32)
    for i in range(a):
        prev = np.maximum.accumulate(prev + match[i])
        g[i] = prev
    pairs = []
    i, j = a - 1, b - 1
    while i >= 0 and j >= 0 and g[i, j] > 0:
        if j > 0 and g[i, j] == g[i, j - 1]:
            j -= 1
        elif match[i, j] and g[i, j] == (g[i - 1, j] if i > 0 else 0) + 1:
            pairs.append((i, j))
            i -= 1
        else:
            i -= 1
    return np.asarray(pairs[::-1], dtype=np.int64).reshape(-1, 2)


def near_matrix(views_a: np.ndarray, views_b: np.ndarray, radius: int) -> np.ndarray:
    """(len a, len b) booleans: frames that match, by any of their views (code, inset,
    centre; `VideoFrames.views`) within radius of any of the other's: a pillarboxed copy
    matches by its inset, a cropped one by the source's centre."""
    views_a, views_b = np.atleast_2d(views_a), np.atleast_2d(views_b)
    dist = hamming(views_a[:, None, :, None], views_b[None, :, None, :])
    return (dist <= radius).any(axis=(0, 1))


def anchored_matrices(a: VideoFrames, b: VideoFrames, mirrored: bool, radius: int) -> np.ndarray:
    """(2 x len(ANCHORS), len a, len b) booleans: a's anchored crop k within radius of b's
    frame or inset code (b shows that part of a), then b's crop k of a's (a shows part of
    b); b flipped when `mirrored`. Frames that match only this way count one crop at a
    time (`video_match`)."""
    crops_b = b.anchored_mirrored if mirrored else b.anchored
    a_in_b = np.zeros((len(ANCHORS), len(a), len(b)), bool)
    b_in_a = np.zeros_like(a_in_b)
    for view_a, view_b in zip(a.views()[:2], b.views(mirrored)[:2]):  # frame, then inset
        a_in_b |= hamming(a.anchored[:, :, None], view_b[None, None, :]) <= radius
        b_in_a |= hamming(view_a[None, :, None], crops_b[:, None, :]) <= radius
    return np.concatenate([a_in_b, b_in_a])


def _directed(near: np.ndarray, la: np.ndarray, lb: np.ndarray) -> tuple[float, np.ndarray, int]:
    """Share of the shorter side's frames matched in order, and the distinct clusters the
    matches span (the smaller of the two sides)."""
    best = (0.0, np.zeros((0, 2), dtype=np.int64), 0)
    # Each direction: the share of that video's frames found, in order, in the other.
    for flip in (False, True):
        m = near.T if flip else near
        pairs = _monotone_matches(m)
        if flip:
            pairs = pairs[:, ::-1]
        if len(pairs) == 0:
            continue
        share = len(pairs) / m.shape[0]
        distinct = min(len(np.unique(la[pairs[:, 0]])), len(np.unique(lb[pairs[:, 1]])))
        if (share, distinct) > best[::2]:
            best = (share, pairs, distinct)
    return best


def video_match(a: VideoFrames, b: VideoFrames, radius: int) -> VideoMatch:
    """The alignment behind `video_similarity`, for review and debugging."""
    if a.version != b.version:
        raise ValueError(f"signatures of different versions: {a.version} vs {b.version}")
    empty = VideoMatch(0.0, np.zeros((0, 2), dtype=np.int64), False, 0)
    if len(a) == 0 or len(b) == 0:
        return empty
    la, lb = _leaders(a.inner, radius), _leaders(b.inner, radius)
    da, db = int(la.max()) + 1, int(lb.max()) + 1
    need = min(MIN_DISTINCT, max(da, db))
    best = empty
    views_a = a.views()
    for mirrored in (False, True):
        # Frames match by any of their views, or else through one anchored crop for the
        # whole video: a cropped copy shows the same part of the source throughout, while
        # another video of the same scene (a pan along another path) meets a different
        # crop from moment to moment and is not let to add them up.
        nears = [near_matrix(views_a, b.views(mirrored), radius)]
        nears += list(anchored_matrices(a, b, mirrored, radius))
        for near in nears:
            most = max(near.any(axis=1).mean(), near.any(axis=0).mean())  # share at most
            if most <= best.score:
                continue
            share, pairs, distinct = _directed(near, la, lb)
            score = share * min(1.0, distinct / need)
            if score > best.score:
                best = VideoMatch(float(score), pairs, mirrored, distinct)
    return best


def video_similarity(a: VideoFrames, b: VideoFrames, radius: int) -> float:
    """How much of one video is found in the other, in order: 0..1.

    The share of one video's kept frames that match (Hamming <= radius) frames of the other
    along a monotone alignment (gaps allowed), taken in the direction that gives more, so a
    trimmed copy (fewer frames, all found) scores 1. b's mirrored codes are tried as well
    (a mirrored copy); the larger score counts.

    Chance and repetition: the matched frames must span at least
    min(MIN_DISTINCT, distinct frames of the richer video) distinct frames on both sides
    (distinct: not within radius of each other), else the share is scaled down by
    matched/needed. A still video (all frames near-identical, one distinct frame) thus
    scores against another still video on that one frame alone (1.0 when the frames
    match, 0 otherwise), and against a video with motion at most 1/MIN_DISTINCT even when
    that video is built from the same still: one frame in common is an image match, which
    the image signal judges, not a video copy.
    """
    return video_match(a, b, radius).score
