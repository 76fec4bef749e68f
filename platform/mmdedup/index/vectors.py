"""FAISS float index for embeddings (CLIP image vectors, sentence embeddings).

Vectors are L2-normalised, so inner product is cosine similarity. Up to `flat_below`
vectors a flat (exact) index is used; past it an HNSW graph, whose search cost grows
with log n rather than n, which is what keeps online checks fast on a large store. Like
the other indexes it is a cache: rebuildable from the store's stored vectors, saved next
to it, ids kept in our own Slots (FAISS's HNSW cannot remove), deletions by tombstone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .runs import load_array, new_token, save_array
from .slots import Slots
from .threads import threads_for

if TYPE_CHECKING:
    import faiss

FORMAT = "mmdedup.vectors/2"


class Neighbours(NamedTuple):
    """Flat result: row k says query ``query[k]`` has neighbour ``ids[k]`` at cosine ``score[k]``."""

    query: np.ndarray
    ids: np.ndarray
    score: np.ndarray


class VectorIndex:
    def __init__(self, dim: int, *, flat_below: int = 50_000, hnsw_m: int = 32,
                 ef_search: int = 96, compact_at: float = 0.25) -> None:
        self.dim = dim
        self.flat_below = flat_below
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.compact_at = compact_at
        self._slots = Slots()
        self._vectors = np.empty((0, dim), np.float32)
        import faiss  # loaded with the first vector index, not with every command

        self._index: faiss.Index = faiss.IndexFlatIP(dim)

    def __len__(self) -> int:
        return len(self._slots)

    def ids(self) -> np.ndarray:
        return self._slots.live_ids()

    @property
    def kind(self) -> str:
        import faiss

        return "hnsw" if isinstance(self._index, faiss.IndexHNSWFlat) else "flat"

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        vectors = self._check(vectors)
        ids = np.asarray(ids, np.int64).ravel()
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids but {len(vectors)} vectors")
        if len(ids) == 0:
            return
        self._slots.append(ids)
        self._vectors = np.concatenate([self._vectors, vectors])
        if self.kind == "flat" and len(self._vectors) >= self.flat_below:
            self._rebuild()
        else:
            self._index.add(vectors)

    def remove(self, ids: np.ndarray) -> int:
        n = self._slots.kill(self._slots.find(ids))
        if self._slots.dead_fraction > self.compact_at:
            keep = self._slots.compact()
            self._vectors = self._vectors[keep]
            self._rebuild()
        return n

    def search(self, vectors: np.ndarray, k: int, min_score: float = -1.0) -> Neighbours:
        """The k nearest live entries of each query with cosine >= min_score."""
        vectors = self._check(vectors)
        empty = Neighbours(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))
        if len(vectors) == 0 or len(self._slots) == 0:
            return empty
        # Ask for more than k so tombstoned entries do not eat into the k answers.
        want = min(len(self._slots.ids), k + min(self._slots.n_dead, 3 * k))
        if self.kind == "hnsw":
            self._index.hnsw.efSearch = max(self.ef_search, want)
        with threads_for(len(vectors)):
            scores, pos = self._index.search(vectors, want)
        query = np.repeat(np.arange(len(vectors), dtype=np.int64), want)
        pos, scores = pos.ravel(), scores.ravel()
        ok = pos >= 0
        ok[ok] = self._slots.alive[pos[ok]]
        ok &= scores >= min_score
        query, pos, scores = query[ok], pos[ok], scores[ok]
        # keep the first k per query (FAISS returns them best first)
        rank = np.arange(len(query)) - np.searchsorted(query, query, side="left")
        keep = rank < k
        return Neighbours(query[keep], self._slots.ids[pos[keep]], scores[keep].astype(np.float32))

    def save(self, folder: str | Path, prefix: str, on_disk: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write the live ids and vectors whole as files named ``prefix.*``; returns the
        manifest naming them (the graph is built again on load)."""
        folder, token, keep = Path(folder), new_token(), self._slots.alive
        return {"format": FORMAT, "dim": self.dim, "flat_below": self.flat_below, "hnsw_m": self.hnsw_m,
                "ef_search": self.ef_search,
                "ids": save_array(folder, f"{prefix}.{token}.ids.npy", self._slots.ids[keep]),
                "vectors": save_array(folder, f"{prefix}.{token}.vectors.npy", self._vectors[keep])}

    @classmethod
    def load(cls, folder: str | Path, manifest: dict[str, Any]) -> VectorIndex:
        if manifest.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} index (got {manifest.get('format')!r})")
        index = cls(manifest["dim"], flat_below=manifest["flat_below"], hnsw_m=manifest["hnsw_m"],
                    ef_search=manifest["ef_search"])
        index.add(load_array(Path(folder), manifest["ids"]), load_array(Path(folder), manifest["vectors"]))
        return index

    def _rebuild(self) -> None:
        import faiss

        if len(self._vectors) >= self.flat_below:
            index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 80
        else:
            index = faiss.IndexFlatIP(self.dim)
        if len(self._vectors):
            index.add(self._vectors)
        self._index = index

    def _check(self, vectors: np.ndarray) -> np.ndarray:
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[1] != self.dim:
            raise ValueError(f"vectors must be (n, {self.dim}), got {v.shape}")
        return v
