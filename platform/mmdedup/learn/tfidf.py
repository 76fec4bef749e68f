"""TF-IDF term weights: document frequencies from the store, frozen into versions.

Why frozen versions: a signature is only comparable with signatures made under the same
weights, so the weights a batch is signed with must not drift while it is being signed.
When the corpus has grown enough (`tfidf_min_docs`, then every `tfidf_refresh_growth`-fold)
the document frequencies are counted again from the stored token sequences, a new version
is frozen and everything is re-signed; the growth factor keeps the total re-signing work
linear in the corpus. Until the corpus is large enough, jieba's shipped IDF table is the
prior (it knows Chinese words; any other word gets its median IDF).

With corpus frequencies, idf = log((N + 1) / (df + 1)): a word on every page (a site
template, a boilerplate footer) has weight exactly 0 and drops out of the signatures.

Terms are keyed by their 64-bit token hash: lookups over a whole batch are one
`searchsorted`, with no per-token Python.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..extract.minhash import term_bags
from ..extract.hashing import hash_strings
from ..extract.tokenbatch import TokenBatch, lookup
from ..store.db import activate_version, insert_rows
from ..store.schema import DocFreq, ModelVersion

PRIOR_VERSION = "prior-jieba"


@dataclass(frozen=True, eq=False)
class TfidfModel:
    """IDF by term hash (`keys` sorted); `default` for terms the model has never seen."""

    version: str
    n_docs: int
    keys: np.ndarray  # uint64, sorted
    idf: np.ndarray  # float32
    default: float

    def weights(self, hashes: np.ndarray) -> np.ndarray:
        """IDF of every token hash of a batch. A direct-mapped table (hash & mask) answers
        most lookups in a few vectorised steps; only hashes landing on a slot that several
        model terms share fall back to binary search. This runs on every distinct term of
        every text signed, where a plain searchsorted over the model cost more than all
        three sketches. Two gathers a hash: a shared slot holds a key no hash of that slot
        can equal (so it gives the default) and a NaN value that sends the hash to the
        binary search (a model with a NaN idf keeps a separate table of shared slots)."""
        mask, keys, values, shared = self._table
        hashes = np.asarray(hashes, np.uint64)
        slot = (hashes & mask).astype(np.intp)
        value = values[slot]
        out = np.where(keys[slot] == hashes, value, np.float32(self.default))
        clash = np.isnan(value) if shared is None else shared[slot]
        if clash.any():
            out[clash] = lookup(self.keys, self.idf, hashes[clash], self.default)
        return out

    @cached_property
    def _table(self) -> tuple[np.uint64, np.ndarray, np.ndarray, np.ndarray | None]:
        size = 1 << max(16, int(np.ceil(np.log2(max(len(self.keys), 1) * 4))))
        slot = (self.keys & np.uint64(size - 1)).astype(np.intp)
        shared = np.bincount(slot, minlength=size) > 1
        values = np.zeros(size, np.float32)
        values[slot] = self.idf  # a clashing slot keeps one of its keys' values
        if np.isnan(self.idf).any():
            keys = np.zeros(size, np.uint64)
            keys[slot] = self.keys  # a clashing slot keeps one of its keys: `shared` catches it
            # A hash of 0 would match an empty slot's zero key: send those to binary search.
            shared[0] = True
            return np.uint64(size - 1), keys, values, shared
        # Empty and shared slots hold slot ^ 1, a key whose low bits name another slot,
        # so no hash looked up there can equal it.
        keys = np.arange(size, dtype=np.uint64) ^ np.uint64(1)
        keys[slot] = self.keys
        keys[shared] = np.flatnonzero(shared).astype(np.uint64) ^ np.uint64(1)
        values[shared] = np.nan
        return np.uint64(size - 1), keys, values, None

    @classmethod
    def from_counts(cls, keys: np.ndarray, df: np.ndarray, n_docs: int) -> TfidfModel:
        order = np.argsort(keys)
        keys, df = keys[order], df[order]
        idf = np.log((n_docs + 1) / (df + 1.0)).astype(np.float32)
        digest = hashlib.sha256(keys.tobytes() + df.astype(np.int64).tobytes()).hexdigest()[:10]
        return cls(f"df{n_docs}-{digest}", n_docs, keys, idf, float(np.log(n_docs + 1)))


@lru_cache(maxsize=1)
def prior_model() -> TfidfModel:
    """jieba's IDF table (about 350,000 Chinese words).

    Read from jieba's package folder without importing jieba.analyse, which loads its
    part-of-speech tables (2 s) that nothing here uses; one split of the whole file
    instead of a Python step per line."""
    import jieba

    path = Path(jieba.__file__).with_name("analyse") / "idf.txt"
    fields = path.read_text(encoding="utf-8").split()
    if len(fields) % 2:
        raise ValueError(f"{path}: expected 'word idf' on every line")
    keys = hash_strings(fields[0::2])
    idf = np.asarray(fields[1::2], dtype=np.float64).astype(np.float32)
    keys, first = np.unique(keys, return_index=True)
    return TfidfModel(PRIOR_VERSION, 0, keys, idf[first], float(np.median(idf)))


def count_documents(tokens: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """(term hashes, number of documents holding each) over a batch of token sequences:
    each document's distinct terms from one hash table over the batch (`term_bags`), not
    a unique per document."""
    return np.unique(tokens.hashes[term_bags(tokens)[0]], return_counts=True)


def merge_counts(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.concatenate([a[0], b[0]])
    counts = np.concatenate([a[1], b[1]])
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inverse.ravel(), weights=counts, minlength=len(uniq)).astype(np.int64)


def active_model(session: Session) -> TfidfModel:
    row = session.scalar(select(ModelVersion).where(ModelVersion.kind == "tfidf",
                                                    ModelVersion.active.is_(True)))
    if row is None or row.version == PRIOR_VERSION:
        return prior_model()
    rows = session.execute(select(DocFreq.term_hash, DocFreq.df).where(DocFreq.model_pk == row.pk)).all()
    keys = np.fromiter((r[0] for r in rows), np.int64, len(rows)).view(np.uint64)
    df = np.fromiter((r[1] for r in rows), np.int64, len(rows))
    model = TfidfModel.from_counts(keys, df, int(row.params["n_docs"]))
    return TfidfModel(row.version, model.n_docs, model.keys, model.idf, model.default)


def freeze(session: Session, keys: np.ndarray, df: np.ndarray, n_docs: int) -> TfidfModel:
    """Store a new version from document frequencies and make it the active one; an
    identical version already stored is re-activated instead."""
    model = TfidfModel.from_counts(keys, df, n_docs)
    row, created = activate_version(session, "tfidf", model.version,
                                    {"n_docs": n_docs, "terms": int(len(keys))})
    if not created:
        return model
    rows = list(zip(model.keys.view(np.int64).tolist(), df[np.argsort(keys)].tolist()))
    insert_rows(session, DocFreq, ("term_hash", "df"), rows, {"model_pk": row.pk})
    return model
