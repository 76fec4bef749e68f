"""Hashing: strings -> uint64, in numpy (`lanes64`), for single strings and whole
batches of tokenised documents (`hash_strings`, `hash_tokens`).

Every sketch (SimHash, MinHash, TF-IDF terms) starts from these hashes, so the function
is versioned (HASH_VERSION) and pinned by tests; why it is not a library hash is in the
note below.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .tokenbatch import _GROUP, TokenBatch, _offsets, doc_ranges

# Why not a library hash: calling one per token (xxhash, ~80 ns of interpreter time) and
# mapping tokens to uniques (a dict, or np.unique, which sorts strings) each cost more than
# the whole SimHash + MinHash budget of ~15 ns a token. So the batch is joined into one byte
# buffer and every token is hashed at once in numpy. We used to evaluate XXH3-64 that way,
# but XXH3 is built on 64x64->128-bit products, which numpy lacks: emulating them with
# 32-bit halves, and branching over XXH3's five length classes, made hashing most of the
# signing time (~20 us of ~40 for a 400-token document).
#
# "lanes64" is designed for numpy instead, with only native uint64 arithmetic (mod 2^64):
#
#     acc = KEY ^ seed ^ n * (2^56 + 1) ^ L0            n = the length in bytes, L0 its
#                                                       first 8 bytes (little-endian,
#                                                       zero-padded if n < 8)
#     for each further lane i = 1 .. ceil(n / 8) - 1, the 8 bytes at min(8 i, n - 8)
#     (so the last lane is the token's last 8 bytes), Li:
#         acc ^= fmix64(Li ^ i * LANE_KEY)
#     h = fmix64(acc)                                   fmix64: MurmurHash3's finaliser
#
# - Stable: a function of the UTF-8 bytes alone (no per-process salt, no CPU-dependent
#   path), the same on every machine and in every process; `lanes64` below is the
#   reference in plain Python, and tests hold the numpy kernel to it and pin values.
# - Good avalanche: fmix64 is a bijection in which every input bit flips every output bit
#   with probability ~1/2; every byte reaches the final fmix64 either directly (the first
#   lane) or through its own lane's fmix64, keyed by the lane's position, so equal or
#   swapped lanes do not cancel (a test checks the bit balance and the avalanche).
# - Collision-free where it matters most: for one length, a one-lane token (<= 8 bytes,
#   most words) maps bijectively; tokens of different lengths <= 7 bytes differ in the top
#   byte before the mix (n * 2^56), so words of up to 7 bytes never collide at all.
#   Otherwise collisions are as for a random 64-bit function (not a cryptographic hash:
#   someone can construct colliding tokens on purpose, as with XXH3).
# - Fast: a lane is one gather from an unaligned strided view of the buffer; only the
#   first lane of a token under 8 bytes is masked (a 9-entry table). The further lanes
#   are independent of one another (XXH3's long-input layout, in small), so the lanes of
#   all longer tokens of a batch go through one gather, one fmix64 and one xor-reduceat,
#   however long the tokens (web page lines are hundreds of bytes).
# Hashing 400 tokens takes ~5 us (2-core VM), where the XXH3 port took ~20; joining them
# into the buffer (str.join, ~13 ns a token) and finding the separators take ~7 more.

HASH_SEED = 0
HASH_VERSION = "lanes64-fmix-s0"

_M64 = 0xFFFFFFFFFFFFFFFF
_U = np.uint64
_LANES_KEY = 0x243F6A8885A308D3  # the first hex digits of pi: any fixed constant would do
_LEN_MUL = (1 << 56) + 1
_LANE_KEY = 0x9E3779B97F4A7C15  # 2^64 / golden ratio, odd: lane i is keyed with i times it
_FMIX1 = 0xFF51AFD7ED558CCD
_FMIX2 = 0xC4CEB9FE1A85EC53
_LANE_MASK = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=np.uint64)  # r valid bytes


def _fmix64_int(h: int) -> int:
    h ^= h >> 33
    h = (h * _FMIX1) & _M64
    h ^= h >> 33
    h = (h * _FMIX2) & _M64
    return h ^ (h >> 33)


def lanes64(data: bytes, seed: int = HASH_SEED) -> int:
    """The token hash of some bytes, in plain Python: the definition `hash_tokens` follows."""
    data = bytes(data)
    n = len(data)
    acc = (_LANES_KEY ^ seed ^ (n * _LEN_MUL) ^ int.from_bytes(data[:8], "little")) & _M64
    for i in range(1, -(-n // 8)):
        at = min(8 * i, n - 8)
        acc ^= _fmix64_int(int.from_bytes(data[at : at + 8], "little") ^ ((i * _LANE_KEY) & _M64))
    return _fmix64_int(acc)


def _fmix64(h: np.ndarray, tmp: np.ndarray) -> None:
    """fmix64 in place (tmp: scratch of the same shape)."""
    np.right_shift(h, _U(33), out=tmp)
    h ^= tmp
    h *= _U(_FMIX1)
    np.right_shift(h, _U(33), out=tmp)
    h ^= tmp
    h *= _U(_FMIX2)
    np.right_shift(h, _U(33), out=tmp)
    h ^= tmp


def _lanes64_ranges(lanes: np.ndarray, starts: np.ndarray, lens: np.ndarray, seed: int) -> np.ndarray:
    """lanes64 of each byte range [start, start + len) of a buffer.

    `lanes` is the buffer seen as a uint64 at every byte offset (strides of 1), with at
    least 8 bytes of padding after the last range. Gathers index it (`lanes[starts]`):
    np.take first copies a non-contiguous source whole, 8 bytes per byte of the buffer.
    """
    acc = lens.astype(np.uint64)
    acc *= _U(_LEN_MUL)
    acc ^= _U((_LANES_KEY ^ seed) & _M64)
    tmp = lanes[starts]
    tmp &= _LANE_MASK[np.minimum(lens, 8)]
    acc ^= tmp
    idx = np.flatnonzero(lens > 8)
    if len(idx):  # the further lanes of the longer tokens, all at once
        s, n = starts[idx], lens[idx]
        if n.max() <= 16:  # 9 to 16 bytes, the usual case: one more lane, the last 8 bytes
            s += n
            s -= 8
            part = lanes[s]
            part ^= _U(_LANE_KEY)
            _fmix64(part, s.view(np.uint64))
        else:
            extra = ((n + 7) >> 3) - 1  # lanes after the first, >= 1
            first = np.cumsum(extra) - extra
            lane = np.arange(1, int(extra.sum()) + 1, dtype=np.int64) - np.repeat(first, extra)
            pos = np.minimum(8 * lane, np.repeat(n - 8, extra))
            pos += np.repeat(s, extra)
            lane_keys = lane.astype(np.uint64)
            lane_keys *= _U(_LANE_KEY)
            part = lanes[pos]
            part ^= lane_keys
            _fmix64(part, lane_keys)
            part = np.bitwise_xor.reduceat(part, first)
        acc[idx] ^= part
    _fmix64(acc, tmp)
    return acc


def _hash_ranges(data: bytes, starts: np.ndarray, lens: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return _hash_padded(data + bytes(16), starts, lens, out)


def _hash_padded(padded, starts: np.ndarray, lens: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`_hash_ranges` of a buffer (bytes, or a uint8 array) that ends with 16 zero bytes."""
    lanes = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    out = np.empty(len(starts), dtype=np.uint64) if out is None else out
    with np.errstate(over="ignore"):
        for lo in range(0, len(starts), _GROUP):
            out[lo : lo + _GROUP] = _lanes64_ranges(lanes, starts[lo : lo + _GROUP], lens[lo : lo + _GROUP], HASH_SEED)
    return out


