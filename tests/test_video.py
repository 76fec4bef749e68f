"""Video signal: sampled frames, pHash codes, and similarity across the copies short videos
are re-posted as (re-encoded, scaled, trimmed, re-timed, mirrored, letterboxed), and the
refusals (empty, corrupt, truncated, audio only, too long, too large).

Clips are made with PyAV from scikit-image's bundled photos (tests/helpers.py): 160x120,
25 fps, a few seconds of pans, a zoom and a hard cut, so that content changes over time.
"""

from __future__ import annotations

import av
import imagehash
import numpy as np
import pytest
from PIL import Image

from mmdedup.config import Settings
from mmdedup.score.calibration import calibrate
from mmdedup.signals.video import VideoSettings
from mmdedup.extract import video as V
from mmdedup.extract.video import (VIDEO_VERSION, VideoError, VideoFrames, hamming_matrix, video_frames,
                                   video_match, video_similarity)

from helpers import FPS, H, W, audio_only, clip, encode, view

DUPLICATE = 0.6  # the duplicate call the bench (scripts/bench/video_quality.py) supports
DISTINCT = 0.35  # at most this for videos that are not copies
SETTINGS = Settings()
LIMITS = {"max_seconds": SETTINGS.max_video_seconds, "max_bytes": SETTINGS.max_file_bytes}  # as the ingest passes them
RADIUS = VideoSettings().frame_radius

@pytest.fixture(scope="module")
def frames_a(photos):
    return clip(photos["astronaut"], photos["coffee"])


@pytest.fixture(scope="module")
def blob_a(frames_a):
    return encode(frames_a)


@pytest.fixture(scope="module")
def sig_a(blob_a):
    return video_frames(blob_a, **LIMITS)


# --------------------------------------------------------------------------------------
# pHash
# --------------------------------------------------------------------------------------


def phash_thumbs(thumbs: np.ndarray) -> np.ndarray:
    """The frame hash of (n, 32, 32) grey thumbnails, where the resize is the identity:
    the DCT rows alone (D8 X D8.T), each block against its median."""
    low = np.einsum("ki,nij,lj->nkl", V._D8, np.asarray(thumbs, dtype=np.float64), V._D8, optimize=True)
    return V._codes_from_low(low)


def frame_codes(grey: np.ndarray) -> tuple[int, int] | None:
    """(code, mirrored code) of one grey frame, through the sampler `video_frames` runs on
    every decoded frame (block averaging, bars cut, blank check), or None when blank."""
    sampler = V._Sampler(fps=1.0, keep_images=False, image_size=0)
    sampler.add(av.VideoFrame.from_ndarray(np.ascontiguousarray(grey, dtype=np.uint8), format="gray"), 0.0)
    return (sampler.codes[0], sampler.mirrored[0]) if sampler.codes else None


def test_frame_hash_on_thumbnails_is_imagehash_phash(photos):
    rng = np.random.default_rng(0)
    thumbs = list(rng.integers(0, 256, (20, 32, 32)).astype(np.uint8))
    thumbs += [np.asarray(Image.fromarray(p).convert("L").resize((32, 32), Image.Resampling.LANCZOS))
               for p in photos.values()]
    ours = phash_thumbs(np.stack(thumbs))
    ref = np.array([int(str(imagehash.phash(Image.fromarray(t))), 16) for t in thumbs], dtype=np.uint64)
    assert ours.dtype == np.uint64
    assert np.array_equal(ours, ref)


def test_frame_codes_close_to_imagehash_and_mirror_exact(photos):
    dists = []
    for p in photos.values():
        grey = np.asarray(Image.fromarray(p).convert("L").resize((W, H), Image.Resampling.BILINEAR))
        code, mirrored = frame_codes(grey)
        ref = int(str(imagehash.phash(Image.fromarray(grey))), 16)
        dists.append((code ^ ref).bit_count())
        # The mirror code (sign flip of odd DCT columns) is the code of the flipped frame.
        assert frame_codes(np.ascontiguousarray(grey[:, ::-1]))[0] == mirrored
        assert (code ^ mirrored).bit_count() > 12  # these photos are not symmetric
    assert np.mean(dists) <= 4  # differs from PIL's path by its 8-bit rounding only


def test_hamming_matrix():
    a = np.array([0, 0xFF, 2**64 - 1], dtype=np.uint64)
    b = np.array([0, 1], dtype=np.uint64)
    assert hamming_matrix(a, b).tolist() == [[0, 1], [8, 7], [64, 63]]


