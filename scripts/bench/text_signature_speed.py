"""Text signature speed: mmdedup's batch kernels against the usual per-document tools.

One run, the same documents for every contender: N documents (default 2000) of 400 tokens
drawn Zipf-like (s = 1) from a 6,000-word vocabulary of pseudo-words, fixed seed. Each
contender starts from the token lists (list[list[str]]) and ends with signatures:

  (a) datasketch  MinHash(num_perm=128) + update_batch(tokens encoded to bytes), per doc
  (b) pure Python textbook 64-bit SimHash: md5 per token, +1/-1 per bit, per doc
  (c) mmdedup     hash_tokens + simhash64 + MinHash(128) over the whole batch, with the
                  default one-permutation MinHash and, separately, the k-permutation one;
                  weighted MinHash (the default quantised expansion, and ICWS) reported
                  on its own, over term frequencies and over TF-IDF-like weights

Before that, tokenising, on 400-word English texts (Python's own reference documentation,
pydoc_data): `hash_texts` (token hashes straight from the texts, what ingest runs) against
`hash_tokens(tokenize_many(texts))`, and `tokenize` against the definition it must equal
and the way it used to run: a `finditer` loop of one regex with groups over `clean(text)`,
with `normalize`'s former str.translate (which is what made non-ASCII texts slow) and link
regexes run whenever a text held "/", "@" or "www.".

Each timing is the best of --repeat runs, the contenders taking turns (the machine may be
shared). The mmdedup peak memory is numpy's traced allocations (tracemalloc) over one
separate pass.

    PYTHONPATH=platform python scripts/bench/text_signature_speed.py [--docs 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import sys
import time
import tracemalloc
import unicodedata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "platform"))

from mmdedup.extract.minhash import MinHash, WeightedMinHash  # noqa: E402
from mmdedup.extract.simhash import simhash64  # noqa: E402
from mmdedup.extract import normalize as normalize_mod  # noqa: E402
from mmdedup.extract import tokens as tokens_mod  # noqa: E402
from mmdedup.extract.ascii_tokens import hash_texts  # noqa: E402
from mmdedup.extract.hashing import hash_tokens  # noqa: E402
from mmdedup.extract.tokenbatch import collapse_terms  # noqa: E402
from mmdedup.extract.tokens import tokenize, tokenize_many  # noqa: E402

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


def english_texts(n: int = 100, words: int = 400) -> list[str]:
    """n windows of `words` words of Python's reference documentation (real English prose)."""
    import re

    from pydoc_data.topics import topics

    all_words = re.sub(r"\s+", " ", " ".join(topics[k] for k in sorted(topics))).split(" ")
    step = max((len(all_words) - words) // n, 1)
    return [" ".join(all_words[i * step : i * step + words]) for i in range(n)]


def _normalize_before(text: str) -> str:
    text = " ".join(unicodedata.normalize("NFKC", text).translate(normalize_mod._PUNCT_FOLD).casefold().split())
    return normalize_mod._SPACE_NEAR_CJK.sub("", text) if normalize_mod._ANY_CJK.search(text) else text


def _clean_before(text: str) -> str:
    text = _normalize_before(normalize_mod._unmark(text))
    if normalize_mod._has_link(text):
        text = _normalize_before(normalize_mod._EMAIL.sub(" ", normalize_mod._URL.sub(" ", text)))
    return text


def tokenize_by_definition(text: str) -> list[str]:
    tokens: list[str] = []
    for match in tokens_mod._TOKEN.finditer(_clean_before(text)):
        han = match.group("han")
        tokens.extend(tokens_mod._cut_han(han) if han is not None else [match.group()])
    return [t for t in tokens if t not in tokens_mod.STOP_WORDS]


def hash_texts_speed(repeat: int) -> tuple[float, float]:
    """us per text, over the same English texts: `hash_texts` (what ingest runs: token hashes
    straight from the text) and `hash_tokens(tokenize_many(...))` (the same hashes, through
    Python token strings)."""
    texts = english_texts()
    assert np.array_equal(hash_texts(texts).hashes, hash_tokens(tokenize_many(texts)).hashes)
    fast = best_of(lambda: hash_texts(texts), repeat)
    slow = best_of(lambda: hash_tokens(tokenize_many(texts)), repeat)
    return fast / len(texts) * 1e6, slow / len(texts) * 1e6


def tokenize_speed(repeat: int) -> tuple[float, float, int]:
    """us per text for `tokenize` and for the definition (per text best of `repeat`)."""
    texts = english_texts()
    assert all(tokenize(t) == tokenize_by_definition(t) for t in texts)
    best = {tokenize: [float("inf")] * len(texts), tokenize_by_definition: [float("inf")] * len(texts)}
    for _ in range(repeat):
        for fn, times in best.items():
            for i, t in enumerate(texts):
                start = time.perf_counter()
                fn(t)
                times[i] = min(times[i], time.perf_counter() - start)
    fast, slow = (sum(best[f]) / len(texts) * 1e6 for f in (tokenize, tokenize_by_definition))
    return fast, slow, len(texts)


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
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    tok_fast, tok_slow, tok_n = tokenize_speed(args.repeat)
    ht_fast, ht_slow = hash_texts_speed(args.repeat)
    docs = make_docs(args.docs)
    n = len(docs)
    oph, kperm = MinHash(128), MinHash(128, variant="kperm")
    expand, icws = WeightedMinHash(128), WeightedMinHash(128, variant="icws")
    stages: dict[str, float] = {}

    def mmdedup(minhash):
        def run():
            batch = hash_tokens(docs)
            simhash64(batch)
            minhash(batch)
        return run

    # Warm-up (first numpy calls, imports), then measured runs, the contenders taking turns
    # so that a change in the machine's load hits them all alike.
    mmdedup(oph)()
    run_datasketch(docs[:10])
    contenders = {
        "ds": lambda: run_datasketch(docs),
        "py": lambda: run_pure_python(docs),
        "mm": mmdedup(oph),
        "mk": mmdedup(kperm),
    }
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, fn in contenders.items():
            best[name] = min(best.get(name, float("inf")), best_of(fn, 1))
    t_ds, t_py, t_mm, t_mk = best["ds"], best["py"], best["mm"], best["mk"]
    batch = hash_tokens(docs)
    stages["hash_tokens"] = best_of(lambda: hash_tokens(docs), args.repeat)
    stages["simhash64"] = best_of(lambda: simhash64(batch), args.repeat)
    stages["MinHash-128 oph"] = best_of(lambda: oph(batch), args.repeat)
    stages["MinHash-128 kperm"] = best_of(lambda: kperm(batch), args.repeat)
    terms = collapse_terms(batch)
    # TF-IDF weights as the text signer makes them, (1 + ln tf) * idf, with the idf a corpus model
    # fitted on these documents would give, ln((N + 1) / (df + 1)).
    vocab, df = np.unique(terms.hashes, return_counts=True)
    idf = np.log((n + 1) / (df[np.searchsorted(vocab, terms.hashes)] + 1.0))
    tfidf = terms.with_weights((1 + np.log(terms.weights)) * idf)
    stages["collapse_terms (tf)"] = best_of(lambda: collapse_terms(batch), args.repeat)
    stages["simhash64 weighted (tf)"] = best_of(lambda: simhash64(terms), args.repeat)
    units = {name: expand.units(b)[1][-1] / n for name, b in (("tf", terms), ("tf-idf", tfidf))}
    for name, b in (("tf", terms), ("tf-idf", tfidf)):
        label = f"WeightedMinHash-128 expand, default ({name}; {units[name]:.0f} units/doc)"
        stages[label] = best_of(lambda: expand(b), args.repeat)
    stages["WeightedMinHash-128 icws (tf)"] = best_of(lambda: icws(terms), max(1, args.repeat // 2))

    tracemalloc.start()
    mmdedup(oph)()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    def rate(t: float) -> float:
        return n / t

    print(f"# tokenize, {tok_n} English texts of 400 words: {tok_fast:.0f} us/text; as it ran before "
          f"(one regex, finditer) {tok_slow:.0f} us/text: {tok_slow / tok_fast:.1f}x")
    print(f"# hash_texts, the same texts: {ht_fast:.0f} us/text; tokenize_many + hash_tokens "
          f"{ht_slow:.0f} us/text: {ht_slow / ht_fast:.1f}x")
    print(f"# text signature speed: {n} docs x {DOC_TOKENS} tokens, Zipf over {VOCAB} words")
    import datasketch

    print(f"# python {platform.python_version()}, numpy {np.__version__}, datasketch {datasketch.__version__}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, best of {args.repeat}")
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
    t_hash = stages["hash_tokens"]
    print(f"one signature at a time (hash_tokens counted in each): MinHash-128 oph vs datasketch "
          f"{t_ds / (t_hash + stages['MinHash-128 oph']):.1f}x, SimHash-64 vs pure Python "
          f"{t_py / (t_hash + stages['simhash64']):.1f}x")
    print(f"mmdedup peak traced memory for the batch: {peak / 2**20:.1f} MiB "
          f"(token lists themselves not counted)")
    print()
    print("| mmdedup stage (whole batch) | docs/s | us/doc |")
    print("|---|---:|---:|")
    for name, t in stages.items():
        print(f"| {name} | {rate(t):,.0f} | {t / n * 1e6:.2f} |")


if __name__ == "__main__":
    main()
