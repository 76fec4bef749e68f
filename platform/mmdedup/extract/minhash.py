"""MinHash over shingle sets, and weighted MinHash over weighted terms.

Both produce uint32 signatures, shape (n_docs, num_perm); the share of positions two
signatures agree on estimates the (weighted) Jaccard similarity of their documents, and the
same signatures feed band LSH (index/lsh.py). Empty documents get all 0xFFFFFFFF, which
`jaccard` never counts as agreement (an empty text duplicates nothing).

MinHash, two variants (`variant=`):

- "oph" (default): one permutation hashing with optimal densification (Li, Owen & Zhang
  2012; Shrivastava 2017). Each shingle hash (already well mixed, see hashing.py) is made
  seed-specific by an xor and an odd multiply, a bijection; its top bits pick one of
  num_perm bins and its low 32 bits are the value; a bin keeps its minimum. A bin no
  shingle fell into borrows the value of a non-empty bin found by probing with a hash of
  (bin, attempt) that does not depend on the document, so two documents with the same
  shingles borrow the same way. Cost: O(tokens) per document instead of
  O(tokens x num_perm). Collision probability per position is the Jaccard similarity; the
  variance is at most that of k independent permutations (lower for sets much larger
  than num_perm, since bins sample without replacement), and densification brings it
  close to it for sets smaller than num_perm.
- "kperm": num_perm independent universal hashes, as datasketch does, but with
  multiply-add-shift (Dietzfelbinger 1996): h_i(x) = ((a_i * x + b_i) mod 2^64) >> 32
  over the 32-bit key x = token_hash >> 32, with random 64-bit a_i, b_i. That family is
  strongly universal (2-independent) like datasketch's (a*x + b) mod (2^61 - 1), but costs
  one multiply and one add in plain uint64 arithmetic, no division; and since >> 32 is
  monotone the minimum is taken before the shift. Still num_perm operations per token:
  on a 2-core VM numpy signs about 8,000 documents of 400 tokens a second this way,
  against about 400,000 with "oph" (scripts/bench/text_signature_speed.py), which is why
  "oph" is the default. Kept as the textbook reference; the tests hold both to the truth.

Weighted MinHash over each document's distinct terms and positive weights (TF-IDF), three
variants (`variant=`):

- "expand" (default): quantised expansion (Haveliwala, Gionis & Indyk 2000; Gollapudi &
  Panigrahy 2006) and one permutation hashing. A term of weight w becomes
  c = floor(w / delta + u) units, u ~ U[0, 1) drawn once per term from its hash
  (randomised rounding), at most `cap`; unit j of term x is the element
  splitmix64(x ^ key + j * gamma), and the signature is the "oph" MinHash of all units
  (bins, minima and densification as above). Units of a term are nested (a document with
  more copies has the units of one with fewer), so the units two documents share are
  min(c_a, c_b) per term, and the expected agreement per position is the Jaccard of the
  units, sum(min c) / sum(max c).
  Bias and variance: rounding with the same u for a term in every document is monotone,
  min(c_a, c_b) = floor(min(w_a, w_b) / delta + u), so E[sum(min c)] = sum(min w) / delta
  and E[sum(max c)] = sum(max w) / delta exactly: the estimate of the weighted Jaccard
  sum(min w) / sum(max w) is a ratio of unbiased sums (bias of order 1/terms; measured
  under 0.01). A term whose weight is the same in both documents gets the same c in
  both, so rounding adds variance only through terms whose weight differs, at most 1/4
  unit^2 each, on top of the MinHash variance J(1 - J)/num_perm; a weight below delta is
  kept or dropped as a whole (with probability w / delta, the same in every document).
  The cap only bites above cap * delta = 256, far beyond TF-IDF weights
  ((1 + ln tf) * idf, idf <= ~12). A document whose weights all round to no unit (its
  weights add up to about delta or less) keeps one unit per term rather than come out
  empty. delta = 1 keeps the units near the weight mass: with corpus IDF a 400-word text
  has ~300-800 units (~10 us); with jieba's prior (every unknown word at idf 12, only
  until the corpus has `tfidf_min_docs` texts) ~2,000-4,000 (~25 us). Both delta and the
  cap are in `version`.
- "icws": ICWS, improved consistent weighted sampling (Ioffe 2010). Per (term,
  permutation) three random variables r ~ Gamma(2,1), c ~ Gamma(2,1), beta ~ U(0,1) give
  t = floor(ln w / r + beta) and ln a = ln c - r (t - beta + 1); the term with the
  smallest a wins, and a position is a 32-bit fingerprint of (winning term, t):
  P[equal] is exactly the weighted Jaccard, with no quantisation. But it is
  O(terms x num_perm): ~300 us for a document of 250 distinct terms on a 2-core VM
  (t = floor(ln w / r + beta) and ln a = A - r t with A = ln c + r beta - r precomputed,
  then an argmin, per cell), which an ingest of 2,000 texts a second cannot afford.
  I2CWS (Wu et al. 2017) removes a dependence ICWS has between t and a, at twice the
  random numbers; PCWS saves one of the three variables; neither changes the order.
- "0bit" (Li 2015): ICWS keeping only the winning term: the same computation, a slight
  upward bias in theory (P[same winner] >= weighted Jaccard) that Li found negligible on
  real weights, and a position depends on one thing less.

BagMinHash (Ertl 2018) and DartMinHash (Christiani 2020) reach the exact weighted
Jaccard in about O(terms + num_perm log num_perm), but both generate points one by one
in increasing order with data-dependent stopping (a heap, or dart rounds), which numpy
runs no faster than ICWS; the expansion is a few flat array passes per batch.

The ICWS random variables come from a counter-based generator (the splitmix64 finaliser
over the term's hash and the permutation index, in numpy uint64 arithmetic): the same
term gets the same variables in every document, batch and process, with no table to
store. They are turned into floats with float32 logarithms; numpy's SIMD log may differ
in the last bit between CPU families, which can flip a rare floor() in t, so ICWS
signatures are bit-identical on one kind of machine and agree on all but the odd
position across kinds. "expand" uses integer arithmetic but for w / delta + u (float64,
exactly rounded on every machine), so its signatures are the same everywhere.
"""