def test_blank_and_bars_in_frame_codes(photos):
    assert frame_codes(np.zeros((H, W), np.uint8)) is None  # black: no identity
    assert frame_codes(np.full((H, W), 200, np.uint8)) is None
    dists, unboxed = [], []
    for p in photos.values():
        grey = np.asarray(Image.fromarray(p).convert("L").resize((W, H)))
        boxed = np.full((H + 40, W + 60), 17, np.uint8)  # bars of any colour, all four sides
        boxed[20:20 + H, 30:30 + W] = grey
        dists.append((frame_codes(grey)[0] ^ frame_codes(boxed)[0]).bit_count())
        raw = V._codes_from_low(V._frame_low(boxed.astype(np.float32), (0, 0, H + 40, W + 60))[None])
        unboxed.append((frame_codes(grey)[0] ^ int(raw[0])).bit_count())
    assert max(dists) <= 8 and np.mean(dists) <= 4
    assert np.mean(unboxed) > 8  # the bars, left in, would cost more


# --------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------


def test_video_frames_shape_and_sampling(sig_a):
    s = sig_a
    assert isinstance(s, VideoFrames) and s.version == VIDEO_VERSION
    assert s.codes.dtype == np.uint64 and s.mirrored.dtype == np.uint64
    assert len(s.times) == len(s.codes) == len(s.mirrored) == len(s.crops)
    assert (W, H, s.decoded) == (s.width, s.height, 100)
    assert abs(s.duration - 4.0) < 0.05 and abs(s.fps - 25) < 1e-6
    assert not s.partial and s.images is None
    assert np.all(np.diff(s.times) > 0) and s.times[0] == 0.0
    # About one frame a second at least, at most MIN_GAP apart, never two near-identical.
    assert 4 <= len(s) <= 4.0 / V.MIN_GAP + 1
    assert np.sum(np.diff(s.times) < V.MIN_GAP - 1e-6) <= 1  # the cut
    steps = np.bitwise_count(s.codes[1:] ^ s.codes[:-1])
    assert steps.min() > V.PRUNE_BITS
    # The cut at 1.6 s is kept on the cut frame itself.
    assert np.any(np.isclose(s.times, 40 / FPS))
    assert np.allclose(s.crops, [0, 0, 1, 1])


def test_still_video_is_one_frame_and_black_frames_are_skipped(photos):
    still = [view(photos["chelsea"], 0.5, 0.5, 0.8)] * 50
    black = [np.zeros((H, W, 3), np.uint8)] * 25
    s = video_frames(encode(black + still + black), **LIMITS)
    assert len(s) == 1 and s.distinct(RADIUS) == 1
    assert s.blank == 50 and s.decoded == 100
    assert s.times[0] == pytest.approx(1.0)


def test_keep_images_for_clip_vectors(photos, frames_a):
    bar = np.zeros((20, W, 3), np.uint8)
    s = video_frames(encode([np.concatenate([bar, f, bar]) for f in frames_a]), keep_images=True,
                     image_size=64, **LIMITS)
    assert s.images is not None and len(s.images) == len(s)
    im = s.images[0]
    assert im.mode == "RGB" and min(im.size) <= 64
    assert abs(im.width / im.height - W / H) < 0.1  # bars cut: the picture's own aspect


# --------------------------------------------------------------------------------------
# Copies match
# --------------------------------------------------------------------------------------


def test_identical_and_reencoded_low_bitrate(sig_a, blob_a, frames_a):
    assert video_similarity(sig_a, sig_a, RADIUS) == 1.0
    low = video_frames(encode(frames_a, codec="mpeg4", bit_rate=60_000), **LIMITS)
    assert video_similarity(sig_a, low, RADIUS) >= DUPLICATE
    assert video_similarity(low, sig_a, RADIUS) >= DUPLICATE


