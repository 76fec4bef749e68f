"""Digest of everything ingest derives from a fixed corpus: signatures, pairs, clusters.

A change that moves code must not change what the product computes. This script builds
one corpus (the bundled sample corpus, 1,500 generated texts with reposts and edits, web
pages, pictures and short videos), ingests it into a fresh SQLite store, labels a few
pairs, retrains, and prints a SHA-256 of every stored signature (kind, version, bytes), of
the pairs (ids, score, tier, kind, signals, details) and of the clusters, at each step.
Run it before and after a refactor: the lines must be identical.

    python scripts/signature_digest.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _words(rng: random.Random, n: int) -> list[str]:
    vocab = [f"w{i}" for i in range(3000)]
    return [rng.choice(vocab) for _ in range(n)]


def _texts(rng: random.Random, n: int) -> list[dict]:
    items = []
    for i in range(n):
        if i % 5 == 4:  # a repost of an earlier text: shuffled sentences and an edit
            src = items[rng.randrange(len(items))]["text"].split(". ")
            rng.shuffle(src)
            words = ". ".join(src).split()
            words[rng.randrange(len(words))] = "edited"
            text = " ".join(words)
        else:
            text = ". ".join(" ".join(_words(rng, 12)) for _ in range(rng.randint(3, 30)))
        items.append({"id": f"t{i}", "text": text, "meta": {"n": i}})
    items.append({"id": "zh-short-a", "text": "今天北京天气晴朗适合出游"})
    items.append({"id": "zh-short-b", "text": "今天北京天气晴朗适宜出游"})
    return items


def _pictures(folder: Path, rng: np.random.Generator) -> list[dict]:
    from PIL import Image

    items = []
    for i in range(6):
        base = (rng.random((48, 64, 3)) * 255).astype(np.uint8)
        img = Image.fromarray(base).resize((320, 240), Image.BILINEAR)
        img.save(folder / f"p{i}.png")
        img.resize((200, 150)).save(folder / f"p{i}-small.jpg", quality=70)
        img.transpose(Image.FLIP_LEFT_RIGHT).save(folder / f"p{i}-mirror.png")
        items += [{"id": f"pic{i}", "images": [f"p{i}.png"]},
                  {"id": f"pic{i}-small", "images": [f"p{i}-small.jpg"]},
                  {"id": f"pic{i}-mirror", "title": f"mirror {i}", "images": [f"p{i}-mirror.png"]}]
    return items


def _videos(folder: Path, rng: np.random.Generator) -> list[dict]:
    import av

    items = []
    for v in range(2):
        scenes = [(rng.random((12, 16, 3)) * 255).astype(np.uint8) for _ in range(6)]
        for name, start in ((f"v{v}.mp4", 0), (f"v{v}-trim.mp4", 12)):
            with av.open(str(folder / name), "w") as out:
                stream = out.add_stream("libx264", rate=12)
                stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
                for f in range(start, 72):
                    scene = np.kron(scenes[f // 12], np.ones((4, 6, 1), np.uint8))
                    scene = np.roll(scene, f % 12, axis=1)
                    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(scene[:64, :96]), format="rgb24")
                    for packet in stream.encode(frame):
                        out.mux(packet)
                for packet in stream.encode():
                    out.mux(packet)
            items.append({"id": name, "video": name})
    return items


def _pages(folder: Path) -> list[dict]:
    items = []
    for page in sorted((ROOT / "tests" / "data" / "web").glob("*.htm*")):
        if page.name.startswith(("xml_bomb", "broken", "no_content")):
            continue
        shutil.copy(page, folder / page.name)
        items.append({"id": f"page-{page.stem}", "html": page.name, "meta": {"site": "example"}})
    return items


def _digest(db: Path, pairs: list[dict], clusters: list[dict]) -> dict[str, str]:
    con = sqlite3.connect(db)
    sig = hashlib.sha256()
    kinds: dict[str, int] = {}
    for item_id, kind, version, value in con.execute(
            "SELECT items.id, s.kind, v.version, s.value FROM signatures s JOIN items ON items.pk = s.item_pk "
            "JOIN signature_versions v ON v.id = s.version_id ORDER BY items.id, s.kind"):
        kinds[kind] = kinds.get(kind, 0) + 1
        sig.update(f"{item_id}\0{kind}\0{version}\0".encode() + bytes(value))
    texts = hashlib.sha256(json.dumps(con.execute(
        "SELECT id, page_text, page_date FROM items ORDER BY id").fetchall()).encode())
    con.close()
    return {"signatures": f"{sig.hexdigest()[:16]} {json.dumps(kinds, sort_keys=True)}",
            "page_texts": texts.hexdigest()[:16],
            "pairs": f"{hashlib.sha256(json.dumps(pairs, sort_keys=True).encode()).hexdigest()[:16]} "
                     f"({len(pairs)})",
            "clusters": f"{hashlib.sha256(json.dumps(clusters, sort_keys=True).encode()).hexdigest()[:16]} "
                        f"({len(clusters)})"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", default=None, help="build the store in this folder and keep it")
    args = parser.parse_args()
    from mmdedup import Platform

    work = Path(args.keep or tempfile.mkdtemp(prefix="mmdedup-digest-"))
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    rng, nrng = random.Random(7), np.random.default_rng(7)
    items = _texts(rng, 1500) + _pictures(corpus, nrng) + _videos(corpus, nrng) + _pages(corpus)
    with open(corpus / "manifest.jsonl", "w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    home = work / "home"
    with Platform.open(home) as p:
        steps = []
        p.ingest(ROOT / "samples" / "corpus" / "manifest.jsonl")
        report = p.ingest(corpus / "manifest.jsonl")
        steps.append(("ingest", report.summary().split(": ", 1)[1]))
        pairs = [_plain(x) for x in p.pairs("weak")]
        steps.append(("ingest", _digest(home / "mmdedup.db", pairs, [_plain(c) for c in p.clusters()])))
        # Labels that move word weights: reposts called duplicates, one called distinct.
        texts = [x for x in pairs if x["a"].startswith("t") and x["b"].startswith("t")]
        for x, dup in zip(texts[:6], (True, True, True, True, True, False)):
            p.label(x["a"], x["b"], duplicate=dup, reviewer="digest")
        p.retrain()
        pairs = [_plain(x) for x in p.pairs("weak")]
        steps.append(("retrain", _digest(home / "mmdedup.db", pairs, [_plain(c) for c in p.clusters()])))
        q = p.query("今天北京天气晴朗适合出游", k=3)
        steps.append(("query", json.dumps([_plain(x) for x in q], ensure_ascii=False, sort_keys=True)))
    for step, value in steps:
        if isinstance(value, dict):
            for key, v in value.items():
                print(f"{step:8} {key:11} {v}")
        else:
            print(f"{step:8} {value}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def _plain(record: object) -> object:
    """A result as its JSON line (typed results or dicts alike)."""
    as_dict = getattr(record, "as_dict", None)
    return as_dict() if callable(as_dict) else record


if __name__ == "__main__":
    main()
