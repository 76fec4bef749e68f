"""64-bit SimHash (Charikar 2002) over a TokenBatch, with optional term weights.

Each token votes +w on the bits set in its 64-bit hash and -w on the others; a document's
code has bit j set where the vote is positive. Copies that share most of their weighted
words share most of the code's bits, so near-duplicates are a small Hamming distance apart
(an index over 64-bit codes finds them, see index/hamming.py), and unrelated texts sit near
32. Word order does not matter: SimHash is a function of the bag of tokens.

The textbook loop (for token, for bit) is 64 Python steps a token. Here:

- unweighted batches (weights None, so a repeated token simply votes again) count the set
  bits per position with bit-sliced adders: a block of (say) 512 token hashes is summed as
  64-bit words by a tree of ripple-carry adders into ten bit-planes (the 64 per-position
  counts, in binary), about seven word operations per token instead of 64 additions;
- weighted batches (TF-IDF) lay each document out in padded blocks and take, per block,
  the (1 x size) @ (size x 64) product of weights and 0/1 bits (BLAS, stacked over
  blocks), in chunks that stay in cache.

Both give the same code for the same votes (a unit test holds them to it). Ties (a vote of
exactly 0) give bit 0; an empty document has code 0.
"""

from __future__ import annotations

import numpy as np

from .text import HASH_VERSION, TokenBatch

SIMHASH_VERSION = f"simhash64-{HASH_VERSION}-v1"

_SLOTS_UNWEIGHTED = 1 << 17  # padded token slots per pass: 1 MiB of hashes
_SLOTS_WEIGHTED = 1 << 12  # 64 float64 bits each: 2 MiB


def simhash64(batch: TokenBatch) -> np.ndarray:
    """One uint64 SimHash code per document of the batch (weights used when present)."""
    n = batch.n_docs
    out = np.zeros(n, dtype=np.uint64)
    if n == 0 or len(batch.hashes) == 0:
        return out
    if batch.weights is None:
        ones, total = _count_bits(batch)
    else:
        ones, total = _weighted_ones(batch)
    bits = (2 * ones) > total[:, None]
    packed = np.packbits(bits, axis=1, bitorder="little")  # (n, 8) bytes, bit j of the code
    out[:] = packed.view("<u8").reshape(n).astype(np.uint64, copy=False)
    return out


