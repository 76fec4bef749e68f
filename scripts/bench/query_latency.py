"""Online check latency: `Platform.query` (nothing ingested) for text, picture and
text + picture queries on a store of 100,000 items, next to a brute-force scan of the same
store measured in the same run.

The store: N texts (Zipf-like words from text_quality.py's vocabulary and exponent, 50-400
words each), and on every (N / pictures)-th item one picture: a crop of 25-60% of one of
the 21 real photographs from skimage.data (image_quality.py's originals), at a random
place, reduced to at most 160 px and stored as JPEG. It is built once through
`Platform.ingest(manifest)` (JSONL + picture files) into `--store` and reused by later runs
with the same --n, --pictures and --seed.

Queries (`--queries` of each kind, half near-duplicates of stored items, half fresh):

    text         near: a stored text with 5% of its words changed; fresh: a new text
    image        near: a stored picture reduced to 85% and re-compressed at JPEG 70;
                 fresh: a new crop (it may overlap a stored one: the pictures are crops of
                 21 photos, so even a fresh one is sometimes found)
    text+image   near: both of a stored item with a picture, edited as above; fresh: both new

Timed: the wall time of one `Platform.query(text, image=bytes, k=10)` call, the store open
and its indexes loaded (the first query of each kind, which loads them, is timed apart);
each method runs a kind's whole query list back to back, as a service answering one query
after another would. Also timed: the text signal's own path inside the query
(`Platform.signal("text").query`: sign, SimHash and LSH lookups, stored sketches read, scores), so
the rest of a text query's time is visible. Brute force: every stored text sketch and
picture code loaded from the store into memory once; per query the query is signed
exactly as the product signs it (same signer, same image codes), then scored against
every stored item with the product's own measures (weighted-MinHash and 3-gram MinHash
agreement over all 128 positions -> text calibration; best dihedral/centre pHash
distance -> image calibration), fused with the product's fusion rule, and the top 10
taken (ties by item, as the query orders them). A SimHash-only popcount scan (radius 3)
is timed too, as the cheapest possible exhaustive pass over the text codes. Agreement
(an untimed pass without the top-10 cut): the share of the items the scan scores at or
above the weak tier that the query also returns at or above it; for those it misses, the
pairing of picture codes (full/centre) that puts them within the match radius.

FAISS runs its searches on OpenMP threads; `OMP_NUM_THREADS=1` in the environment runs
them on one (see docs/benchmarks.md for both).

    python scripts/bench/query_latency.py [--n 100000] [--pictures 8000] [--queries 250]
                                          [--seed 1] [--store DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from image_quality import originals  # noqa: E402
from text_quality import BODY_EXPONENT, make_vocab  # noqa: E402

from mmdedup import Platform  # noqa: E402
from mmdedup.extract import image as mi  # noqa: E402
from mmdedup.extract.minhash import jaccard  # noqa: E402
from mmdedup.extract.simhash import hamming  # noqa: E402
from mmdedup.extract.text_sketches import TextSketches  # noqa: E402
from mmdedup.input.items import probe_item  # noqa: E402
from mmdedup.signals.scorer import fusion_of  # noqa: E402
from mmdedup.store.signatures import load_signatures  # noqa: E402

K = 10
CHUNK = 10_000


# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


class Words:
    def __init__(self, seed: int) -> None:
        self.vocab = np.array(make_vocab(random.Random(seed)))
        p = 1.0 / np.arange(1, len(self.vocab) + 1) ** BODY_EXPONENT
        self.p = p / p.sum()

    def texts(self, rng: np.random.Generator, n: int) -> list[str]:
        lengths = rng.integers(50, 401, n)
        words = self.vocab[rng.choice(len(self.vocab), size=(n, 400), p=self.p)]
        return [" ".join(row[:k]) for row, k in zip(words, lengths)]

    def edit(self, rng: np.random.Generator, text: str, rate: float = 0.05) -> str:
        words = text.split()
        pos = rng.choice(len(words), max(1, round(rate * len(words))), replace=False)
        for i, w in zip(pos, self.vocab[rng.choice(len(self.vocab), len(pos), p=self.p)]):
            words[i] = w
        return " ".join(words)


class Crops:
    def __init__(self) -> None:
        self.photos = [p for _, p in originals()]

    def make(self, rng: random.Random) -> bytes:
        photo = self.photos[rng.randrange(len(self.photos))]
        w, h = photo.size
        share = rng.uniform(0.25, 0.6)
        cw, ch = int(w * share), min(h, int(h * share * rng.uniform(0.7, 1.3)))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        pic = photo.crop((x, y, x + cw, y + ch))
        pic.thumbnail((160, 160), Image.LANCZOS)
        return jpeg(pic, 85)


def jpeg(pic: Image.Image, quality: int) -> bytes:
    buf = io.BytesIO()
    pic.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def repost(data: bytes) -> bytes:
    pic = Image.open(io.BytesIO(data)).convert("RGB")
    return jpeg(pic.resize((max(8, round(pic.width * 0.85)), max(8, round(pic.height * 0.85))),
                           Image.LANCZOS), 70)


def has_picture(i: int, n: int, pictures: int) -> bool:
    step = max(1, n // pictures) if pictures else 0
    return bool(pictures) and i % step == 0 and i // step < pictures


def build(store: Path, n: int, pictures: int, seed: int) -> dict:
    """Write the manifest and pictures, ingest them; returns the build record."""
    data = store / "data"
    (data / "img").mkdir(parents=True, exist_ok=True)
    words, crops = Words(seed), Crops()
    rng, prng = np.random.default_rng(seed), random.Random(seed)
    start = time.perf_counter()
    with (data / "manifest.jsonl").open("w", encoding="utf-8") as fh:
        for lo in range(0, n, CHUNK):
            for i, text in enumerate(words.texts(rng, min(CHUNK, n - lo)), start=lo):
                item = {"id": f"d{i}", "text": text}
                if has_picture(i, n, pictures):
                    (data / "img" / f"d{i}.jpg").write_bytes(crops.make(prng))
                    item["images"] = [f"img/d{i}.jpg"]
                fh.write(json.dumps(item) + "\n")
    made = time.perf_counter() - start
    with Platform.open(store / "home") as platform:
        start = time.perf_counter()
        report = platform.ingest(data / "manifest.jsonl")
        ingest = time.perf_counter() - start
        stats = platform.stats()
    record = {"n": n, "pictures": pictures, "seed": seed, "made_s": round(made, 1),
              "ingest_s": round(ingest, 1), "summary": report.summary(),
              "refreshes": platform.signal("text").refreshes, "stats": {k: stats[k] for k in
                                                             ("items", "signatures", "pairs")}}
    (store / "bench.json").write_text(json.dumps(record, indent=1))
    return record


def stored_items(store: Path, ids: set[str]) -> dict[str, dict]:
    out = {}
    with (store / "data" / "manifest.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            item = json.loads(line)
            if item["id"] in ids:
                out[item["id"]] = item
    return out


def make_queries(store: Path, n: int, pictures: int, seed: int, count: int) -> dict[str, list]:
    """kind -> [(text or None, image bytes or None, target id or None)]."""
    rng, prng = np.random.default_rng(seed + 101), random.Random(seed + 101)
    words, crops = Words(seed), Crops()
    half = count // 2
    with_pic = [i for i in range(n) if has_picture(i, n, pictures)]
    text_targets = [f"d{i}" for i in rng.choice(n, half, replace=False)]
    pic_targets = [f"d{i}" for i in rng.choice(with_pic, 2 * half, replace=False)]
    items = stored_items(store, set(text_targets) | set(pic_targets))
    picture = lambda i: (store / "data" / items[i]["images"][0]).read_bytes()  # noqa: E731
    fresh_texts = words.texts(rng, 2 * (count - half))
    out = {
        "text": [(words.edit(rng, items[i]["text"]), None, i) for i in text_targets]
        + [(t, None, None) for t in fresh_texts[: count - half]],
        "image": [(None, repost(picture(i)), i) for i in pic_targets[:half]]
        + [(None, crops.make(prng), None) for _ in range(count - half)],
        "text+image": [(words.edit(rng, items[i]["text"]), repost(picture(i)), i)
                       for i in pic_targets[half:]]
        + [(t, crops.make(prng), None) for t in fresh_texts[count - half:]],
    }
    return out


# --------------------------------------------------------------------------------------
# Brute force
# --------------------------------------------------------------------------------------


class Scan:
    """Every stored sketch and picture code in memory; each query scored against all."""

    def __init__(self, platform: Platform) -> None:
        start = time.perf_counter()
        self.settings = platform.settings
        self.text, self.image = platform.signal("text"), platform.signal("image")
        self.fusion = fusion_of([platform.signal(n) for n in ("text", "image")], platform.settings)
        self.signer = self.text.signer
        with platform.sessions() as session:
            stored = load_signatures(session, "text", self.signer.version)
            self.text_pks = np.fromiter(stored, np.int64, len(stored))
            self.sk = TextSketches.unpack(list(stored.values()))
            blobs = load_signatures(session, "image", mi.IMAGE_VERSION)
            self.ids = dict(session.execute(select_ids()).all())
        self.pk_row = {pk: i for i, pk in enumerate(self.text_pks.tolist())}
        codes = [self.image.unpack(b) for b in blobs.values()]
        self.image_owner = np.repeat(np.fromiter(blobs, np.int64, len(blobs)), [len(c) for c in codes])
        self.codes = mi.ImageCodes(*(np.concatenate([getattr(c, f) for c in codes]) for f in
                                     ("scales", "dhash")), errors=[None] * len(self.image_owner),
                                   **{f: np.concatenate([getattr(c, f) for c in codes])
                                      for f in ("anchored", "chroma", "contrast")})
        self.image_rows = np.array([self.pk_row[pk] for pk in self.image_owner.tolist()], np.int64)
        self.load_s = time.perf_counter() - start

    def text_scores(self, text: str) -> np.ndarray:
        q = self.signer.sign([text])
        wj = jaccard(q.wminhash[0], self.sk.wminhash)
        j = jaccard(q.minhash[0], self.sk.minhash)
        raw = np.where(self.sk.empty | q.empty[0], 0.0, np.maximum(wj, j))
        return self.text.calibrate(raw)

    def simhash_only(self, text: str) -> np.ndarray:
        q = self.signer.sign([text])
        return np.nonzero(hamming(q.simhash[0], self.sk.simhash) <= self.text.config.simhash_radius)[0]

    def image_scores(self, data: bytes) -> np.ndarray:
        """Per stored item row (NaN where it has no picture): the best of its pictures."""
        q = mi.image_codes([data], self.settings.max_image_pixels)
        dist = mi.image_distance(q, self.codes)[0]
        out = np.full(len(self.text_pks), np.nan)
        best = np.full(len(self.text_pks), 64.0)
        np.minimum.at(best, self.image_rows, dist)
        has = np.zeros(len(self.text_pks), bool)
        has[self.image_rows] = True
        out[has] = self.image.calibrate(best[has])
        return out

    def pairing(self, image: bytes, item: str) -> str:
        """How image_distance() finds an item's pictures from a query picture: along an
        alignment of the scale chains (scale k against k + shift, the mean of the closest
        three pairs), or by the whole pictures' codes alone (plus their penalty)."""
        q = mi.image_codes([image], self.settings.max_image_pixels)
        pk = next(pk for pk, i in self.ids.items() if i == item)
        st = self.codes.take(np.nonzero(self.image_owner == pk)[0])
        if len(st) == 0:
            return "no picture (text)"
        whole = float(mi.image_distance(q, st, centre=False).min()) + mi.WHOLE_PENALTY
        best = float(mi.image_distance(q, st).min())
        if best > self.image.config.radius:
            return f"{best:.2f} bits, outside the radius {self.image.config.radius} (text)"
        return "whole" if best == whole else "scale chain"

    def query(self, text: str | None, image: bytes | None, k: int = K,
              min_score: float = 0.0) -> list[tuple[str, float]]:
        """The top k, best first (ties by pk, as Platform.query orders them)."""
        signals = {}
        if text is not None:
            signals["text"] = self.text_scores(text)
        if image is not None:
            signals["image"] = self.image_scores(image)
        fused = fuse_all(signals, self.fusion.weights, self.fusion.media)
        top = np.nonzero(fused >= min_score)[0] if min_score > 0 else np.arange(len(fused))
        if len(top) > k:
            top = top[np.argpartition(-fused[top], k)[:k]]
        top = top[np.lexsort((self.text_pks[top], -fused[top]))]
        return [(self.ids[int(self.text_pks[i])], float(fused[i])) for i in top]


