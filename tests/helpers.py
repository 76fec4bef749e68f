"""Plain helpers that several test files use (their fixtures are in conftest.py)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import av
import numpy as np
import pytest
from PIL import Image

from mmdedup import Platform


def pair_map(platform: Platform) -> dict[tuple[str, str], dict]:
    """The platform's pairs of every tier, by their two ids in sorted order."""
    return {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}


# --------------------------------------------------------------------------------------
# Video clips: made with PyAV from scikit-image's bundled photos (the `photos` fixture),
# 160x120 at 25 fps, a few seconds of pans, a zoom and a hard cut.
# --------------------------------------------------------------------------------------

W, H, FPS = 160, 120, 25


def rgb(x: np.ndarray) -> np.ndarray:
    """A photo as a contiguous RGB array: grey stacked to three channels, alpha dropped."""
    x = np.asarray(x)
    if x.ndim == 2:
        x = np.stack([x] * 3, axis=-1)
    return np.ascontiguousarray(x[..., :3])


def view(photo: np.ndarray, cx: float, cy: float, zoom: float, w: int = W, h: int = H) -> np.ndarray:
    """A w x h view of the photo centred at (cx, cy) (fractions of it), `zoom` of its
    largest window of that aspect."""
    ph, pw = photo.shape[:2]
    base = min(pw / w, ph / h)
    vw, vh = w * base * zoom, h * base * zoom
    x0 = float(np.clip(cx * pw - vw / 2, 0, pw - vw))
    y0 = float(np.clip(cy * ph - vh / 2, 0, ph - vh))
    return np.asarray(Image.fromarray(photo).resize((w, h), Image.Resampling.BILINEAR,
                                                    box=(x0, y0, x0 + vw, y0 + vh)))


def clip(a: np.ndarray, b: np.ndarray, seconds: float = 4.0) -> list[np.ndarray]:
    """Pan across a, hard cut, zoom into b, pan across b."""
    n = int(seconds * FPS)
    n1, n2 = n * 2 // 5, n * 3 // 10
    n3 = n - n1 - n2
    frames = [view(a, 0.25 + 0.5 * i / n1, 0.5, 0.6) for i in range(n1)]
    frames += [view(b, 0.5, 0.5, 0.95 - 0.4 * i / n2) for i in range(n2)]
    frames += [view(b, 0.7 - 0.4 * i / n3, 0.4, 0.55) for i in range(n3)]
    return frames


def encode(frames: list[np.ndarray], *, fps: int = FPS, codec: str = "libx264",
           bit_rate: int | None = None, fmt: str = "mp4", path=None) -> bytes:
    """Encode RGB frames; with `path` the file is written there (mp4 moov at the front)."""
    target = str(path) if path is not None else io.BytesIO()
    options = {"movflags": "faststart"} if path is not None and fmt == "mp4" else {}
    with av.open(target, "w", format=fmt, options=options) as out:
        s = out.add_stream(codec, rate=fps)
        s.height, s.width = frames[0].shape[:2]
        s.pix_fmt = "yuv420p"
        if codec == "libx264":
            s.options = {"preset": "ultrafast"}
        if bit_rate:
            s.bit_rate = bit_rate
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    if path is not None:
        return path.read_bytes()
    return target.getvalue()


def write_clip_and_trimmed_copy(folder, photos) -> list[np.ndarray]:
    """orig.mp4 (astronaut then coffee) and trimmed.mp4 (its first half second cut,
    re-encoded at a low bit rate) in `folder`; returns the original's frames."""
    frames = clip(photos["astronaut"], photos["coffee"])
    encode(frames, path=folder / "orig.mp4")
    encode(frames[12:], path=folder / "trimmed.mp4", bit_rate=80_000)
    return frames


def audio_only(codec: str, fmt: str, sample_fmt: str) -> bytes:
    """About half a second of a mono tone, `codec` in a `fmt` container: no video stream."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        s = out.add_stream(codec, rate=44100)
        s.layout = "mono"
        n = 1152
        for i in range(20):
            x = np.sin(np.arange(n) * 0.05 + i) * 0.3
            arr = x.astype(np.float32)[None] if sample_fmt == "fltp" else (x * 20000).astype(np.int16)[None]
            frame = av.AudioFrame.from_ndarray(arr, format=sample_fmt, layout="mono")
            frame.sample_rate = 44100
            for p in s.encode(frame):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return buf.getvalue()


# --------------------------------------------------------------------------------------
# CLIP: a tiny random open_clip model (the `tiny_checkpoint` fixture) and the model
# registry file that names it.
# --------------------------------------------------------------------------------------

TINY = "mmdedup-test-tiny"
TINY_CFG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
    # vocab_size is CLIP's: the bundled BPE tokenizer emits ids up to 49407.
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}


def write_registry(folder: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`body` as the model registry mmdedup reads (a file in `folder`), its model cache beside it."""
    path = folder / "registry.toml"
    path.write_text(body)
    monkeypatch.setenv("MMDEDUP_MODEL_REGISTRY", str(path))
    monkeypatch.setenv("MMDEDUP_MODEL_CACHE", str(folder / "cache"))
    return path


def sign_as(session, kind: str, version: str) -> None:  # noqa: ANN001
    """Mark every stored signature of `kind` as made by `version` (an earlier release)."""
    from sqlalchemy import update

    from mmdedup.store.schema import Signature
    from mmdedup.store.signatures import version_id

    vid = version_id(session, kind, version, create=True)
    session.execute(update(Signature).where(Signature.kind == kind).values(version_id=vid))


def wait_for(condition: Callable[[], bool], seconds: float = 120) -> None:
    """Poll `condition` until it holds; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {condition}"
        time.sleep(0.05)


def mmdedup(home: Path, url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mmdedup", "--home", str(home), "--db", url, *args]
    return subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out + err


def pairs_by_ids(home: Path, url: str) -> dict[tuple[str, str], tuple]:
    """Every pair, keyed by its two ids in order (pks differ between orders of work)."""
    with Platform.open(home, url) as p:
        return {tuple(sorted((x.a, x.b))): (round(x.score, 6), x.tier, x.kind,
                                            tuple(sorted(x.signals.items())))
                for x in p.pairs("weak")}


def encode_with_subtitles(frames: list[np.ndarray], srt: str, path: Path, fps: int = FPS) -> None:
    """Frames as H.264 and a SubRip text as a subtitle stream, muxed into Matroska at
    `path` (the subtitle packets copied from FFmpeg's SubRip demuxer)."""
    with av.open(io.BytesIO(srt.encode()), format="srt") as src, av.open(str(path), "w", format="matroska") as out:
        v = out.add_stream("libx264", rate=fps)
        v.height, v.width = frames[0].shape[:2]
        v.pix_fmt = "yuv420p"
        v.options = {"preset": "ultrafast"}
        s = out.add_stream_from_template(src.streams.subtitles[0])
        for f in frames:
            for p in v.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                out.mux(p)
        for p in v.encode():
            out.mux(p)
        for packet in src.demux(src.streams.subtitles[0]):
            if packet.size:
                packet.stream = s
                out.mux(packet)


def srt_of(lines: list[str], step: float = 1.5) -> str:
    """A SubRip file showing each line for `step` seconds in turn."""
    def stamp(t: float) -> str:
        ms = round(t * 1000)
        return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"
    return "".join(f"{i + 1}\n{stamp(i * step)} --> {stamp((i + 1) * step - 0.1)}\n{line}\n\n"
                   for i, line in enumerate(lines))
