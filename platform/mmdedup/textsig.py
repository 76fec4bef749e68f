"""The text signal: signing texts, keeping their candidate indexes, scoring text pairs.

One signature row (kind "text") per item packs three sketches made from the same tokens:
a TF-IDF weighted SimHash (Hamming candidates), a weighted MinHash over TF-IDF weighted
terms (LSH candidates, and the weighted Jaccard estimate that scores pairs), and a MinHash
over word 3-gram shingles (the order-aware Jaccard). Terms whose weight is zero under the
active TF-IDF model (words every page shares) are left out of all three, so a site template
or a boilerplate footer cannot make two texts look alike.

The signature's version names the tokenizer, TF-IDF model, word-weight model and sketch
parameters; only signatures of the active version are indexed or compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from .config import Settings
from .extract.minhash import MinHash, WeightedMinHash
from .extract.minhash import jaccard as minhash_jaccard
from .extract.simhash import SIMHASH_VERSION, hamming, simhash64
from .extract.text import (
    HASH_VERSION,
    TokenBatch,
    collapse_terms,
    hash_tokens,
    lookup,
    tokenize_many,
    tokenizer_version,
)
from .index.hamming import HammingIndex
from .index.lsh import BandLSH
from .learn.tfidf import TfidfModel
from .learn.weights import UNIT, WordWeights
from .score.pairs import SignalFn, SignalValues
from .index.cache import load_cached, save_cached
from .store.db import count_signatures, load_signatures, replace_signatures

KIND = "text"
NUM_PERM = 128
SHINGLE_N = 3
_PACKED = 8 + 4 * NUM_PERM * 2
# Mixing constants for hashing consecutive token hashes into a shingle hash.
_K = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))


@dataclass
class TextSketches:
    """Sketches of a batch of texts, row i for text i; `empty` marks texts with no terms."""

    simhash: np.ndarray  # uint64 (n,)
    wminhash: np.ndarray  # uint32 (n, NUM_PERM)
    minhash: np.ndarray  # uint32 (n, NUM_PERM)
    empty: np.ndarray  # bool (n,)

    def pack(self, i: int) -> bytes:
        return self.simhash[i : i + 1].tobytes() + self.wminhash[i].tobytes() + self.minhash[i].tobytes()

    @classmethod
    def unpack(cls, blobs: list[bytes]) -> TextSketches:
        if not blobs:
            return cls(np.zeros(0, np.uint64), np.zeros((0, NUM_PERM), np.uint32),
                       np.zeros((0, NUM_PERM), np.uint32), np.zeros(0, bool))
        raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), _PACKED)
        simhash = raw[:, :8].copy().view(np.uint64).ravel()
        w = raw[:, 8 : 8 + 4 * NUM_PERM].copy().view(np.uint32)
        m = raw[:, 8 + 4 * NUM_PERM :].copy().view(np.uint32)
        return cls(simhash, w, m, (w == np.uint32(0xFFFFFFFF)).all(axis=1))

    def take(self, rows: np.ndarray) -> TextSketches:
        return TextSketches(self.simhash[rows], self.wminhash[rows], self.minhash[rows], self.empty[rows])


def tokenize_texts(texts: list[str]) -> TokenBatch:
    """Token hash sequences of a batch of texts: what the store keeps per item ("tokens"),
    so that re-weighting and re-signing never tokenise a text again."""
    return hash_tokens(tokenize_many(texts))


TOKENS_KIND = "tokens"


def tokens_version() -> str:
    return f"{tokenizer_version()}|{HASH_VERSION}"


class TextSigner:
    """Pure: token sequences in, sketches out, under one TF-IDF model and word weights.

    Learned word multipliers below 1 (see learn/weights.py) scale a word's TF-IDF weight
    in the SimHash and the weighted MinHash, and a word at the floor leaves the text (as a
    template word does). Multipliers above 1 (decisive words) stay out of the sketches: a
    sketch cannot tell a word two texts share from one they differ in, and a heavy shared
    decisive word would make two different notices alike. They act when pairs are scored
    (`Decisive`).
    """

    def __init__(self, model: TfidfModel, words: WordWeights = UNIT) -> None:
        self.model = model
        self.words = words
        self.multipliers = words.table  # (sorted word hashes, multiplier), 1.0 elsewhere
        self.minhash = MinHash(num_perm=NUM_PERM)
        self.wminhash = WeightedMinHash(num_perm=NUM_PERM)
        self.version = "|".join([
            tokens_version(), f"tfidf={model.version}", f"ww={words.version}",
            SIMHASH_VERSION, self.wminhash.version, self.minhash.version, f"sh{SHINGLE_N}",
        ])

    def term_weights(self, hashes: np.ndarray) -> np.ndarray:
        w = self.model.weights(hashes)
        if self.multipliers is None:
            return w
        return w * np.minimum(lookup(self.multipliers[0], self.multipliers[1], hashes, 1.0), 1.0)

    def sign(self, texts: list[str]) -> TextSketches:
        return self.sign_tokens(tokenize_texts(texts))

    def sign_tokens(self, tokens: TokenBatch) -> TextSketches:
        kept = tokens.select(self.term_weights(tokens.hashes) > 0)
        bag = collapse_terms(kept.with_weights(None))  # distinct terms, weight = tf
        tf = bag.weights
        weights = (1 + np.log(np.maximum(tf, 1))) * self.term_weights(bag.hashes)
        terms = TokenBatch(bag.hashes, bag.offsets, weights.astype(np.float32))
        return TextSketches(
            simhash=simhash64(terms),
            wminhash=self.wminhash(terms),
            minhash=self.minhash(_shingles(kept, SHINGLE_N)),
            empty=bag.lengths == 0,
        )


def _shingles(batch: TokenBatch, n: int) -> TokenBatch:
    """Hashes of n consecutive token hashes within each document (a document shorter than
    n is one shingle of all its tokens), computed for the whole batch at once."""
    lengths = batch.lengths
    counts = np.where(lengths >= n, lengths - n + 1, np.minimum(lengths, 1))
    offsets = np.zeros(batch.n_docs + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    doc = np.repeat(np.arange(batch.n_docs), counts)
    start = batch.offsets[doc] + (np.arange(offsets[-1]) - offsets[doc])
    end = batch.offsets[doc + 1]
    h = np.zeros(len(start), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            pos = start + j
            valid = pos < end
            part = np.where(valid, batch.hashes[np.minimum(pos, len(batch.hashes) - 1)], 0) \
                if len(batch.hashes) else np.zeros(len(start), np.uint64)
            h = (h ^ (part * _K[j])) * _K[(j + 1) % n]
            h ^= h >> np.uint64(29)
    return TokenBatch(h, offsets)


def similarity(a: TextSketches, b: TextSketches) -> dict[str, np.ndarray]:
    """Row-wise raw similarities of two aligned sets of sketches."""
    wj = minhash_jaccard(a.wminhash, b.wminhash)
    j = minhash_jaccard(a.minhash, b.minhash)
    bits = hamming(a.simhash, b.simhash)
    none = a.empty | b.empty
    return {"wjaccard": np.where(none, 0.0, wj), "jaccard": np.where(none, 0.0, j),
            "simhash_bits": bits, "raw": np.where(none, 0.0, np.maximum(wj, j))}


class Decisive:
    """The words reviewers found decisive (multiplier > 1), and how decisive (their share,
    learn/weights.py). A pair whose texts differ in one of them, one text holding it and the
    other not, keeps only (1 - share) of its raw text similarity: "不予批准" against
    "给予批准" at full share scores 0 whatever else the texts share. Checked on the token
    sequences, not the sketches: a sketch cannot tell a word two texts share from one they
    differ in, and sharing a decisive word must not make two texts alike. A text holding a
    decisive word more often than the other ("must not ... shall not") differs in it too."""

    def __init__(self, words: WordWeights) -> None:
        table = words.table
        keep = table[1] > 1 if table is not None else np.zeros(0, bool)
        self.keys = table[0][keep] if table is not None else np.zeros(0, np.uint64)
        self.share = words.share(table[1][keep]) if table is not None else np.zeros(0)

    def __bool__(self) -> bool:
        return bool(len(self.keys))

    def words_in(self, tokens: np.ndarray) -> frozenset[tuple[int, int]]:
        """(word, count) of the decisive words of a text: "shall not" beside "must not"
        differs from "shall" beside "must not" only in how often "not" occurs."""
        words, counts = np.unique(tokens[np.isin(tokens, self.keys)], return_counts=True)
        return frozenset(zip(words.tolist(), counts.tolist()))

    def shares(self, a: list[frozenset[tuple[int, int]]], b: list[frozenset[tuple[int, int]]]) -> np.ndarray:
        """Per pair, the largest share among the decisive words the two texts hold a
        different number of times."""
        out = np.zeros(len(a))
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                diff = np.fromiter({w for w, _ in x ^ y}, np.uint64)
                out[i] = self.share[np.searchsorted(self.keys, diff)].max()
        return out

    def stored(self, session: Session, pks: np.ndarray) -> dict[int, frozenset[tuple[int, int]]]:
        """The decisive words of stored items, from their token sequences."""
        found = load_signatures(session, TOKENS_KIND, tokens_version(), np.unique(pks).tolist())
        return {pk: self.words_in(np.frombuffer(v, np.uint64)) for pk, v in found.items()}


def calibrate(raw: np.ndarray, settings: Settings) -> np.ndarray:
    """Raw text similarity -> score on the common scale where tier thresholds apply."""
    xs, ys = zip(*settings.text_calibration)
    return np.interp(raw, xs, ys)


# --- indexes --------------------------------------------------------------------------


class TextIndex:
    """The Hamming and LSH indexes over the active version's text signatures.

    A cache: saved under <home>/index with the version and item count it holds, and
    rebuilt from the signatures table whenever those disagree with the store.
    """

    def __init__(self, folder: Path, version: str, settings: Settings) -> None:
        self.folder = folder
        self.version = version
        self.settings = settings
        self.hamming = HammingIndex()
        self.perms = min(settings.text_lsh_perms, NUM_PERM)
        self.lsh = BandLSH(settings.text_lsh_threshold, self.perms)

    @classmethod
    def open(cls, folder: Path, version: str, settings: Settings, session: Session) -> TextIndex:
        index = cls(folder, version, settings)
        saved = load_cached(folder, "text", index.stamp(session),
                            {"simhash": HammingIndex.load, "lsh": BandLSH.load})
        if saved is None:
            return cls.rebuild(folder, version, settings, session)
        index.hamming, index.lsh = saved["simhash"], saved["lsh"]
        return index

    def stamp(self, session: Session) -> dict:
        return {"version": self.version, "count": count_signatures(session, KIND, self.version),
                "lsh": [self.lsh.bands, self.lsh.rows]}

    @classmethod
    def rebuild(cls, folder: Path, version: str, settings: Settings, session: Session) -> TextIndex:
        index = cls(folder, version, settings)
        pks, sk = load_sketches(session, None, version)
        index.add(pks[~sk.empty], sk.take(~sk.empty))
        return index

    def add(self, pks: np.ndarray, sk: TextSketches) -> None:
        self.hamming.add(pks, sk.simhash)
        self.lsh.add(pks, sk.wminhash[:, : self.perms])

    def remove(self, pks: np.ndarray) -> None:
        self.hamming.remove(pks)
        self.lsh.remove(pks)

    def candidates(self, sk: TextSketches) -> tuple[np.ndarray, np.ndarray]:
        """(query row, item pk) pairs from either index, deduplicated."""
        hits = self.hamming.search(sk.simhash, self.settings.text_simhash_radius)
        cand = self.lsh.query(sk.wminhash[:, : self.perms])
        q = np.concatenate([hits.query, cand.query])
        ids = np.concatenate([hits.ids, cand.ids])
        if len(q) == 0:
            return q, ids
        key = np.unique(np.stack([q, ids], axis=1), axis=0)
        return key[:, 0], key[:, 1]

    def save(self, session: Session) -> None:
        save_cached(self.folder, "text", self.stamp(session), {"simhash": self.hamming, "lsh": self.lsh})


def load_sketches(session: Session, pks: np.ndarray | None, version: str) -> tuple[np.ndarray, TextSketches]:
    """Stored sketches of these items (of the given version), as (pks, sketches)."""
    found = load_signatures(session, KIND, version, None if pks is None else np.unique(pks).tolist())
    return np.fromiter(found, np.int64, len(found)), TextSketches.unpack(list(found.values()))


# --- the ingest step ------------------------------------------------------------------


def store_tokens(session: Session, pks: np.ndarray, tokens: TokenBatch) -> None:
    replace_signatures(session, TOKENS_KIND, tokens_version(),
                       ((pk, tokens.doc(i).tobytes()) for i, pk in enumerate(pks.tolist())))


def sign_and_index(session: Session, pks: np.ndarray, tokens: TokenBatch, signer: TextSigner,
                   index: TextIndex) -> np.ndarray:
    """Sign items from their token sequences, store the sketches, index them, and return
    candidate pairs (n, 2) with indexed items and with each other."""
    sk = signer.sign_tokens(tokens)
    replace_signatures(session, KIND, signer.version, ((pk, sk.pack(i)) for i, pk in enumerate(pks.tolist())))
    index.remove(pks)
    live = ~sk.empty
    pks, sk = pks[live], sk.take(live)
    index.add(pks, sk)
    q, other = index.candidates(sk)
    return np.stack([pks[q], other], axis=1) if len(q) else np.zeros((0, 2), np.int64)


def text_signal(signer: TextSigner, settings: Settings) -> SignalFn:
    """The `text` signal of pairs, from the stored sketches of the signer's version."""

    decisive = Decisive(signer.words)

    def signal(session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
        pks, sketches = load_sketches(session, np.concatenate([a, b]), signer.version)
        pos = {pk: i for i, pk in enumerate(pks.tolist())}
        ra = np.array([pos.get(pk, -1) for pk in a.tolist()], np.int64)
        rb = np.array([pos.get(pk, -1) for pk in b.tolist()], np.int64)
        have = (ra >= 0) & (rb >= 0)
        values = np.full(len(a), np.nan)
        details = {"wjaccard": np.zeros(len(a)), "jaccard": np.zeros(len(a)),
                   "simhash_bits": np.zeros(len(a), np.int64)}
        if have.any():
            sims = similarity(sketches.take(ra[have]), sketches.take(rb[have]))
            raw = sims["raw"]
            if decisive:
                words = decisive.stored(session, np.concatenate([a[have], b[have]]))
                none = frozenset()
                share = decisive.shares([words.get(pk, none) for pk in a[have].tolist()],
                                        [words.get(pk, none) for pk in b[have].tolist()])
                raw = raw * (1 - share)
                details["decisive"] = np.zeros(len(a))
                details["decisive"][have] = share
            values[have] = calibrate(raw, settings)
            for key in sims.keys() & details.keys():
                details[key][have] = sims[key]
        return SignalValues(values, details)

    return signal


def query_scores(session: Session, texts: list[str], signer: TextSigner, index: TextIndex,
                 settings: Settings) -> list[dict[int, dict[str, float]]]:
    """For each query text, {item pk: {"text": score, ...raw}} of its candidates."""
    tokens = tokenize_texts(texts)
    sk = signer.sign_tokens(tokens)
    q, pks = index.candidates(sk)
    out: list[dict[int, dict[str, float]]] = [{} for _ in texts]
    if len(q) == 0:
        return out
    stored_pks, stored = load_sketches(session, pks, signer.version)
    pos = {int(pk): i for i, pk in enumerate(stored_pks.tolist())}
    rows = np.array([pos.get(int(pk), -1) for pk in pks], np.int64)
    ok = rows >= 0
    q, pks, rows = q[ok], pks[ok], rows[ok]
    sims = similarity(sk.take(q), stored.take(rows))
    raw = sims["raw"]
    decisive = Decisive(signer.words)
    if decisive:
        mine = [decisive.words_in(tokens.doc(i)) for i in range(tokens.n_docs)]
        theirs = decisive.stored(session, pks)
        raw = raw * (1 - decisive.shares([mine[i] for i in q.tolist()],
                                         [theirs.get(pk, frozenset()) for pk in pks.tolist()]))
    scores = calibrate(raw, settings)
    for i in range(len(q)):
        out[int(q[i])][int(pks[i])] = {"text": float(scores[i]),
                                       "wjaccard": float(sims["wjaccard"][i]),
                                       "jaccard": float(sims["jaccard"][i])}
    return out

