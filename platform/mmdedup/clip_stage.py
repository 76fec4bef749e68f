"""CLIP vectors of items' pictures and video keyframes: stored, indexed in the float
index, proposing candidates, and the `clip` signal for pairs; and text-to-image queries,
a query text through CLIP's text tower searched against the same index (`clip_text`).
Off, with one logged message, wherever the encoder's weights cannot be had; everything
else works the same without it."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from .config import Settings
from .extract.clip import ClipEncoder, default_encoder
from .extract.registry import EncoderUnavailable
from .extract.video import VideoError, video_frames
from .image_stage import MAX_IMAGES
from .index.slots import entry_ids
from .index.vectors import VectorIndex
from .items import LoadedItem
from .score.pairs import SignalValues
from .index.cache import load_cached, save_cached, signature_stamp
from .store.db import load_signatures, replace_signatures
from .store.schema import Signature

KIND = "clip"
log = logging.getLogger("mmdedup")


class ClipStage:
    def __init__(self, home: Path, sessions, settings: Settings) -> None:  # noqa: ANN001
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self.off_reason: str | None = None
        self._encoder: ClipEncoder | None = None
        self._index: VectorIndex | None = None

    @property
    def encoder(self) -> ClipEncoder | None:
        """The loaded encoder, or None (the reason logged once) when it cannot be had."""
        if self.off_reason is not None:
            return None
        if self._encoder is None:
            encoder = default_encoder(allow_download=self.settings.clip_download)
            try:
                encoder.load()
            except EncoderUnavailable as exc:
                self.off_reason = str(exc)
                log.warning("%s", exc)
                return None
            self._encoder = encoder
        return self._encoder

    def index(self, session: Session, encoder: ClipEncoder) -> VectorIndex:
        if self._index is None:
            saved = load_cached(self.folder, "clip", signature_stamp(session, KIND, encoder.version),
                                {"vectors": VectorIndex.load})
            if saved is not None:
                self._index = saved["vectors"]
            else:
                self._index = VectorIndex(int(encoder.dim))
                for pk, vectors in load_vectors(session, None, encoder.version, int(encoder.dim)).items():
                    self._add(pk, vectors)
        return self._index

    def _add(self, pk: int, vectors: np.ndarray) -> None:
        ids = entry_ids(pk, MAX_IMAGES, len(vectors))
        self._index.add(ids, vectors[: len(ids)])

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        items = [(pk, li) for pk, li in changed
                 if li.video is not None or any(a.role == "image" for a in li.assets)]
        if not items or (encoder := self.encoder) is None:
            return None
        index = self.index(session, encoder)
        index.remove(entry_ids([pk for pk, _ in changed], MAX_IMAGES))
        per_item = [(pk, self._vectors(encoder, li)) for pk, li in items]
        per_item = [(pk, v) for pk, v in per_item if len(v)]
        if not per_item:
            return None
        pks = [pk for pk, _ in per_item]
        replace_signatures(session, KIND, encoder.version,
                           ((pk, v.astype("<f4").tobytes()) for pk, v in per_item), fresh=True)
        for pk, v in per_item:
            self._add(pk, v)
        vectors = np.concatenate([v for _, v in per_item])
        found = index.search(vectors, self.settings.clip_neighbours, self.settings.clip_min_cosine)
        owner = np.repeat(np.asarray(pks, np.int64), [len(v) for _, v in per_item])
        return np.stack([owner[found.query], found.ids // MAX_IMAGES], axis=1)

    def _vectors(self, encoder: ClipEncoder, li: LoadedItem) -> np.ndarray:
        """CLIP vectors of an item's pictures, then of its video's keyframes (spread over
        the video, MAX_IMAGES in all): one set per item, so the signal is the best match
        whichever medium the picture came in."""
        blobs = [a.data for a in li.assets if a.role == "image"]
        vectors, errors = encoder.encode_image_bytes(blobs, self.settings.max_image_pixels)
        vectors = vectors[[e is None for e in errors]]
        clip = next((a for a in li.assets if a.role == "video"), None)
        room = MAX_IMAGES - len(vectors)
        if clip is not None and room > 0:
            try:
                frames = video_frames(clip.data, max_seconds=self.settings.max_video_seconds,
                                      max_bytes=self.settings.max_file_bytes, keep_images=True)
            except VideoError:
                frames = None
            if frames is not None and frames.images:
                keep = np.unique(np.linspace(0, len(frames.images) - 1, min(room, len(frames.images))).astype(int))
                vectors = np.concatenate([vectors, encoder.encode_images([frames.images[i] for i in keep])])
        return vectors

    def after_chunk(self) -> None:
        pass

    def finish(self) -> None:
        if self._index is not None and self._encoder is not None:
            with self.sessions() as session:
                save_cached(self.folder, "clip", signature_stamp(session, KIND, self._encoder.version),
                            {"vectors": self._index})

    def calibrate(self, cosine: np.ndarray | float) -> np.ndarray:
        xs, ys = zip(*self.settings.clip_calibration)
        return np.interp(cosine, xs, ys)

    def calibrate_text(self, cosine: np.ndarray | float) -> np.ndarray:
        """Text-image cosine -> score: its own map (`clip_text_calibration`), as text-image
        cosines run far lower than image-image ones."""
        xs, ys = zip(*self.settings.clip_text_calibration)
        return np.interp(cosine, xs, ys)

    def query_text(self, text: str) -> dict[int, tuple[float, float]]:
        """{item pk: (clip_text score, cosine)}: the items whose pictures or keyframes are
        nearest to a query text, through CLIP's text tower (the model's own tokenizer,
        the text cut at its context length) searched in the CLIP index; an item's cosine
        is its best picture's. Empty, without loading the model, while no item has CLIP
        vectors; empty, with the signal's one message, when the weights cannot be had."""
        with self.sessions() as session:
            stored = session.scalar(select(Signature.item_pk).where(Signature.kind == KIND).limit(1))
            if stored is None or (encoder := self.encoder) is None:
                return {}
            index = self.index(session, encoder)
        query = encoder.encode_texts([text])
        found = index.search(query, self.settings.clip_text_neighbours, self.settings.clip_text_min_cosine)
        best: dict[int, float] = {}
        for pk, cosine in zip((found.ids // MAX_IMAGES).tolist(), found.score.tolist()):
            best[pk] = max(cosine, best.get(pk, -1.0))
        return {pk: (float(self.calibrate_text(c)), float(c)) for pk, c in best.items()}

    def signal(self):  # noqa: ANN201
        """The `clip` signal: the best cosine over the two items' pictures; absent (NaN)
        while the encoder is off."""

        def signal(session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
            values = np.full(len(a), np.nan)
            if self._encoder is None:
                return SignalValues(values)
            vectors = load_vectors(session, np.unique(np.concatenate([a, b])).tolist(),
                                   self._encoder.version, int(self._encoder.dim))
            cosine = np.zeros(len(a))
            for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
                if x in vectors and y in vectors:
                    cosine[i] = float((vectors[x] @ vectors[y].T).max())
                    values[i] = float(self.calibrate(cosine[i]))
            return SignalValues(values, {"cosine": cosine})

        return signal


def load_vectors(session: Session, pks: list[int] | None, version: str, dim: int) -> dict[int, np.ndarray]:
    """{item pk: (vectors, dim) float32} of the given encoder version (all items if pks is None)."""
    return {pk: np.frombuffer(v, "<f4").astype(np.float32).reshape(-1, dim)
            for pk, v in load_signatures(session, KIND, version, pks).items()}