from __future__ import annotations

import numpy as np

from .hashing import HASH_VERSION
from .tokenbatch import TokenBatch, collapse_terms, doc_ranges

EMPTY = np.uint32(0xFFFFFFFF)

_U = np.uint64
_GAMMA = 0x9E3779B97F4A7C15
_CHUNK_TOKENS = 1 << 15  # OPH: tokens per pass
VOCAB_MIN_TERMS = 4096  # weighted MinHash: from this many terms on, units are hashed per distinct term
_TABLE_MIN_UNITS = 4  # ... where the terms have this many units each on average
_CHUNK_CELLS = 1 << 17  # k-perm and ICWS: token x permutation cells per pass (1 MiB of uint64)
_GROUP_CHUNKS = 32  # weighted: chunks sharing one draw of the variables (<= 64 MiB of them)
# Weighted MinHash by expansion: the weight of one unit (a term of weight w makes about
# w / EXPAND_DELTA units), and the most units one term makes.
EXPAND_DELTA = 1.0
EXPAND_CAP = 256


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection on uint64 with full avalanche."""
    x = x ^ (x >> _U(30))
    x *= _U(0xBF58476D1CE4E5B9)
    x ^= x >> _U(27)
    x *= _U(0x94D049BB133111EB)
    x ^= x >> _U(31)
    return x


def _mix_int(x: int) -> int:
    """_mix64 for one Python int (derives keys from seeds, same numbers as the array form)."""
    return int(_mix64(np.array([x & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0])


def _key(seed: int, purpose: int) -> int:
    return _mix_int((seed * _GAMMA + purpose * 0xD1B54A32D192ED03) & 0xFFFFFFFFFFFFFFFF)


def _fastrange(x: np.ndarray, k: int) -> np.ndarray:
    """floor(top 32 bits of x * k / 2^32): a bin in [0, k) without a division (Lemire).

    For k a power of two that is the top log2(k) bits, one shift."""
    if k & (k - 1) == 0:
        return x >> _U(64 - (k.bit_length() - 1))
    return ((x >> _U(32)) * _U(k)) >> _U(32)


def _mix64_inplace(x: np.ndarray, tmp: np.ndarray) -> None:
    """`_mix64` of x, written over x (tmp: scratch of x's size): no array allocated."""
    np.right_shift(x, _U(30), out=tmp)
    x ^= tmp
    x *= _U(0xBF58476D1CE4E5B9)
    np.right_shift(x, _U(27), out=tmp)
    x ^= tmp
    x *= _U(0x94D049BB133111EB)
    np.right_shift(x, _U(31), out=tmp)
    x ^= tmp


def _fastrange_into(x: np.ndarray, k: int, out: np.ndarray) -> None:
    """`_fastrange(x, k)` written into `out`."""
    if k & (k - 1) == 0:
        np.right_shift(x, _U(64 - (k.bit_length() - 1)), out=out)
    else:
        np.right_shift(x, _U(32), out=out)
        out *= _U(k)
        out >>= _U(32)


_STEPS = np.zeros(0, np.uint64)


def _gamma_steps(m: int) -> np.ndarray:
    """i * gamma for i in 0..m-1 (uint64, wrapping), kept between calls (up to _KEEP)."""
    global _STEPS
    if len(_STEPS) < m:
        with np.errstate(over="ignore"):
            steps = np.arange(max(m, _CHUNK_TOKENS), dtype=np.uint64) * _U(_GAMMA)
        if len(steps) > _KEEP:
            return steps[:m]
        _STEPS = steps
    return _STEPS[:m]


_KEEP = 1 << 22  # the longest run of counters kept between calls (32 MiB)


def term_ids(hashes: np.ndarray, _round: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(ids, first): hashes[i] == hashes[first[ids[i]]], `first` ascending: a vocabulary
    of a batch's terms, so that work that depends on a term's hash only (its weight, its
    units) is done once per term of the vocabulary, not once per document holding it.

    A hash table in numpy: every hash writes its index into its slot and reads the slot
    back; a hash finding an index with the same hash takes that index's term (all copies
    of a hash share the slot, so the hash that won it is settled entirely). The hashes
    that lost their slot to another hash go round again, placed anew, a few times; any
    still left are terms of their own, so a hash can (rarely) have more than one id:
    nothing here needs the vocabulary to be minimal, only every id to name one hash. The
    table has 2 to 4 slots a hash up to 2^18 slots (2 MiB): a batch has far fewer
    distinct terms than terms, and a bigger table costs more in cache misses than the
    rounds it saves.
    """
    hashes = np.ascontiguousarray(hashes, np.uint64)
    n = len(hashes)
    index = iota(n)
    bits = min(max(int(n - 1).bit_length() + 1, 4), 18)
    table = np.empty(1 << bits, np.intp)
    with np.errstate(over="ignore"):
        slot = hashes * _SLOT_MUL[_round]
    slot >>= _U(64 - bits)
    slot = slot.view(np.intp)
    table[slot] = index
    owner = table[slot]
    lost = np.flatnonzero(np.take(hashes, owner) != hashes)
    if len(lost):
        if _round + 1 < len(_SLOT_MUL):
            sub_ids, sub_first = term_ids(hashes[lost], _round + 1)
            owner[lost] = lost[sub_first[sub_ids]]
        else:
            owner[lost] = lost
    first = np.flatnonzero(owner == index)
    rank = np.empty(n, np.intp)
    rank[first] = index[: len(first)]
    return np.take(rank, owner), first


# Odd multipliers placing a hash in `term_ids`' and `term_bags`' tables, one per round.
_SLOT_MUL = tuple(_U(m) for m in (
    0xD1B54A32D192ED03, 0xAEF17502108EF2D9, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB,
    0xDB4F0B9175AE2165, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3,
))


_BAG_GROUP = 1 << 14  # tokens per table (2 to 4 slots a token): the table stays in L2


def term_bags(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct hashes: (first, tf).

    `first`: the flat index of one token of each distinct (document, hash), ascending,
    so grouped by document; `tf`: how many tokens of its document have that hash.

    A hash table in numpy rounds rather than a sort (a sort of the batch cost more than
    the three sketches made from it). Each document has a region of the table of its
    own, a power of two at least twice its length, so a slot only ever holds tokens of
    one document. In each round every unresolved token writes its index into the slot
    its hash picks in its document's region; the slot is read back, and a token whose
    slot holds a token with the same hash is resolved to it. All tokens of one hash
    share a slot in every round, so the hash that won a slot is settled entirely, and
    only hashes that lost a slot to another go on to the next round, placed anew (about
    one token in twenty after the first round). Which token of a hash wins does not
    matter. Groups of documents keep the table in cache. (`term_ids` does the same over
    a whole batch, with the same multipliers.)
    """
    hashes, offsets = batch.hashes, batch.offsets
    lengths = batch.lengths
    log_size = np.frexp(np.maximum(2 * lengths - 1, 1))[1]  # bit_length(2 len - 1)
    size = np.where(lengths > 0, 1 << log_size, 0)
    region = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=region[1:])
    shift_of = (64 - log_size).astype(np.uint64)
    parts_first, parts_tf = [], []
    with np.errstate(over="ignore"):
        for d0, d1 in doc_ranges(offsets, _BAG_GROUP):
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            if t0 == t1:
                continue
            g = t1 - t0
            doc_len = lengths[d0:d1]
            # slot = region + (hash * odd) >> (64 - log2 size): uint64 throughout
            base = np.repeat((region[d0:d1] - region[d0]).astype(np.uint64), doc_len)
            shift = np.repeat(shift_of[d0:d1], doc_len)
            h = hashes[t0:t1]
            table = np.empty(int(region[d1] - region[d0]), np.intp)
            index = iota(g)
            slot = h * _SLOT_MUL[0]
            slot >>= shift
            slot += base
            slot = slot.view(np.intp)
            table[slot] = index
            owner = table[slot]
            todo = np.flatnonzero(np.take(h, owner) != h)
            for r in range(1, len(_SLOT_MUL) + 1):
                if len(todo) == 0:
                    break
                if r == len(_SLOT_MUL):  # hashes that lost every round (never seen): sort them
                    doc = np.searchsorted(offsets[d0 + 1 : d1 + 1] - t0, todo, side="right")
                    order = todo[np.lexsort((h[todo], doc))]
                    doc = np.searchsorted(offsets[d0 + 1 : d1 + 1] - t0, order, side="right")
                    k = h[order]
                    new = np.flatnonzero(np.concatenate(([True], (k[1:] != k[:-1]) | (doc[1:] != doc[:-1]))))
                    owner[order] = order[np.repeat(new, np.diff(np.append(new, len(order))))]
                    break
                k = h[todo]
                slot = k * _SLOT_MUL[r]
                slot >>= shift[todo]
                slot += base[todo]
                slot = slot.view(np.intp)
                table[slot] = todo
                won = table[slot]
                owner[todo] = won  # right for those that match; the others go round again
                todo = todo[np.take(h, won) != k]
            first = np.flatnonzero(owner == index)
            parts_tf.append(np.bincount(owner, minlength=g)[first])
            parts_first.append(first + t0)
    if not parts_first:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    return np.concatenate(parts_first), np.concatenate(parts_tf)


