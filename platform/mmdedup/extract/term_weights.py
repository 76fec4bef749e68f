"""Term weights the text sketches are signed under: TF-IDF models and learned word
multipliers, as plain values (learn/ fits and stores them; signals/text.py loads the
active ones).

Why frozen versions: a signature is only comparable with signatures made under the same
weights, so the weights a batch is signed with must not drift while it is being signed.
Until the corpus is large enough, jieba's shipped IDF table is the prior (it knows Chinese
words; any other word gets its median IDF). With corpus frequencies, idf = log((N + 1) /
(df + 1)): a word on every page (a site template, a boilerplate footer) has weight exactly
0 and drops out of the signatures. Terms are keyed by their 64-bit token hash: lookups
over a whole batch are one `searchsorted`, with no per-token Python.

Word multipliers (learn/weights.py says how labels set them): a word at the floor is
dropped from the sketches, as a template word is; a word above 1 is decisive in proportion
to log(m) / log(max) (its `share`, see extract/polarity.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from .minhash import term_bags
from .hashing import hash_strings
from .tokenbatch import TokenBatch, lookup

NO_WEIGHTS = "w0"  # the version of "every multiplier is 1.0"

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


@dataclass(frozen=True)
class WordWeights:
    """Multipliers of the words labels moved; every other word is 1.0."""

    version: str
    words: tuple[str, ...]
    multipliers: np.ndarray  # float32, aligned with words
    floor: float = 0.0  # a word at the floor is dropped (multiplier 0 in `table`)
    ceiling: float = 1.0  # a word at the ceiling weighs as much as the rest of its text

    def share(self, multipliers: np.ndarray) -> np.ndarray:
        """How decisive words are, from 0 (multiplier <= 1) to 1 (at the ceiling): the
        part of a pair's text similarity that a word the two texts differ in takes away."""
        if self.ceiling <= 1:
            return np.zeros(len(multipliers))
        return np.clip(np.log(np.maximum(multipliers, 1.0)) / np.log(self.ceiling), 0.0, 1.0)

    @cached_property
    def table(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(sorted word hashes, multipliers), the form TextSigner looks words up in. Cached:
        the signer and every scoring of pairs (each ingest chunk, each query) read it."""
        if not self.words:
            return None
        hashes = hash_strings(list(self.words))
        order = np.argsort(hashes)
        m = self.multipliers[order]
        return hashes[order], np.where(m <= self.floor * (1 + 1e-4), np.float32(0), m)

    def as_dict(self) -> dict[str, float]:
        return {w: round(float(m), 4) for w, m in zip(self.words, self.multipliers.tolist())}


UNIT = WordWeights(NO_WEIGHTS, (), np.zeros(0, np.float32))