class _SepInToken(Exception):
    pass


def _segments(docs: list, offsets: np.ndarray, sep: str):
    """Per group of documents: one UTF-8 buffer of its tokens, `sep` between them.

    Yields (d0, d1, data, starts, lens) with token byte ranges relative to `data`. Joining
    per document and then over documents keeps the per-token work inside str.join (C).
    Raises _SepInToken if a token contains `sep` (boundaries would be ambiguous).
    """
    code = ord(sep)
    for d0, d1 in doc_ranges(offsets):
        n = int(offsets[d1] - offsets[d0])
        if n == 0:
            continue
        data = sep.join([sep.join(d) for d in docs[d0:d1] if d]).encode("utf-8")
        seps = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == code)
        if len(seps) != n - 1:
            raise _SepInToken
        starts = np.empty(n, dtype=np.int64)
        starts[0] = 0
        starts[1:] = seps + 1
        lens = np.empty(n, dtype=np.int64)
        lens[:-1] = seps - starts[:-1]
        lens[-1] = len(data) - starts[-1]
        yield d0, d1, data, starts, lens


def _encoded_ranges(strings: list[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The strings' UTF-8 bytes back to back, and their byte ranges (no separator: for
    strings that may hold any character; a Python step per string)."""
    encoded = [s.encode("utf-8") for s in strings]
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return b"".join(encoded), _offsets(lens)[:-1], lens


def hash_strings(strings: Sequence[str]) -> np.ndarray:
    """`lanes64` of each string's UTF-8 bytes, as uint64; vectorized."""
    strings = list(strings)
    parts = [strings[i : i + _GROUP] for i in range(0, len(strings), _GROUP)]
    return hash_tokens(parts).hashes


def hash_tokens(docs: Sequence[Sequence[str]]) -> TokenBatch:
    """Hash every token of every document into one TokenBatch."""
    docs = docs if isinstance(docs, list) else list(docs)
    counts = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    offsets = _offsets(counts)
    hashes = np.empty(int(offsets[-1]), dtype=np.uint64)
    try:
        for d0, d1, data, starts, lens in _segments(docs, offsets, "\0"):
            _hash_ranges(data, starts, lens, hashes[offsets[d0] : offsets[d1]])
    except _SepInToken:  # a token with a NUL inside: rare, do it the slow way
        hashes = _hash_ranges(*_encoded_ranges([t for d in docs for t in d]))
    return TokenBatch(hashes, offsets)
