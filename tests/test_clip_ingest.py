"""CLIP through ingest with a tiny randomly initialised open_clip model saved to a local
checkpoint: the real load, encode, store, index and score path runs; without weights the
signal is off with one message and everything else is unchanged."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage import data
from sqlalchemy import select

from mmdedup import Platform
from mmdedup.extract import clip
from mmdedup.store.schema import Signature

from test_clip import TINY, tiny_checkpoint, write_registry  # noqa: F401
from test_video import photos  # noqa: F401


@pytest.fixture
def posts(tmp_path: Path) -> list[dict]:
    folder = tmp_path / "posts"
    folder.mkdir()
    Image.fromarray(data.astronaut()).save(folder / "a.png")
    Image.fromarray(data.astronaut()).resize((200, 200)).save(folder / "a-small.jpg", quality=30)
    Image.fromarray(data.coffee()).save(folder / "c.png")
    return [{"id": "a", "images": [str(folder / "a.png")]},
            {"id": "a-small", "images": [str(folder / "a-small.jpg")]},
            {"id": "c", "images": [str(folder / "c.png")]}]


def test_clip_vectors_stored_indexed_and_fused(platform: Platform, posts, tiny_checkpoint: Path,  # noqa: F811
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tiny_checkpoint}"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    platform.ingest(posts)
    assert platform.clip.off_reason is None
    with platform.sessions() as session:
        rows = session.execute(select(Signature.item_pk, Signature.value).where(Signature.kind == "clip")).all()
    assert len(rows) == 3
    vectors = [np.frombuffer(v, "<f4") for _, v in rows]
    assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-4) for v in vectors)
    pair = next(p for p in platform.pairs("weak") if {p["a"], p["b"]} == {"a", "a-small"})
    assert 0.0 <= pair["signals"]["clip"] <= 1.0 and pair["details"]["clip"]["cosine"] > 0.5


def test_without_weights_the_signal_is_off_with_one_message(platform: Platform, posts, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tmp_path}/missing.pt"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    with caplog.at_level(logging.WARNING, logger="mmdedup"):
        platform.ingest(posts)
        platform.ingest(posts[:1] + [{"id": "a2", "images": posts[0]["images"]}])
    messages = [r.getMessage() for r in caplog.records if "CLIP signal off" in r.getMessage()]
    assert len(messages) == 1 and "missing.pt" in messages[0]
    pairs = {frozenset((p["a"], p["b"])): p for p in platform.pairs("weak")}
    assert pairs[frozenset(("a", "a-small"))]["signals"].get("clip") is None
    assert pairs[frozenset(("a", "a2"))]["tier"] == "strong"


def test_video_keyframes_get_clip_vectors(platform: Platform, tiny_checkpoint: Path,  # noqa: F811
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch, photos) -> None:  # noqa: F811
    from test_video import clip as make_clip, encode

    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tiny_checkpoint}"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    folder = tmp_path / "v"
    folder.mkdir()
    encode(make_clip(photos["astronaut"], photos["coffee"]), path=folder / "a.mp4")
    Image.fromarray(data.astronaut()).save(folder / "still.png")
    platform.ingest([{"id": "video", "video": "a.mp4"}, {"id": "still", "images": ["still.png"]}], root=folder)
    with platform.sessions() as session:
        sizes = dict(session.execute(select(Signature.item_pk, Signature.value).where(Signature.kind == "clip")).all())
    video_pk, still_pk = sorted(sizes)
    # one vector for the still picture, several for the video's keyframes
    assert len(sizes[video_pk]) >= 3 * len(sizes[still_pk]) > 0
