"""Items with a video through ingest and query: re-posted copies found (trimmed, mirrored,
re-encoded), other clips not, broken and audio-only files recorded with their reason."""

from __future__ import annotations

import json
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


SAID = ["The harbour opens at six and the first boats leave before the fog lifts",
        "Fishermen sort the night catch on the quay while gulls circle the cranes",
        "By noon the market hall is full of buyers from the inland towns",
        "Prices are chalked on slate boards and change as the ice melts",
        "In the evening the nets are mended under the lamps of the old warehouse"]
OTHER = ["A mountain railway climbs through tunnels cut by hand a century ago",
         "Snow closes the pass each winter and the line runs only to the lower station",
         "Engineers inspect the rack rails every spring before the tourist season",
         "The summit hotel keeps a logbook of every train since the opening day",
         "From the terrace walkers watch eagles ride the warm air over the glacier"]


@pytest.fixture(scope="module")
def subtitled(tmp_path_factory, photos):
    """Clips with their words: a clip and a re-encode of it with the same subtitles (one
    as .srt, one as .vtt), a third video that says the same in a subtitle stream, a
    different clip with different subtitles, and one whose .srt is broken."""
    from helpers import encode_with_subtitles, srt_of

    folder = tmp_path_factory.mktemp("subtitled")
    frames = clip(photos["astronaut"], photos["coffee"])
    encode(frames, path=folder / "a.mp4")
    encode(frames, path=folder / "a-low.mp4", codec="mpeg4", bit_rate=80_000)
    still = [view(photos["chelsea"], 0.5, 0.5, 0.8)] * 50  # other pictures, the same words
    encode_with_subtitles(still, srt_of(SAID), folder / "said.mkv")
    encode(clip(photos["rocket"], photos["camera"]), path=folder / "b.mp4")
    srt = srt_of(SAID)
    (folder / "a.srt").write_text(srt)
    (folder / "a.vtt").write_text("WEBVTT\n\n" + srt_of([f"<v Narrator>{x}" for x in SAID]).replace(",", "."))
    (folder / "b.srt").write_text(srt_of(OTHER))
    (folder / "broken.srt").write_text("1\nthis is not a timing line\nHello\n")
    items = [{"id": "a", "video": "a.mp4", "subtitles": "a.srt"},
             {"id": "a-low", "video": "a-low.mp4", "subtitles": "a.vtt"},
             {"id": "said", "video": "said.mkv"},
             {"id": "b", "video": "b.mp4", "subtitles": "b.srt"},
             {"id": "broken", "video": "b.mp4", "subtitles": "broken.srt"}]
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in items))
    return manifest


def test_subtitles_reach_the_text_signal(platform: Platform, subtitled: Path) -> None:
    report = platform.ingest(subtitled)
    failures = {f["key"]: f for f in platform.failures()}
    assert set(failures) == {"broken"} and failures["broken"]["reason"] == "bad_subtitles"
    assert "broken.srt" in failures["broken"]["detail"]
    assert report.new == 4
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    # The same words from a .srt, a .vtt and a subtitle stream: matched as text.
    for key in (("a", "a-low"), ("a", "said"), ("a-low", "said")):
        assert pairs[key]["signals"]["text"] >= 0.9, pairs[key]
    # Different clips saying different things: no pair, by text or by picture.
    assert not any("b" in key for key in pairs), pairs


def test_subtitles_field_is_checked() -> None:
    from mmdedup.input.items import InputError, Item

    with pytest.raises(InputError, match="srt or .vtt"):
        Item.from_dict({"id": "x", "video": "x.mp4", "subtitles": "x.txt"})
    with pytest.raises(InputError, match="must be a string"):
        Item.from_dict({"id": "x", "video": "x.mp4", "subtitles": ["x.srt"]})
