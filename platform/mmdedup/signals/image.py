"""The `image` signal: perceptual hashes of an item's pictures.

An item's signature holds, for each of its pictures, the pHash of each scale of its
scale chain (the whole and four centre regions, `SCALES`), of the four smaller scales of
each chain placed at a corner, an edge or between (`ANCHORS`) and the dHash, of all eight
dihedral variants, so a pair can be scored mirrored or rotated whichever side is the
query. The Hamming indexes hold only the as-given codes of the `INDEXED` scales (the
whole, "full", and the middle 80%, "centre"), one entry per picture with id pk * 64 +
position, and of the 80% of each chain anchored at a corner or an edge (`INDEXED_ANCHORS`:
"anchored", eight entries a picture); queries
search with all eight variants of the codes that share an alignment with them, so a
flipped or cropped copy is found from either side. A
pair's raw similarity is the best `image_distance` over the two items' pictures (the mean
of the closest pairs of codes along the best alignment of the two scale chains).

A release that changes how the codes are made changes IMAGE_VERSION, and signatures of
different versions are never compared: before an ingest or a query, `catch_up` signs
again every stored picture of another version from its file (the store keeps each file's
path and sha256, not its bytes), so no stored item drops out of picture pairing or of a
query's answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
from tqdm import tqdm

from ..config import Calibration, Knots, Number, SignalSettings, setting
from ..extract.image import (ANCHOR_SHIFTS, ANCHORS, INDEXED, INDEXED_ANCHOR, INDEXED_ANCHORS, IMAGE_VERSION, SCALES, SHIFT,
                             TONE_GRID, ImageCodes, codes_of, image_distance, tone_apart)
from ..index.hamming import HammingIndex
from ..index.slots import distinct_pairs, entry_ids
from ..input.items import InputError, LoadedItem, read_stored_picture
from ..score.pairs import candidate_pairs
from ..store import items as stored_items
from ..store.locks import take_write_lock
from ..store.pairs import pairs_touching
from ..store.queries import stored_files
from ..store.runs import finish_run, start_run
from ..store.schema import utcnow
from ..store.signatures import count_other_versions, has_other_version, replace_signatures, stale_pks
from .base import Signal

MAX_IMAGES = 64  # pictures per item that get an index id (pk * 64 + position)
RESIGN_CHUNK = 200  # items signed again per transaction (each file read and decoded)
# The failures of a re-sign are recorded under this source (a later re-sign that reaches
# the item again closes them, as a rerun of an ingest closes its own).
RESIGN_SOURCE = "resign:image"
INDEXED_AT = len(INDEXED_ANCHORS)  # anchored chains a picture whose innermost code is indexed
TONE_VALUES = TONE_GRID * TONE_GRID * 2 + 1  # a picture's tone: its chroma grid and contrast


@dataclass(frozen=True)
class ImageSettings(SignalSettings):
    weight: float = 0.3
    # `image_distance` (a mean of three pHash distances, so in steps of 2/3 of a bit:
    # each pHash sets the 32 bits above its median, distances are even) -> score. Set by
    # hand on the picture benches (docs/benchmarks.md, image_tiers.py): edited copies of
    # photos lie within 10 2/3 (strong), different photos from 14 2/3 up, and different
    # flat graphics (the low-detail pictures whose codes collide) gather from 11 1/3 up, so
    # 10 2/3 is strong and the medium tier has no band of its own; 11 1/3 to 13 is weak
    # (at 13 1/3 and 14, the calibration set holds 163 pairs of different pictures and 26
    # copies: calibrate_signals.py).
    calibration: Calibration = setting((
        (0.0, 1.0), (4.0, 0.95), (10.7, 0.9), (11.3, 0.75), (13.1, 0.7), (15.0, 0.6),
        (24.0, 0.2), (32.0, 0.0)),
        Knots(0, 64))
    # candidates: pictures with a pair of codes (one of them of an indexed scale) within
    # this many bits. A pair within the strong tier can have none within 12 from the later
    # picture's side (its alignment's indexed pair spoilt: a 12% crop), hence 16.
    radius: int = setting(16, Number(int, 0, 64))
    # The radius of the searches an anchored chain takes part in: an anchored alignment
    # counts only within ANCHOR_REACH bits, its penalty included (a mean of 7 bits), and
    # the corners of low-detail pictures (flat backgrounds) are alike; searched at
    # `radius`, they brought so many candidates that the cap on candidates an item cut
    # the copies of flat graphics.
    anchor_radius: int = setting(8, Number(int, 0, 64))
    LEGACY: ClassVar = {"image_calibration": "calibration", "image_radius": "radius"}


@dataclass
class ImageIndex:
    """Hamming indexes over the stored full-frame and centre codes, and the innermost
    codes of the chains at a corner or an edge (id (pk * 64 + position) * INDEXED_AT + k,
    k the chain's place in INDEXED_ANCHORS)."""

    full: HammingIndex
    centre: HammingIndex
    anchored: HammingIndex


class ImageSignal(Signal[ImageCodes, ImageSettings]):
    name = "image"
    settings_type = ImageSettings
    medium = "image"
    kind = "image-reuse"
    listed = True
    exact_parts = ("image",)
    index_parts: ClassVar = {"full": HammingIndex.load, "centre": HammingIndex.load,
                             "anchored": HammingIndex.load}
    # (the alignments of two scale chains are symmetric: a search finds a pair from either
    # picture's side)
    searched_after = True
    resigns = True

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self._caught_up: str | None = None
        self.resign_failures: dict[str, tuple[str, str]] = {}  # item id -> (reason, detail)

    def version(self) -> str:
        return IMAGE_VERSION

    # --- signing stored pictures again ---------------------------------------------------

    def needs_resign(self, session: Any, version: str) -> bool:
        """Stale pictures other than those a re-sign already failed on (file gone or
        changed): a query on a machine without the media would otherwise read every
        missing file again in each process. The next ingest tries those again."""
        return count_other_versions(session, self.name, version, untried=RESIGN_SOURCE) > 0

    def catch_up(self, progress: bool = False) -> bool:
        """Before an ingest or a query: sign again every stored picture whose signature is
        of another version (`resign_all`); checked once per process. True if any was."""
        version = self.version()
        if self._caught_up == version:
            return False
        with self.sessions() as session:
            stale = has_other_version(session, self.name, version)
        if stale:
            self.resign_all(progress=progress)
        self._caught_up = version
        return stale

    def resign_all(self, progress: bool = False) -> int:
        """Sign again, a chunk at a time under the write lock, every item whose picture
        signature is of another version: its files read from where they were ingested,
        checked against their sha256 and decoded as ingest decodes them; then indexed and
        re-paired (its new candidates and the pairs it had, scored by the Platform's
        scorer). An item whose file is gone, changed or no longer decodes keeps its old
        signature (never compared) and is recorded as a failure with its reason
        (`resign_failures`, and the failures table under RESIGN_SOURCE); the rest go on.
        Returns how many items were signed again. `progress`: a bar of the items reached,
        on stderr."""
        version = self.version()
        done, last = 0, 0
        self.resign_failures = {}
        total = None
        if progress:
            with self.sessions() as session:
                total = count_other_versions(session, self.name, version)
        bar = tqdm(total=total, unit="item", desc="sign pictures again (new version)", disable=not progress,
                   leave=False)
        while True:
            with self.sessions.begin() as session:
                take_write_lock(session)
                pks = stale_pks(session, self.name, version, last, RESIGN_CHUNK)
                if not pks:
                    break
                last = pks[-1]
                done += self._resign(session, pks, version)
            bar.update(len(pks))
        bar.close()
        self.finish()
        return done

    def _resign(self, session: Any, pks: list[int], version: str) -> int:
        files: dict[int, list[Any]] = {}
        for row in stored_files(session, pks, "image"):
            files.setdefault(row.item_pk, []).append(row)
        signed: list[tuple[int, ImageCodes]] = []
        failed: list[dict[str, Any]] = []
        for pk in pks:
            rows = files.get(pk, [])
            try:
                if not rows:
                    raise InputError("missing_file", "the store lists no picture for this item")
                pictures = [read_stored_picture(r.path, r.source, r.sha256, self.settings) for r in rows]
            except InputError as exc:
                item_id = rows[0].id if rows else str(pk)
                failed.append({"key": item_id, "item_id": item_id, "reason": exc.reason,
                               "detail": exc.detail})
                self.resign_failures[item_id] = (exc.reason, exc.detail)
                continue
            signed.append((pk, codes_of(pictures)))
        self._record(session, [files[pk][0].id for pk, _ in signed], failed)
        if not signed:
            return 0
        index = self.index(session)
        done = np.fromiter((pk for pk, _ in signed), np.int64, len(signed))
        self.index_remove(index, done)
        replace_signatures(session, self.name, version, ((pk, self.pack(c)) for pk, c in signed))
        values = [c for _, c in signed]
        self.index_add(index, done, values)
        self.indexed_write(session)
        found = self.candidates(index, done, values)
        if self.rescore is not None:
            both = np.concatenate([found, pairs_touching(session, done.tolist())])
            self.rescore(session, candidate_pairs(both[:, 0], both[:, 1]))
        return len(signed)

    @staticmethod
    def _record(session: Any, reached: list[str], failed: list[dict[str, Any]]) -> None:
        """Close the earlier re-sign failures of the items reached; record the new ones."""
        if not reached and not failed:
            return
        again = [f["key"] for f in failed]
        stored_items.resolve_failures(session, RESIGN_SOURCE, reached, utcnow())
        stored_items.drop_open_failures(session, RESIGN_SOURCE, again)
        if failed:
            run = start_run(session, RESIGN_SOURCE)
            stored_items.insert_failures(session, [{"run_pk": run, "source": RESIGN_SOURCE, **f}
                                                   for f in failed])
            finish_run(session, run, {"failed": len(failed)})

    def extract(self, items: Sequence[LoadedItem]) -> list[ImageCodes | None]:
        # Decoded once, when the item was loaded (a bad picture fails its item there).
        return [li.images if li.images is not None and len(li.images) else None for li in items]

    @staticmethod
    def pack(codes: ImageCodes) -> bytes:
        """A picture's codes as rows of eight little-endian uint64: the scale chain, the
        anchored chains, the dHash, and one row of sixteen float32 holding its tone (the
        chroma grid, the contrast, zeros)."""
        n = len(codes)
        anchored = codes.anchored.reshape(n, -1, 8)
        tone = np.zeros((n, 16), "<f4")
        tone[:, :TONE_VALUES - 1] = codes.chroma.reshape(n, -1)
        tone[:, TONE_VALUES - 1] = codes.contrast
        rows = np.concatenate([codes.scales, anchored, codes.dhash[:, None]], axis=1).astype("<u8")
        return np.concatenate([rows, tone.view("<u8")[:, None]], axis=1).tobytes()

    @staticmethod
    def unpack(blob: bytes) -> ImageCodes:
        k = len(SCALES)
        raw = np.frombuffer(blob, "<u8").reshape(-1, k + len(ANCHORS) * (k - 1) + 2, 8)
        tone = np.ascontiguousarray(raw[:, -1]).view("<f4").astype(np.float32)
        raw = raw[:, :-1].astype(np.uint64)
        return ImageCodes(raw[:, :k], raw[:, -1], errors=[None] * len(raw),
                          anchored=raw[:, k:-1].reshape(len(raw), len(ANCHORS), k - 1, 8),
                          chroma=tone[:, :TONE_VALUES - 1].reshape(len(raw), TONE_GRID, TONE_GRID, 2),
                          contrast=tone[:, TONE_VALUES - 1].copy())

    def new_index(self) -> ImageIndex:
        return ImageIndex(HammingIndex(), HammingIndex(), HammingIndex())

    def index_from_parts(self, parts: dict[str, Any]) -> ImageIndex:
        return ImageIndex(parts["full"], parts["centre"], parts["anchored"])

    def parts_of(self, index: ImageIndex) -> dict[str, Any]:
        return {"full": index.full, "centre": index.centre, "anchored": index.anchored}

    def index_add(self, index: ImageIndex, pks: np.ndarray, values: list[ImageCodes]) -> None:
        for pk, codes in zip(pks.tolist(), values):
            ids = entry_ids(pk, MAX_IMAGES, len(codes))
            index.full.add(ids, codes.scales[: len(ids), INDEXED[0], 0])
            index.centre.add(ids, codes.scales[: len(ids), INDEXED[1], 0])
            index.anchored.add(entry_ids(pk, MAX_IMAGES * INDEXED_AT, len(ids) * INDEXED_AT),
                               codes.anchored[: len(ids), INDEXED_ANCHORS, INDEXED_ANCHOR - 1, 0].reshape(-1))

    def index_remove(self, index: ImageIndex, pks: np.ndarray) -> None:
        if not len(index.full) and not len(index.centre) and not len(index.anchored):
            return
        ids = entry_ids(pks, MAX_IMAGES)
        index.full.remove(ids)
        index.centre.remove(ids)
        index.anchored.remove(entry_ids(pks, MAX_IMAGES * INDEXED_AT))

    def search(self, index: ImageIndex, values: list[ImageCodes]) -> tuple[np.ndarray, np.ndarray]:
        """Items with a picture one of whose indexed codes is within the radius of any
        variant of a code of one of each item's pictures, at a scale that shares an
        alignment with it (`image_distance`)."""
        radius = self.config.radius
        rows, found = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        # One search of every item's codes at once per indexed scale (a search a picture
        # paid the flat scan's setup a picture).
        # The anchored chains' scale k is SCALES[k + 1]; an anchored alignment pairs one of
        # a chain's codes with the other's whole (full) or innermost (anchored) code.
        k = len(SCALES)
        whole = [i - 1 for i in range(1, k) if i in ANCHOR_SHIFTS]
        inner = [i - 1 for i in range(1, k) if INDEXED_ANCHOR - i in ANCHOR_SHIFTS]
        for part, near, anchored, per in ((index.full, [i for i in range(k) if abs(i - INDEXED[0]) <= SHIFT], [], 1),
                                          (index.centre, [i for i in range(k) if abs(i - INDEXED[1]) <= SHIFT], [], 1),
                                          (index.full, [], whole, 1),
                                          (index.anchored, [], inner, INDEXED_AT)):
            if not values:
                continue
            chains = np.ix_(INDEXED_ANCHORS, anchored)  # (an empty selection, copying nothing, where none)
            queries = [np.concatenate([codes.scales[:, near].reshape(-1),
                                       codes.anchored[:, chains[0], chains[1]].reshape(-1)])
                       for codes in values]
            owner = np.repeat(np.arange(len(values), dtype=np.int64), [len(q) for q in queries])
            hits = part.search(np.concatenate(queries), self.config.anchor_radius if anchored else radius)
            rows.append(owner[hits.query])
            found.append(hits.ids // (MAX_IMAGES * per))
        return distinct_pairs(np.concatenate(rows), np.concatenate(found))[:2]

    def similarity(self, a: list[ImageCodes], b: list[ImageCodes]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The best pair of the two items' pictures: its distance, and whether their tones
        held it back (`tone_apart`: the reason a pair alike in grey is only weak)."""
        bits, apart = np.empty(len(a)), np.empty(len(a))
        for k, (x, y) in enumerate(zip(a, b)):
            d = image_distance(x, y)
            i, j = np.unravel_index(np.argmin(d), d.shape)
            bits[k] = d[i, j]
            apart[k] = float(tone_apart(x.take([i]), y.take([j]))[0, 0])
        return bits, {"bits": bits, "tone_apart": apart}
