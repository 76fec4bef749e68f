"""MinHash over shingle sets, and weighted MinHash over weighted terms.

Both produce uint32 signatures, shape (n_docs, num_perm); the share of positions two
signatures agree on estimates the (weighted) Jaccard similarity of their documents, and the
same signatures feed band LSH (index/lsh.py). Empty documents get all 0xFFFFFFFF, which
`jaccard` never counts as agreement (an empty text duplicates nothing).

MinHash, two variants (`variant=`):

- "oph" (default): one permutation hashing with optimal densification (Li, Owen & Zhang
  2012; Shrivastava 2017). Each shingle hash (already well mixed, see text.py) is made
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

from .text import HASH_VERSION, TokenBatch, collapse_terms, doc_ranges

EMPTY = np.uint32(0xFFFFFFFF)

_U = np.uint64
_GAMMA = 0x9E3779B97F4A7C15
_CHUNK_TOKENS = 1 << 15  # OPH: tokens per pass
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


def _row_bases(offsets: np.ndarray, d0: int, d1: int, k: int) -> np.ndarray:
    """d * k for every entry of documents d0..d1-1 (uint64): the start of its row in a
    flat (n_docs, k) signature. A cumsum of the steps between documents (a repeat costs
    about twice as much)."""
    t0 = int(offsets[d0])
    base = np.zeros(int(offsets[d1]) - t0, dtype=np.uint64)
    docs = d0 + np.flatnonzero(offsets[d0 + 1 : d1 + 1] > offsets[d0:d1])
    if len(docs):
        rows = docs.astype(np.uint64) * np.uint64(k)
        base[offsets[docs] - t0] = np.diff(rows, prepend=np.uint64(0))
        np.cumsum(base, out=base)
    return base



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
        n, k = batch.n_docs, self.num_perm
        sig = np.full((n, k), EMPTY, dtype=np.uint32)
        offsets, lengths = batch.offsets, batch.lengths
        flat = sig.reshape(-1)
        for d0, d1 in doc_ranges(offsets, _CHUNK_TOKENS):
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            if t0 == t1:
                continue
            # Token hashes are already well mixed: one xor and one odd multiply (a bijection)
            # make them seed-specific; the top bits pick the bin, the low 32 bits are the value.
            x = batch.hashes[t0:t1] ^ self._bin_key
            x *= self._bin_mul
            cell = _fastrange(x, k)
            cell += _row_bases(offsets, d0, d1, k)
            value = x.astype(np.uint32)  # the low 32 bits
            np.minimum(value, np.uint32(0xFFFFFFFE), out=value)  # 0xFFFFFFFF marks an empty bin
            np.minimum.at(flat, cell.view(np.int64), value)
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

        A batch that already is that (textsig passes collapsed TF-IDF terms) is not
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
        with np.errstate(over="ignore"):
            if self.variant == "expand":
                return self._expand(terms)
            return self._cws(terms)

    # -- quantised expansion + one permutation hashing ----------------------------------

    def units(self, terms: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
        """Units of each term, floor(w / delta + u) with u ~ U[0, 1) fixed per term, at most
        `cap` (int64); and their offsets per document (see the module docstring)."""
        u = (_mix64(terms.hashes ^ self._round_key) >> _U(11)).astype(np.float64) * (1.0 / (1 << 53))
        copies = np.floor(terms.weights.astype(np.float64) / self.delta + u)
        np.minimum(copies, self.cap, out=copies)
        copies = copies.astype(np.int64)
        cum = np.zeros(len(copies) + 1, np.int64)
        np.cumsum(copies, out=cum[1:])
        unit_off = cum[terms.offsets]
        lost = (unit_off[1:] == unit_off[:-1]) & (terms.lengths > 0)
        if lost.any():  # weights too small to round to any unit: one unit per term
            copies[lost[terms.doc_ids()]] = 1
            np.cumsum(copies, out=cum[1:])
            unit_off = cum[terms.offsets]
        return copies, unit_off

    def _expand(self, terms: TokenBatch) -> np.ndarray:
        n, k = terms.n_docs, self.num_perm
        sig = np.full((n, k), EMPTY, dtype=np.uint32)
        copies, unit_off = self.units(terms)
        per_doc = np.diff(unit_off)
        flat = sig.reshape(-1)
        offsets = terms.offsets
        doc_of = terms.doc_ids().astype(np.uint64)
        for d0, d1 in doc_ranges(unit_off, _CHUNK_TOKENS):
            u0, u1 = int(unit_off[d0]), int(unit_off[d1])
            if u0 == u1:
                continue
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            c = copies[t0:t1]
            # Unit j (1, 2, ...) of term x: splitmix64's j-th output from the state x ^ key,
            # mix64(x ^ key + j * gamma). With i the unit's index in the chunk and `first`
            # that of its term's first unit, j = i - first + 1: one repeat of a per-term
            # value, plus i * gamma. The cell's row base rides along in the same repeat.
            per_term = np.empty((t1 - t0, 2), dtype=np.uint64)
            first = np.cumsum(c) - c
            np.multiply(first.astype(np.uint64) - _U(1), _U(_GAMMA), out=per_term[:, 0])
            np.subtract(terms.hashes[t0:t1] ^ self._unit_key, per_term[:, 0], out=per_term[:, 0])
            np.multiply(doc_of[t0:t1], _U(k), out=per_term[:, 1])
            units = np.repeat(per_term, c, axis=0)
            state = np.arange(u1 - u0, dtype=np.uint64)
            state *= _U(_GAMMA)
            state += units[:, 0]
            x = _mix64(state)
            cell = _fastrange(x, k)
            cell += units[:, 1]
            value = x.astype(np.uint32)
            np.minimum(value, np.uint32(0xFFFFFFFE), out=value)
            np.minimum.at(flat, cell.view(np.int64), value)
        self._oph._densify(sig, per_doc > 0)
        return sig

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
