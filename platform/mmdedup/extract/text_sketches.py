"""Text sketches: token sequences in, SimHash and MinHash sketches out (pure).

One signature row (kind "text") per item packs three sketches made from the same tokens:
a TF-IDF weighted SimHash (Hamming candidates), a weighted MinHash over TF-IDF weighted
terms (LSH candidates, and the weighted Jaccard estimate that scores pairs), and a MinHash
over word 3-gram shingles (the order-aware Jaccard). Terms whose weight is zero under the
active TF-IDF model (words every page shares) are left out of all three, so a site template
or a boilerplate footer cannot make two texts look alike.

Short texts (`is_short`: a 12-character Chinese post has about five words, three word
3-grams, and one changed word makes the sets disjoint) take their order-aware MinHash over
character n-grams instead (`short_text_shingles`), so signing
needs the text of every document with fewer than SHORT_CHARS tokens.

The signature's version names the tokenizer, TF-IDF model, word-weight model and sketch
parameters; only signatures of the active version are indexed or compared.

A signature keeps 16 bits of each MinHash position (`stored_values`), b-bit minwise
hashing (Li and König, 2010) at b = 16: two texts agree on a position by chance with
probability 2^-16 where 32 bits gave 2^-32, a bias of at most 1.5e-5 on a Jaccard
estimate whose own noise at 128 positions is 0.044 at 0.5, for half of the bytes a text's
signature takes in the store, is read back and compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from .ascii_tokens import hash_texts
from .hashing import HASH_VERSION, hash_tokens
from .minhash import EMPTY, VOCAB_MIN_TERMS, MinHash, WeightedMinHash, iota, term_bags, term_ids
from .minhash import jaccard as minhash_jaccard
from .shingles import SHORT_CHARS, shingle_version, short_text_shingles
from .simhash import SIMHASH_VERSION, hamming, simhash64
from .term_weights import UNIT, TfidfModel, WordWeights
from .tokenbatch import TokenBatch, lookup
from .tokens import tokenizer_version
from .winnowing import Anchors, Passages

NUM_PERM = 128
SHINGLE_N = 3
STORED_BITS = 16
_STORED_EMPTY = np.uint32((1 << STORED_BITS) - 1)  # an empty position's stored value
_PACKED = 8 + STORED_BITS // 8 * NUM_PERM * 2
# Mixing constants for hashing consecutive token hashes into a shingle hash.
_K = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))


@dataclass
class TextSketches:
    """Sketches of a batch of texts, row i for text i; `empty` marks texts with no terms."""

    simhash: np.ndarray  # uint64 (n,)
    wminhash: np.ndarray  # uint32 (n, NUM_PERM), `stored_values`
    minhash: np.ndarray  # uint32 (n, NUM_PERM), `stored_values`
    empty: np.ndarray  # bool (n,)

    def pack(self, i: int) -> bytes:
        # (EMPTY, 0xFFFFFFFF, becomes 0xFFFF; every other value is below it)
        return (self.simhash[i : i + 1].tobytes() + self.wminhash[i].astype(np.uint16).tobytes()
                + self.minhash[i].astype(np.uint16).tobytes())

    @classmethod
    def unpack(cls, blobs: list[bytes]) -> TextSketches:
        if not blobs:
            return cls(np.zeros(0, np.uint64), np.zeros((0, NUM_PERM), np.uint32),
                       np.zeros((0, NUM_PERM), np.uint32), np.zeros(0, bool))
        raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), _PACKED)
        simhash = raw[:, :8].copy().view(np.uint64).ravel()
        values = raw[:, 8:].copy().view(np.uint16).astype(np.uint32)
        values[values == _STORED_EMPTY] = EMPTY
        w, m = values[:, :NUM_PERM], values[:, NUM_PERM:]
        return cls(simhash, w, m, (w == EMPTY).all(axis=1))

    def take(self, rows: np.ndarray) -> TextSketches:
        return TextSketches(self.simhash[rows], self.wminhash[rows], self.minhash[rows], self.empty[rows])


def stored_values(sig: np.ndarray) -> np.ndarray:
    """MinHash values as a text signature keeps them (module docstring): each value modulo
    0xFFFF, which leaves 0xFFFF to an empty position (EMPTY stays EMPTY in memory), so a
    signature read back is the one signed, bit for bit."""
    out = sig % _STORED_EMPTY
    out[sig == EMPTY] = EMPTY
    return out


def tokenize_texts(texts: list[str]) -> TokenBatch:
    """Token hash sequences of a batch of texts: what the store keeps per item ("tokens"),
    so that re-weighting and re-signing never tokenise a text again."""
    return hash_texts(texts)


def tokens_version() -> str:
    return f"{tokenizer_version()}|{HASH_VERSION}"


def signer_version(tfidf: str, words: str) -> str:
    """The version of the signatures a `TextSigner` makes under the TF-IDF and word-weight
    versions named: known without loading either model (a command that only compares
    versions, a picture-only ingest, never reads a TF-IDF table)."""
    return "|".join([tokens_version(), f"tfidf={tfidf}", f"ww={words}", *_sketch_versions()])


@lru_cache(maxsize=1)
def _sketch_versions() -> tuple[str, ...]:
    return (SIMHASH_VERSION, WeightedMinHash(num_perm=NUM_PERM).version, MinHash(num_perm=NUM_PERM).version,
            f"sh{SHINGLE_N}", shingle_version(SHINGLE_N),  # short texts: character n-grams (`sign_tokens`)
            f"b{STORED_BITS}")


class TextSigner:
    """Pure: token sequences in, sketches out, under one TF-IDF model and word weights.

    Learned word multipliers below 1 (see learn/weights.py) scale a word's TF-IDF weight
    in the SimHash and the weighted MinHash, and a word at the floor leaves the text (as a
    template word does). Multipliers above 1 (decisive words) stay out of the sketches: a
    sketch cannot tell a word two texts share from one they differ in, and a heavy shared
    decisive word would make two different notices alike. They act when pairs are scored
    (extract/polarity.py).
    """

    def __init__(self, model: TfidfModel, words: WordWeights = UNIT, passages: Passages | None = None) -> None:
        self.model = model
        self.words = words
        self.passages = passages  # recurring passages, taken out before signing (winnowing.py)
        self.multipliers = words.table  # (sorted word hashes, multiplier), 1.0 elsewhere
        self.minhash = MinHash(num_perm=NUM_PERM)
        self.wminhash = WeightedMinHash(num_perm=NUM_PERM)
        self.version = signer_version(model.version, words.version)

    def term_weights(self, hashes: np.ndarray) -> np.ndarray:
        """TF-IDF weight of each hash times its learned multiplier capped at 1 (0: left out).

        With learned words, one lookup in a table of the model's and the words' hashes
        whose values are exactly that product (`_weights`), rather than a lookup in
        the model and a binary search among the words for every hash."""
        return self._weights.weights(hashes)

    @cached_property
    def _weights(self) -> TfidfModel:
        """The model itself, or with learned words a TfidfModel whose weight for every hash
        the model or the words know is the model weight times the multiplier capped at 1,
        by the same float32 operations (any other hash: the model's default times 1)."""
        model, table = self.model, self.multipliers
        if table is None:
            return model
        keys = np.union1d(model.keys, table[0])
        values = model.weights(keys) * np.minimum(lookup(table[0], table[1], keys, 1.0), 1.0)
        return TfidfModel(model.version, model.n_docs, keys, values.astype(np.float32, copy=False),
                          model.default)

    def sign(self, texts: list[str]) -> TextSketches:
        return self.sign_tokens(tokenize_texts(texts), texts)

    def sign_tokens(self, tokens: TokenBatch, texts: Sequence[str | None] | None = None,
                    found: Anchors | None = None) -> TextSketches:
        """Sketches of token sequences: the kept tokens (positive term weight), their
        distinct terms weighted (1 + ln tf) * term weight, and their word 3-gram shingles.

        `texts[i]` is the text document i was tokenised from; it is needed (else
        ValueError) only for documents of fewer than SHORT_CHARS tokens, and may be None
        (or `texts` None) for the others. A document short by `is_short` takes its
        order-aware MinHash over the character n-grams of its text, not word 3-grams
        (see the module docstring); a text of SHORT_CHARS tokens or more has at least
        SHORT_CHARS word characters, so is never short, and its sketches never depend
        on its text. Only those few documents cost Python work per text.

        Bit for bit what selecting tokens by weight, collapsing what is left (a sort)
        and looking every token and term up gave, at about half the cost:

        - each document's terms come from `term_bags` (a hash table, no sort), in no
          particular order; neither sketch depends on it (a SimHash adds weights
          exactly, a weighted MinHash keeps minima);
        - weights are looked up once per term of the batch's vocabulary (`term_ids`:
          a batch of texts shares most of its words), which the weighted MinHash also
          uses to hash the units of a shared term once;
        - a token is kept where its term's weight is positive; the terms of weight 0 or
          less (few) stay in the bags with weight 0, which neither sketch sees.

        `found`: `winnowing.anchors(tokens)`, where the caller needs them too (so the
        passages are found without winnowing the batch again).
        """
        if self.passages is not None:
            tokens = self.passages.strip(tokens, found)
        first, tf = term_bags(tokens)
        hashes = tokens.hashes[first]
        if len(hashes) >= VOCAB_MIN_TERMS:  # the batch's distinct terms
            ids, vocab = term_ids(hashes)
            vocab = hashes[vocab]
        else:  # (a few texts: finding them costs more than it saves)
            ids, vocab = iota(len(hashes)), hashes
        vocab_weight = self.term_weights(vocab)
        weight = np.take(vocab_weight, ids)
        kept = tokens.with_weights(None)
        offsets = np.searchsorted(first, tokens.offsets)  # `first` ascends, doc by doc
        empty = offsets[1:] == offsets[:-1]
        alive = vocab_weight > 0
        if not alive.all():
            # Dead terms (words on every page, words at the floor) stay in the bag with
            # weight 0 (a SimHash adds 0, a weighted MinHash makes no unit of it); their
            # tokens leave the shingles, and a document of dead terms only is empty.
            dead = np.flatnonzero(~np.take(alive, ids))
            weight[dead] = 0
            keep = _absent(tokens.hashes, np.unique(vocab[~alive]))
            kept = TokenBatch(tokens.hashes[keep], _less(tokens.lengths, offsets, dead, tf[dead]))
            empty = np.diff(_less(np.diff(offsets), offsets, dead)) == 0
        tf = tf.astype(np.float32)
        if weight.dtype == np.float32:  # (1 + ln 1) * w is w: the log only where tf > 1
            weights = weight
            more = np.flatnonzero(tf > 1)
            weights[more] = (1 + np.log(tf[more])) * weight[more]
        else:
            weights = ((1 + np.log(np.maximum(tf, 1))) * weight).astype(np.float32)
        terms = TokenBatch(hashes, offsets, weights)
        shingles = word_shingles(kept, SHINGLE_N)
        rows, chars = short_char_shingles(tokens.lengths, texts)
        if len(rows):
            shingles = _replace_docs(shingles, rows, chars)
        return TextSketches(
            simhash=simhash64(terms),
            wminhash=stored_values(self.wminhash.sign_terms(terms, (ids, vocab))),
            minhash=stored_values(self.minhash(shingles)),
            empty=empty,
        )


def short_char_shingles(lengths: np.ndarray, texts: Sequence[str | None] | None) -> tuple[np.ndarray, TokenBatch]:
    """(rows, hashed character n-grams of those rows' texts) of the documents that are
    short by `is_short` (`lengths[i]`: document i's token count): what
    `short_text_shingles` gives them. Texts are looked at only where `lengths` is below
    SHORT_CHARS, and must be there (a missing one raises, rather than silently signing
    the document with word 3-grams)."""
    need = np.flatnonzero(lengths < SHORT_CHARS)
    rows: list[int] = []
    sets: list[list[str]] = []
    if len(need) and (texts is None or len(texts) != len(lengths)):
        raise ValueError(f"signing needs the texts of documents with fewer than {SHORT_CHARS} tokens "
                         f"({len(need)} here), aligned with the token batch")
    for i in need.tolist():
        text = texts[i]  # type: ignore[index]
        if text is None:
            raise ValueError(f"document {i} has {int(lengths[i])} tokens (fewer than {SHORT_CHARS}): "
                             "its text is needed to sign it")
        chars = short_text_shingles(text, int(lengths[i]))
        if chars is not None:
            rows.append(i)
            sets.append(chars)
    return np.array(rows, np.intp), hash_tokens(sets)


def _replace_docs(batch: TokenBatch, rows: np.ndarray, sub: TokenBatch) -> TokenBatch:
    """`batch` with documents `rows` (ascending) replaced by the documents of `sub`."""
    lengths = batch.lengths.copy()
    lengths[rows] = sub.lengths
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint64)
    new = _spans(offsets[rows], sub.lengths)
    old = np.ones(len(batch.hashes), bool)
    old[_spans(batch.offsets[rows], batch.lengths[rows])] = False
    rest = np.ones(len(out), bool)
    rest[new] = False
    out[new] = sub.hashes
    out[rest] = batch.hashes[old]
    return TokenBatch(out, offsets)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Flat indices start .. start + length - 1 of each span, in order."""
    lengths = np.asarray(lengths, np.int64)
    first = np.repeat(np.asarray(starts, np.int64) - (np.cumsum(lengths) - lengths), lengths)
    return first + np.arange(int(lengths.sum()), dtype=np.int64)


def _absent(hashes: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """hashes[i] not in `keys` (few, distinct): a direct-mapped table on the low bits, of
    at least 16 slots a key, where no two keys share a slot (empty slots hold slot ^ 1,
    which no hash of that slot equals): one gather a hash, in cache."""
    for bits in range(max(int(16 * len(keys)).bit_length(), 8), 24):
        mask = np.uint64((1 << bits) - 1)
        slot = (keys & mask).astype(np.intp)
        if len(np.unique(slot)) == len(slot):
            table = np.arange(1 << bits, dtype=np.uint64) ^ np.uint64(1)
            table[slot] = keys
            return np.take(table, (hashes & mask).view(np.intp)) != hashes
    return ~np.isin(hashes, keys)


def _less(lengths: np.ndarray, offsets: np.ndarray, drop: np.ndarray,
          counts: np.ndarray | None = None) -> np.ndarray:
    """Offsets for documents of `lengths` less, for each entry `drop` (ascending flat
    indices) of the CSR layout `offsets`, one (or its `counts`) from its document:
    from the few entries dropped rather than a running sum over all that are kept."""
    doc = np.searchsorted(offsets, drop, side="right") - 1
    lengths = lengths - np.bincount(doc, weights=counts, minlength=len(lengths)).astype(np.int64)
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def word_shingles(batch: TokenBatch, n: int) -> TokenBatch:
    """Hashes of n consecutive token hashes within each document (a document shorter than
    n is one shingle of all its tokens, the missing tokens hashing as 0).

    Every flat position p of the batch is hashed with the n tokens from p on, in
    slices of the hash array (no gathers; a chunk at a time, in place, so that the
    temporaries stay in cache), and positions whose n tokens run past their document's
    end (each document's last n - 1) are dropped; documents shorter than n are hashed
    apart (`_short_shingles`) and put in their place. The first step of the chain,
    (0 ^ t * K0) * K1, is one multiply by K0 * K1 (mod 2^64).
    """
    lengths = batch.lengths
    counts = np.where(lengths >= n, lengths - n + 1, np.minimum(lengths, 1))
    offsets = np.zeros(batch.n_docs + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    hashes = batch.hashes
    m = len(hashes) - n + 1  # positions with n tokens ahead in the flat array
    short = np.flatnonzero((lengths > 0) & (lengths < n))
    full = np.zeros(0, np.uint64)
    with np.errstate(over="ignore"):
        if m > 0:
            full = np.empty(m, np.uint64)
            tmp = np.empty(min(m, _SHINGLE_CHUNK), np.uint64)
            first = _K[0] * _K[1 % n]
            for c0 in range(0, m, _SHINGLE_CHUNK):
                c1 = min(c0 + _SHINGLE_CHUNK, m)
                h, t = full[c0:c1], tmp[: c1 - c0]
                np.multiply(hashes[c0:c1], first, out=h)
                np.right_shift(h, np.uint64(29), out=t)
                h ^= t
                for j in range(1, n):
                    np.multiply(hashes[c0 + j : c1 + j], _K[j], out=t)
                    h ^= t
                    h *= _K[(j + 1) % n]
                    np.right_shift(h, np.uint64(29), out=t)
                    h ^= t
            valid = np.ones(m, bool)
            ends = batch.offsets[1:]
            for j in range(1, n):  # the last n - 1 positions of each document
                at = ends[lengths >= j] - j
                valid[at[at < m]] = False
            full = full[valid]
        if len(short) == 0:
            return TokenBatch(full, offsets)
        out = np.empty(int(offsets[-1]), np.uint64)
        at_short = np.zeros(len(out), bool)
        at_short[offsets[short]] = True
        out[~at_short] = full
        out[at_short] = _short_shingles(hashes, batch.offsets[short], lengths[short], n)
    return TokenBatch(out, offsets)


_SHINGLE_CHUNK = 1 << 14


def _short_shingles(hashes: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int) -> np.ndarray:
    """The one shingle of each document shorter than n (tokens at `starts`, `lengths`
    of them): the chain of `word_shingles` with 0 for the missing tokens."""
    h = np.zeros(len(starts), np.uint64)
    for j in range(n):
        part = np.where(j < lengths, hashes[np.minimum(starts + j, len(hashes) - 1)], np.uint64(0))
        h = (h ^ (part * _K[j])) * _K[(j + 1) % n]
        h ^= h >> np.uint64(29)
    return h


# What `raw_similarity` names in a scorer's version: a change of the rule re-scores pairs.
RAW_VERSION = "raw=max(j,min(wj,base+slope*j))"
# The rule's defaults (TextSettings.reuse_base and reuse_slope take them).
REUSE_BASE = 0.12
REUSE_SLOPE = 2.25


def raw_similarity(wj: np.ndarray, j: np.ndarray, base: float, slope: float) -> np.ndarray:
    """A pair's raw similarity from its weighted Jaccard of TF-IDF terms (`wj`) and its
    Jaccard of word 3-grams (`j`): max(j, min(wj, base + slope * j)).

    The weighted Jaccard forgives a copy its edits (a replaced word costs one term, but
    three shingles), so it leads; but it cannot tell re-use from topical overlap. Two
    sections of one long contract share its party names, defined terms and statutes,
    rare words that TF-IDF weighs most, while hardly a sentence of one is in the other:
    their weighted Jaccard alone would call them re-use. Re-use keeps word runs (an
    edited copy keeps most 3-grams, shuffled sentences lose only those at the joins, a
    truncated copy keeps the part it kept), so the weighted figure counts only as far as
    the shingles back it: up to `base + slope * j`. Non-decreasing in both figures,
    which lets an upper bound on each bound the pair (`TextSignal.reachable`)."""
    return np.maximum(j, np.minimum(wj, base + slope * j))


def passage_backed(raw: np.ndarray, j: np.ndarray, aligned: np.ndarray, base: float,
                   slope: float) -> np.ndarray:
    """A checked pair's raw similarity once its texts were read: `raw_similarity`'s line
    again, with the exact share of the texts on shared word runs in one order
    (`alignment.aligned_share`) in place of the 3-gram estimate. Stock phrases shared at
    random offsets (a quarter of two contract sections' 3-grams) back nothing; a copy,
    edited, shuffled by sentence or cut, keeps its passages and most of its tokens on
    them, so the check leaves it as it was. Never above `raw`."""
    return np.maximum(j, np.minimum(raw, base + slope * aligned))


# How far under the 3-gram estimate a pair's share on shared passages is looked for: a
# pair whose weighted Jaccard a 3-gram Jaccard this much lower would still back is not read
# (shared 3-grams that many lie on passages; stock phrases by chance are far fewer).
PASSAGE_MARGIN = 0.1


def needs_passages(raw: np.ndarray, j: np.ndarray, base: float, slope: float) -> np.ndarray:
    """Pairs whose raw similarity the check of their passages (`passage_backed`) could
    lower: the weighted Jaccard leads, backed by the 3-gram estimate only narrowly."""
    return (raw > j) & (base + slope * np.maximum(j - PASSAGE_MARGIN, 0.0) < raw)


def similarity(a: TextSketches, b: TextSketches, base: float = REUSE_BASE,
               slope: float = REUSE_SLOPE) -> dict[str, np.ndarray]:
    """Row-wise raw similarities of two aligned sets of sketches (`raw_similarity`)."""
    wj = minhash_jaccard(a.wminhash, b.wminhash)
    j = minhash_jaccard(a.minhash, b.minhash)
    bits = hamming(a.simhash, b.simhash)
    none = a.empty | b.empty
    return {"wjaccard": np.where(none, 0.0, wj), "jaccard": np.where(none, 0.0, j),
            "simhash_bits": bits, "raw": np.where(none, 0.0, raw_similarity(wj, j, base, slope))}


def sketch_change(old: TextSketches, new: TextSketches) -> np.ndarray:
    """Per text, the share of MinHash positions (the larger of the weighted and the
    order-aware sketch's) that differ between two signings of the same texts. A pair's
    two Jaccard estimates (the share of positions that agree) each move by at most the
    sum of its two texts' changes: positions neither text changed agree or differ as before.
    What a TF-IDF refresh would move, measured before signing anything again."""
    return np.maximum((old.wminhash != new.wminhash).mean(axis=1),
                      (old.minhash != new.minhash).mean(axis=1))
