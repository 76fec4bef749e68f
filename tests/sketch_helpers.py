"""What the text-sketch tests share: random corpora, the signers they compare, and the plain
per-document definitions (textbook SimHash, one-permutation MinHash with densification,
weighted MinHash by expansion, hash-combined word shingles) that the fast kernels are held
to bit for bit."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from mmdedup.extract import text_sketches as textsig_mod
from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract.minhash import EMPTY, MinHash, WeightedMinHash

PLATFORM = Path(__file__).resolve().parents[1] / "platform"
SIGNERS = {
    "oph": MinHash(128),
    "kperm": MinHash(128, variant="kperm"),
    "expand": WeightedMinHash(128),
    "icws": WeightedMinHash(128, variant="icws"),
    "0bit": WeightedMinHash(128, variant="0bit"),
}


def random_words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 12))) for _ in range(n)]


def zipf_docs(seed: int, n_docs: int, length: int, vocab_size: int = 3000) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    vocab = random_words(random.Random(seed), vocab_size)
    p = 1.0 / np.arange(1, vocab_size + 1)
    p /= p.sum()
    lengths = rng.integers(0, length + 1, n_docs)
    return [[vocab[i] for i in rng.choice(vocab_size, int(k), p=p)] for k in lengths]


def textbook_simhash(hashes: list[int], weights: list[float] | None = None) -> int:
    votes = [0.0] * 64
    for k, h in enumerate(hashes):
        w = 1.0 if weights is None else weights[k]
        for i in range(64):
            votes[i] += w if (h >> i) & 1 else -w
    return sum(1 << i for i in range(64) if votes[i] > 0)


_M64 = (1 << 64) - 1


def reference_shingles(tokens: list[int], n: int) -> list[int]:
    """word_shingles of one document by its definition: n consecutive tokens from each start
    (a document shorter than n: one shingle, the missing tokens 0), in Python ints."""
    k = [int(x) for x in textsig_mod._K]
    starts = range(len(tokens) - n + 1) if len(tokens) >= n else ([0] if tokens else [])
    out = []
    for s in starts:
        h = 0
        for j in range(n):
            part = tokens[s + j] if s + j < len(tokens) else 0
            h = ((h ^ ((part * k[j]) & _M64)) * k[(j + 1) % n]) & _M64
            h ^= h >> 29
        out.append(h)
    return out


def reference_densify(bins: np.ndarray, signer: MinHash) -> np.ndarray:
    """Optimal densification by its definition: an empty bin j takes the first non-empty
    bin among probe(j, 1), probe(j, 2), ...; an empty document stays empty."""
    out = bins.copy()
    if (bins == EMPTY).all():
        return out
    probes = signer._probe_table(4096)
    for j in np.flatnonzero(bins == EMPTY):
        hits = bins[probes[j]] != EMPTY
        out[j] = bins[probes[j][hits.argmax()]]
    return out


def reference_oph(hashes: np.ndarray, signer: MinHash) -> np.ndarray:
    k = signer.num_perm
    bins = np.full(k, EMPTY, np.uint32)
    if len(hashes):
        x = (np.asarray(hashes, np.uint64) ^ signer._bin_key) * signer._bin_mul
        np.minimum.at(bins, minhash_mod._fastrange(x, k).astype(np.intp),
                      np.minimum(x.astype(np.uint32), np.uint32(0xFFFFFFFE)))
    return reference_densify(bins, signer)


def reference_expand(hashes: np.ndarray, weights: np.ndarray, signer: WeightedMinHash) -> np.ndarray:
    """Weighted MinHash "expand" of one document's distinct terms (weights > 0) by the
    module docstring: floor(w / delta + u) units a term (at most cap; one a term if none
    at all), unit j of term x = mix64(x ^ key + j * gamma), then one-permutation hashing."""
    k, mix = signer.num_perm, minhash_mod._mix64
    bins = np.full(k, EMPTY, np.uint32)
    if len(hashes):
        hashes = np.asarray(hashes, np.uint64)
        u = (mix(hashes ^ signer._round_key) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        c = np.minimum(np.floor(np.asarray(weights, np.float32).astype(np.float64) / signer.delta + u),
                       signer.cap).astype(np.int64)
        if c.sum() == 0:
            c[:] = 1
        term = np.repeat(np.arange(len(hashes)), c)
        j = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c) + 1
        with np.errstate(over="ignore"):
            x = mix((hashes[term] ^ signer._unit_key) + j.astype(np.uint64) * np.uint64(minhash_mod._GAMMA))
        np.minimum.at(bins, minhash_mod._fastrange(x, k).astype(np.intp),
                      np.minimum(x.astype(np.uint32), np.uint32(0xFFFFFFFE)))
    return reference_densify(bins, signer._oph)
