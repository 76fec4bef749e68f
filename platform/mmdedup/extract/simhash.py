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
  counts, in binary), about seven word operations per token instead of 64 additions. The
  tokens are scattered straight into the transposed (row, block) layout the tree halves
  in place, and the tree's last levels (a few rows per block, all numpy call overhead)
  run once for the whole batch rather than once per group of blocks;
- weighted batches (TF-IDF): a document of 64 tokens or more adds up its weights by
  byte of the hash (one weighted bincount of 8 keys a token into 8 x 256 sums), and
  bit i of byte b weighs the sums of the byte values with bit i set; a shorter one is
  laid out in padded blocks with, per block, the (1 x size) @ (size x 64) product of
  weights and 0/1 bits (BLAS, stacked over blocks). Sums of float32 weights are exact
  in float64, so neither the way nor the order of adding changes a code.

Both give the same code for the same votes (a unit test holds them to it). Ties (a vote of
exactly 0) give bit 0; an empty document has code 0.
"""

from __future__ import annotations

import numpy as np

from .hashing import HASH_VERSION
from .tokenbatch import TokenBatch, doc_ranges

SIMHASH_VERSION = f"simhash64-{HASH_VERSION}-v1"

_SLOTS_UNWEIGHTED = 1 << 16  # padded token slots per pass: 512 KiB of hashes, an L2 cache
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



def _blocks(batch: TokenBatch, size: int, with_weights: bool, max_slots: int, transposed: bool = False):
    """Documents padded to whole blocks of `size` tokens, a group of documents at a time.

    Yields (d0, d1, hashes (nb, size), weights (nb, size) or None, block starts of the
    non-empty documents d0 + nonempty, nonempty). Padding is hash 0 and weight 0, which
    sets no bit and adds no weight. Buffers are reused between groups. `transposed` lays
    the hashes out as (size, nb) instead (one scatter, rather than a scatter and a copy).
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
    for d0, d1 in doc_ranges(block_off, max_blocks):
        b0, b1 = int(block_off[d0]), int(block_off[d1])
        if b0 == b1:
            continue
        t0, t1 = int(batch.offsets[d0]), int(batch.offsets[d1])
        nb = b1 - b0
        if len(hbuf) < nb * size:
            hbuf = np.empty(max(nb, max_blocks) * size, np.uint64)
            wbuf = np.empty(len(hbuf), np.float32) if with_weights else wbuf
        hashes = hbuf[: nb * size]
        hashes.fill(0)
        nonempty = np.flatnonzero(blocks[d0:d1] > 0)
        if transposed:
            hashes[_transposed_slots(batch.offsets, lengths, block_off, d0 + nonempty, size, nb, b0)] = \
                batch.hashes[t0:t1]
        else:
            slots = np.arange(t0, t1, dtype=np.int64) + np.repeat(shift[d0:d1] - b0 * size, lengths[d0:d1])
            hashes[slots] = batch.hashes[t0:t1]
        weights = None
        if with_weights:
            weights = wbuf[: nb * size]
            weights.fill(0)
            weights[slots] = batch.weights[t0:t1]
            weights = weights.reshape(nb, size)
        yield d0, d1, hashes.reshape(-1, nb if transposed else size), weights, (block_off[d0:d1] - b0)[nonempty], nonempty


def _transposed_slots(offsets, lengths, block_off, docs, size, nb, b0):
    """Where each token of these (non-empty, consecutive-in-the-batch) documents goes in a
    (size, nb) layout: token i of doc d at row i % size, column block_off[d] - b0 + i // size.

    Where every document fits in one block, token i of doc d is at i * nb + its column:
    the flat index times nb plus one value per document (an arange and a repeat).
    Otherwise as a running sum: +nb from one token to the next, a jump at each
    document's first token and where a long document starts its next block (one
    cumsum, which numpy runs a step at a time, instead of the arithmetic of computing
    every index outright).
    """
    t0 = int(offsets[docs[0]])
    doc_len = lengths[docs]
    if doc_len.max() <= size:
        t1 = int(offsets[docs[-1] + 1])
        slots = np.arange(0, (t1 - t0) * nb, nb, dtype=np.int64)
        slots += np.repeat(block_off[docs] - b0 - (offsets[docs] - t0) * nb, doc_len)
        return slots
    steps = np.full(int(offsets[docs[-1] + 1]) - t0, nb, dtype=np.int64)
    first = offsets[docs] - t0
    start = block_off[docs] - b0
    last = lengths[docs] - 1
    lg = size.bit_length() - 1
    end = (last & (size - 1)) * nb + start + (last >> lg)
    steps[first[0]] = start[0]
    steps[first[1:]] = start[1:] - end[:-1]
    long_docs = np.flatnonzero(last >= size)
    if len(long_docs):  # next block of a long document: row 0, one column on
        extra = (lengths[docs[long_docs]] - 1) >> lg
        at = np.repeat(first[long_docs], extra) + size * (
            np.arange(int(extra.sum())) - np.repeat(np.cumsum(extra) - extra, extra) + 1)
        steps[at] = 1 - (size - 1) * nb
    return np.cumsum(steps, out=steps)


