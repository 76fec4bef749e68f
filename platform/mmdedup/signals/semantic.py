"""The `semantic` signal: sentence embeddings of items' texts, proposing paraphrase
candidates that the sketches miss.

`enabled` in its settings: "auto" (the default) turns it on where a GPU is present, since
on a CPU the encoder runs at tens to a few hundred texts a second, far below the rest of
the text pipeline; "on" forces it, "off" never loads the model. Where the model cannot be
loaded the signal is off with one logged message.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ..config import Calibration, Choice, Knots, Number, SignalSettings, setting
from ..extract.embed import SentenceEncoder
from ..extract.registry import EncoderUnavailable
from ..index.vectors import VectorIndex
from ..input.items import LoadedItem
from .base import Signal

log = logging.getLogger("mmdedup")
_ENCODER: SentenceEncoder | None = None  # one model per process, loaded on first use


@dataclass(frozen=True)
class SemanticSettings(SignalSettings):
    weight: float = 0.2
    # Cosine -> score; only near-paraphrases (cosine >= 0.88) reach the weak tier. Set by
    # hand: fitted on templated paraphrases and one-word-changed hard negatives
    # (scripts/calibrate_signals.py), MiniLM alone would never reach the weak tier, which
    # loses recall, so this map stays until it is fitted on real labelled pairs.
    calibration: Calibration = setting(
        ((0.0, 0.0), (0.8, 0.4), (0.88, 0.7), (0.93, 0.8), (0.97, 0.9), (1.0, 1.0)), Knots(-1, 1))
    enabled: str = setting("auto", Choice(("auto", "on", "off")))  # "auto": where a GPU is
    neighbours: int = setting(10, Number(int, lo=1))
    min_cosine: float = setting(0.85, Number(float, -1, 1))
    LEGACY: ClassVar = {"semantic": "enabled", "semantic_neighbours": "neighbours",
                        "semantic_min_cosine": "min_cosine", "semantic_calibration": "calibration"}


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


class SemanticSignal(Signal[np.ndarray, SemanticSettings]):
    name = "semantic"
    settings_type = SemanticSettings
    medium = "text"
    kind = "paraphrase"
    index_parts: ClassVar = {"vectors": VectorIndex.load}

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self._off_reason: str | None = None
        self._decided = False  # "auto" looks for a GPU through torch: not on every open

    @property
    def off_reason(self) -> str | None:
        if not self._decided:
            self._decided = True
            if not wanted(self.config.enabled):
                self._off_reason = f"semantic = {self.config.enabled!r}"
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

    def load_models(self) -> str | None:
        return None if self.encoder is not None else self.off_reason

    def version(self) -> str | None:
        """Off until the encoder loaded (scoring pairs never loads it)."""
        if self.off_reason is not None or _ENCODER is None:
            return None
        return _ENCODER.version

    def on_chunk(self, session, changed):  # noqa: ANN001, ANN201
        if any(li.signal_text.strip() for _, li in changed) and self.encoder is not None:
            return super().on_chunk(session, changed)
        return None

    def extract(self, items: Sequence[LoadedItem]) -> list[np.ndarray | None]:
        rows = [i for i, li in enumerate(items) if li.signal_text.strip()]
        out: list[np.ndarray | None] = [None] * len(items)
        if rows and (encoder := self.encoder) is not None:
            vectors = encoder.encode([items[i].signal_text for i in rows])
            for k, i in enumerate(rows):
                out[i] = vectors[k]
        return out

    def pack(self, vector: np.ndarray) -> bytes:
        return vector.astype("<f4").tobytes()

    def unpack(self, blob: bytes) -> np.ndarray:
        return np.frombuffer(blob, "<f4")

    def new_index(self) -> VectorIndex:
        return VectorIndex(_ENCODER.dim)

    def index_add(self, index: VectorIndex, pks: np.ndarray, values: list[np.ndarray]) -> None:
        index.add(pks, np.stack(values))

    def index_remove(self, index: VectorIndex, pks: np.ndarray) -> None:
        index.remove(pks)

    def search(self, index: VectorIndex, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        found = index.search(np.stack(values), self.config.neighbours, self.config.min_cosine)
        return found.query, found.ids

    def similarity(self, a: list[np.ndarray], b: list[np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cosine = np.array([float(x @ y) for x, y in zip(a, b)], np.float64)
        return cosine, {"cosine": cosine}
