"""The semantic text signal: sentence embeddings of items' texts, stored and indexed in the
float index, proposing paraphrase candidates that the sketches miss, and the `semantic`
signal for pairs.

`semantic` in config: "auto" (the default) turns it on where a GPU is present, since on a
CPU the encoder runs at tens to a few hundred texts a second, far below the rest of the
text pipeline; "on" forces it, "off" never loads the model. Where the model cannot be
loaded the signal is off with one logged message.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from .config import Settings
from .extract.embed import SentenceEncoder
from .extract.registry import EncoderUnavailable
from .index.cache import load_cached, save_cached, signature_stamp
from .index.vectors import VectorIndex
from .items import LoadedItem
from .score.pairs import SignalValues
from .store.db import load_signatures, replace_signatures

KIND = "semantic"
log = logging.getLogger("mmdedup")
_ENCODER: SentenceEncoder | None = None  # one model per process, loaded on first use


def wanted(setting: str) -> bool:
    if setting == "on":
        return True
    if setting == "off":
        return False
    if not gpu_driver_present():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def gpu_driver_present() -> bool:
    """Whether torch could find a GPU at all. Importing torch to ask costs seconds (4 s on
    a small VM, more than all else an ingest of 20,000 texts does at start), so on Linux
    the kernel driver's files are looked for first: NVIDIA's, or AMD's (ROCm) /dev/kfd.
    Elsewhere torch is asked."""
    if not sys.platform.startswith("linux"):
        return True
    return (os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/kfd")
            or bool(glob.glob("/dev/nvidia[0-9]*")))


class SemanticStage:
    def __init__(self, home: Path, sessions, settings: Settings) -> None:  # noqa: ANN001
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self._off_reason: str | None = None
        self._decided = False  # "auto" looks for a GPU through torch: not on every open
        self._index: VectorIndex | None = None

    @property
    def off_reason(self) -> str | None:
        if not self._decided:
            self._decided = True
            if not wanted(self.settings.semantic):
                self._off_reason = f"semantic = {self.settings.semantic!r}"
        return self._off_reason

    @property
    def encoder(self) -> SentenceEncoder | None:
        global _ENCODER
        if self.off_reason is not None:
            return None
        if _ENCODER is None:
            _ENCODER = SentenceEncoder()
        try:
            _ENCODER.dim  # noqa: B018 - loads the model
        except EncoderUnavailable as exc:
            self._off_reason = str(exc)
            log.warning("semantic signal off: %s", exc)
            return None
        return _ENCODER

    def index(self, session: Session, encoder: SentenceEncoder) -> VectorIndex:
        if self._index is None:
            saved = load_cached(self.folder, "semantic", signature_stamp(session, KIND, encoder.version),
                                {"vectors": VectorIndex.load})
            if saved is not None:
                self._index = saved["vectors"]
            else:
                self._index = VectorIndex(encoder.dim)
                stored = load_signatures(session, KIND, encoder.version)
                if stored:
                    pks = np.fromiter(stored, np.int64, len(stored))
                    self._index.add(pks, np.stack([np.frombuffer(v, "<f4") for v in stored.values()]))
        return self._index

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        texts = [(pk, li.signal_text) for pk, li in changed if li.signal_text.strip()]
        if not texts or (encoder := self.encoder) is None:
            return None
        index = self.index(session, encoder)
        pks = np.fromiter((pk for pk, _ in texts), np.int64, len(texts))
        index.remove(np.fromiter((pk for pk, _ in changed), np.int64, len(changed)))
        vectors = encoder.encode([t for _, t in texts])
        replace_signatures(session, KIND, encoder.version,
                           ((pk, vectors[i].astype("<f4").tobytes()) for i, pk in enumerate(pks)), fresh=True)
        index.add(pks, vectors)
        found = index.search(vectors, self.settings.semantic_neighbours, self.settings.semantic_min_cosine)
        return np.stack([pks[found.query], found.ids], axis=1)

    def after_chunk(self) -> None:
        pass

    def finish(self) -> None:
        if self._index is not None and _ENCODER is not None and self.off_reason is None:
            with self.sessions() as session:
                save_cached(self.folder, "semantic", signature_stamp(session, KIND, _ENCODER.version),
                            {"vectors": self._index})

    def signal(self):  # noqa: ANN201
        """The `semantic` signal: cosine of the two texts' embeddings, calibrated; absent
        (NaN) while the encoder is off."""

        def signal(session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
            values = np.full(len(a), np.nan)
            if self.off_reason is not None or _ENCODER is None:
                return SignalValues(values)
            stored = load_signatures(session, KIND, _ENCODER.version,
                                     np.unique(np.concatenate([a, b])).tolist())
            vec = {pk: np.frombuffer(v, "<f4") for pk, v in stored.items()}
            cosine = np.zeros(len(a))
            have = np.array([x in vec and y in vec for x, y in zip(a.tolist(), b.tolist())], bool)
            if have.any():
                cosine[have] = [float(vec[x] @ vec[y]) for x, y in zip(a[have].tolist(), b[have].tolist())]
                xs, ys = zip(*self.settings.semantic_calibration)
                values[have] = np.interp(cosine[have], xs, ys)
            return SignalValues(values, {"cosine": cosine})

        return signal
