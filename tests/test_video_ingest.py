"""Items with a video through ingest and query: re-posted copies found (trimmed, mirrored,
re-encoded), other clips not, broken and audio-only files recorded with their reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mmdedup import Platform

from helpers import audio_only, clip, encode, write_clip_and_trimmed_copy


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