def _weighted_ones(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per document: weight on tokens with bit j set (n, 64), and total weight (n,).

    In float64: sums of float32 weights are then exact (unless the weights of one
    document span more than ~2^19), so the code does not depend on the order in which
    the weights are added, nor on block size, batch or BLAS kernel, and a document gets
    the same code in any batch and by either way of adding them up:

    - documents of `_HIST_MIN_TERMS` tokens or more: per document and byte of the hash,
      the weight on each of the byte's 256 values (one weighted bincount over 8 keys a
      token), then for each bit the sum over the values with the bit set (`_bit_sums`):
      8 additions a token instead of 64 multiply-adds, and no (tokens x 64) float64
      array (`_weighted_ones_bytes`);
    - shorter ones: padded blocks and a (1 x size) @ (size x 64) product of weights and
      bits per block (`_weighted_ones_blocks`), whose cost follows the tokens, where the
      byte tables (2048 sums a document) would cost more than a short text's tokens.
    """
    n = batch.n_docs
    lengths = batch.lengths
    big = lengths >= _HIST_MIN_TERMS
    if not big.any() or not np.isfinite(batch.weights).all():  # (+-inf: 0 * inf in a product)
        return _weighted_ones_blocks(batch)
    ones = np.zeros((n, 64), dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    small = (lengths > 0) & ~big
    for docs, fn in ((np.flatnonzero(big), _weighted_ones_bytes), (np.flatnonzero(small), _weighted_ones_blocks)):
        if len(docs) == len(lengths):
            ones, total = fn(batch)
        elif len(docs):
            ones[docs], total[docs] = fn(_only(batch, docs))
    return ones, total


def _only(batch: TokenBatch, docs: np.ndarray) -> TokenBatch:
    """The documents `docs` (ascending) of a batch, as a batch of their own."""
    keep = np.zeros(batch.n_docs, bool)
    keep[docs] = True
    lengths = batch.lengths[docs]
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    at = np.flatnonzero(np.repeat(keep, batch.lengths))
    return TokenBatch(batch.hashes[at], offsets, None if batch.weights is None else batch.weights[at])


# A document with at least this many tokens is summed by bytes (`_weighted_ones`), in
# groups of `_HIST_DOCS` documents (2048 float64 sums each: the group's table stays in L2).
# _BYTE_BITS[v, i] is bit i of the byte value v.
_HIST_MIN_TERMS = 64
_HIST_DOCS = 16
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(np.float64)
_BYTE_BASE = (np.arange(8, dtype=np.intp) * 256)[:, None]


def _weighted_ones_bytes(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """`_weighted_ones` by byte tables: for byte b of the hash and value v, the weight
    on the document's tokens whose byte b is v (a bincount over keys doc * 2048 + b * 256
    + v); bit 8b + i of the code then weighs the sum over the v with bit i set
    (`_bit_sums`)."""
    n = batch.n_docs
    ones = np.zeros((n, 64), dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    offsets, lengths = batch.offsets, batch.lengths
    for d0 in range(0, n, _HIST_DOCS):
        d1 = min(d0 + _HIST_DOCS, n)
        t0, t1 = int(offsets[d0]), int(offsets[d1])
        if t0 == t1:
            continue
        nd, g = d1 - d0, t1 - t0
        by = batch.hashes[t0:t1].astype("<u8", copy=False).view(np.uint8).reshape(g, 8)
        # byte-major (each row a contiguous run of tokens), in 16 bits while they hold
        # the keys: a quarter of the memory traffic of building them in 64
        dtype = np.uint16 if nd * 2048 <= 1 << 16 else np.intp
        key = np.empty((8, g), dtype)
        doc = np.repeat(np.arange(0, nd * 2048, 2048, dtype=dtype), lengths[d0:d1])
        np.add(doc, _BYTE_BASE.astype(dtype), out=key)
        key += by.T
        w = np.empty((8, g), np.float64)
        w[:] = batch.weights[t0:t1]
        hist = np.bincount(key.reshape(-1), weights=w.reshape(-1), minlength=nd * 2048)
        hist = hist.reshape(nd * 8, 256)
        ones[d0:d1] = _bit_sums(hist).reshape(nd, 64)
        total[d0:d1] = hist[::8].sum(axis=1)
    return ones, total


def _bit_sums(hist: np.ndarray) -> np.ndarray:
    """(rows, 256) weights by byte value -> (rows, 8): column i sums the values with bit
    i set, as 0/1 products (exact: every partial sum is a sum of weights).

    One small product per document ((8 x 256) @ (256 x 8), stacked): OpenBLAS runs a
    product this small on the calling thread, where one (rows x 256) product would wake
    its worker threads, which on a busy 2-core machine costs far more than the product.
    """
    return (hist.reshape(-1, 8, 256) @ _BYTE_BITS).reshape(-1, 8)


def _weighted_ones_blocks(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """`_weighted_ones` by padded blocks.

    Per block a (1 x size) @ (size x 64) product of weights and 0/1 bits (BLAS, stacked
    over blocks), which beats multiplying out 64 votes per token and np.add.reduceat.
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


