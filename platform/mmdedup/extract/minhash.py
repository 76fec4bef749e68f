"""MinHash over shingle sets, and weighted MinHash over weighted terms.

Both produce uint32 signatures, shape (n_docs, num_perm); the share of positions two
signatures agree on estimates the (weighted) Jaccard similarity of their documents, and the
same signatures feed band LSH (index/lsh.py). Empty documents get all 0xFFFFFFFF, which
`jaccard` never counts as agreement (an empty text duplicates nothing).

MinHash, two variants (`variant=`):

- "oph" (default): one permutation hashing with optimal densification (Li, Owen & Zhang
  2012; Shrivastava 2017). Each shingle hash (already XXH3 output) is made seed-specific
  by an xor and an odd multiply, a bijection; its top bits pick one of num_perm bins and
  its low 32 bits are the value; a bin keeps its minimum. A bin no
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
  on a 2-core VM numpy signs about 4,000 documents of 400 tokens a second this way,
  against about 80,000 with "oph" (scripts/bench/text_signature_speed.py), which is why
  "oph" is the default. Kept as the textbook reference; the tests hold both to the truth.

Weighted MinHash: ICWS, improved consistent weighted sampling (Ioffe 2010), over each
document's distinct terms and positive weights (TF-IDF). Per (term, permutation) three
random variables r ~ Gamma(2,1), c ~ Gamma(2,1), beta ~ U(0,1) give
t = floor(ln w / r + beta) and ln a = ln c - r (t - beta + 1); the term with the smallest
a wins. With `variant="icws"` (default) a position is a 32-bit fingerprint of
(winning term, t): P[equal] is exactly the weighted Jaccard sum(min)/sum(max). With
"0bit" (Li 2015) only the winning term is kept: the same computation (so no faster), a
slight upward bias in theory (P[same winner] >= weighted Jaccard) that Li found negligible
on real weights, and a position depends on one thing less, so it moves less when
retraining nudges the weights. We chose ICWS as the default for being unbiased; I2CWS (Wu et al. 2017) removes a dependence
ICWS has between t and a, at twice the random numbers for a gain that matters little on
near-duplicates. "PCWS" saves one of the three variables; the random numbers are not our
bottleneck (they are drawn once per distinct term in a chunk and reused by every
document that has the term).

The random variables come from a counter-based generator (the splitmix64 finaliser over
the term's hash and the permutation index, in numpy uint64 arithmetic): the same term gets
the same variables in every document, batch and process, with no table to store. They
are turned into floats with float32 logarithms; numpy's SIMD log may differ in the last
bit between CPU families, which can flip a rare floor() in t, so signatures are
bit-identical on one kind of machine and agree on all but the odd position across kinds.
"""

from __future__ import annotations

import numpy as np

from .text import HASH_VERSION, TokenBatch, collapse_terms

EMPTY = np.uint32(0xFFFFFFFF)

_U = np.uint64
_M32 = _U(0xFFFFFFFF)
_GAMMA = 0x9E3779B97F4A7C15
_CHUNK_TOKENS = 1 << 15  # OPH: tokens per pass
_CHUNK_CELLS = 1 << 19  # k-perm and ICWS: token x permutation cells per pass (4 MiB of uint64)
_GROUP_CHUNKS = 16  # weighted: chunks sharing one draw of the variables


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
    """floor(top 32 bits of x * k / 2^32): a bin in [0, k) without a division (Lemire)."""
    return ((x >> _U(32)) * _U(k)) >> _U(32)


