"""Items with a video through ingest and query: re-posted copies found (trimmed, mirrored,
re-encoded), other clips not, broken and audio-only files recorded with their reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mmdedup import Platform

from helpers import audio_only, clip, encode, view, write_clip_and_trimmed_copy


@pytest.fixture(scope="module")
def videos(tmp_path_factory, photos):
    folder = tmp_path_factory.mktemp("videos")
    frames = write_clip_and_trimmed_copy(folder, photos)
    encode([np.ascontiguousarray(f[:, ::-1]) for f in frames], path=folder / "mirrored.mp4")
    encode(clip(photos["rocket"], photos["chelsea"]), path=folder / "other.mp4")
    whole = (folder / "orig.mp4").read_bytes()
    (folder / "truncated.mp4").write_bytes(whole[: len(whole) // 3])
    (folder / "audio.mkv").write_bytes(audio_only("mp2", "matroska", "s16"))
    return folder


def test_video_copies_and_failures(platform: Platform, videos: Path) -> None:
    report = platform.ingest(videos)
    reasons = {f["key"]: f["reason"] for f in platform.failures()}
    assert reasons.get("audio.mkv") == "no_video_stream"
    assert reasons.get("truncated.mp4", "corrupt_video") == "corrupt_video"
    assert report.new == 6 - len(reasons)
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    for copy in ("trimmed.mp4", "mirrored.mp4"):
        pair = pairs[tuple(sorted(("orig.mp4", copy)))]
        assert pair["kind"] == "video-reuse" and pair["tier"] in ("strong", "medium"), pair
    assert pairs[("mirrored.mp4", "orig.mp4")]["details"]["video"]["mirrored"] is True
    assert not any("other.mp4" in key for key in pairs)


def test_query_by_video(platform: Platform, videos: Path) -> None:
    platform.ingest(videos)
    results = platform.query(video=videos / "trimmed.mp4", k=5)
    ids = [r["id"] for r in results]
    assert "orig.mp4" in ids and "other.mp4" not in ids
    with pytest.raises(ValueError, match="cannot be read"):
        platform.query(video=videos / "audio.mkv")


def _edits(frames: list[np.ndarray], background: list[np.ndarray]) -> dict[str, list[np.ndarray]]:
    """Re-posted copies: a frame a third wider with blurred side bars, another with
    gradient bars, 10% cropped off-centre, a picture in picture, played 1.1x faster."""
    from PIL import Image, ImageFilter

    h, w = frames[0].shape[:2]
    ow, x0 = (w * 4 // 3) // 2 * 2, (w * 4 // 3) // 2 * 2 // 2 - w // 2
    ramp = np.linspace(0, 1, h)[:, None, None]
    gradient = np.broadcast_to((np.array([30, 90, 160]) * (1 - ramp) + np.array([140, 40, 60]) * ramp)
                               .astype(np.uint8), (h, ow, 3))

    def boxed(f, fill):
        canvas = fill.copy()
        canvas[:, x0:x0 + w] = f
        return canvas

    def blurred(f):
        big = Image.fromarray(f).resize((ow, ow * h // w)).crop((0, 0, ow, h))
        return np.asarray(big.filter(ImageFilter.GaussianBlur(h / 18)))

    def resize(f, size):
        return np.asarray(Image.fromarray(np.ascontiguousarray(f)).resize(size, Image.Resampling.BILINEAR))

    def pip(f, bg):
        canvas = bg.copy()
        canvas[10:10 + 78, 40:40 + 104] = resize(f, (104, 78))
        return canvas

    return {
        "pillarbox-blur": [boxed(f, blurred(f)) for f in frames],
        "pillarbox-gradient": [boxed(f, gradient) for f in frames],
        "crop10": [resize(f[4:4 + 108, 14:14 + 144], (w, h)) for f in frames],
        "pip": [pip(f, bg) for f, bg in zip(frames, background)],
        "speed1.1": [frames[round(k * 1.1)] for k in range(int(len(frames) / 1.1))],
    }


@pytest.fixture(scope="module")
def edited(tmp_path_factory, photos):
    folder = tmp_path_factory.mktemp("edited")
    frames = clip(photos["astronaut"], photos["coffee"], seconds=5.0)
    encode(frames, path=folder / "orig.mp4")
    background = [view(photos["camera"], 0.3 + 0.4 * i / len(frames), 0.5, 0.7) for i in range(len(frames))]
    for name, copy in _edits(frames, background).items():
        encode(copy, path=folder / f"{name}.mp4")
    # A look-alike: another video of the same two photos (other pans and zooms).
    n = len(frames)
    other = [view(photos["astronaut"], 0.7 - 0.4 * i / (n // 2), 0.35, 0.5) for i in range(n // 2)]
    other += [view(photos["coffee"], 0.4, 0.6, 0.6 + 0.3 * i / (n - n // 2)) for i in range(n - n // 2)]
    encode(other, path=folder / "lookalike.mp4")
    return folder


def test_edited_copies_paired_at_medium_and_lookalike_not(platform: Platform, edited: Path) -> None:
    """Copies boxed in blurred or gradient bars, cropped, set in a picture in picture or
    sped up are each paired with the original at the medium tier or above; a different
    video of the same photos is paired with none of them."""
    platform.ingest(edited)
    assert platform.failures() == []
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    for copy in ("pillarbox-blur.mp4", "pillarbox-gradient.mp4", "crop10.mp4", "pip.mp4", "speed1.1.mp4"):
        pair = pairs.get(tuple(sorted(("orig.mp4", copy))))
        assert pair is not None and pair["tier"] in ("strong", "medium"), (copy, pair)
    assert not any("lookalike.mp4" in key for key in pairs), pairs
