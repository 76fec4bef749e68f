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
from mmdedup.store.schema import Item, Signature

from helpers import TINY, write_registry

# Without open_clip and torch the module skips, as test_clip.py does.
pytest.importorskip("open_clip")
pytest.importorskip("torch")


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


def test_clip_vectors_stored_indexed_and_fused(platform: Platform, posts, tiny_checkpoint: Path,
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tiny_checkpoint}"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    platform.ingest(posts)
    assert platform.signal("clip").off_reason is None
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


def test_video_keyframes_get_clip_vectors(platform: Platform, tiny_checkpoint: Path,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch, photos) -> None:
    from helpers import clip as make_clip, encode

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


# --- text-to-image queries through CLIP's text tower ---------------------------------------

QUERY = "an astronaut in a white suit"


def _tiny_model(checkpoint: Path):  # noqa: ANN202
    import open_clip

    model = open_clip.create_model(TINY, pretrained=str(checkpoint))
    model.eval()
    return model, open_clip.get_tokenizer(TINY)


def test_text_query_searches_pictures_through_the_text_tower(
        home: Path, db_url: str, posts, tiny_checkpoint: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The query text is tokenised and encoded by the model's own text tower, the CLIP
    index is searched with that vector, and every stored picture comes back with its
    clip_text score and cosine. A random model: mechanics only, not which picture wins."""
    import torch

    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tiny_checkpoint}"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    (home / "config.toml").write_text("clip_text_min_cosine = -1.0\n")  # random cosines: keep all
    seen: list[tuple[list[str], np.ndarray]] = []
    real = clip.ClipEncoder.encode_texts

    def spy(self, texts):  # noqa: ANN001, ANN202 - records what the real method returns
        out = real(self, texts)
        seen.append((list(texts), out))
        return out

    monkeypatch.setattr(clip.ClipEncoder, "encode_texts", spy)
    with Platform.open(home, db_url) as platform:
        platform.ingest(posts + [{"id": "t", "text": "an astronaut in a white suit floats above the earth"}])
        results = platform.query(QUERY, k=10)
        settings = platform.settings
        text_map = platform.signal("clip").config.text_calibration
        with platform.sessions() as session:
            stored = dict(session.execute(select(Signature.item_pk, Signature.value)
                                          .where(Signature.kind == "clip")).all())
            ids = dict(session.execute(select(Item.pk, Item.id)).all())

    # the vector is the model's encode_text of the tokenised query, normalised
    assert [texts for texts, _ in seen] == [[QUERY]]
    model, tokenizer = _tiny_model(tiny_checkpoint)
    with torch.inference_mode():
        want = model.encode_text(tokenizer([QUERY]), normalize=True)[0].numpy()
    got = seen[0][1][0]
    assert got.shape == (32,) and np.allclose(got, want, atol=1e-5)

    # the index was searched: each picture item's best cosine with that vector
    by_id = {r["id"]: r for r in results}
    assert {"a", "a-small", "c"} <= set(by_id)
    for pk, blob in stored.items():
        cosine = float((np.frombuffer(blob, "<f4").reshape(-1, 32) @ want).max())
        r = by_id[ids[pk]]
        assert set(r) == {"id", "score", "signals", "details"}
        assert r["details"]["clip_text_cosine"] == pytest.approx(cosine, abs=1e-3)
        xs, ys = zip(*text_map)
        assert r["signals"]["clip_text"] == pytest.approx(float(np.interp(cosine, xs, ys)), abs=1e-3)
        assert "text" not in r["signals"]  # pictures only: no text of their own
        assert r["score"] == pytest.approx(r["signals"]["clip_text"], abs=1e-4)  # alone, it is the score
    # the text item is found by its words, and has no CLIP vector
    assert by_id["t"]["signals"].get("text", 0) > 0 and "clip_text" not in by_id["t"]["signals"]
    assert results[0]["id"] == "t"  # a text match outranks a caption match (below the tiers)
    assert max(ys) < settings.tier_weak


def test_text_query_without_clip_is_unchanged(home: Path, db_url: str, posts, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """CLIP off (no weights) or no CLIP vectors stored: a text query gives what it gave
    before CLIP text queries existed, and a store without vectors never loads the model."""
    from mmdedup.signals.clip import ClipSignal as ClipStage

    texts = [{"id": "t1", "text": "The council approved the plan to build a stadium on Tuesday after a long debate."},
             {"id": "t2", "text": "On Tuesday the council approved the plan to build a stadium after a long debate."}]
    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tmp_path}/missing.pt"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    with Platform.open(home, db_url) as platform:
        platform.ingest(texts)
        before = platform.query(texts[0]["text"], k=5)
        assert platform.signal("clip")._encoder is None and platform.signal("clip").off_reason is None  # never tried
        platform.ingest(posts)  # pictures, CLIP off: no vectors
        assert platform.signal("clip").off_reason is not None
        with_pictures = platform.query(texts[0]["text"], k=5)
        monkeypatch.setattr(ClipStage, "query_text", lambda self, text: {})
        without = platform.query(texts[0]["text"], k=5)
    assert before == with_pictures == without
    assert [r["id"] for r in before] == ["t1", "t2"]
    assert all(set(r["signals"]) == {"text"} for r in before)


def test_cli_text_query_shows_clip_text(home: Path, db_url: str, posts, tiny_checkpoint: Path,
                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    import json

    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{tiny_checkpoint}"\n', monkeypatch)
    monkeypatch.setattr(clip, "_default", None)
    (home / "config.toml").write_text("clip_text_min_cosine = -1.0\n")
    manifest = tmp_path / "posts.jsonl"
    manifest.write_text("".join(json.dumps(p) + "\n" for p in posts))
    assert cli("ingest", str(manifest), "--no-progress")[0] == 0
    monkeypatch.setattr(clip, "_default", None)
    rc, out, _ = cli("query", "--text", QUERY, "--format", "json")
    assert rc == 0
    found = {r["id"]: r for r in json.loads(out)}
    assert set(found) == {"a", "a-small", "c"} and all("clip_text" in r["signals"] for r in found.values())
    rc, out, _ = cli("query", "--text", QUERY, "--format", "table")
    assert rc == 0 and "clip_text" in out and "a-small" in out