def test_scaled_copy(sig_a, frames_a):
    small = [np.asarray(Image.fromarray(f).resize((W // 2, H // 2), Image.Resampling.BILINEAR))
             for f in frames_a]
    big = [np.asarray(Image.fromarray(f).resize((W * 2, H * 2), Image.Resampling.BILINEAR))
           for f in frames_a]
    assert video_similarity(sig_a, video_frames(encode(small), **LIMITS), RADIUS) >= DUPLICATE
    assert video_similarity(sig_a, video_frames(encode(big), **LIMITS), RADIUS) >= DUPLICATE


@pytest.mark.parametrize("cut", [0.5, 1.0, 2.2])
def test_trimmed_copy(sig_a, frames_a, cut):
    trimmed = video_frames(encode(frames_a[round(cut * FPS):]), **LIMITS)
    assert trimmed.times[0] == 0.0  # times are the copy's own
    assert video_similarity(sig_a, trimmed, RADIUS) >= DUPLICATE
    # The end cut too: the copy is a stretch of the original.
    assert video_similarity(sig_a, video_frames(encode(frames_a[:-round(cut * FPS)]), **LIMITS), RADIUS) >= DUPLICATE


def test_frame_rate_15_vs_25(sig_a, frames_a):
    n = len(frames_a) * 15 // FPS
    f15 = [frames_a[min(len(frames_a) - 1, round(k * FPS / 15))] for k in range(n)]
    s = video_frames(encode(f15, fps=15), **LIMITS)
    assert abs(s.fps - 15) < 1e-6
    assert video_similarity(sig_a, s, RADIUS) >= DUPLICATE


def test_mirrored_copy_matches_through_flipped_codes(sig_a, frames_a):
    mirrored = video_frames(encode([np.ascontiguousarray(f[:, ::-1]) for f in frames_a]), **LIMITS)
    m = video_match(sig_a, mirrored, RADIUS)
    assert m.score >= DUPLICATE and m.mirrored
    # Without the mirrored codes it would not match: the flip is what finds it.
    blind = VideoFrames(**{**mirrored.__dict__, "mirrored": mirrored.codes,
                           "inner_mirrored": mirrored.inner, "centre_mirrored": mirrored.centre,
                           "centre2_mirrored": mirrored.centre2, "anchored_mirrored": mirrored.anchored})
    assert video_similarity(sig_a, blind, RADIUS) <= DISTINCT


def test_letterboxed_and_pillarboxed_copies(sig_a, frames_a):
    bars = np.zeros((30, W, 3), np.uint8)
    letter = video_frames(encode([np.concatenate([bars, f, bars]) for f in frames_a]), **LIMITS)
    assert np.allclose(np.median(letter.crops, axis=0), [30 / 180, 0, 150 / 180, 1], atol=0.03)
    assert video_similarity(sig_a, letter, RADIUS) >= DUPLICATE

    def pillar(f):  # scaled into a wider frame, grey bars left and right
        canvas = np.full((H, 240, 3), 60, np.uint8)
        canvas[:, 40:200] = f
        return canvas
    assert video_similarity(sig_a, video_frames(encode([pillar(f) for f in frames_a]), **LIMITS), RADIUS) >= DUPLICATE


def test_picture_in_picture_over_a_coarse_texture_is_found_at_its_size():
    """A picture in picture touching the frame's right edge, over a coarse texture on a slow
    horizontal pan (gravel), as the inset search sees it: the share of moving frames with
    a step at each working pixel (modelled on scripts/bench/video_edits.py seed 3, clip 5,
    where the inset was found 72 working pixels tall for 58). The texture has a step in
    most frames nearly everywhere and the pan keeps its rows still; the picture's own sides
    meet greys like theirs in some frames. The inset is the picture, at its size, its
    right side the frame's edge; not a box of the texture's rows."""
    rng = np.random.default_rng(0)
    h, w = 90, 120
    t, lft, b = 18, 42, 76  # the picture: rows 18..75, columns 42..119
    steps_x = rng.uniform(0.55, 0.85, (h, w - 2))  # step between pixels c and c+2 (centre c+1)
    steps_y = rng.uniform(0.55, 0.85, (h - 2, w))
    for row in (5, 11, 83):  # rows of the texture the horizontal pan keeps still
        steps_y[row - 1] = rng.uniform(0.8, 0.95, w)
    steps_x[t:b, lft:] = rng.uniform(0.1, 0.35, (b - t, w - 2 - lft))  # the picture's moving content
    steps_y[t:b - 2, lft:] = rng.uniform(0.1, 0.35, (b - 2 - t, w - lft))

    def side(n):  # a step in most frames; in a few, the picture meets the texture's greys
        return np.where(rng.random(n) < 0.55, rng.uniform(0.85, 1.0, n), rng.uniform(0.72, 0.79, n))
    steps_x[t:b, lft - 1] = side(b - t)
    steps_y[t - 1, lft:] = side(w - lft)
    steps_y[b - 1, lft:] = side(w - lft)
    texture = np.ones((h - 2, w - 2))  # no smooth bars
    # The side at a step blends both: the inset starts a pixel in, and ends at the frame's edge.
    assert V._inset_of(steps_x, steps_y, texture) == (t + 1, lft + 1, b, w)
    # The texture alone, with its still rows, is no picture in picture.
    steps_x[t:b, lft - 1:] = rng.uniform(0.55, 0.85, (b - t, w - 1 - lft))
    steps_y[t - 1:b, lft:] = rng.uniform(0.55, 0.85, (b - t + 1, w - lft))
    assert V._inset_of(steps_x, steps_y, texture) is None


# --------------------------------------------------------------------------------------
# Non-copies do not
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("top, left", [(0, 0), (12, 16)])
def test_off_centre_crop_pairs_at_medium_and_lookalike_does_not(sig_a, frames_a, photos, top, left):
    """10% of each side cut at a corner (as far from the centre codes as such a crop goes)
    and scaled back: the copy scores at the medium tier with its source, through the
    crops anchored at the corners; a different video of the same two photos (other pans
    and zooms) stays under the weak tier."""
    signal = VideoSettings()
    tiers = Settings()

    def resize(f):
        return np.asarray(Image.fromarray(np.ascontiguousarray(f)).resize((W, H), Image.Resampling.BILINEAR))
    ch, cw = round(H * 0.9), round(W * 0.9)
    crop = video_frames(encode([resize(f[top:top + ch, left:left + cw]) for f in frames_a]), **LIMITS)
    assert calibrate(video_similarity(sig_a, crop, RADIUS), signal.calibration) >= tiers.tier_medium
    assert calibrate(video_similarity(crop, sig_a, RADIUS), signal.calibration) >= tiers.tier_medium
    # The frame, inset and centre codes alone do not find it.
    def blind(s):
        return VideoFrames(**{**s.__dict__, "anchored": None, "anchored_mirrored": None})
    assert calibrate(video_similarity(blind(sig_a), blind(crop), RADIUS), signal.calibration) < tiers.tier_medium

    n = len(frames_a)
    other = [view(photos["astronaut"], 0.7 - 0.4 * i / (n // 2), 0.35, 0.5) for i in range(n // 2)]
    other += [view(photos["coffee"], 0.4, 0.6, 0.6 + 0.3 * i / (n - n // 2)) for i in range(n - n // 2)]
    lookalike = video_frames(encode(other), **LIMITS)
    for x, y in ((sig_a, lookalike), (crop, lookalike)):
        assert calibrate(video_similarity(x, y, RADIUS), signal.calibration) < tiers.tier_weak


def test_other_clip_does_not_match(sig_a, photos):
    other = video_frames(encode(clip(photos["rocket"], photos["camera"])), **LIMITS)
    assert video_similarity(sig_a, other, RADIUS) <= DISTINCT
    assert video_similarity(other, sig_a, RADIUS) <= DISTINCT


def test_reversed_clip_does_not_match(sig_a, frames_a):
    # The same frames in reverse order: matching is in temporal order, not a bag of frames.
    rev = video_frames(encode(frames_a[::-1]), **LIMITS)
    assert video_similarity(sig_a, rev, RADIUS) <= DISTINCT


def test_same_still_with_other_motion(photos):
    """One photo, three videos: a still, a pan, a zoom. The still has one distinct frame,
    so against the pan it can be found at most as one frame of MIN_DISTINCT (a shared
    picture, for the image signal to judge), and the pan and the zoom share only the frames
    near the full view. Against its own re-encode the still scores on its one frame: 1.0."""
    p = photos["chelsea"]
    still = video_frames(encode([view(p, 0.5, 0.5, 0.8)] * 75), **LIMITS)
    pan = video_frames(encode([view(p, 0.3 + 0.4 * i / 75, 0.5, 0.8) for i in range(75)]), **LIMITS)
    zoom = video_frames(encode([view(p, 0.5, 0.5, 1.0 - 0.5 * i / 75) for i in range(75)]), **LIMITS)
    again = video_frames(encode([view(p, 0.5, 0.5, 0.8)] * 50, codec="mpeg4", bit_rate=80_000), **LIMITS)
    assert still.distinct(RADIUS) == 1 and pan.distinct(RADIUS) >= 2 and zoom.distinct(RADIUS) >= 3
    assert video_match(still, pan, RADIUS).pairs.shape[0] >= 1  # the picture is found...
    assert video_similarity(still, pan, RADIUS) <= 0.5 + 1e-9  # ...but is no video copy
    assert video_similarity(still, zoom, RADIUS) <= 1 / V.MIN_DISTINCT + 1e-9
    assert video_similarity(pan, zoom, RADIUS) <= DISTINCT
    assert video_similarity(still, again, RADIUS) == 1.0


def test_fades_to_black_do_not_match(photos):
    black = [np.zeros((H, W, 3), np.uint8)] * 30
    a = video_frames(encode(black + [view(photos["rocket"], 0.3 + 0.01 * i, 0.5, 0.6) for i in range(40)] + black),
                     **LIMITS)
    b = video_frames(encode(black + [view(photos["camera"], 0.3 + 0.01 * i, 0.5, 0.6) for i in range(40)] + black),
                     **LIMITS)
    assert a.blank == b.blank == 60
    assert video_similarity(a, b, RADIUS) == 0.0


def test_monotone_alignment_allows_gaps_and_keeps_order():
    m = np.array([[1, 0, 0, 0],
                  [0, 0, 1, 0],
                  [0, 1, 0, 0],
                  [0, 0, 0, 1]], dtype=bool)
    pairs = V._monotone_matches(m)
    assert pairs.tolist() in ([[0, 0], [1, 2], [3, 3]], [[0, 0], [2, 1], [3, 3]])
    # One column may take consecutive rows (a copy sampled more densely there).
    assert len(V._monotone_matches(np.ones((3, 1), dtype=bool))) == 3
    assert len(V._monotone_matches(np.eye(4, dtype=bool)[::-1])) == 1


def test_versions_never_compared(sig_a):
    other = VideoFrames(**{**sig_a.__dict__, "version": V.video_version(2.0)})
    with pytest.raises(ValueError):
        video_similarity(sig_a, other, RADIUS)
    empty = VideoFrames(**{**sig_a.__dict__, "codes": sig_a.codes[:0], "mirrored": sig_a.codes[:0],
                           "times": sig_a.times[:0]})
    assert video_similarity(sig_a, empty, RADIUS) == 0.0


# --------------------------------------------------------------------------------------
# Refusals and damaged input
# --------------------------------------------------------------------------------------


def _reason(source, **kw) -> str:
    with pytest.raises(VideoError) as exc:
        video_frames(source, **{**LIMITS, **kw})
    return exc.value.reason


def test_zero_bytes(tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    assert _reason(empty) == "empty_video"
    assert _reason(b"") == "empty_video"
    assert _reason(tmp_path / "missing.mp4") == "unreadable_video"


def test_garbage_is_corrupt():
    assert _reason(b"\x00\x01not a video at all" * 100) == "corrupt_video"


def test_truncated_mp4_without_index_is_corrupt(blob_a):
    # PyAV (like ffmpeg) writes the mp4 index at the end: cut that off and nothing opens.
    assert _reason(blob_a[: len(blob_a) * 6 // 10]) == "corrupt_video"


@pytest.mark.parametrize("fmt,suffix", [("mp4", "mp4"), ("matroska", "mkv")])
def test_truncated_file_gives_the_frames_it_has(tmp_path, frames_a, sig_a, fmt, suffix):
    whole = encode(frames_a, fmt=fmt, path=tmp_path / f"a.{suffix}")
    cut = tmp_path / f"cut.{suffix}"
    cut.write_bytes(whole[: len(whole) * 6 // 10])
    s = video_frames(cut, **LIMITS)
    assert s.partial and "truncated" in s.note
    assert 0 < s.decoded < 100 and s.duration < 3.5 and len(s) >= 2
    assert video_similarity(sig_a, s, RADIUS) >= DUPLICATE  # what it has is the original's start
    # Cut before the first frame: nothing to give.
    head = tmp_path / f"head.{suffix}"
    head.write_bytes(whole[:2000])
    assert _reason(head) == "corrupt_video"


@pytest.mark.parametrize("codec,fmt,sample_fmt", [("aac", "mp4", "fltp"), ("mp2", "matroska", "s16")])
def test_audio_only_has_no_video_stream(codec, fmt, sample_fmt):
    with pytest.raises(VideoError) as exc:
        video_frames(audio_only(codec, fmt, sample_fmt), **LIMITS)
    assert exc.value.reason == "no_video_stream" and "audio" in exc.value.detail


def test_limits(blob_a, frames_a):
    assert _reason(blob_a, max_seconds=2.0) == "video_too_long"
    assert _reason(blob_a, max_bytes=1000) == "video_too_large"
    assert _reason(blob_a, max_pixels=100 * 100) == "video_too_large"
    # A stream that declares no duration (raw H.264) is stopped while decoding.
    raw = encode(frames_a, fmt="h264")
    assert _reason(raw, max_seconds=2.0) == "video_too_long"
    capped = video_frames(blob_a, max_frames=3, **LIMITS)
    assert len(capped) == 3 and capped.partial and "max_frames" in capped.note
