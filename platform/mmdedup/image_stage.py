"""Items with images at ingest: codes stored and indexed, candidates proposed, and the
`image` signal for pairs.

An item's signature (kind "image") holds, for each of its images, the pHash, dHash and
centre-region pHash of all eight dihedral variants (192 bytes an image), so a pair can be
scored mirrored or rotated whichever side is the query. The Hamming indexes hold only the
as-given codes (full frame and centre), one entry per image with id pk * 64 + position;
queries search with all eight variants, so a flipped copy is found from either side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from .config import Settings
from .extract.image import CENTRE_PENALTY, IMAGE_VERSION, ImageCodes, calibrate, image_distance
from .index.hamming import HammingIndex
from .index.slots import entry_ids
from .items import LoadedItem
from .score.pairs import SignalValues
from .index.cache import load_cached, save_cached, signature_stamp
from .store.db import load_signatures, replace_signatures

KIND = "image"
MAX_IMAGES = 64  # images per item that get an index id (pk * 64 + position)


def pack(codes: ImageCodes) -> bytes:
    return np.stack([codes.phash, codes.dhash, codes.centre], axis=1).astype("<u8").tobytes()


def unpack(blob: bytes) -> ImageCodes:
    raw = np.frombuffer(blob, "<u8").reshape(-1, 3, 8).astype(np.uint64)
    return ImageCodes(raw[:, 0], raw[:, 1], raw[:, 2], errors=[None] * len(raw))


class ImageIndex:
    """Hamming indexes over the stored full-frame and centre codes; a cache like the text one."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.full = HammingIndex()
        self.centre = HammingIndex()

    @classmethod
    def open(cls, folder: Path, session: Session) -> ImageIndex:
        index = cls(folder)
        saved = load_cached(folder, "image", signature_stamp(session, KIND, IMAGE_VERSION),
                            {"full": HammingIndex.load, "centre": HammingIndex.load})
        if saved is not None:
            index.full, index.centre = saved["full"], saved["centre"]
            return index
        for pk, value in load_signatures(session, KIND, IMAGE_VERSION).items():
            index.add(pk, unpack(value))
        return index

    def add(self, pk: int, codes: ImageCodes) -> None:
        ids = entry_ids(pk, MAX_IMAGES, len(codes))
        self.full.add(ids, codes.phash[: len(ids), 0])
        self.centre.add(ids, codes.centre[: len(ids), 0])

    def remove(self, pks: list[int]) -> None:
        ids = entry_ids(pks, MAX_IMAGES)
        self.full.remove(ids)
        self.centre.remove(ids)

    def candidates(self, codes: ImageCodes, radius: int) -> np.ndarray:
        """Item pks whose images are within `radius` of any variant of these images."""
        hits = []
        # The four pairings `image_distance` scores; centre-centre carries its penalty.
        for queries, index, r in ((codes.phash, self.full, radius), (codes.phash, self.centre, radius),
                                  (codes.centre, self.full, radius),
                                  (codes.centre, self.centre, radius - CENTRE_PENALTY)):
            if r >= 0:
                hits.append(index.search(queries.reshape(-1), r).ids)
        ids = np.concatenate(hits) if hits else np.zeros(0, np.int64)
        return np.unique(ids // MAX_IMAGES)

    def save(self, session: Session) -> None:
        save_cached(self.folder, "image", signature_stamp(session, KIND, IMAGE_VERSION),
                    {"full": self.full, "centre": self.centre})


class ImageStage:
    def __init__(self, home: Path, sessions, settings: Settings) -> None:  # noqa: ANN001
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self._index: ImageIndex | None = None

    def index(self, session: Session) -> ImageIndex:
        if self._index is None:
            self._index = ImageIndex.open(self.folder, session)
        return self._index

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        with_images = [(pk, li.images) for pk, li in changed if li.images is not None and len(li.images)]
        index = self.index(session)
        index.remove([pk for pk, _ in changed])
        if not with_images:
            return None
        replace_signatures(session, KIND, IMAGE_VERSION, ((pk, pack(codes)) for pk, codes in with_images), fresh=True)
        pairs = []
        for pk, codes in with_images:
            index.add(pk, codes)
        for pk, codes in with_images:
            others = index.candidates(codes, self.settings.image_radius)
            pairs.append(np.stack([np.full(len(others), pk), others], axis=1))
        return np.concatenate(pairs)

    def after_chunk(self) -> None:
        pass

    def finish(self) -> None:
        if self._index is not None:
            with self.sessions() as session:
                self._index.save(session)

    def query(self, codes: ImageCodes) -> dict[int, float]:
        """{item pk: image score} of stored items near these query images."""
        with self.sessions() as session:
            pks = self.index(session).candidates(codes, self.settings.image_radius)
            stored = load_codes(session, pks.tolist())
        out = {}
        for pk, theirs in stored.items():
            out[pk] = float(calibrate(image_distance(codes, theirs).min(), self.settings.image_calibration))
        return out


def load_codes(session: Session, pks: list[int]) -> dict[int, ImageCodes]:
    return {pk: unpack(v) for pk, v in load_signatures(session, KIND, IMAGE_VERSION, pks).items()}


def image_signal(settings: Settings):  # noqa: ANN201
    """The `image` signal of pairs: the best match over the two items' images."""

    def signal(session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
        codes = load_codes(session, np.unique(np.concatenate([a, b])).tolist())
        values = np.full(len(a), np.nan)
        bits = np.full(len(a), 64, np.int64)
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            if x in codes and y in codes:
                bits[i] = int(image_distance(codes[x], codes[y]).min())
                values[i] = float(calibrate(bits[i], settings.image_calibration))
        return SignalValues(values, {"bits": bits})

    return signal
