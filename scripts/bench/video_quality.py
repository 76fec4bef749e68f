"""Video near-duplicate quality: copies re-encoded, scaled, trimmed, re-timed, mirrored and
letterboxed, against clips made from other photos; and the cost of a signature.

Source clips (default 10, 320x180 at 25 fps, 12-16 s, libx264 at its default quality)
are made from scikit-image's bundled photos, two disjoint photos (or disjoint halves of a
large one) per clip, so that different clips share no picture: a pan across photo A,
a one-second crossfade to photo B, a slow zoom into B, a hard cut, a pan across B the
other way. Speeds and directions are drawn per clip. Each source gets these copies:

    lowrate     the decoded source re-encoded with another codec (MPEG-4 part 2) at
                120 kbit/s
    scale50     160x90
    trim0.5     the first 0.5 s cut (12 frames)
    trim3       the first 3 s cut
    fps15       re-timed to 15 fps (nearest source frame)
    mirror      flipped left-right
    letterbox   padded to 320x240 with black bars top and bottom
    boxed       scaled to 240x135 and centred in 320x180 (bars on all four sides, grey)
    combo       all at once: first 1.3 s cut, 15 fps, mirrored, scaled to 240x135 and
                letterboxed in 240x180, MPEG-4 part 2 at 100 kbit/s

Positives: a source against each of its copies. Negatives: a source against every copy
(and the source) of every other clip. Hard negatives, reported apart: three clips of one
photo that is in no other clip (a still, a pan, a zoom) against each other, and each
source against a re-edit of its own two photos (other pan paths, speeds and zooms): the
same pictures, not the same video.

Speed: `video_frames` over the sources, CPU seconds (process time, all decoder threads)
and wall seconds per minute of 25 fps video at 320x180, next to a bare PyAV decode of the
same files (threaded, no processing).

Baseline, same hashes and similarity: a fixed 1 fps grid (the first frame at or after
t = 0, 1, 2 ... s) instead of content sampling; it shows what sampling on content buys.

    python scripts/bench/video_quality.py [--seed 1] [--clips 10] [--threshold 0.6]
"""

from __future__ import annotations

import argparse
import io
import time

import av
import numpy as np
from PIL import Image
from skimage import data

from mmdedup.config import Settings
from mmdedup.signals.video import VideoSettings
from mmdedup.extract import video as V
from mmdedup.extract.video import VIDEO_VERSION, VideoFrames, video_frames, video_similarity

W, H, FPS = 320, 180, 25
SETTINGS = Settings()
LIMITS = {"max_seconds": SETTINGS.max_video_seconds, "max_bytes": SETTINGS.max_file_bytes}  # as the ingest passes them
VARIANTS = ("lowrate", "scale50", "trim0.5", "trim3", "fps15", "mirror", "letterbox", "boxed",
            "combo")


# --------------------------------------------------------------------------------------
# Photos and clips
# --------------------------------------------------------------------------------------


def photos() -> list[np.ndarray]:
    """Disjoint RGB pictures from scikit-image's bundled data (no download)."""
    def rgb(x):
        x = np.asarray(x)
        if x.dtype == bool:
            x = x.astype(np.uint8) * 255
        if x.ndim == 2:
            x = np.stack([x] * 3, axis=-1)
        return np.ascontiguousarray(x[..., :3])

    hub, ret = data.hubble_deep_field(), data.retina()
    out = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket(), data.camera(),
           data.coins(), data.moon(), data.immunohistochemistry(), hub[:436], hub[436:],
           ret[:705], ret[705:], data.brick(), data.grass(), data.gravel(),
           data.stereo_motorcycle()[0], data.clock(), data.cell(), data.page(),
           data.colorwheel(), data.text(), data.logo()[..., :3]]
    return [rgb(p) for p in out]


def _view(photo: np.ndarray, cx: float, cy: float, zoom: float, w: int = W, h: int = H) -> np.ndarray:
    """A w x h view of the photo centred at (cx, cy) (fractions), showing `zoom` of its
    largest window of that aspect."""
    ph, pw = photo.shape[:2]
    base = min(pw / w, ph / h)
    vw, vh = w * base * zoom, h * base * zoom
    x0 = np.clip(cx * pw - vw / 2, 0, pw - vw)
    y0 = np.clip(cy * ph - vh / 2, 0, ph - vh)
    im = Image.fromarray(photo).resize((w, h), Image.Resampling.BILINEAR,
                                       box=(x0, y0, x0 + vw, y0 + vh))
    return np.asarray(im)