_IOTA = np.zeros(0, np.intp)


def iota(n: int) -> np.ndarray:
    """0..n-1 (intp), kept between calls (read only; up to _KEEP)."""
    global _IOTA
    if len(_IOTA) < n:
        if n > _KEEP:
            return np.arange(n, dtype=np.intp)
        _IOTA = np.arange(max(n, 1 << 16), dtype=np.intp)
        _IOTA.flags.writeable = False
    return _IOTA[:n]


class MinHash:
    """MinHash signatures of the hash sets in a TokenBatch (weights ignored, repeats too)."""

    def __init__(self, num_perm: int = 128, seed: int = 1, variant: str = "oph"):
        if num_perm < 1 or num_perm > 1 << 16:
            raise ValueError("num_perm must be in 1..65536")
        if variant not in ("oph", "kperm"):
            raise ValueError("variant must be 'oph' or 'kperm'")
        self.num_perm = num_perm
        self.seed = seed
        self.variant = variant
        self.version = f"minhash-{variant}-p{num_perm}-s{seed}-{HASH_VERSION}-v1"
        self._bin_key = _U(_key(seed, 1))
        self._bin_mul = _U(_key(seed, 7) | 1)
        self._probe_key = _U(_key(seed, 2))
        self._probes: np.ndarray | None = None
        with np.errstate(over="ignore"):
            counters = np.arange(1, num_perm + 1, dtype=np.uint64) * _U(_GAMMA)
            self._a = _mix64(counters ^ _U(_key(seed, 3)))
            self._b = _mix64(counters ^ _U(_key(seed, 4)))

    def __call__(self, batch: TokenBatch) -> np.ndarray:
        return self.sign(batch)

    def sign(self, batch: TokenBatch) -> np.ndarray:
        """uint32 (n_docs, num_perm)."""
        with np.errstate(over="ignore"):
            if self.variant == "oph":
                return self._oph(batch)
            return self._kperm(batch)

    # -- one permutation hashing ----------------------------------------------------------

    def _oph(self, batch: TokenBatch) -> np.ndarray:
        """Token hashes are already well mixed: one xor and one odd multiply (a bijection)
        make them seed-specific; the top bits pick the bin, the low 32 bits are the value.
        In place, in buffers reused from chunk to chunk; a bin's row base is a repeat of
        one value per document."""
        n, k = batch.n_docs, self.num_perm
        sig = np.full((n, k), EMPTY, dtype=np.uint32)
        offsets, lengths = batch.offsets, batch.lengths
        flat = sig.reshape(-1)
        rows = np.arange(n, dtype=np.uint64) * _U(k)
        mixed = scratch = value = np.empty(0, np.uint64)
        for d0, d1 in doc_ranges(offsets, _CHUNK_TOKENS):
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            if t0 == t1:
                continue
            m = t1 - t0
            if len(mixed) < m:
                mixed, scratch, value = np.empty(m, np.uint64), np.empty(m, np.uint64), np.empty(m, np.uint32)
            x, cell, v = mixed[:m], scratch[:m], value[:m]
            np.bitwise_xor(batch.hashes[t0:t1], self._bin_key, out=x)
            x *= self._bin_mul
            _fastrange_into(x, k, cell)
            cell += np.repeat(rows[d0:d1], lengths[d0:d1])
            np.copyto(v, x, casting="unsafe")  # the low 32 bits
            top = v == EMPTY  # 0xFFFFFFFF marks an empty bin: such a value is one less
            if top.any():
                v[top] = np.uint32(0xFFFFFFFE)
            np.minimum.at(flat, cell.view(np.int64), v)
        self._densify(sig, lengths > 0)
        return sig

    def _probe_table(self, attempts: int) -> np.ndarray:
        """Bin probed by (bin, attempt): (num_perm, attempts) int64, the same for every doc."""
        if self._probes is None or self._probes.shape[1] < attempts:
            k = self.num_perm
            cols = np.arange(k, dtype=np.uint64)[:, None] << _U(32)
            tries = np.arange(1, attempts + 1, dtype=np.uint64)[None, :]
            with np.errstate(over="ignore"):
                self._probes = _fastrange(_mix64((cols | tries) ^ self._probe_key), k).astype(np.int64)
        return self._probes

    def _densify(self, sig: np.ndarray, nonempty_doc: np.ndarray) -> None:
        """Fill empty bins of non-empty documents from a non-empty bin (optimal densification).

        Bin j of a document takes the value of the first non-empty bin among
        probe(j, 1), probe(j, 2), ... of the same document. The first probe settles most
        bins (a share of bins about that of non-empty ones), so it is done alone, in 1-D;
        the rest in rounds of widening 2-D probes. Values are read before any is written.
        """
        k = self.num_perm
        flat = sig.reshape(-1)
        pending = np.flatnonzero(flat == EMPTY)
        if pending.size == 0:
            return
        if not nonempty_doc.all():  # an empty document stays empty
            pending = pending[nonempty_doc[pending // k]]
        cols = pending % k
        rows = pending - cols
        filled, values = [], []
        attempt, width = 0, 1
        while rows.size:
            probes = self._probe_table(attempt + width)[:, attempt : attempt + width]
            if width == 1:
                got = flat[rows + probes[cols, 0]]
                found = got != EMPTY
                first = got[found]
            else:
                got = flat[rows[:, None] + probes[cols]]  # (pending, width)
                hit = got != EMPTY
                found = hit.any(axis=1)
                first = got[found, hit[found].argmax(axis=1)]
            filled.append(rows[found] + cols[found])
            values.append(first)
            rows, cols = rows[~found], cols[~found]
            attempt += width
            width = min(width * 4, 256)
        if filled:
            flat[np.concatenate(filled)] = np.concatenate(values)

    # -- k independent permutations -------------------------------------------------------

    def _kperm(self, batch: TokenBatch) -> np.ndarray:
        n, k = batch.n_docs, self.num_perm
        best = np.full((n, k), np.iinfo(np.uint64).max, dtype=np.uint64)
        offsets = batch.offsets
        keys = batch.hashes >> _U(32)
        a, b = self._a[None, :], self._b[None, :]
        limit = max(_CHUNK_CELLS // k, 1)
        for d0, d1 in doc_ranges(offsets, limit):
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            # A document longer than a chunk is done in parts, keeping the minimum.
            for s0 in range(t0, t1, limit) if t1 - t0 > limit else (t0,):
                s1 = min(s0 + limit, t1)
                if s0 == s1:
                    continue
                cells = keys[s0:s1, None] * a
                cells += b
                local = np.clip(offsets[d0 : d1 + 1], s0, s1) - s0
                nonempty = np.flatnonzero(np.diff(local) > 0)
                mins = np.minimum.reduceat(cells, local[:-1][nonempty], axis=0)
                rows = d0 + nonempty
                best[rows] = np.minimum(best[rows], mins)
        sig = np.minimum(best >> _U(32), _U(0xFFFFFFFE)).astype(np.uint32)
        sig[batch.lengths == 0] = EMPTY
        return sig


class WeightedMinHash:
    """Weighted MinHash signatures of the weighted term sets in a TokenBatch.

    Repeated hashes in a document are merged first (weights summed; without weights each
    occurrence counts 1, i.e. term frequency). Terms with weight <= 0 are left out.
    `variant`: "expand" (default: quantised expansion and one permutation hashing, fast),
    "icws" or "0bit" (consistent weighted sampling, O(terms x num_perm)); see the module
    docstring. `delta` and `cap` apply to "expand" only.
    """

    def __init__(self, num_perm: int = 128, seed: int = 1, variant: str = "expand",
                 delta: float = EXPAND_DELTA, cap: int = EXPAND_CAP):
        if num_perm < 1 or num_perm > 1 << 16:
            raise ValueError("num_perm must be in 1..65536")
        if variant not in ("expand", "icws", "0bit"):
            raise ValueError("variant must be 'expand', 'icws' or '0bit'")
        if not delta > 0 or cap < 1:
            raise ValueError("delta must be > 0 and cap >= 1")
        self.num_perm = num_perm
        self.seed = seed
        self.variant = variant
        self.delta = float(delta)
        self.cap = int(cap)
        if variant == "expand":
            self.version = f"wminhash-expand-d{self.delta:g}-c{self.cap}-p{num_perm}-s{seed}-{HASH_VERSION}-v1"
        else:
            self.version = f"wminhash-{variant}-p{num_perm}-s{seed}-{HASH_VERSION}-v1"
        self._term_key = _U(_key(seed, 5))
        self._out_key = _U(_key(seed, 6))
        self._round_key = _U(_key(seed, 8))
        self._unit_key = _U(_key(seed, 9))
        self._oph = MinHash(num_perm, seed, "oph")  # its densification

    def __call__(self, batch: TokenBatch) -> np.ndarray:
        return self.sign(batch)

    def _terms(self, batch: TokenBatch) -> TokenBatch:
        """Each document's distinct terms with positive (summed) weights, in hash order.

        A batch that already is that (the text signer passes collapsed TF-IDF terms) is not
        collapsed again: sorting is most of the cost at this size.
        """
        h, w, off = batch.hashes, batch.weights, batch.offsets
        ascending = h[1:] > h[:-1]
        inner = off[1:-1]
        ascending[inner[(inner > 0) & (inner < len(h))] - 1] = True  # across documents: any
        if w is None or len(h) and not ascending.all():
            batch = collapse_terms(batch)
            w = batch.weights
        if np.all(w > 0):
            return batch
        return batch.select(w > 0)

    def sign(self, batch: TokenBatch) -> np.ndarray:
        """uint32 (n_docs, num_perm)."""
        terms = self._terms(batch)
        if self.variant == "expand":
            return self.sign_terms(terms)
        with np.errstate(over="ignore"):
            return self._cws(terms)

    def sign_terms(self, terms: TokenBatch, vocab: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """`sign` of a batch that already holds each document's distinct terms, in any
        order (the text signer's bags): the same signatures, without the check and the sort that
        put a batch in that form ("expand" keeps minima, so the order of a document's
        terms does not matter; the CWS variants break ties by term hash in `_cws`, which
        needs hash order, so they go through `sign`). A term of weight 0 is as good as
        absent ("expand" makes no unit of it), so a caller can zero terms, not drop them.

        `vocab`, if the caller has it: (ids, hashes) with terms.hashes == hashes[ids]
        (`term_ids`); otherwise "expand" finds it for a batch big enough to share terms."""
        if self.variant != "expand":
            return self.sign(terms)
        n_terms = len(terms.hashes)
        if vocab is None and n_terms >= VOCAB_MIN_TERMS and \
                terms.weights.sum(dtype=np.float64) >= _TABLE_MIN_UNITS * self.delta * n_terms:
            ids, first = term_ids(terms.hashes)
            vocab = (ids, terms.hashes[first])
        with np.errstate(over="ignore"):
            return self._expand(terms, vocab)

    # -- quantised expansion + one permutation hashing ----------------------------------

    def units(self, terms: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
        """Units of each term, floor(w / delta + u) with u ~ U[0, 1) fixed per term, at most
        `cap` (int64); and their offsets per document (see the module docstring)."""
        copies, _, unit_off = self._units(terms)
        return copies, unit_off

    def _rounding(self, hashes: np.ndarray) -> np.ndarray:
        """u ~ U[0, 1) of each term, from the top 53 bits of mix64(hash ^ key) (float64)."""
        x = hashes ^ self._round_key
        tmp = np.empty_like(x)
        _mix64_inplace(x, tmp)
        x >>= _U(11)
        u = tmp.view(np.float64)  # the scratch, reused
        np.copyto(u, x, casting="unsafe")
        u *= 1.0 / (1 << 53)
        return u

    def _units(self, terms: TokenBatch, vocab: tuple[np.ndarray, np.ndarray] | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`units`, with the running count of units before each term (n_terms + 1,).

        A chunk of terms at a time, in place in buffers that stay in cache. With a
        `vocab`, the rounding u of each distinct hash is drawn once and gathered."""
        hashes, weights = terms.hashes, terms.weights
        if vocab is not None:
            u_of = self._rounding(vocab[1])
        copies = np.empty(len(hashes), np.int64)
        size = max(min(len(hashes), _CHUNK_TOKENS), 1)
        c = np.empty(size, np.float64)
        for s0 in range(0, len(hashes), size):
            s1 = min(s0 + size, len(hashes))
            m = s1 - s0
            u = np.take(u_of, vocab[0][s0:s1]) if vocab is not None else self._rounding(hashes[s0:s1])
            np.copyto(c[:m], weights[s0:s1])
            if self.delta != 1.0:  # (x / 1.0 is x)
                c[:m] /= self.delta
            c[:m] += u
            np.floor(c[:m], out=c[:m])
            np.minimum(c[:m], self.cap, out=c[:m])
            np.copyto(copies[s0:s1], c[:m], casting="unsafe")
        cum = np.zeros(len(copies) + 1, np.int64)
        np.cumsum(copies, out=cum[1:])
        unit_off = cum[terms.offsets]
        lost = (unit_off[1:] == unit_off[:-1]) & (terms.lengths > 0)
        if lost.any():  # weights too small to round to any unit: one unit per term
            copies[lost[terms.doc_ids()] & (weights > 0)] = 1  # (a zero weight: no term)
            np.cumsum(copies, out=cum[1:])
            unit_off = cum[terms.offsets]
        return copies, cum, unit_off

    def _expand(self, terms: TokenBatch, vocab: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Unit j (1, 2, ...) of term x is splitmix64's j-th output from the state x ^ key:
        mix64(x ^ key + j * gamma), which gives its cell (top bits) and value (low 32).

        With a `vocab` whose distinct terms have far fewer units (as many as the most a
        document gives the term) than the batch has (a batch of texts shares most of its
        words), those units are hashed once into a table of (bin, value) and each
        document's units are gathered from it (`_unit_table`); otherwise every unit is
        hashed where it occurs (`_hash_units`). Either way the cell's row base is a
        repeat of one value per document, and a cell keeps its minimum."""
        n, k = terms.n_docs, self.num_perm
        sig = np.full((n, k), EMPTY, dtype=np.uint32)
        copies, cum, unit_off = self._units(terms, vocab)
        per_doc = np.diff(unit_off)
        flat = sig.reshape(-1)
        offsets = terms.offsets
        rows = np.arange(n, dtype=np.uint64) * _U(k)
        shared = vocab is not None and len(vocab[1]) < len(vocab[0])  # (else no term to share)
        table = self._unit_table(vocab, copies) if shared else None
        scratch = value = np.empty(0, np.uint64)
        for d0, d1 in doc_ranges(unit_off, _CHUNK_TOKENS):
            u0, u1 = int(unit_off[d0]), int(unit_off[d1])
            if u0 == u1:
                continue
            m = u1 - u0
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            if len(scratch) < m:
                scratch, value = np.empty(m, np.uint64), np.empty(m, np.uint32)
            cell, v = scratch[:m], value[:m]
            if table is None:
                x = self._hash_units(terms.hashes[t0:t1], copies[t0:t1], cum[t0:t1] - u0, cell)
            else:  # unit j of a term is entry start + j - 1 of the table
                start, packed = table
                at = np.take(start, vocab[0][t0:t1])
                at -= cum[t0:t1] - u0
                at = np.repeat(at, copies[t0:t1])
                at += iota(m)
                x = np.take(packed, at).view(np.uint64)
                np.right_shift(x, _U(32), out=cell)
            cell += np.repeat(rows[d0:d1], per_doc[d0:d1])  # the cell's row base
            np.copyto(v, x, casting="unsafe")  # the low 32 bits
            if table is None:
                top = v == EMPTY  # 0xFFFFFFFF marks an empty bin: such a value is one less
                if top.any():
                    v[top] = np.uint32(0xFFFFFFFE)
            np.minimum.at(flat, cell.view(np.int64), v)
        self._oph._densify(sig, per_doc > 0)
        return sig

    def _hash_units(self, hashes: np.ndarray, copies: np.ndarray, first: np.ndarray,
                    cell: np.ndarray) -> np.ndarray:
        """The units of terms (`copies` each, the first at index `first` of the run):
        mix64 outputs x (returned) and their bins (written into `cell`).

        With i a unit's index in the run, j = i - first + 1, so the state is a repeat of
        one value per term, (x ^ key) - (first - 1) * gamma, plus i * gamma
        (`_gamma_steps`); the hashing runs in place, each step one pass over contiguous
        uint64 (this is most of the cost of a text's signature)."""
        base = (first - 1).astype(np.uint64)
        base *= _U(_GAMMA)
        np.subtract(hashes ^ self._unit_key, base, out=base)
        x = np.repeat(base, copies)
        x += _gamma_steps(len(x))
        _mix64_inplace(x, cell)
        _fastrange_into(x, self.num_perm, cell)
        return x

    def _unit_table(self, vocab: tuple[np.ndarray, np.ndarray], copies: np.ndarray):
        """(start, packed): units 1..c of each distinct term, c the most any of its
        documents gives it, as (bin << 32 | value) at packed[start[id]:start[id + 1]]
        (int64); or None where that saves too little: terms of a few units each (the
        per-term work of gathering them is most of the cost then) or a table that would
        hold more than a quarter of the batch's units."""
        ids, hashes = vocab
        units = int(copies.sum())
        if units < _TABLE_MIN_UNITS * len(copies):  # gathering a unit costs about what hashing it does
            return None
        most = np.zeros(len(hashes), np.int64)
        np.maximum.at(most, ids, copies)
        start = np.zeros(len(hashes) + 1, np.int64)
        np.cumsum(most, out=start[1:])
        if start[-1] * 4 > units:
            return None
        packed = np.empty(int(start[-1]), np.int64)
        for g0, g1 in doc_ranges(start, _CHUNK_TOKENS):
            p0, p1 = int(start[g0]), int(start[g1])
            if p0 == p1:
                continue
            out = packed[p0:p1].view(np.uint64)
            x = self._hash_units(hashes[g0:g1], most[g0:g1], start[g0:g1] - p0, out)
            value = x.astype(np.uint32)
            np.minimum(value, np.uint32(0xFFFFFFFE), out=value)  # 0xFFFFFFFF: an empty bin
            out <<= _U(32)
            out |= value
        return start[:-1], packed

    # -- consistent weighted sampling (ICWS, 0-bit CWS) ----------------------------------

    def _variables(self, terms: np.ndarray) -> np.ndarray:
        """ICWS variables of each term for every permutation: float32 (len(terms), 3, k).

        Per (term, permutation): r ~ Gamma(2,1), beta ~ U(0,1), and A = ln c + r*beta - r
        with c ~ Gamma(2,1), so that ln a = A - r*t. One array, so a chunk gathers its
        terms' rows in one go. Counter-based: splitmix64 over the term's mixed hash plus a
        gamma-spaced counter for (permutation, draw); each 64-bit output gives two 24-bit
        uniforms (exact in float32, never 0 or 1).
        """
        k = self.num_perm
        states = _mix64(terms.astype(np.uint64) ^ self._term_key)[:, None]
        base = np.arange(k, dtype=np.uint64)[None, :] * _U(3) + _U(1)
        scale = np.float32(1.0 / (1 << 24))

        def uniforms(state: np.ndarray, draw: int):
            z = _mix64(state + (base + _U(draw)) * _U(_GAMMA))
            u1 = ((z >> _U(40)).astype(np.float32) + np.float32(0.5)) * scale
            u2 = ((z & _U(0xFFFFFF)).astype(np.float32) + np.float32(0.5)) * scale
            return u1, u2

        out = np.empty((len(terms), 3, k), dtype=np.float32)
        step = max(_CHUNK_CELLS // (4 * k), 1)  # rows per pass: temporaries stay in cache
        for i in range(0, len(terms), step):
            state = states[i : i + step]
            u1, u2 = uniforms(state, 0)
            r = out[i : i + step, 0, :]
            np.negative(np.log(u1 * u2), out=r)  # Gamma(2, 1): the sum of two Exp(1)
            beta = out[i : i + step, 1, :]
            beta[...] = uniforms(state, 2)[0]
            u3, u4 = uniforms(state, 1)
            out[i : i + step, 2, :] = np.log(-np.log(u3 * u4)) + r * beta - r
        return out

    def _cws(self, terms: TokenBatch) -> np.ndarray:
        n, k = terms.n_docs, self.num_perm
        sig = np.full((n, k), EMPTY, dtype=np.uint32)
        offsets, hashes = terms.offsets, terms.hashes
        if len(hashes) == 0:
            return sig
        if len(hashes) >= 1 << 32:
            raise ValueError("batch too large: split it below 2**32 terms")
        log_w = np.log(terms.weights.astype(np.float64)).astype(np.float32)
        # Best (orderable ln a, row) key and the winner's t so far, per doc and permutation.
        best = np.full((n, k), np.iinfo(np.int64).max, dtype=np.int64)
        best_t = np.zeros((n, k), dtype=np.float32)
        cells = max(_CHUNK_CELLS // k, 1)
        with np.errstate(over="ignore"):
            # Variables are drawn once per distinct term of a group of documents and shared
            # by the chunks of that group (Zipf: most terms of a chunk recur across it).
            for g0, g1 in doc_ranges(offsets, cells * _GROUP_CHUNKS):
                u0, u1 = int(offsets[g0]), int(offsets[g1])
                if u0 == u1:
                    continue
                uniq, inverse = np.unique(hashes[u0:u1], return_inverse=True)
                variables = self._variables(uniq)
                inverse = inverse.reshape(-1)
                for d0, d1 in doc_ranges(offsets[g0 : g1 + 1] - u0, cells):
                    d0, d1 = g0 + d0, g0 + d1
                    t0, t1 = int(offsets[d0]), int(offsets[d1])
                    # A document longer than a chunk is done in parts, keeping the best.
                    for s0 in range(t0, t1, cells):
                        s1 = min(s0 + cells, t1)
                        local = np.clip(offsets[d0 : d1 + 1], s0, s1) - s0
                        nonempty = np.flatnonzero(np.diff(local) > 0)
                        rows = d0 + nonempty
                        keys, t_win = self._keys(variables, inverse[s0 - u0 : s1 - u0], log_w[s0:s1],
                                                 local[:-1][nonempty], s0)
                        better = keys < best[rows]
                        best[rows] = np.where(better, keys, best[rows])
                        best_t[rows] = np.where(better, t_win, best_t[rows])
            live = np.flatnonzero(terms.lengths > 0)
            winner = (best[live] & 0xFFFFFFFF).astype(np.int64)  # (docs, k): winning term
            term = hashes[winner]
            if self.variant == "icws":
                step = best_t[live].astype(np.int64).astype(np.uint64)
            else:
                step = np.zeros_like(term)
            fp = (_mix64(term ^ _mix64(step ^ self._out_key)) >> _U(32)).astype(np.uint32)
        # A fingerprint equal to the empty marker would read as "no terms": nudge it.
        sig[live] = np.minimum(fp, np.uint32(0xFFFFFFFE))
        return sig

    def _keys(self, variables, inverse, log_w, starts, row_base):
        """Per document of a chunk and permutation: min over its terms of (ln a, row), and t.

        The float's bits, made monotone as a signed int32, sit above the row index, so one
        int64 min gives the argmin (ties to the lower row: terms are in hash order within a
        document, so ties break the same way in any batch).
        """
        v = variables[inverse]  # (terms, 3, k)
        r, beta, big_a = v[:, 0, :], v[:, 1, :], v[:, 2, :]
        t = log_w[:, None] / r
        t += beta
        np.floor(t, out=t)
        log_a = big_a - r * t
        bits = log_a.view(np.int32)
        order = bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))
        key = order.astype(np.int64) << np.int64(32)
        key |= np.arange(row_base, row_base + len(inverse), dtype=np.int64)[:, None]
        best = np.minimum.reduceat(key, starts, axis=0)
        local_row = (best & 0xFFFFFFFF) - row_base
        t_win = t[local_row, np.arange(t.shape[1])[None, :]]
        return best, t_win


def jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Share of positions where two signatures agree, ignoring empty-document positions.

    Broadcasts over leading axes: (k,) vs (k,), (k,) vs (n, k) (one against many), or
    (n, k) vs (n, k) row by row. An empty document (all 0xFFFFFFFF) scores 0 with anything.
    """
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    same = (a == b) & (a != EMPTY)
    return same.mean(axis=-1)
