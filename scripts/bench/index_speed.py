"""Candidate-index benchmark: HammingIndex and BandLSH at 1M documents.

One run, a few minutes on 2 cores, prints a markdown table for docs/benchmarks.md:

    PYTHONPATH=platform python scripts/bench/index_speed.py [--n 1000000]

What is measured, and how:
- HammingIndex: build over n random 64-bit codes (1% are planted copies of
  other codes with 1-3 bits flipped), batch range search at radius 3 (and 7,
  10 for reference); baseline in the same run is FAISS's exhaustive
  ``IndexBinaryFlat`` range search (SIMD popcount over all n codes) plus a
  plain numpy popcount scan.  Exactness is checked on the baseline sample.
- Memory: HammingIndex by RSS delta around the build (codes, sorted chunk
  tables) and its own estimate;
  BandLSH exactly, from its numpy arrays' nbytes (it holds nothing else), plus
  tracemalloc's peak during the build.
- datasketch MinHashLSH: inserted one by one on a 20k-document sample,
  memory by tracemalloc, extrapolated linearly to n.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc

import faiss
import numpy as np

from mmdedup.signals.text import TextSettings
from mmdedup.index.hamming import HammingIndex, as_code_bytes
from mmdedup.index.lsh import BandLSH

MB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def planted_codes(n: int, rng: np.random.Generator) -> np.ndarray:
    """Random codes, the last 1% near-duplicates (1-3 bits) of earlier ones."""
    codes = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    k = n // 100
    src = rng.integers(0, n - k, size=k)
    flips = np.zeros(k, np.uint64)
    for _ in range(3):
        bit = rng.integers(0, 64, size=k).astype(np.uint64)
        flips |= np.uint64(1) << bit  # 1-3 distinct bits after collisions
    codes[n - k:] = codes[src] ^ flips
    return codes


def bench_hamming(n: int, rng: np.random.Generator) -> dict:
    codes = planted_codes(n, rng)
    ids = np.arange(n, dtype=np.int64)
    r0 = rss()
    index, t_build = timed(HammingIndex.from_arrays, ids, codes)
    _, t_tables = timed(index.search, codes[:1], 3)  # the chunk tables: at the first probing search
    t_build += t_tables
    mem_rss = rss() - r0

    # queries: half planted near-duplicates' sources perturbed, half random indexed codes perturbed by 1-2 bits
    nq = 100_000
    q = codes[rng.integers(0, n, size=nq)] ^ (np.uint64(1) << rng.integers(0, 64, size=nq).astype(np.uint64))
    res = {"n": n, "build_s": t_build, "mem_rss": mem_rss, "mem_est": index.nbytes()}
    hits, t = timed(index.search, q, 3)
    res["r3_qps"], res["r3_hits"] = nq / t, len(hits.ids)
    for radius, m in ((7, 10_000), (10, 2_000)):
        _, t = timed(index.search, q[:m], radius)
        res[f"r{radius}_qps"] = m / t

    # baselines, same codes, same queries
    flat = faiss.IndexBinaryFlat(64)
    flat.add(as_code_bytes(codes))
    m = 2_000
    (lims, _, labels), t = timed(flat.range_search, as_code_bytes(q[:m]), 4)  # strict <: radius 3
    res["flat_qps"] = m / t
    mine = index.search(q[:m], 3)
    theirs = set(zip(np.repeat(np.arange(m), np.diff(lims).astype(np.int64)).tolist(), labels.tolist()))
    res["exact"] = theirs == set(zip(mine.query.tolist(), mine.ids.tolist()))
    m = 20
    t = time.perf_counter()
    for x in q[:m]:
        np.nonzero(np.bitwise_count(codes ^ x) <= 3)
    res["numpy_qps"] = m / (time.perf_counter() - t)

    with tempfile.TemporaryDirectory() as d:
        manifest, res["save_s"] = timed(index.save, d, "simhash")
        _, res["load_s"] = timed(HammingIndex.load, d, manifest)
    return res


def bench_lsh(n: int, threshold: float, rng: np.random.Generator, sigs: np.ndarray,
              perms: int = 128) -> dict:
    ids = np.arange(n, dtype=np.int64)
    sigs = np.ascontiguousarray(sigs[:, :perms])
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    lsh = BandLSH(threshold, perms)
    t = time.perf_counter()
    lsh.add(ids, sigs)
    lsh.query(sigs[:1])  # first read sorts the pending batch into the band runs
    t_build = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    res = {"threshold": threshold, "bands": lsh.bands, "rows": lsh.rows, "build_s": t_build,
           "nbytes": lsh.nbytes(), "peak": peak}

    # planted near-duplicates (~97% of rows kept -> Jaccard ~0.94) arriving as an ingest stream
    batches, size = 20, 1_000
    new = sigs[rng.integers(0, n, size=batches * size)].copy()
    change = rng.random(new.shape) > 0.97
    new[change] = rng.integers(0, 2**32, size=int(change.sum()), dtype=np.uint32)
    t = time.perf_counter()
    found = 0
    for b in range(batches):
        s = slice(b * size, (b + 1) * size)
        new_ids = np.arange(n + b * size, n + (b + 1) * size)
        lsh.add(new_ids, new[s])
        a, _ = lsh.pairs(new_ids, new[s])
        found += len(a)
    res["stream_dps"] = batches * size / (time.perf_counter() - t)
    res["stream_pairs"] = found / (batches * size)
    m = 20_000
    _, t = timed(lsh.query, sigs[:m])
    res["query_qps"] = m / t
    with tempfile.TemporaryDirectory() as d:
        manifest, res["save_s"] = timed(lsh.save, d, "minhash")
        _, res["load_s"] = timed(BandLSH.load, d, manifest)
    return res


def bench_datasketch(n_sample: int, threshold: float, sigs: np.ndarray) -> dict:
    from datasketch import MinHash, MinHashLSH

    mhs = [MinHash(num_perm=128, hashvalues=sigs[i], scheme="affine32") for i in range(n_sample)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    t = time.perf_counter()
    for i, mh in enumerate(mhs):
        lsh.insert(i, mh)
    dt = time.perf_counter() - t
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {"n": n_sample, "ips": n_sample / dt, "per_doc": mem / n_sample, "bands": lsh.b, "rows": lsh.r}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--datasketch-sample", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.n
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]

    h = bench_hamming(n, rng)
    sigs = rng.integers(0, 2**32, size=(n, 128), dtype=np.uint32)
    # The product's text index (config defaults), and t=0.8 over all 128 positions for
    # comparison with datasketch at the same setting.
    settings = TextSettings()
    l5 = bench_lsh(n, settings.lsh_threshold, rng, sigs, settings.lsh_perms)
    l8 = bench_lsh(n, 0.8, rng, sigs)
    ds = bench_datasketch(args.datasketch_sample, 0.8, sigs)
    total = time.perf_counter() - t0

    h_doc = h["mem_rss"] / n
    row = "| {} | {} | {} |".format
    print(f"\n### Candidate indexes, {n:,} documents "
          f"({os.cpu_count()} cores, load average {load_before:.1f} at start, FAISS {faiss.__version__}, "
          f"numpy {np.__version__}; run took {total:.0f} s)\n")
    print("`PYTHONPATH=platform python scripts/bench/index_speed.py`\n")
    print("| measure | value | note |")
    print("|---|---|---|")
    print(row("HammingIndex build (nhash=4, b=16)", f"{h['build_s']:.2f} s", f"{n / h['build_s']:,.0f} codes/s"))
    print(row("HammingIndex query, radius 3", f"**{h['r3_qps']:,.0f} q/s**",
              f"batch of 100k; {h['r3_hits'] / 1e5:.2f} hits/query; exact vs flat: {h['exact']}"))
    print(row("brute force: FAISS IndexBinaryFlat, radius 3", f"{h['flat_qps']:,.0f} q/s", "2,000 queries, SIMD scan"))
    print(row("brute force: numpy popcount scan, radius 3", f"{h['numpy_qps']:,.0f} q/s", "20 queries"))
    print(row("speed-up vs FAISS flat / numpy", f"{h['r3_qps'] / h['flat_qps']:,.0f}x / "
              f"{h['r3_qps'] / h['numpy_qps']:,.0f}x", ""))
    print(row("HammingIndex query, radius 7 / 10", f"{h['r7_qps']:,.0f} / {h['r10_qps']:,.0f} q/s",
              "radius 7: nflip=1 multi-hash; radius 10: exact flat scan"))
    print(row("HammingIndex memory", f"{h_doc:.0f} B/doc", f"RSS delta of the build; serialised "
              f"estimate {h['mem_est'] / n:.0f} B/doc"))
    print(row("HammingIndex save / open", f"{h['save_s']:.2f} s / {h['load_s']:.2f} s",
              ".npy of ids, codes, chunk tables (memory-mapped)"))
    for L in (l8, l5):
        tag = f"BandLSH t={L['threshold']} ({L['bands']}x{L['rows']})"
        if L is l5:
            tag += " (product default)"
        print(row(f"{tag} build", f"{L['build_s']:.2f} s", f"{n / L['build_s']:,.0f} docs/s bulk insert"))
        print(row(f"{tag} memory", f"{L['nbytes'] / n:.0f} B/doc",
                  f"exact nbytes; build peak {L['peak'] / n:.0f} B/doc (tracemalloc)"))
        print(row(f"{tag} stream insert + pairs", f"{L['stream_dps']:,.0f} docs/s",
                  f"20 batches of 1,000 near-duplicates onto {n:,}; {L['stream_pairs']:.2f} pairs/doc"))
        print(row(f"{tag} query", f"{L['query_qps']:,.0f} q/s", "batch of 20k"))
        print(row(f"{tag} save / load", f"{L['save_s']:.2f} s / {L['load_s']:.2f} s", ""))
    print(row(f"datasketch MinHashLSH t=0.8 ({ds['bands']}x{ds['rows']}) insert", f"{ds['ips']:,.0f} docs/s",
              f"one by one, {ds['n']:,} docs; ours bulk is {(n / l8['build_s']) / ds['ips']:,.0f}x"))
    print(row("datasketch MinHashLSH t=0.8 memory", f"{ds['per_doc']:,.0f} B/doc",
              f"tracemalloc on {ds['n']:,} docs, extrapolated: {ds['per_doc'] * n / 2**30:.1f} GiB at {n:,}; "
              f"ours {ds['per_doc'] / (l8['nbytes'] / n):.0f}x smaller"))
    both8, both5 = h_doc + l8["nbytes"] / n, h_doc + l5["nbytes"] / n
    print(row("**both indexes together, product default**", f"**{both5:.0f} B/doc**",
              f"budget 300 B/doc; {both5 * n / MB:,.0f} MiB at {n:,} ({both8:.0f} B/doc with t=0.8)"))


if __name__ == "__main__":
    main()