def clip_frames(a: np.ndarray, b: np.ndarray, seconds: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Pan across a, crossfade to b, zoom into b, cut, pan across b the other way."""
    n = int(seconds * FPS)
    n_pan, n_fade = int(n * 0.4), FPS
    n_zoom = int(n * 0.3)
    n_last = n - n_pan - n_fade - n_zoom
    y = rng.uniform(0.35, 0.65)
    z = rng.uniform(0.55, 0.75)
    x0, x1 = sorted(rng.uniform(0.2, 0.8, 2)) if rng.random() < 0.5 else sorted(rng.uniform(0.2, 0.8, 2))[::-1]
    frames = [_view(a, x0 + (x1 - x0) * i / n_pan, y + 0.05 * np.sin(i / 20), z) for i in range(n_pan)]
    bx, by = rng.uniform(0.3, 0.7, 2)
    last_a = frames[-1].astype(np.float32)
    first_b = _view(b, bx, by, 0.9).astype(np.float32)
    for i in range(n_fade):
        f = (i + 1) / (n_fade + 1)
        frames.append(((1 - f) * last_a + f * first_b).astype(np.uint8))
    z1 = rng.uniform(0.45, 0.6)
    frames += [_view(b, bx, by, 0.9 + (z1 - 0.9) * i / n_zoom) for i in range(n_zoom)]
    u0, u1 = (0.75, 0.25) if rng.random() < 0.5 else (0.25, 0.75)
    v = rng.uniform(0.3, 0.7)
    frames += [_view(b, u0 + (u1 - u0) * i / n_last, v, 0.6) for i in range(n_last)]
    return frames


def encode(frames: list[np.ndarray], fps: int = FPS, codec: str = "libx264",
           bit_rate: int | None = None) -> bytes:
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        s = out.add_stream(codec, rate=fps)
        s.height, s.width = frames[0].shape[:2]
        s.pix_fmt = "yuv420p"
        if codec == "libx264":
            s.options = {"preset": "veryfast"}
        if bit_rate:
            s.bit_rate = bit_rate
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return buf.getvalue()


def decode_rgb(blob: bytes) -> list[np.ndarray]:
    with av.open(io.BytesIO(blob)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def variant(name: str, frames: list[np.ndarray], source: bytes) -> bytes:
    if name == "lowrate":
        return encode(decode_rgb(source), codec="mpeg4", bit_rate=120_000)
    if name == "scale50":
        return encode([np.asarray(Image.fromarray(f).resize((W // 2, H // 2), Image.Resampling.BILINEAR))
                       for f in frames])
    if name.startswith("trim"):
        return encode(frames[round(float(name[4:]) * FPS):])
    if name == "fps15":
        n = int(len(frames) / FPS * 15)
        return encode([frames[min(len(frames) - 1, round(k * FPS / 15))] for k in range(n)], fps=15)
    if name == "mirror":
        return encode([f[:, ::-1] for f in frames])
    if name == "letterbox":
        bar = np.zeros((30, W, 3), np.uint8)
        return encode([np.concatenate([bar, f, bar]) for f in frames])
    if name == "combo":
        n = int((len(frames) - round(1.3 * FPS)) / FPS * 15)
        out = []
        for k in range(n):
            f = frames[min(len(frames) - 1, round(1.3 * FPS) + round(k * FPS / 15))][:, ::-1]
            canvas = np.zeros((180, 240, 3), np.uint8)
            canvas[22:22 + 135] = np.asarray(Image.fromarray(np.ascontiguousarray(f)).resize(
                (240, 135), Image.Resampling.BILINEAR))
            out.append(canvas)
        return encode(out, fps=15, codec="mpeg4", bit_rate=100_000)
    if name == "boxed":
        out = []
        for f in frames:
            canvas = np.full((H, W, 3), 40, np.uint8)
            canvas[22:22 + 135, 40:40 + 240] = np.asarray(
                Image.fromarray(f).resize((240, 135), Image.Resampling.BILINEAR))
            out.append(canvas)
        return encode(out)
    raise ValueError(name)


def hard_negatives(photo: np.ndarray, seconds: float) -> dict[str, bytes]:
    """Three different videos of one photo: a still, a pan, a zoom."""
    n = int(seconds * FPS)
    still = [_view(photo, 0.5, 0.5, 0.8)] * n
    pan = [_view(photo, 0.25 + 0.5 * i / n, 0.5, 0.8) for i in range(n)]
    zoom = [_view(photo, 0.5, 0.5, 1.0 - 0.5 * i / n) for i in range(n)]
    return {"still": encode(still), "pan": encode(pan), "zoom": encode(zoom)}


def grid_frames(blob: bytes, fps: float = 1.0) -> VideoFrames:
    """Baseline: the first frame at or after each 1/fps tick (t = 0, 1, 2 ... s), hashed
    exactly as video_frames hashes (bars cut, blanks skipped), no content sampling."""
    times, codes, mirrored = [], [], []
    with av.open(io.BytesIO(blob)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        t0, tick = None, 0.0
        for frame in c.decode(s):
            t0 = frame.time if t0 is None else t0
            t = frame.time - t0
            if t + 1e-6 < tick:
                continue
            tick = (int(t * fps + 1e-6) + 1) / fps
            g, _ = V._grey(frame)
            box = V._content_box(g)
            if box is None:
                continue
            low = V._frame_low(g, box)[None]
            times.append(t)
            codes.append(int(V._codes_from_low(low)[0]))
            mirrored.append(int(V._codes_from_low(low * V._MIRROR)[0]))
    n = len(codes)
    return VideoFrames(np.array(times), np.array(codes, np.uint64), np.array(mirrored, np.uint64),
                       np.zeros((n, 4), np.float32), 0.0, 0, 0, 0.0, 0, 0)


# --------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clips", type=int, default=10)
    ap.add_argument("--threshold", type=float, default=0.6)
    ap.add_argument("--radius", type=int, default=VideoSettings().frame_radius)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    pics = photos()
    if 2 * args.clips + 1 > len(pics):
        raise SystemExit(f"at most {(len(pics) - 1) // 2} clips: {len(pics)} photos")
    order = rng.permutation(len(pics))

    t_make = time.perf_counter()
    blobs: dict[tuple[int, str], bytes] = {}
    seconds_total = 0.0
    for c in range(args.clips):
        a, b = pics[order[2 * c]], pics[order[2 * c + 1]]
        secs = float(rng.uniform(12, 16))
        frames = clip_frames(a, b, secs, rng)
        seconds_total += len(frames) / FPS
        blobs[(c, "source")] = encode(frames)
        for v in VARIANTS:
            blobs[(c, v)] = variant(v, frames, blobs[(c, "source")])
        blobs[(c, "re-edit")] = encode(clip_frames(a, b, secs, rng))
    hard = hard_negatives(pics[order[2 * args.clips]], 10.0)
    t_make = time.perf_counter() - t_make

    # Speed: signatures of the sources, against a bare threaded decode.
    def bare(blob: bytes) -> None:
        with av.open(io.BytesIO(blob)) as c:
            s = c.streams.video[0]
            s.thread_type = "AUTO"
            for _ in c.decode(s):
                pass

    sources = [blobs[(c, "source")] for c in range(args.clips)]
    timings = {}
    def signature(blob: bytes) -> VideoFrames:
        return video_frames(blob, **LIMITS)

    for name, fn in (("PyAV decode only (threaded)", bare), ("video_frames (decode + signature)", signature)):
        cpu, wall = time.process_time(), time.perf_counter()
        for blob in sources:
            fn(blob)
        timings[name] = (time.process_time() - cpu, time.perf_counter() - wall)

    sigs = {key: signature(blob) for key, blob in blobs.items()}
    hsigs = {key: signature(blob) for key, blob in hard.items()}

    def sim(x, y) -> float:
        return video_similarity(sigs[x], sigs[y], radius=args.radius)

    true = {v: np.array([sim((c, "source"), (c, v)) for c in range(args.clips)]) for v in VARIANTS}
    false = {v: np.array([sim((c, "source"), (d, v)) for c in range(args.clips)
                          for d in range(args.clips) if d != c]) for v in VARIANTS}
    false["source"] = np.array([sim((c, "source"), (d, "source")) for c in range(args.clips)
                                for d in range(c + 1, args.clips)])

    thr = args.threshold
    n_frames = [len(sigs[(c, "source")]) for c in range(args.clips)]
    print(f"## Video near-duplicates (seed {args.seed})\n")
    print(f"{args.clips} source clips, {W}x{H} at {FPS} fps, {seconds_total:.0f} s in all "
          f"({seconds_total / args.clips:.1f} s each), each from two photos no other clip shows; "
          f"{len(VARIANTS)} copies each. Signature `{VIDEO_VERSION}`: "
          f"{np.mean(n_frames):.1f} kept frames per source ({np.mean(n_frames) / (seconds_total / args.clips):.2f}/s). "
          f"Duplicate call: `video_similarity >= {thr:g}` (frame radius {args.radius} bits).\n")
    print("| copy | recall | precision | true pairs: min score | mean | false pairs | false pairs: max score | false calls |")
    print("|---|---|---|---|---|---|---|---|")
    all_tp = all_fp = all_pos = 0
    for v in VARIANTS:
        t, f = true[v], false[v]
        tp, fp = int((t >= thr).sum()), int((f >= thr).sum())
        all_tp, all_fp, all_pos = all_tp + tp, all_fp + fp, all_pos + len(t)
        prec = tp / (tp + fp) if tp + fp else float("nan")
        print(f"| {v} | {tp / len(t):.0%} ({tp}/{len(t)}) | {prec:.0%} | {t.min():.3f} | {t.mean():.3f} | "
              f"{len(f)} | {f.max():.3f} | {fp} |")
    f = false["source"]
    fp_src = int((f >= thr).sum())
    print(f"| source vs other sources | - | - | - | - | {len(f)} | {f.max():.3f} | {fp_src} |")
    all_fp += fp_src
    print(f"| **all** | {all_tp / all_pos:.1%} | {all_tp / max(1, all_tp + all_fp):.1%} | "
          f"{min(x.min() for x in true.values()):.3f} | | {sum(len(x) for x in false.values())} | "
          f"{max(x.max() for x in false.values()):.3f} | {all_fp} |")

    reedit = np.array([sim((c, "source"), (c, "re-edit")) for c in range(args.clips)])
    print("\n| same photos, different video (hard negatives) | score | kept frames | distinct |")
    print("|---|---|---|---|")
    print(f"| source vs a re-edit of its two photos ({args.clips} pairs) | max {reedit.max():.3f}, "
          f"mean {reedit.mean():.3f}, calls {int((reedit >= thr).sum())} | | |")
    names = list(hsigs)
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            print(f"| {x} vs {y} | {video_similarity(hsigs[x], hsigs[y], radius=args.radius):.3f} | "
                  f"{len(hsigs[x])} / {len(hsigs[y])} | "
                  f"{hsigs[x].distinct(args.radius)} / {hsigs[y].distinct(args.radius)} |")

    # Baseline: a fixed 1 fps grid, same hashes, same similarity.
    grid = {key: grid_frames(blob) for key, blob in blobs.items() if key[1] != "re-edit"}
    print(f"\n| copy, recall at >= {thr:g} | content sampling (mmdedup) | fixed 1 fps grid | "
          "grid: true pairs min score | grid: false pairs max score |")
    print("|---|---|---|---|---|")
    for v in VARIANTS:
        g_true = np.array([video_similarity(grid[(c, "source")], grid[(c, v)], radius=args.radius)
                           for c in range(args.clips)])
        g_false = np.array([video_similarity(grid[(c, "source")], grid[(d, v)], radius=args.radius)
                            for c in range(args.clips) for d in range(args.clips) if d != c])
        print(f"| {v} | {(true[v] >= thr).mean():.0%} | {(g_true >= thr).mean():.0%} | "
              f"{g_true.min():.3f} | {g_false.max():.3f} |")

    minutes = seconds_total / 60
    print(f"\n| speed, {W}x{H} H.264 at {FPS} fps, one process, {minutes:.1f} min of video | "
          "CPU s per minute of video | wall s per minute |")
    print("|---|---|---|")
    for name, (cpu, wall) in timings.items():
        print(f"| {name} | {cpu / minutes:.2f} | {wall / minutes:.2f} |")
    print(f"\n(clips made and encoded in {t_make:.0f} s.) Command: "
          f"`python scripts/bench/video_quality.py --seed {args.seed} --clips {args.clips} "
          f"--threshold {thr:g}`")


if __name__ == "__main__":
    main()
