"""CLIP vectors: the real load-and-encode path on a tiny random open_clip model saved as a
local checkpoint, and one clear EncoderUnavailable whenever weights cannot be had."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

open_clip = pytest.importorskip("open_clip")
torch = pytest.importorskip("torch")

from mmdedup.config import Settings  # noqa: E402
from mmdedup.extract import clip  # noqa: E402

from helpers import TINY, write_registry  # noqa: E402


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network: the hub client reads its offline flag at import, so set both."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True)


@pytest.fixture
def encoder(tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            offline) -> clip.ClipEncoder:
    # a relative checkpoint path goes by the registry file's folder
    rel = os.path.relpath(tiny_checkpoint, tmp_path)
    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{rel}"\n', monkeypatch)
    return clip.ClipEncoder(device="cpu")


def pictures() -> list[Image.Image]:
    rng = np.random.default_rng(7)
    out = []
    for k in range(3):
        a = rng.integers(0, 255, (48 + 16 * k, 80, 3), dtype=np.uint8)
        out.append(Image.fromarray(a))
    return out


def test_encodes_images_and_texts(encoder: clip.ClipEncoder, tiny_checkpoint: Path):
    pics = pictures()
    vecs = encoder.encode_images(pics)
    assert vecs.shape == (3, 32) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    again = clip.ClipEncoder(device="cpu").encode_images(pics)
    assert np.array_equal(vecs, again)  # deterministic, across loads too
    same = encoder.encode_images([pics[0], pics[0].copy()])
    assert float(same[0] @ same[1]) == pytest.approx(1.0, abs=1e-6)
    assert float(vecs[0] @ vecs[1]) < 0.9999  # different pictures, different vectors
    texts = encoder.encode_texts(["a red rocket on a launch pad", "a cat", ""])
    assert texts.shape == (3, 32) and np.allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)
    assert encoder.encode_images([]).shape == (0, 32)
    sha = clip.file_sha256(tiny_checkpoint)[:16]
    assert encoder.version == f"{clip.CLIP_CODE_VERSION}|{TINY}|sha256:{sha}"
    assert encoder.device == "cpu"


def test_checkpoint_weights_are_used(encoder: clip.ClipEncoder, tiny_checkpoint: Path):
    """The vectors come from the saved weights, not a fresh random init."""
    model = open_clip.create_model(TINY, pretrained=str(tiny_checkpoint))
    model.eval()
    _, _, preprocess = open_clip.create_model_and_transforms(TINY)
    pic = pictures()[1]
    with torch.inference_mode():
        want = model.encode_image(preprocess(pic)[None], normalize=True)[0].numpy()
    got = encoder.encode_images([pic])[0]
    assert np.allclose(got, want, atol=1e-5)


def test_encode_image_bytes_keeps_going(encoder: clip.ClipEncoder):
    buf = io.BytesIO()
    pictures()[0].save(buf, "PNG")
    blobs = [buf.getvalue(), b"not an image", buf.getvalue()]
    vecs, errors = encoder.encode_image_bytes(blobs, Settings().max_image_pixels)
    assert [e.reason if e else None for e in errors] == [None, "not_an_image", None]
    assert np.allclose(vecs[0], vecs[2]) and not vecs[1].any()


def test_missing_checkpoint_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline):
    write_registry(tmp_path, '[clip]\nmodel = "ViT-B-32"\ncheckpoint = "nowhere/clip.safetensors"\n',
                   monkeypatch)
    enc = clip.ClipEncoder(device="cpu")  # lazy: constructing never fails
    with pytest.raises(clip.EncoderUnavailable) as err:
        enc.encode_images(pictures())
    msg = str(err.value)
    assert "nowhere/clip.safetensors" in msg and "does not exist" in msg and "checkpoint" in msg
    with pytest.raises(clip.EncoderUnavailable):  # remembered, same answer
        enc.encode_texts(["x"])


def test_pretrained_tag_offline_and_uncached_is_unavailable(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch, offline):
    write_registry(tmp_path, '[clip]\nmodel = "ViT-B-32"\npretrained = "laion2b_s34b_b79k"\n',
                   monkeypatch)
    enc = clip.ClipEncoder(device="cpu")
    assert enc.version == f"{clip.CLIP_CODE_VERSION}|ViT-B-32|laion2b_s34b_b79k"
    with pytest.raises(clip.EncoderUnavailable) as err:
        enc.encode_images(pictures())
    msg = str(err.value)
    assert "HF_HUB_OFFLINE" in msg and "checkpoint" in msg and str(tmp_path / "cache") in msg


def test_cached_tag_weights_found_without_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  offline):
    """Weights already in the cache (hub layout) load offline: they are looked up first."""
    cfg = open_clip.get_pretrained_cfg("ViT-B-32", "laion2b_s34b_b79k")
    repo = cfg["hf_hub"].rstrip("/")
    snap = tmp_path / "cache" / f"models--{repo.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (snap / "open_clip_model.safetensors").write_bytes(b"stand-in")
    refs = tmp_path / "cache" / f"models--{repo.replace('/', '--')}" / "refs"
    refs.mkdir()
    (refs / "main").write_text("0" * 40)
    found = clip._cached_tag_weights(cfg, tmp_path / "cache")
    assert found is not None and found.endswith("open_clip_model.safetensors")


def test_no_weights_configured_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write_registry(tmp_path, '[clip]\nmodel = "ViT-B-32"\n', monkeypatch)
    with pytest.raises(clip.EncoderUnavailable, match="neither pretrained nor checkpoint"):
        clip.ClipEncoder(device="cpu").encode_images(pictures())


def test_unknown_tag_and_model_are_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline):
    write_registry(tmp_path, '[clip]\nmodel = "ViT-B-32"\npretrained = "no_such_tag"\n', monkeypatch)
    (tmp_path / "cache").mkdir()  # some weights in the cache: open_clip is asked about the tag
    (tmp_path / "cache" / "other.safetensors").write_bytes(b"stand-in")
    with pytest.raises(clip.EncoderUnavailable, match="laion2b_s34b_b79k"):  # lists known tags
        clip.ClipEncoder(device="cpu").load()
    write_registry(tmp_path, '[clip]\nmodel = "ViT-Z-99"\npretrained = "x"\n', monkeypatch)
    with pytest.raises(clip.EncoderUnavailable, match="unknown open_clip model"):
        clip.ClipEncoder(device="cpu").load()


def test_checkpoint_of_another_model_is_unavailable(tiny_checkpoint: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, offline):
    write_registry(tmp_path, f'[clip]\nmodel = "{TINY}-other"\ncheckpoint = "{tiny_checkpoint}"\n',
                   monkeypatch)
    with pytest.raises(clip.EncoderUnavailable, match=f"could not be loaded into {TINY}-other"):
        clip.ClipEncoder(device="cpu").load()


def test_registry_problems_are_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MMDEDUP_MODEL_REGISTRY", str(tmp_path / "missing.toml"))
    with pytest.raises(clip.EncoderUnavailable, match="not found"):
        clip.ClipEncoder().load()
    write_registry(tmp_path, '[sentence]\nname = "x"\n', monkeypatch)
    with pytest.raises(clip.EncoderUnavailable, match=r"no \[clip\] section"):
        clip.ClipEncoder().load()


def test_without_open_clip_installed(monkeypatch: pytest.MonkeyPatch):
    import sys

    monkeypatch.setitem(sys.modules, "open_clip", None)  # import open_clip -> ImportError
    with pytest.raises(clip.EncoderUnavailable, match=r"mmdedup\[ml\]"):
        clip.ClipEncoder().load()


def test_shipped_registry_names_the_default_model(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MMDEDUP_MODEL_REGISTRY", raising=False)
    spec = clip.load_spec()
    assert (spec.model, spec.pretrained, spec.checkpoint) == ("ViT-B-32", "laion2b_s34b_b79k", None)
    assert open_clip.get_pretrained_cfg(spec.model, spec.pretrained)  # a tag open_clip knows


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("MMDEDUP_MODEL_CACHE", str(tmp_path / "c"))
    assert clip.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("MMDEDUP_MODEL_CACHE")
    assert clip.cache_dir().name in ("cache", "models")
