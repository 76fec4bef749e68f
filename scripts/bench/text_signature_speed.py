"""Text signature speed: mmdedup's batch kernels against the usual per-document tools.

One run, the same documents for every contender: N documents (default 2000) of 400 tokens
drawn Zipf-like (s = 1) from a 6,000-word vocabulary of pseudo-words, fixed seed. Each
contender starts from the token lists (list[list[str]]) and ends with signatures:

  (a) datasketch  MinHash(num_perm=128) + update_batch(tokens encoded to bytes), per doc
  (b) pure Python textbook 64-bit SimHash: md5 per token, +1/-1 per bit, per doc
  (c) mmdedup     hash_tokens + simhash64 + MinHash(128) over the whole batch, with the
                  default one-permutation MinHash and, separately, the k-permutation one;
                  weighted MinHash (ICWS over term frequencies) reported on its own

Each timing is the best of --repeat runs (the machine may be shared). The mmdedup peak
memory is numpy's traced allocations (tracemalloc) over one separate pass.

    PYTHONPATH=platform python scripts/bench/text_signature_speed.py [--docs 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "platform"))

from mmdedup.extract.minhash import MinHash, WeightedMinHash  # noqa: E402
from mmdedup.extract.simhash import simhash64  # noqa: E402
from mmdedup.extract.text import collapse_terms, hash_tokens  # noqa: E402

VOCAB = 6000
DOC_TOKENS = 400


def make_docs(n_docs: int, seed: int = 20240501) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < VOCAB:
        word = "".join(rng.choice(letters, int(rng.integers(2, 11))))
        if word not in seen:
            seen.add(word)
            vocab.append(word)
    p = 1.0 / np.arange(1, VOCAB + 1)
    p /= p.sum()
    ids = rng.choice(VOCAB, size=(n_docs, DOC_TOKENS), p=p)
    return [[vocab[i] for i in row] for row in ids.tolist()]


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def run_datasketch(docs):
    from datasketch import MinHash as DSMinHash

    for doc in docs:
        m = DSMinHash(num_perm=128)
        m.update_batch([t.encode("utf-8") for t in doc])
        m.digest()


def textbook_simhash(tokens: list[str]) -> int:
    v = [0] * 64
    for token in tokens:
        h = int.from_bytes(hashlib.md5(token.encode("utf-8")).digest()[:8], "little")
        for i in range(64):
            if (h >> i) & 1:
                v[i] += 1
            else:
                v[i] -= 1
    code = 0
    for i in range(64):
        if v[i] > 0:
            code |= 1 << i
    return code


def run_pure_python(docs):
    for doc in docs:
        textbook_simhash(doc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    docs = make_docs(args.docs)
    n = len(docs)
    oph, kperm, wmh = MinHash(128), MinHash(128, variant="kperm"), WeightedMinHash(128)
    stages: dict[str, float] = {}

    def mmdedup(minhash):
        def run():
            batch = hash_tokens(docs)
            simhash64(batch)
            minhash(batch)
        return run

    # Warm-up (first numpy calls, imports), then measured runs.
    mmdedup(oph)()
    t_ds = best_of(lambda: run_datasketch(docs), args.repeat)
    t_py = best_of(lambda: run_pure_python(docs), args.repeat)
    t_mm = best_of(mmdedup(oph), args.repeat)
    t_mk = best_of(mmdedup(kperm), args.repeat)
    batch = hash_tokens(docs)
    stages["hash_tokens"] = best_of(lambda: hash_tokens(docs), args.repeat)
    stages["simhash64"] = best_of(lambda: simhash64(batch), args.repeat)
    stages["MinHash-128 oph"] = best_of(lambda: oph(batch), args.repeat)
    stages["MinHash-128 kperm"] = best_of(lambda: kperm(batch), args.repeat)
    terms = collapse_terms(batch)
    stages["collapse_terms (tf)"] = best_of(lambda: collapse_terms(batch), args.repeat)
    stages["simhash64 weighted (tf)"] = best_of(lambda: simhash64(terms), args.repeat)
    stages["WeightedMinHash-128 icws (tf)"] = best_of(lambda: wmh(terms), args.repeat)

    tracemalloc.start()
    mmdedup(oph)()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    def rate(t: float) -> float:
        return n / t

    print(f"# text signature speed: {n} docs x {DOC_TOKENS} tokens, Zipf over {VOCAB} words")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
          f"best of {args.repeat}")
    print()
    print("| contender | docs/s | us/doc | mmdedup speed-up |")
    print("|---|---:|---:|---:|")
    rows = [
        ("datasketch MinHash-128 (update_batch)", t_ds, t_ds / t_mm),
        ("pure-Python SimHash-64 (md5, per bit)", t_py, t_py / t_mm),
        ("mmdedup hash_tokens + SimHash-64 + MinHash-128 (oph)", t_mm, None),
        ("mmdedup hash_tokens + SimHash-64 + MinHash-128 (kperm)", t_mk, None),
    ]
    for name, t, ratio in rows:
        r = f"{ratio:.1f}x" if ratio is not None else ""
        print(f"| {name} | {rate(t):,.0f} | {t / n * 1e6:.1f} | {r} |")
    print()
    print(f"mmdedup (oph) / datasketch: {t_ds / t_mm:.1f}x;  mmdedup (oph) / pure Python: {t_py / t_mm:.1f}x;  "
          f"with kperm: {t_ds / t_mk:.1f}x and {t_py / t_mk:.1f}x")
    print(f"mmdedup peak traced memory for the batch: {peak / 2**20:.1f} MiB "
          f"(token lists themselves not counted)")
    print()
    print("| mmdedup stage (whole batch) | docs/s | us/doc |")
    print("|---|---:|---:|")
    for name, t in stages.items():
        print(f"| {name} | {rate(t):,.0f} | {t / n * 1e6:.2f} |")


if __name__ == "__main__":
    main()