def select_ids():
    from sqlalchemy import select

    from mmdedup.store.schema import Item

    return select(Item.pk, Item.id)


def fuse_all(signals: dict[str, np.ndarray], weights: dict[str, float], content) -> np.ndarray:
    """score.fusion.fuse over every item at once (NaN = the item lacks that signal)."""
    n = len(next(iter(signals.values())))
    total, mean, best = np.zeros(n), np.zeros(n), np.zeros(n)
    for name, v in signals.items():
        have = ~np.isnan(v)
        w = weights.get(name, 0.0)
        total += np.where(have, w, 0.0)
        mean += np.where(have, w * np.nan_to_num(v), 0.0)
        if name in content:
            best = np.maximum(best, np.nan_to_num(v))
    mean = np.divide(mean, total, out=np.zeros(n), where=total > 0)
    return np.maximum(mean, best)


# --------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------


def pcts(ms: list[float]) -> tuple[float, float, float]:
    a = np.asarray(ms)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99)), float(a.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="stored items (all with text)")
    ap.add_argument("--pictures", type=int, default=8000, help="of them, items with a picture")
    ap.add_argument("--queries", type=int, default=250, help="queries of each kind")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", type=Path, default=None,
                    help="folder to keep the built store in (reused when it matches)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    tmp = None
    if args.store is None:
        tmp = tempfile.TemporaryDirectory()
        args.store = Path(tmp.name)
    store = args.store
    marker = store / "bench.json"
    record = json.loads(marker.read_text()) if marker.exists() else None
    if not record or (record["n"], record["pictures"], record["seed"]) != (args.n, args.pictures, args.seed):
        if record:
            sys.exit(f"{store} holds a store built with other parameters ({record['n']}, "
                     f"{record['pictures']}, {record['seed']}); give another --store")
        print(f"building the store in {store} ...", flush=True)
        record = build(store, args.n, args.pictures, args.seed)
        built = "built in this run"
    else:
        built = "reused from an earlier run"
    print(f"Store ({built}): {record['summary'].split(': ', 1)[1]}; made in {record['made_s']} s, "
          f"ingested in {record['ingest_s']} s ({args.n / record['ingest_s']:,.0f} items/s), "
          f"TF-IDF refreshes {record['refreshes']}; {record['stats']}")

    queries = make_queries(store, args.n, args.pictures, args.seed, args.queries)
    load_start = os.getloadavg()[0]

    start = time.perf_counter()
    platform = Platform.open(store / "home")
    opened = time.perf_counter() - start
    cold = {}
    for kind, qs in queries.items():  # the first query of each kind loads its indexes
        text, image, _ = qs[0]
        t0 = time.perf_counter()
        platform.query(text, image=image, k=K)
        cold[kind] = (time.perf_counter() - t0) * 1e3
    scan = Scan(platform)

    # Timed: per kind of query, each method runs the whole query list back to back (as a
    # service answering one query after another would), the methods one after the other.
    methods = {
        "query": "mmdedup Platform.query",
        "textpath": "of which the text signal (signal('text').query)",
        "scan": "brute-force scan (numpy, every stored item)",
        "simhash": f"SimHash-only popcount scan, radius {platform.signal('text').config.simhash_radius}",
    }
    results: dict[str, dict] = {}
    for kind, qs in queries.items():
        r = results[kind] = {m: [] for m in methods} | {"ans_query": [], "ans_scan": []}
        for m in methods:
            if m == "textpath" and kind == "image" or m == "simhash" and kind != "text":
                continue
            for text, image, _ in qs:
                t0 = time.perf_counter()
                if m == "query":
                    got = platform.query(text, image=image, k=K)
                elif m == "textpath":
                    got = platform.signal("text").query(probe_item(text, None, None, platform.settings))
                elif m == "scan":
                    got = scan.query(text, image)
                else:
                    got = scan.simhash_only(text)
                r[m].append((time.perf_counter() - t0) * 1e3)
                if m == "query":
                    r["ans_query"].append([(a["id"], a["score"]) for a in got])
                elif m == "scan":
                    r["ans_scan"].append(got)

    # Agreement, untimed: everything the scan scores at or above the weak tier against
    # everything the query returns at or above it (no k cut-off on either side).
    weak = platform.settings.tier_weak
    for kind, qs in queries.items():
        want = [{i for i, _ in scan.query(t, im, k=len(scan.text_pks), min_score=weak)} for t, im, _ in qs]
        have = [{a["id"] for a in platform.query(t, image=im, k=len(scan.text_pks), min_score=weak)}
                for t, im, _ in qs]
        results[kind]["agree"] = (sum(len(w & h) for w, h in zip(want, have)), sum(map(len, want)),
                                  sum(len(h - w) for w, h in zip(want, have)))
        # Why the query missed an item: which pairing of picture codes brings it in range.
        why = results[kind]["why"] = Counter()
        for (t, im, _), w, h in zip(qs, want, have):
            for i in w - h:
                why[scan.pairing(im, i) if im is not None else "text"] += 1
    platform.close()

    load_end = os.getloadavg()[0]
    print(f"\n# Query latency: {args.n:,} stored items (all with text, {args.pictures:,} with one "
          f"picture); {args.queries} queries of each kind, half near-duplicates, k={K}\n")
    print("| query | method | p50 ms | p99 ms | mean ms | near-dups: target first | "
          "hits >= weak in the top 10, per query | of the scan's items >= weak (no k limit), "
          "the query returns |")
    print("|---|---|---:|---:|---:|---|---|---|")
    for kind, qs in queries.items():
        r = results[kind]
        near = [i for i, q in enumerate(qs) if q[2] is not None]
        base = pcts(r["query"])[0]
        for m, label in methods.items():
            if not r[m]:
                continue
            p50, p99, mean = pcts(r[m])
            first = hits = agree = ""
            if m in ("query", "scan"):
                ans = r[f"ans_{m}"]
                first = f"{sum(1 for i in near if ans[i] and ans[i][0][0] == qs[i][2])}/{len(near)}"
                hits = f"{np.mean([sum(1 for _, s in a if s >= weak) for a in ans]):.2f}"
            if m == "scan":
                both, total, extra = r["agree"]
                agree = f"{both / total:.1%} of {total}" if total else "-"
                if extra:
                    agree += f" (+{extra} the scan scores lower)"
            if m in ("scan", "simhash"):
                label += f" ({p50 / base:.1f}x the query's p50)"
            print(f"| {kind} | {label} | {p50:.2f} | {p99:.2f} | {mean:.2f} | {first} | {hits} | {agree} |")
    for kind in queries:
        why = results[kind]["why"]
        if why:
            print(f"\n{kind}: items the scan scores >= weak that the query misses, by the pairing "
                  "of picture codes that brings them within the match radius: "
                  + ", ".join(f"{k} {v}" for k, v in why.most_common()))
    print(f"\nLoad average (1 min) on this {os.cpu_count()}-CPU machine: {load_start:.1f} at the "
          f"start of the timing, {load_end:.1f} at its end; FAISS OpenMP threads: "
          f"{os.environ.get('OMP_NUM_THREADS', 'default')}.")
    print(f"\nOnce per process: Platform.open {opened * 1e3:.0f} ms; first query (loads the "
          f"indexes): " + ", ".join(f"{k} {v:.0f} ms" for k, v in cold.items())
          + f"; the scan's load of {len(scan.text_pks):,} text sketches and "
          f"{len(scan.image_owner):,} picture codes from the store {scan.load_s:.1f} s.")
    print(f"Command: python scripts/bench/query_latency.py --n {args.n} --pictures {args.pictures} "
          f"--queries {args.queries} --seed {args.seed}" + (f" --store {args.store}" if tmp is None else ""))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