def _doc_chunks(offsets: np.ndarray, max_tokens: int):
    n = len(offsets) - 1
    d0 = 0
    while d0 < n:
        d1 = int(np.searchsorted(offsets, offsets[d0] + max_tokens, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n)
        yield d0, d1
        d0 = d1


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
        for d0, d1 in _doc_chunks(offsets, _CHUNK_TOKENS):
            t0, t1 = int(offsets[d0]), int(offsets[d1])
            if t0 == t1:
                continue
            # Token hashes are already XXH3 output: one xor and one odd multiply (a bijection)
            # make them seed-specific; the top bits pick the bin, the low 32 bits are the value.
            x = batch.hashes[t0:t1] ^ self._bin_key
            x *= self._bin_mul
            cell = np.repeat(np.arange(0, (d1 - d0) * k, k, dtype=np.int64), lengths[d0:d1])
            cell += _fastrange(x, k).astype(np.int64)
            value = (x & _M32).astype(np.uint32)
            np.minimum(value, np.uint32(0xFFFFFFFE), out=value)  # 0xFFFFFFFF marks an empty bin
            np.minimum.at(sig[d0:d1].reshape(-1), cell, value)
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
        """Fill empty bins of non-empty documents from a non-empty bin (optimal densification)."""
        k = self.num_perm
        flat = sig.reshape(-1)
        pending = np.flatnonzero((sig == EMPTY) & nonempty_doc[:, None])
        if pending.size == 0:
            return
        original = flat.copy()
        rows, cols = pending // k * k, pending % k
        attempt, width = 0, 2  # most bins resolve on the first probe: start narrow
        while rows.size:
            probes = self._probe_table(attempt + width)[:, attempt : attempt + width]
            values = original[rows[:, None] + probes[cols]]  # (pending, width)
            hit = values != EMPTY
            found = hit.any(axis=1)
            first = hit.argmax(axis=1)
            flat[rows[found] + cols[found]] = values[found, first[found]]
            rows, cols = rows[~found], cols[~found]
            attempt += width
            width = min(width * 4, 256)

    # -- k independent permutations -------------------------------------------------------

    def _kperm(self, batch: TokenBatch) -> np.ndarray:
        n, k = batch.n_docs, self.num_perm
        best = np.full((n, k), np.iinfo(np.uint64).max, dtype=np.uint64)
        offsets = batch.offsets
        keys = batch.hashes >> _U(32)
        a, b = self._a[None, :], self._b[None, :]
        limit = max(_CHUNK_CELLS // k, 1)
        for d0, d1 in _doc_chunks(offsets, limit):
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
    """ICWS signatures of the weighted term sets in a TokenBatch.

    Repeated hashes in a document are merged first (weights summed; without weights each
    occurrence counts 1, i.e. term frequency). Terms with weight <= 0 are left out.
    """

    def __init__(self, num_perm: int = 128, seed: int = 1, variant: str = "icws"):
        if num_perm < 1 or num_perm > 1 << 16:
            raise ValueError("num_perm must be in 1..65536")
        if variant not in ("icws", "0bit"):
            raise ValueError("variant must be 'icws' or '0bit'")
        self.num_perm = num_perm
        self.seed = seed
        self.variant = variant
        self.version = f"wminhash-{variant}-p{num_perm}-s{seed}-{HASH_VERSION}-v1"
        self._term_key = _U(_key(seed, 5))
        self._out_key = _U(_key(seed, 6))

    def __call__(self, batch: TokenBatch) -> np.ndarray:
        return self.sign(batch)

    def _variables(self, terms: np.ndarray, perms: np.ndarray):
        """ICWS variables of (term, permutation) pairs, broadcast; float32 arrays.

        Returns 1/r, beta, r and A = ln c + r*beta - r (so that ln a = A - r*t). Counter-
        based: splitmix64 over the term's mixed hash plus a gamma-spaced counter for
        (permutation, draw); each 64-bit output gives two 24-bit uniforms (exact in float32,
        never 0 or 1).
        """
        state = _mix64(terms ^ self._term_key)
        base = perms.astype(np.uint64) * _U(3) + _U(1)
        scale = np.float32(1.0 / (1 << 24))

        def uniforms(draw: int):
            z = _mix64(state + (base + _U(draw)) * _U(_GAMMA))
            u1 = ((z >> _U(40)).astype(np.float32) + np.float32(0.5)) * scale
            u2 = ((z & _U(0xFFFFFF)).astype(np.float32) + np.float32(0.5)) * scale
            return u1, u2

        u1, u2 = uniforms(0)
        r = -np.log(u1 * u2)  # Gamma(2, 1): the sum of two Exp(1)
        u3, u4 = uniforms(1)
        log_c = np.log(-np.log(u3 * u4))
        beta = uniforms(2)[0]
        return np.float32(1.0) / r, beta, r, log_c + r * beta - r

    def sign(self, batch: TokenBatch) -> np.ndarray:
        """uint32 (n_docs, num_perm)."""
        n, k = batch.n_docs, self.num_perm
        sig = np.full((n, k), EMPTY, dtype=np.uint32)
        terms = collapse_terms(batch)
        weights = terms.weights
        if not np.all(weights > 0):
            keep = weights > 0
            counts = np.bincount(terms.doc_ids()[keep], minlength=n)
            offsets = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            terms = TokenBatch(terms.hashes[keep], offsets, weights[keep])
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
            for g0, g1 in _doc_chunks(offsets, cells * _GROUP_CHUNKS):
                u0, u1 = int(offsets[g0]), int(offsets[g1])
                if u0 == u1:
                    continue
                uniq, inverse = np.unique(hashes[u0:u1], return_inverse=True)
                variables = self._variables(uniq[:, None], np.arange(k)[None, :])
                inverse = inverse.reshape(-1)
                for d0, d1 in _doc_chunks(offsets[g0 : g1 + 1] - u0, cells):
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
        int64 min gives the argmin (ties to the lower row).
        """
        inv_r, beta, r, big_a = (v[inverse] for v in variables)
        t = np.floor(log_w[:, None] * inv_r + beta)
        log_a = big_a - r * t
        bits = log_a.view(np.int32)
        order = bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))
        rows = np.arange(len(inverse), dtype=np.int64)[:, None]
        key = (order.astype(np.int64) << np.int64(32)) | (rows + row_base)
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
