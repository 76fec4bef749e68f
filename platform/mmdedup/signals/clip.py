"""The `clip` signal: CLIP vectors of an item's pictures and video keyframes, and CLIP's
text-to-picture search for queries (`clip_text`).

Vectors go into the float index (ids pk * 64 + k, as the picture index); a pair's raw
similarity is the best cosine over the two items' vectors. A query text goes through
CLIP's text tower and is searched against the same index: the query-only `clip_text`
signal. Off, with one logged message, wherever the encoder's weights cannot be had;
everything else works the same without it. The pictures and keyframes are the ones the
item's loading decoded (`LoadedItem.pictures`, `.video.images`): nothing is decoded twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ..config import Calibration, Flag, Knots, Number, SignalSettings, setting
from ..extract.clip import ClipEncoder, ClipSpec, default_encoder
from ..extract.registry import EncoderUnavailable
from ..index.slots import entry_ids
from ..index.vectors import VectorIndex
from ..input.items import LoadedItem
from ..score.calibration import calibrate
from ..store.signatures import has_any
from .base import Signal
from .image import MAX_IMAGES

log = logging.getLogger("mmdedup")
TEXT_SIGNAL = "clip_text"
_TOLD: set[str] = set()  # why CLIP is off, said once per process however many stores open


@dataclass(frozen=True)
class ClipSettings(SignalSettings):
    # Without calibration on real weights the signal only moves the fused mean (a small
    # weight, not a content signal): it never decides alone.
    weight: float = 0.1
    calibration: Calibration = setting(
        ((0.0, 0.0), (0.85, 0.5), (0.92, 0.7), (0.96, 0.85), (1.0, 1.0)), Knots(-1, 1))
    # On when its weights are on this machine (a checkpoint, or the tag's weights in the
    # model cache); `download` lets the tag download them once.
    download: bool = setting(False, Flag())
    neighbours: int = setting(10, Number(int, lo=1))
    min_cosine: float = setting(0.85, Number(float, -1, 1))
    # Text-to-picture in queries (`clip_text`): a query text through CLIP's text tower,
    # searched among the pictures' and keyframes' vectors (this many nearest, at least
    # this cosine). Text-image cosines run far lower than image-image ones (about
    # 0.2-0.35 for a caption that fits, with ViT-B-32), hence a map of its own.
    # UNCALIBRATED: set by hand without real weights; it stays below the weak tier, so a
    # caption match orders query results and never claims a duplicate. It weighs
    # `text_weight` in a query's fused score (it never scores pairs).
    text_neighbours: int = setting(50, Number(int, lo=1))
    text_min_cosine: float = setting(0.15, Number(float, -1, 1))
    text_weight: float = setting(0.1, Number(float, lo=0))
    text_calibration: Calibration = setting(
        ((0.0, 0.0), (0.15, 0.05), (0.25, 0.3), (0.35, 0.6), (1.0, 0.6)), Knots(-1, 1))
    LEGACY: ClassVar = {"clip_download": "download", "clip_neighbours": "neighbours",
                        "clip_min_cosine": "min_cosine", "clip_calibration": "calibration",
                        "clip_text_neighbours": "text_neighbours",
                        "clip_text_min_cosine": "text_min_cosine",
                        "clip_text_weight": "text_weight",
                        "clip_text_calibration": "text_calibration"}


class ClipSignal(Signal[np.ndarray, ClipSettings]):
    name = "clip"
    settings_type = ClipSettings
    index_parts: ClassVar = {"vectors": VectorIndex.load}

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.off_reason: str | None = None
        self._encoder: ClipEncoder | None = None

    @property
    def encoder(self) -> ClipEncoder | None:
        """The loaded encoder, or None (the reason logged once) when it cannot be had."""
        if self.off_reason is not None:
            return None
        if self._encoder is None:
            encoder = default_encoder(allow_download=self.config.download)
            try:
                encoder.load()
            except EncoderUnavailable as exc:
                self.off_reason = str(exc)
                if self.off_reason not in _TOLD:
                    _TOLD.add(self.off_reason)
                    log.warning("%s", exc)
                return None
            self._encoder = encoder
        return self._encoder

    def load_models(self) -> str | None:
        return None if self.encoder is not None else self.off_reason

    def wants_pixels(self) -> bool:
        """Asked at an ingest's first chunk with pictures: loads the model where its
        weights are here; where they surely are not, says so without importing torch."""
        return self.encoder is not None

    def version(self) -> str | None:
        return self._encoder.version if self._encoder is not None else None

    def on_chunk(self, session, changed):  # noqa: ANN001, ANN201
        # The model loads only once a chunk has pictures or a video.
        if any(li.pictures or li.video is not None or self.name in li.extracted for _, li in changed) \
                and self.encoder is not None:
            return super().on_chunk(session, changed)
        return None

    def extract(self, items: Sequence[LoadedItem]) -> list[np.ndarray | None]:
        return clip_vectors(self.encoder, items)

    def worker_extract(self) -> ClipVectors | None:
        encoder = self.encoder
        return ClipVectors(encoder.spec, encoder.allow_download) if encoder is not None else None

    def pack(self, vectors: np.ndarray) -> bytes:
        return vectors.astype("<f4").tobytes()

    def unpack(self, blob: bytes) -> np.ndarray:
        return np.frombuffer(blob, "<f4").astype(np.float32).reshape(-1, int(self._encoder.dim))

    def new_index(self) -> VectorIndex:
        return VectorIndex(int(self._encoder.dim))

    def index_add(self, index: VectorIndex, pks: np.ndarray, values: list[np.ndarray]) -> None:
        for pk, vectors in zip(pks.tolist(), values):
            ids = entry_ids(pk, MAX_IMAGES, len(vectors))
            index.add(ids, vectors[: len(ids)])

    def index_remove(self, index: VectorIndex, pks: np.ndarray) -> None:
        if len(index):
            index.remove(entry_ids(pks, MAX_IMAGES))

    def search(self, index: VectorIndex, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.concatenate(values)
        found = index.search(vectors, self.config.neighbours, self.config.min_cosine)
        owner = np.repeat(np.arange(len(values), dtype=np.int64), [len(v) for v in values])
        return owner[found.query], found.ids // MAX_IMAGES

    def similarity(self, a: list[np.ndarray], b: list[np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cosine = np.array([float((x @ y.T).max()) for x, y in zip(a, b)], np.float64)
        return cosine, {"cosine": cosine}

    # --- text-to-picture queries ---------------------------------------------------------

    def query_only_weights(self) -> dict[str, float]:
        return {TEXT_SIGNAL: self.config.text_weight}

    def queries(self, probe: LoadedItem) -> dict[str, dict[int, tuple[float, dict[str, float]]]]:
        out = {}
        if probe.pictures or probe.video is not None:
            out[self.name] = self.query(probe) if self.encoder is not None else {}
        if probe.item.text:
            out[TEXT_SIGNAL] = self.query_text(probe.item.text)
        return out

    def query_text(self, text: str) -> dict[int, tuple[float, dict[str, float]]]:
        """{item pk: (clip_text score, {"clip_text_cosine"})}: the items whose pictures or
        keyframes are nearest to a query text, through CLIP's text tower (the model's own
        tokenizer, the text cut at its context length); an item's cosine is its best
        picture's. Empty, without loading the model, while no item has CLIP vectors."""
        with self.sessions() as session:
            if not has_any(session, self.name) or (encoder := self.encoder) is None:
                return {}
            index = self.index(session)
        found = index.search(encoder.encode_texts([text]), self.config.text_neighbours,
                             self.config.text_min_cosine)
        best: dict[int, float] = {}
        for pk, cosine in zip((found.ids // MAX_IMAGES).tolist(), found.score.tolist()):
            best[pk] = max(cosine, best.get(pk, -1.0))
        return {pk: (float(calibrate(c, self.config.text_calibration)), {"clip_text_cosine": float(c)})
                for pk, c in best.items()}


def clip_vectors(encoder: ClipEncoder | None, items: Sequence[LoadedItem]) -> list[np.ndarray | None]:
    """CLIP vectors of each item's pictures, then of its video's keyframes (spread over
    the video, MAX_IMAGES in all): one set per item, so the signal is the best match
    whichever medium the picture came in."""
    out: list[np.ndarray | None] = []
    for li in items:
        images = list(li.pictures or [])
        keyframes = li.video.images if li.video is not None and li.video.images else []
        room = MAX_IMAGES - len(images)
        if keyframes and room > 0:
            keep = np.unique(np.linspace(0, len(keyframes) - 1, min(room, len(keyframes))).astype(int))
            images += [keyframes[i] for i in keep]
        out.append(encoder.encode_images(images) if images and encoder is not None else None)
    return out


@dataclass(frozen=True)
class ClipVectors:
    """`ClipSignal.extract` where the items are loaded: the encoder of the same registry
    entry, loaded once a process (on the GPU Ray gave the process, where it gave one)."""

    spec: ClipSpec
    allow_download: bool

    def __call__(self, items: Sequence[LoadedItem]) -> list[np.ndarray | None]:
        if (encoder := _ENCODERS.get(self)) is None:
            encoder = _ENCODERS[self] = ClipEncoder(self.spec, allow_download=self.allow_download)
        return clip_vectors(encoder, items)


_ENCODERS: dict[ClipVectors, ClipEncoder] = {}  # a worker's loaded encoders
