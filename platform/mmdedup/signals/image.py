"""The `image` signal: perceptual hashes of an item's pictures.

An item's signature holds, for each of its pictures, the pHash, dHash and centre-region
pHash of all eight dihedral variants (192 bytes a picture), so a pair can be scored
mirrored or rotated whichever side is the query. The Hamming indexes hold only the
as-given codes (full frame and centre), one entry per picture with id pk * 64 + position;
queries search with all eight variants, so a flipped copy is found from either side. A
pair's raw similarity is the best Hamming distance over the two items' pictures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from ..config import Calibration, Knots, Number, SignalSettings, setting
from ..extract.image import CENTRE_PENALTY, IMAGE_VERSION, ImageCodes, image_distance
from ..index.hamming import HammingIndex
from ..index.slots import entry_ids
from ..input.items import LoadedItem
from .base import Signal

MAX_IMAGES = 64  # pictures per item that get an index id (pk * 64 + position)


@dataclass(frozen=True)
class ImageSettings(SignalSettings):
    weight: float = 0.3
    # pHash distance in bits -> score. Set by hand; the fit agrees on weak and medium (12
    # bits is medium, 14 below the tiers: distances are even, each pHash sets the 32 bits
    # above its median) and would make 10 bits strong, losing precision there, so it stays.
    calibration: Calibration = setting((
        (0.0, 1.0), (4.0, 0.95), (8.0, 0.9), (12.0, 0.8), (14.0, 0.6), (24.0, 0.2), (32.0, 0.0)),
        Knots(0, 64))
    radius: int = setting(12, Number(int, 0, 64))  # candidates within this many bits
    LEGACY: ClassVar = {"image_calibration": "calibration", "image_radius": "radius"}


@dataclass
class ImageIndex:
    """Hamming indexes over the stored full-frame and centre codes."""

    full: HammingIndex
    centre: HammingIndex


class ImageSignal(Signal[ImageCodes, ImageSettings]):
    name = "image"
    settings_type = ImageSettings
    medium = "image"
    kind = "image-reuse"
    listed = True
    exact_parts = ("image",)
    index_parts: ClassVar = {"full": HammingIndex.load, "centre": HammingIndex.load}

    def version(self) -> str:
        return IMAGE_VERSION

    def extract(self, items: Sequence[LoadedItem]) -> list[ImageCodes | None]:
        # Decoded once, when the item was loaded (a bad picture fails its item there).
        return [li.images if li.images is not None and len(li.images) else None for li in items]

    @staticmethod
    def pack(codes: ImageCodes) -> bytes:
        return np.stack([codes.phash, codes.dhash, codes.centre], axis=1).astype("<u8").tobytes()

    @staticmethod
    def unpack(blob: bytes) -> ImageCodes:
        raw = np.frombuffer(blob, "<u8").reshape(-1, 3, 8).astype(np.uint64)
        return ImageCodes(raw[:, 0], raw[:, 1], raw[:, 2], errors=[None] * len(raw))

    def new_index(self) -> ImageIndex:
        return ImageIndex(HammingIndex(), HammingIndex())

    def index_from_parts(self, parts: dict[str, Any]) -> ImageIndex:
        return ImageIndex(parts["full"], parts["centre"])

    def parts_of(self, index: ImageIndex) -> dict[str, Any]:
        return {"full": index.full, "centre": index.centre}

    def index_add(self, index: ImageIndex, pks: np.ndarray, values: list[ImageCodes]) -> None:
        for pk, codes in zip(pks.tolist(), values):
            ids = entry_ids(pk, MAX_IMAGES, len(codes))
            index.full.add(ids, codes.phash[: len(ids), 0])
            index.centre.add(ids, codes.centre[: len(ids), 0])

    def index_remove(self, index: ImageIndex, pks: np.ndarray) -> None:
        ids = entry_ids(pks, MAX_IMAGES)
        index.full.remove(ids)
        index.centre.remove(ids)

    def search(self, index: ImageIndex, values: list[ImageCodes]) -> tuple[np.ndarray, np.ndarray]:
        """Items whose pictures are within the radius of any variant of each item's."""
        radius = self.config.radius
        rows, found = [], []
        for row, codes in enumerate(values):
            hits = []
            # The four pairings `image_distance` scores; centre-centre carries its penalty.
            for queries, part, r in ((codes.phash, index.full, radius), (codes.phash, index.centre, radius),
                                     (codes.centre, index.full, radius),
                                     (codes.centre, index.centre, radius - CENTRE_PENALTY)):
                if r >= 0:
                    hits.append(part.search(queries.reshape(-1), r).ids)
            owners = np.unique(np.concatenate(hits) // MAX_IMAGES) if hits else np.zeros(0, np.int64)
            rows.append(np.full(len(owners), row, np.int64))
            found.append(owners)
        return np.concatenate(rows), np.concatenate(found).astype(np.int64)

    def similarity(self, a: list[ImageCodes], b: list[ImageCodes]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        bits = np.array([int(image_distance(x, y).min()) for x, y in zip(a, b)], np.int64)
        return bits, {"bits": bits}
