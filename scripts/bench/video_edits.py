"""Video edits through the product: re-posted copies that are pillarboxed, letterboxed at
another size, trimmed at both ends, cropped, set in a picture-in-picture or played faster
or slower, ingested with a look-alike clip of another scene; which pairs reach the
medium tier.

Source clips (default 6, 10-12 s at 25 fps, H.264) are made as in video_quality.py from
scikit-image's bundled photos, two photos per clip that no other clip shows; even clips
are 16:9 (320x180), odd ones 4:3 (240x180). Each source gets these copies:

    pillarbox-blur    in a frame a third wider, the side bars a blurred, enlarged copy of
                      the picture (the usual fill of a re-posted phone or 4:3 video)
    pillarbox-grad    in a frame a third wider, the side bars a coloured gradient, top to
                      bottom (no bar row or column is uniform)
    letterbox-blur    scaled to 1.5x and set in a frame a third taller, blurred bars above
                      and below
    trim1+1, trim2+2  1 s (2 s) cut at the start and at the end
    crop5, crop10     5% (10%) of the width and height cut, at a random place, and scaled
                      back to the source size
    pip65             scaled to 65% of the frame, at a random place, over a pan of a photo
                      no clip shows (each clip its own)
    speed0.9, speed1.1  played at 0.9x (1.1x): 25 fps out, each output frame the source
                      frame nearest its time times the speed

The look-alike of each clip is another clip made from the same two photos (other pan
paths, speeds and zooms): a different video of the same scene. Everything is written as
files with a manifest (one item per video, no text) and ingested into a new store through
`Platform`; a copy is found when its pair with the source is at the medium tier or above.
False pairs: a pair between items of two different clips, or between a clip's look-alike
and the clip or any of its copies (any tier).

BEFORE is the product at `--before` (a git revision, default the commit before this work),
AFTER the working tree; both ingest the same files in the same run, each in a child process
that imports its own copy of the package.

With `--subtitles`, each source also gets a SubRip file of what is said in it (the
sentences of one of text_quality.py's English documents, a line every 1.5 s), each copy
the same words as WebVTT (re-timed as the copy is, lines cut off by a trim dropped), and
each look-alike another document's; the manifest names them in
"subtitles". Reported: the copies whose pair's text signal alone reaches the medium tier,
and false pairs by text. BEFORE (which has no such field) ingests the same videos without
the subtitles.

    python scripts/bench/video_edits.py [--clips 6] [--seed 1] [--before REV] [--subtitles]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EDITS = ("pillarbox-blur", "pillarbox-grad", "letterbox-blur", "trim1+1", "trim2+2", "crop5",
         "crop10", "pip65", "speed0.9", "speed1.1")
FPS = 25
BEFORE = "b4a25b2"  # the product before the edits above were handled


def _resize(f: np.ndarray, w: int, h: int) -> np.ndarray:
    return np.asarray(Image.fromarray(np.ascontiguousarray(f)).resize((w, h), Image.Resampling.BILINEAR))


def _blur_fill(f: np.ndarray, w: int, h: int) -> np.ndarray:
    """The picture enlarged to cover w x h and blurred: the fill behind a boxed video."""
    fh, fw = f.shape[:2]
    s = max(w / fw, h / fh)
    big = Image.fromarray(f).resize((max(w, round(fw * s)), max(h, round(fh * s))), Image.Resampling.BILINEAR)
    x0, y0 = (big.width - w) // 2, (big.height - h) // 2
    return np.asarray(big.crop((x0, y0, x0 + w, y0 + h)).filter(ImageFilter.GaussianBlur(radius=h / 18)))


def edit(name: str, frames: list[np.ndarray], rng: np.random.Generator, background) -> list[np.ndarray]:
    h, w = frames[0].shape[:2]
    if name == "pillarbox-blur" or name == "pillarbox-grad":
        ow = (w * 4 // 3) // 2 * 2
        x0 = (ow - w) // 2
        if name == "pillarbox-grad":
            top, bottom = rng.integers(20, 200, 3), rng.integers(20, 200, 3)
            ramp = np.linspace(0, 1, h)[:, None, None]
            grad = (top * (1 - ramp) + bottom * ramp).astype(np.uint8)
            canvas = np.broadcast_to(grad, (h, ow, 3))
        out = []
        for f in frames:
            c = _blur_fill(f, ow, h).copy() if name == "pillarbox-blur" else canvas.copy()
            c[:, x0:x0 + w] = f
            out.append(c)
        return out
    if name == "letterbox-blur":
        cw, ch = (w * 3 // 2) // 2 * 2, (h * 3 // 2) // 2 * 2
        oh = (ch * 4 // 3) // 2 * 2
        y0 = (oh - ch) // 2
        out = []
        for f in frames:
            c = _blur_fill(f, cw, oh).copy()
            c[y0:y0 + ch] = _resize(f, cw, ch)
            out.append(c)
        return out
    if name.startswith("trim"):
        a, b = (round(float(x) * FPS) for x in name[4:].split("+"))
        return frames[a:len(frames) - b]
    if name.startswith("crop"):
        share = float(name[4:]) / 100
        cw, ch = round(w * (1 - share)), round(h * (1 - share))
        x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        return [_resize(f[y0:y0 + ch, x0:x0 + cw], w, h) for f in frames]
    if name.startswith("pip"):
        share = float(name[3:]) / 100
        iw, ih = (round(w * share) // 2) * 2, (round(h * share) // 2) * 2
        x0, y0 = int(rng.integers(0, w - iw + 1)), int(rng.integers(0, h - ih + 1))
        out = []
        for f, bg in zip(frames, background):
            c = bg.copy()
            c[y0:y0 + ih, x0:x0 + iw] = _resize(f, iw, ih)
            out.append(c)
        return out
    if name.startswith("speed"):
        speed = float(name[5:])
        n = int(len(frames) / speed)
        return [frames[min(len(frames) - 1, round(k * speed))] for k in range(n)]
    raise ValueError(name)


def _stamp(t: float, sep: str) -> str:
    ms = max(0, round(t * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def subtitle_file(lines: list[str], seconds: float, shift: float = 0.0, speed: float = 1.0,
                  vtt: bool = False) -> str:
    """Each line for 1.5 s of the source, as seen in a copy cut by `shift` seconds at the
    start and played at `speed`; lines that fall outside the copy are dropped."""
    sep = "." if vtt else ","
    out = ["WEBVTT\n"] if vtt else []
    k = 0
    for i, line in enumerate(lines):
        a, b = (i * 1.5 - shift) / speed, ((i + 1) * 1.5 - 0.1 - shift) / speed
        if a < 0 or b > seconds:
            continue
        k += 1
        number = "" if vtt else f"{k}\n"
        out.append(f"{number}{_stamp(a, sep)} --> {_stamp(b, sep)}\n{line}\n")
    return "\n".join(out)


def make(folder: Path, clips: int, seed: int, subtitles: bool = False) -> dict:
    """Write the clips, their copies and look-alikes, and manifest.jsonl; returns the
    clip count and seconds of video."""
    sys.path.insert(0, str(HERE))
    import video_quality as VQ

    rng = np.random.default_rng(seed)
    pics = VQ.photos()
    if 3 * clips > len(pics):
        raise SystemExit(f"at most {len(pics) // 3} clips: {len(pics)} photos")
    order = rng.permutation(len(pics))
    docs = []
    if subtitles:  # real English prose, a document per clip and per look-alike
        import text_quality

        prose = text_quality.en_docs()
        docs = [prose[i] for i in rng.permutation(len(prose))[:2 * clips]]
    lines, sub_lines, seconds = [], [], 0.0
    for c in range(clips):
        a, b, bgp = pics[order[2 * c]], pics[order[2 * c + 1]], pics[order[2 * clips + c]]
        w, h = (320, 180) if c % 2 == 0 else (240, 180)
        VQ._view.__defaults__ = (w, h)  # clip_frames draws its views at _view's default size
        secs = float(rng.uniform(10, 12))
        frames = VQ.clip_frames(a, b, secs, rng)
        n = len(frames)
        background = [VQ._view(bgp, 0.3 + 0.4 * i / n, 0.5, 0.7, w, h) for i in range(n)]
        videos = {"source": frames, "lookalike": VQ.clip_frames(a, b, secs, rng)}
        for e in EDITS:
            videos[e] = edit(e, frames, rng, background)
        said = {"source": docs[2 * c][:int(secs / 1.5)],
                "lookalike": docs[2 * c + 1][:int(secs / 1.5)]} if subtitles else {}
        for name, fr in videos.items():
            rel = f"c{c}/{name}.mp4"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(VQ.encode(fr))
            seconds += len(fr) / FPS
            lines.append(json.dumps({"id": f"c{c}-{name}", "video": rel}))
            if subtitles:
                shift = float(name[4:].split("+")[0]) if name.startswith("trim") else 0.0
                speed = float(name[5:]) if name.startswith("speed") else 1.0
                vtt = name not in ("source", "lookalike")
                sub = f"c{c}/{name}.{'vtt' if vtt else 'srt'}"
                (folder / sub).write_text(subtitle_file(said.get(name, said["source"]), len(fr) / FPS,
                                                        shift, speed, vtt))
                sub_lines.append(json.dumps({"id": f"c{c}-{name}", "video": rel, "subtitles": sub}))
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    if subtitles:
        (folder / "subtitled.jsonl").write_text("\n".join(sub_lines) + "\n")
    return {"clips": clips, "seconds": seconds, "videos": len(lines)}


def measure(folder: Path, manifest: str = "manifest.jsonl") -> dict:
    """Ingest the manifest into a new store with the package on sys.path; the pairs."""
    from mmdedup import Platform

    with tempfile.TemporaryDirectory(dir=folder) as home:
        with Platform.open(Path(home)) as p:
            t = time.perf_counter()
            p.ingest(folder / manifest)
            wall = time.perf_counter() - t
            pairs = [{"a": x["a"], "b": x["b"], "score": x["score"], "tier": x["tier"],
                      "video": x["signals"].get("video"), "text": x["signals"].get("text")}
                     for x in p.pairs("weak")]
            failures = [f["key"] for f in p.failures()]
            version = p.signal("video").version()
    return {"pairs": pairs, "failures": failures, "wall": wall, "version": version}


def _score(result: dict, clips: int) -> dict:
    by = {tuple(sorted((p["a"], p["b"]))): p for p in result["pairs"]}
    found, scores, by_text = {}, {}, {}
    for e in EDITS:
        hits, text, sc = 0, 0, []
        for c in range(clips):
            p = by.get(tuple(sorted((f"c{c}-source", f"c{c}-{e}"))))
            sc.append(p["score"] if p else 0.0)
            hits += bool(p) and p["tier"] in ("medium", "strong")
            text += bool(p) and (p.get("text") or 0.0) >= 0.8
        found[e], scores[e], by_text[e] = hits, sc, text
    false = [p for (a, b), p in by.items()
             if a.split("-")[0] != b.split("-")[0] or ("lookalike" in a) != ("lookalike" in b)]
    return {"found": found, "scores": scores, "false": false, "text": by_text,
            "false_text": [p for p in false if (p.get("text") or 0.0) >= 0.7]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--before", default=BEFORE, help="git revision of the BEFORE product")
    ap.add_argument("--subtitles", action="store_true", help="give the videos subtitles files")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--manifest", default="manifest.jsonl", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.manifest)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        made = make(tmp / "videos", args.clips, args.seed, args.subtitles)
        t_make = time.perf_counter() - t
        old = tmp / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "platform"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        results = {}
        for label, src in (("before", old / "platform"), ("after", ROOT / "platform")):
            env = dict(os.environ, PYTHONPATH=str(src))
            manifest = "subtitled.jsonl" if args.subtitles and label == "after" else "manifest.jsonl"
            out = subprocess.run([sys.executable, __file__, "--measure", str(tmp / "videos"),
                                  "--manifest", manifest],
                                 env=env, check=True, capture_output=True, text=True).stdout
            results[label] = json.loads(out.strip().splitlines()[-1])

    n = args.clips
    before, after = _score(results["before"], n), _score(results["after"], n)
    print(f"## Video edits through the product (seed {args.seed})\n")
    print(f"{n} clips ({made['videos']} videos, {made['seconds']:.0f} s in all), each with "
          f"{len(EDITS)} copies and a look-alike; ingested into a new store. A copy is found when "
          f"its pair with the source is at the medium tier or above (fused score >= 0.8).\n")
    print(f"BEFORE: `{results['before']['version']}` (revision {args.before}); "
          f"AFTER: `{results['after']['version']}`.\n")
    print("| copy | found at medium, before | after | after: min score | after: mean score |")
    print("|---|---|---|---|---|")
    for e in EDITS:
        sc = np.array(after["scores"][e])
        print(f"| {e} | {before['found'][e] / n:.0%} ({before['found'][e]}/{n}) | "
              f"{after['found'][e] / n:.0%} ({after['found'][e]}/{n}) | {sc.min():.3f} | {sc.mean():.3f} |")
    tb, ta = sum(before["found"].values()), sum(after["found"].values())
    print(f"| **all** | {tb / (n * len(EDITS)):.1%} | {ta / (n * len(EDITS)):.1%} | | |")
    print("\n| false pairs (other clip, or a look-alike) | before | after |")
    print("|---|---|---|")
    for tier in ("weak", "medium", "strong"):
        rank = {"weak": 0, "medium": 1, "strong": 2}
        cb = sum(rank[p["tier"]] >= rank[tier] for p in before["false"])
        ca = sum(rank[p["tier"]] >= rank[tier] for p in after["false"])
        print(f"| at {tier} or above | {cb} | {ca} |")
    worst = max((p["score"] for p in after["false"]), default=0.0)
    print(f"| after: highest false pair score | {max((p['score'] for p in before['false']), default=0.0):.3f} "
          f"| {worst:.3f} |")
    if args.subtitles:
        print("\n| copy, same words as the source's subtitles | text signal >= 0.8, before "
              "(no subtitles) | after |")
        print("|---|---|---|")
        for e in EDITS:
            print(f"| {e} | {before['text'][e]}/{n} | {after['text'][e]}/{n} |")
        print(f"| false pairs with text >= 0.7 (other clip, or a look-alike saying other words) | "
              f"{len(before['false_text'])} | {len(after['false_text'])} |")
    print(f"\nIngest wall time: before {results['before']['wall']:.0f} s, after "
          f"{results['after']['wall']:.0f} s; failures {results['before']['failures']} / "
          f"{results['after']['failures']}. (Clips made in {t_make:.0f} s.)")
    print(f"\nCommand: `python scripts/bench/video_edits.py --clips {n} --seed {args.seed} "
          f"--before {args.before}{' --subtitles' if args.subtitles else ''}`")


if __name__ == "__main__":
    main()
