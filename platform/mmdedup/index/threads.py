"""FAISS on one thread for small query batches.

FAISS parallelises a search over its queries with OpenMP. A batch of a few hundred
queries (one ingest chunk, one online query) takes well under a millisecond of work, and
handing it to a thread team costs more than that; on a machine whose cores are busy (two
cores, an ingest and its extraction workers) OpenMP's spin-waiting made a 500-query
Hamming search take 50 ms instead of 0.15 ms. Big batches (rebuilds, benchmarks) keep
every thread. FAISS is imported on the first call: a command that never runs a FAISS
search (a text query) does not load it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

SMALL_BATCH = 4096
_lock = threading.Lock()


@contextmanager
def threads_for(n_queries: int) -> Iterator[None]:
    if n_queries >= SMALL_BATCH:
        yield
        return
    import faiss

    with _lock:  # the thread count is process-wide
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            yield
        finally:
            faiss.omp_set_num_threads(before)