def _pick_block(lengths: np.ndarray, per_block: float, per_plane: float) -> int:
    """Block size (a power of two, 32..1024) for laying documents out in padded blocks.

    Bigger blocks mean fewer per-block costs but more zero padding at the end of each
    document; a rough cost model (per padded slot 1, per block `per_block` plus
    `per_plane` per bit-plane) picks the cheapest. 400-token documents get 512, tweets 32.
    """
    lengths = lengths[lengths > 0]
    if len(lengths) == 0:
        return 64
    best, best_cost = 64, None
    for log_b in range(5, 11):
        size = 1 << log_b
        blocks = -(-lengths // size)
        cost = float(blocks.sum()) * (size + per_block + per_plane * (log_b + 1))
        if best_cost is None or cost < best_cost:
            best, best_cost = size, cost
    return best


def _doc_chunks(offsets: np.ndarray, max_items: int):
    """Yield (first_doc, end_doc) ranges holding about max_items items (a long doc alone)."""
    n = len(offsets) - 1
    d0 = 0
    while d0 < n:
        d1 = int(np.searchsorted(offsets, offsets[d0] + max_items, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n)
        yield d0, d1
        d0 = d1


def _blocks(batch: TokenBatch, size: int, with_weights: bool, max_slots: int):
    """Documents padded to whole blocks of `size` tokens, a group of documents at a time.

    Yields (d0, d1, hashes (nb, size), weights (nb, size) or None, block starts of the
    non-empty documents d0 + nonempty, nonempty). Padding is hash 0 and weight 0, which
    sets no bit and adds no weight. Buffers are reused between groups.
    """
    n = batch.n_docs
    lengths = batch.lengths
    blocks = -(-lengths // size)  # ceil; 0 for empty docs
    block_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(blocks, out=block_off[1:])
    # Token p of doc d sits at slot p + shift[d] of the row-major (n_blocks, size) layout.
    shift = block_off[:-1] * size - batch.offsets[:-1]
    max_blocks = max(max_slots // size, 1)
    hbuf = np.empty(0, np.uint64)
    wbuf = np.empty(0, np.float32)
    for d0, d1 in _doc_chunks(block_off, max_blocks):
        b0, b1 = int(block_off[d0]), int(block_off[d1])
        if b0 == b1:
            continue
        t0, t1 = int(batch.offsets[d0]), int(batch.offsets[d1])
        nb = b1 - b0
        if len(hbuf) < nb * size:
            hbuf = np.empty(max(nb, max_blocks) * size, np.uint64)
            wbuf = np.empty(len(hbuf), np.float32) if with_weights else wbuf
        slots = np.arange(t0, t1, dtype=np.int64) + np.repeat(shift[d0:d1] - b0 * size, lengths[d0:d1])
        hashes = hbuf[: nb * size]
        hashes.fill(0)
        hashes[slots] = batch.hashes[t0:t1]
        weights = None
        if with_weights:
            weights = wbuf[: nb * size]
            weights.fill(0)
            weights[slots] = batch.weights[t0:t1]
            weights = weights.reshape(nb, size)
        nonempty = np.flatnonzero(blocks[d0:d1] > 0)
        yield d0, d1, hashes.reshape(nb, size), weights, (block_off[d0:d1] - b0)[nonempty], nonempty


def _weighted_ones(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per document: weight on tokens with bit j set (n, 64), and total weight (n,).

    Per block a (1 x size) @ (size x 64) product of weights and 0/1 bits (BLAS, stacked
    over blocks), which beats multiplying out 64 votes per token and np.add.reduceat. In
    float64: sums of float32 weights are then exact (unless the weights of one document
    span more than ~2^19), so no rounding depends on block size, batch or BLAS kernel,
    and a document gets the same code in any batch.
    """
    n = batch.n_docs
    ones = np.zeros((n, 64), dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    size = _pick_block(batch.lengths, per_block=32.0, per_plane=0.0)
    for d0, _, hashes, weights, starts, nonempty in _blocks(batch, size, True, _SLOTS_WEIGHTED):
        nb = len(hashes)
        flat = hashes.reshape(-1).astype("<u8", copy=False)
        bits = np.unpackbits(flat.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        bits = bits.astype(np.float64).reshape(nb, size, 64)
        w = weights.astype(np.float64)
        per_block = np.matmul(w[:, None, :], bits)[:, 0, :]
        ones[d0 + nonempty] = np.add.reduceat(per_block, starts, axis=0)
        total[d0 + nonempty] = np.add.reduceat(w.sum(axis=1), starts)
    return ones, total


def _count_bits(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per document: how many tokens have bit j set (n, 64), and the token count (n,)."""
    n = batch.n_docs
    ones = np.zeros((n, 64), dtype=np.int64)
    size = _pick_block(batch.lengths, per_block=0.0, per_plane=16.0)
    columns = scratch = np.empty(0, np.uint64)
    for d0, _, hashes, _, starts, nonempty in _blocks(batch, size, False, _SLOTS_UNWEIGHTED):
        nb = len(hashes)
        if len(columns) < nb * size:
            columns, scratch = np.empty(nb * size, np.uint64), np.empty(nb * size, np.uint64)
        # Transposed, so the adder tree halves rows: contiguous slices, in-place numpy ops.
        cols = columns[: nb * size].reshape(size, nb)
        np.copyto(cols, hashes.T)
        counts = _block_counts(cols, scratch[: nb * size])
        ones[d0 + nonempty] = np.add.reduceat(counts, starts, axis=0)
    return ones, batch.lengths


def _block_counts(columns: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Count set bits per position down each column of words: (size, cols) -> (cols, 64).

    A tree of ripple-carry adders on bit-planes: a number is a list of planes (plane i holds
    bit i of 64 counters side by side in one uint64); the top and bottom halves of the rows
    are added until one row is left, log2(size)+1 planes deep. All in place: `columns` and
    `scratch` (same size) are overwritten, nothing is allocated per level.
    """
    size, cols = columns.shape
    carries = scratch[: (size - 1) * cols]
    xbuf = scratch[(size - 1) * cols : (size - 1) * cols + (size // 2) * cols]
    if len(xbuf) < (size // 2) * cols:  # size == 1 has nothing to add; otherwise fits
        xbuf = np.empty((size // 2) * cols, np.uint64)
    planes = [columns]
    used = 0
    height = size
    while height > 1:
        half = height // 2
        low = [p[:half] for p in planes]
        high = [p[half:] for p in planes]
        carry = carries[used : used + half * cols].reshape(half, cols)
        used += half * cols
        x = xbuf[: half * cols].reshape(half, cols)
        np.bitwise_and(low[0], high[0], out=carry)
        np.bitwise_xor(low[0], high[0], out=low[0])
        for a, b in zip(low[1:], high[1:]):
            np.bitwise_xor(a, b, out=x)
            np.bitwise_and(a, b, out=b)
            np.bitwise_xor(x, carry, out=a)
            np.bitwise_and(carry, x, out=carry)
            np.bitwise_or(carry, b, out=carry)
        planes = low + [carry]
        height = half
    stacked = np.stack([p[0] for p in planes], axis=1).astype("<u8", copy=False)  # (cols, P)
    bits = np.unpackbits(stacked.view(np.uint8).reshape(cols, len(planes), 8), axis=2, bitorder="little")
    counts = bits[:, 0, :].astype(np.int32)
    for i in range(1, len(planes)):
        counts += bits[:, i, :].astype(np.int32) << i
    return counts


if hasattr(np, "bitwise_count"):

    def _popcount(x: np.ndarray) -> np.ndarray:
        return np.bitwise_count(x)

else:  # numpy < 2
    _POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def _popcount(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype="<u8")
        return _POP8[x.view(np.uint8)].reshape(*x.shape, 8).sum(axis=-1, dtype=np.uint8)


def hamming(a, b) -> np.ndarray:
    """Bits that differ between 64-bit codes; broadcasts (one against many, pairwise rows)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
    return _popcount(x)


def similarity(a, b) -> np.ndarray:
    """1 - hamming/64: the SimHash signal on the 0..1 scale fusion uses."""
    return 1.0 - hamming(a, b).astype(np.float64) / 64.0