# The adder tree's last levels work on a few rows per block: per group of blocks they are
# ~150 numpy calls on arrays of a few thousand words, all call overhead. So each group
# only goes down to this many rows, its planes are set aside, and the last levels run
# once over the planes of every group of the batch.
_DEEP_ROWS = 32


def _count_bits(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per document: how many tokens have bit j set (n, 64), and the token count (n,)."""
    n = batch.n_docs
    ones = np.zeros((n, 64), dtype=np.int64)
    size = _pick_block(batch.lengths, per_block=0.0, per_plane=16.0)
    blocks = -(-batch.lengths // size)
    n_blocks = int(blocks.sum())
    if n_blocks == 0:
        return ones, batch.lengths
    rows = min(size, _DEEP_ROWS)
    deep = np.empty((size.bit_length() - rows.bit_length() + 1, rows, n_blocks), np.uint64)
    scratch = np.empty(0, np.uint64)
    block_off = np.zeros(n + 1, np.int64)
    np.cumsum(blocks, out=block_off[1:])
    for d0, _, cols, _, _, _ in _blocks(batch, size, False, _SLOTS_UNWEIGHTED, transposed=True):
        # Transposed, so the adder tree halves rows: contiguous slices, in-place numpy ops
        # (halves of each row of a (blocks, size) layout interleave in memory, and numpy
        # then copies the inputs of every in-place operation to be safe).
        if len(scratch) < cols.size:
            scratch = np.empty(cols.size, np.uint64)
        b0 = int(block_off[d0])
        planes = _add_halves([cols], rows, scratch[: cols.size])
        for i, plane in enumerate(planes):
            deep[i, :, b0 : b0 + cols.shape[1]] = plane
    counts = _plane_counts(_add_halves(list(deep), 1, None))
    nonempty = np.flatnonzero(blocks > 0)
    if len(counts) == len(nonempty):  # one block a document: its counts are the block's
        ones[nonempty] = counts
    else:
        ones[nonempty] = np.add.reduceat(counts, block_off[nonempty], axis=0)
    return ones, batch.lengths


def _add_halves(planes: list[np.ndarray], stop: int, scratch: np.ndarray | None) -> list[np.ndarray]:
    """Add the top and bottom halves of the rows of a bit-sliced number until `stop` rows
    are left: (height, cols) planes -> (stop, cols) planes, one more per halving.

    A tree of ripple-carry adders on bit-planes: a number is a list of planes (plane i holds
    bit i of 64 counters side by side in one uint64). In place: the planes and `scratch`
    (as large as the first plane, or None to allocate) are overwritten; nothing of the
    planes' size is allocated per level.
    """
    height, cols = planes[0].shape
    if scratch is None:
        scratch = np.empty(height * cols, np.uint64)
    # Carries of successive levels take height/2, height/4, ... rows of `scratch`; the
    # scratch word (x below) the rows after them, or a fresh array where they run out.
    used = 0
    while height > stop:
        half = height // 2
        low = [p[:half] for p in planes]
        high = [p[half:] for p in planes]
        carry = scratch[used : used + half * cols].reshape(half, cols)
        used += half * cols
        rest = scratch[used : used + half * cols]
        x = rest.reshape(half, cols) if len(rest) == half * cols else np.empty((half, cols), np.uint64)
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
    return planes


def _plane_counts(planes: list[np.ndarray]) -> np.ndarray:
    """(1, cols) planes of a bit-sliced number -> its 64 counters per column (cols, 64)."""
    cols = planes[0].shape[1]
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
