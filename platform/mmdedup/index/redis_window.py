"""The candidate indexes' key tables kept in Redis: one window that several processes share.

A process's candidate indexes (lsh.py, hamming.py, bbit.py) are its own numpy arrays,
caught up with the store before each batch: every process holds the whole window and
reads every other process's new signatures. With `window_store = "redis://..."` the
key-based indexes live once, in Redis, and every process searches the same keys:

- band keys (`RedisBands`, what `BandLSH` holds): the ids of a band key's bucket packed in
  order in a field of a hash, so that a capped lookup reads the earliest;
- Hamming chunk keys (`RedisHamming`, `HammingIndex`'s tables): a set of ids per (table,
  chunk value); candidates are checked against their whole codes, kept per item;
- b-bit rows (`RedisRows`, `BitRows`): a record per item;
- and per item, what it was indexed under (its keys, its code), so that it can be taken
  out again when it is deleted or leaves the window.

Records and buckets are fields of hashes, not keys of their own: Redis keeps a small
hash as one compact list, and a key costs some 70 bytes more, which was most of the
window's memory when each item took some thirty keys.

Each class has the methods, and the results, of the numpy index it stands for, so a
signal's steps run unchanged over either. Every key expires by itself (`ttl`, per key:
each write to it sets it again), so a window nobody maintains any more empties itself; the
entries leave precisely when the store says they were deleted or evicted
(signals/shared_window.py catches the window up with the store's logs).

`WindowSlot` is where a signal's index of one signature version keeps its state: a hash
with its generation (the prefix of its keys) and the store's write it has caught up with.
A lost Redis (flushed, restarted without its data) has no state, and the next process to
look rebuilds the window from the store (SQL stays the truth) under a new generation;
`advance` moves the state on only within the generation it was read in, so a writer whose
Redis was lost during its own batch finds out before it commits.

A few round trips per step of a batch (pipelines, no transaction): Redis is another
machine.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from functools import cache
from math import comb
from typing import Any, Iterable

import numpy as np

from .hamming import Hits, as_codes, flip_masks
from .lsh import Candidates, band_keys, optimal_params
from .slots import distinct_pairs

_ADVANCE = """
if redis.call('HGET', KEYS[1], 'gen') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'seq', ARGV[2])
  return 1
end
return 0
"""
_GET_FIELDS = """
local out = {}
for i = 1, #KEYS do out[i] = redis.call('HGET', KEYS[i], ARGV[i]) end
return out
"""
_PUT_FIELDS = """
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  if ARGV[2 * i + 1] == '' then
    redis.call('HDEL', KEYS[i], ARGV[2 * i])
  else
    redis.call('HSET', KEYS[i], ARGV[2 * i], ARGV[2 * i + 1])
    if ttl > 0 then redis.call('EXPIRE', KEYS[i], ttl) end
  end
end
"""
_A_CALL = 8000  # fields a script call reads or writes: bounds the arguments and replies held at once
_RECORDS_A_HASH = 128  # item records a hash (within Redis's compact encoding of small hashes)
_BUCKET_FIELD_BITS = 20  # of a 32-bit band key, the bits that name its field within a hash
_BUCKET_FIELD_MASK = (1 << _BUCKET_FIELD_BITS) - 1


class WindowStoreError(ValueError):
    """The window store cannot be reached (a setting a user can fix, said in one line)."""


def connect(url: str) -> Any:
    """A client of the window store, retrying a dropped connection for a few seconds (a
    restart of the server) before an error reaches the batch."""
    import redis

    try:
        client = _client(url)
        client.ping()
    except (redis.exceptions.RedisError, ValueError) as exc:
        raise WindowStoreError(f"window_store = {url!r}: Redis cannot be reached there ({exc})") from exc
    return client


@cache
def _client(url: str) -> Any:  # (one connection pool a process and URL)
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=30,
                                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=10),
                                retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError])


class SharedWindow:
    """A Redis database holding the windows of one store's signals (`prefix` says whose),
    each key expiring `ttl` seconds after its last write (None: never)."""

    def __init__(self, client: Any, prefix: str, ttl: float | None) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl = None if ttl is None or math.isinf(ttl) else max(1, math.ceil(ttl))

    def slot(self, kind: str, stamp: dict[str, Any]) -> WindowSlot:
        """The state of the index of signature `kind` made as `stamp` says (the index
        files' stamp: a version and parameters): another stamp, another slot."""
        tag = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:12]
        return WindowSlot(self, f"{self.prefix}:{kind}:{tag}")

    def unlink(self, match: str) -> None:
        """Delete the keys that match a pattern, a thousand a call."""
        for keys in _chunks(self.client.scan_iter(match=match, count=1000), 1000):
            self.client.unlink(*keys)

    def expire(self, pipe: Any, key: str) -> None:
        if self.ttl is not None:
            pipe.expire(key, self.ttl)


class WindowSlot:
    def __init__(self, window: SharedWindow, name: str) -> None:
        self.window = window
        self.name = name

    def state(self) -> tuple[str, int] | None:
        """(generation, write caught up with); None: never built, or lost."""
        found = self.window.client.hmget(self.name, ["gen", "seq"])
        if found[0] is None or found[1] is None:
            return None
        return found[0].decode(), int(found[1])

    def keys(self, gen: str) -> str:
        return f"{self.name}:{gen}"

    def start(self) -> str:
        """A new generation, empty; the keys of the slot's earlier ones go (those of a
        half-lost window, which nobody would take entries out of)."""
        gen = secrets.token_hex(4)
        self.window.client.hset(self.name, mapping={"gen": gen, "seq": -1})
        self.window.unlink(f"{self.name}:*")  # (the new generation has no keys yet)
        return gen

    def drop(self) -> None:
        """The slot and all its keys (a signature version no longer signed under)."""
        self.window.client.unlink(self.name)
        self.window.unlink(f"{self.name}:*")

    def advance(self, gen: str, seq: int) -> bool:
        """Record that generation `gen` holds every write up to `seq`; False when the
        window is no longer that generation (lost, or rebuilt by another process)."""
        return bool(self.window.client.eval(_ADVANCE, 1, self.name, gen, seq))


class _Tables:
    """Item records under one prefix (a part of one generation's index), 128 to a hash:
    Redis holds a small hash as one compact list, where a key of its own costs each
    record some 70 bytes more (and an entry in the table of expiring keys)."""

    def __init__(self, window: SharedWindow, prefix: str) -> None:
        self.window = window
        self.prefix = prefix

    def _record(self, pk: int) -> tuple[str, int]:
        return f"{self.prefix}:i:{pk // _RECORDS_A_HASH:x}", pk % _RECORDS_A_HASH

    def records(self, ids: np.ndarray) -> list[bytes | None]:
        """Each item's record (None: not held), an HMGET a hash (consecutive pks share one)."""
        return _fields(self.window.client, [self._record(pk) for pk in ids.tolist()])

    def _set_records(self, writes: list[tuple[str, int, bytes]], ids: np.ndarray, blobs: list[bytes]) -> None:
        writes.extend((*self._record(pk), blob) for pk, blob in zip(ids.tolist(), blobs))

    def _drop_records(self, writes: list[tuple[str, int, bytes]], ids: np.ndarray) -> None:
        writes.extend((*self._record(pk), b"") for pk in ids.tolist())


class _Keyed(_Tables):
    """Item ids filed under keys derived from their values: each item's record holds its
    row of uint64 (`_rows`), from which `_keyed` names where it is filed."""

    def _rows(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _keyed(self, ids: np.ndarray, rows: np.ndarray) -> dict[Any, list[int]]:
        raise NotImplementedError

    def _file(self, writes: list[tuple[str, int, bytes]], keyed: dict[Any, list[int]]) -> None:
        """File ids where `keyed` says, now or as field writes added to `writes`."""
        raise NotImplementedError

    def _unfile(self, writes: list[tuple[str, int, bytes]], keyed: dict[Any, list[int]]) -> None:
        raise NotImplementedError

    def add(self, ids: np.ndarray, values: np.ndarray) -> None:
        """File values under ids, which are not filed (the signals take an item out before
        they file it again, as the arrays need)."""
        ids = np.asarray(ids, np.int64).ravel()
        if not len(ids):
            return
        rows = self._rows(values)
        writes: list[tuple[str, int, bytes]] = []
        self._set_records(writes, ids, [row.tobytes() for row in rows])
        self._file(writes, self._keyed(ids, rows))
        _put_fields(self.window, writes)

    def remove(self, ids: np.ndarray) -> int:
        ids = np.asarray(ids, np.int64).ravel()
        found = [(pk, blob) for pk, blob in zip(ids.tolist(), self.records(ids)) if blob is not None]
        if not found:
            return 0
        pks = np.array([pk for pk, _ in found], np.int64)
        rows = np.frombuffer(b"".join(blob for _, blob in found), np.uint64).reshape(len(found), -1)
        writes: list[tuple[str, int, bytes]] = []
        self._unfile(writes, self._keyed(pks, rows))
        self._drop_records(writes, pks)
        _put_fields(self.window, writes)
        return len(found)


class RedisBands(_Keyed):
    """`BandLSH` in Redis: the same band keys (lsh.py). A band key's bucket is a field of
    a hash (its high 12 bits name the hash, 4,096 of them a band, the rest the field)
    holding its ids packed in order: most buckets hold one text, and a key each cost
    three times the memory. A field is read, changed and written back, which is safe
    because writers hold the store's write lock in turn (signals/shared_window.py)."""

    def __init__(self, window: SharedWindow, prefix: str, threshold: float, num_perm: int = 128,
                 weights: tuple[float, float] = (0.5, 0.5), params: tuple[int, int] | None = None) -> None:
        super().__init__(window, prefix)
        self.num_perm = int(num_perm)
        self.bands, self.rows = params if params else optimal_params(threshold, num_perm, *weights)

    def _bucket(self, band: int, key: int) -> tuple[str, int]:
        key >>= 32
        return f"{self.prefix}:{band}:{key >> _BUCKET_FIELD_BITS:x}", key & _BUCKET_FIELD_MASK

    def _keyed(self, ids: np.ndarray, keys: np.ndarray) -> dict[Any, list[int]]:
        out: dict[Any, list[int]] = {}
        for pk, row in zip(ids.tolist(), keys.tolist()):
            for band, key in enumerate(row):
                out.setdefault(self._bucket(band, key), []).append(pk)
        return out

    def _held(self, buckets: list[tuple[str, int]]) -> list[np.ndarray]:
        return [np.frombuffer(b, "<i8") if b else np.zeros(0, np.int64) for b in _fields(self.window.client, buckets)]

    def _file(self, writes: list[tuple[str, int, bytes]], keyed: dict[Any, list[int]]) -> None:
        for (key, field), held in zip(keyed, self._held(list(keyed))):
            writes.append((key, field, np.union1d(held, keyed[key, field]).astype("<i8").tobytes()))

    def _unfile(self, writes: list[tuple[str, int, bytes]], keyed: dict[Any, list[int]]) -> None:
        for (key, field), held in zip(keyed, self._held(list(keyed))):
            writes.append((key, field, np.setdiff1d(held, keyed[key, field]).astype("<i8").tobytes()))

    def _rows(self, sigs: np.ndarray) -> np.ndarray:
        return band_keys(np.asarray(sigs), self.bands, self.rows)

    def query(self, sigs: np.ndarray, distinct: bool = True, first: int | None = None) -> Candidates:
        """As `BandLSH.query`: the ids sharing a band with each signature; `first`: each
        bucket's earliest `first` ids (by id), the rest counted in `passed`."""
        sigs = np.asarray(sigs)
        passed = np.zeros(len(sigs), np.int64)
        if not len(sigs):
            e = np.empty(0, np.int64)
            return Candidates(e, e.copy(), passed)
        keys = band_keys(sigs, self.bands, self.rows)
        held = self._held([self._bucket(band, key) for row in keys.tolist() for band, key in enumerate(row)])
        qs, found = [], []
        for i in range(len(sigs)):
            for members in held[i * self.bands:(i + 1) * self.bands]:
                if first is not None and len(members) > first:
                    passed[i] += len(members) - first
                    members = members[:first]
                qs.append(np.full(len(members), i, np.int64))
                found.append(members)
        q, ids = np.concatenate(qs), np.concatenate(found).astype(np.int64)
        if distinct:
            q, ids, _ = distinct_pairs(q, ids)
        return Candidates(q, ids, passed)


class RedisHamming(_Keyed):
    """`HammingIndex` in Redis (multi-index hashing, hamming.py): a set of ids per
    (table, chunk value); each candidate checked against its whole code."""

    def __init__(self, window: SharedWindow, prefix: str, nhash: int = 4, bits: int = 16) -> None:
        super().__init__(window, prefix)
        self.nhash, self.bits = nhash, bits

    def _chunks_of(self, codes: np.ndarray) -> np.ndarray:
        shifts = np.arange(self.nhash, dtype=np.uint64) * np.uint64(self.bits)
        return (codes[:, None] >> shifts[None, :]) & np.uint64((1 << self.bits) - 1)

    def _rows(self, codes: np.ndarray) -> np.ndarray:
        return as_codes(codes)[:, None]

    def _keyed(self, ids: np.ndarray, codes: np.ndarray) -> dict[Any, list[int]]:
        out: dict[Any, list[int]] = {}
        for pk, row in zip(ids.tolist(), self._chunks_of(codes[:, 0]).tolist()):
            for t, chunk in enumerate(row):
                out.setdefault(f"{self.prefix}:{t}:{chunk:x}", []).append(pk)
        return out

    def _file(self, writes: list[tuple[str, int, bytes]], keyed: dict[Any, list[int]]) -> None:
        """(A set a chunk value: at most 2**16 of them a table, whatever the window
        holds, and a common chunk is shared by thousands of codes, too many to write
        back whole at each add.)"""
        pipe = self.window.client.pipeline(transaction=False)
        for key, members in keyed.items():
            pipe.sadd(key, *members)
            self.window.expire(pipe, key)
        pipe.execute()

    def _unfile(self, writes: list[tuple[str, int, bytes]], keyed: dict[Any, list[int]]) -> None:
        pipe = self.window.client.pipeline(transaction=False)
        for key, members in keyed.items():
            pipe.srem(key, *members)
        pipe.execute()

    def search(self, codes: np.ndarray, radius: int) -> Hits:
        """As `HammingIndex.search`: every indexed code within `radius` bits of each
        query, by (query, distance, id). Exact while the probes stay few (nflip <= 1);
        a wider radius is refused rather than answered from a scan of the whole window."""
        x = as_codes(codes)
        nflip = -(-(int(radius) + 1) // self.nhash) - 1
        if nflip > 1:
            raise ValueError(f"a Hamming radius of {radius} bits is not searched in the Redis window (at most "
                             f"{2 * self.nhash - 1}: a wider one probes {comb(self.bits, nflip)} keys a chunk and more)")
        e = np.empty(0, np.int64)
        if not len(x):
            return Hits(e, e.copy(), np.empty(0, np.int32))
        flips = flip_masks(self.bits, nflip).tolist()
        chunks = self._chunks_of(x)
        pipe = self.window.client.pipeline(transaction=False)
        for row in chunks.tolist():
            for t, chunk in enumerate(row):
                for f in flips:
                    pipe.smembers(f"{self.prefix}:{t}:{chunk ^ f:x}")
        replies = iter(pipe.execute())
        qs, found = [], []
        for i in range(len(x)):
            for _ in range(self.nhash * len(flips)):
                members = next(replies)
                qs.extend([i] * len(members))
                found.extend(int(m) for m in members)
        q, ids, _ = distinct_pairs(np.array(qs, np.int64), np.array(found, np.int64))
        if not len(q):
            return Hits(e, e.copy(), np.empty(0, np.int32))
        uniq, at = np.unique(ids, return_inverse=True)
        blobs = self.records(uniq)
        have = np.array([b is not None for b in blobs], bool)
        theirs = np.zeros(len(uniq), np.uint64)
        if have.any():
            theirs[have] = np.frombuffer(b"".join(b for b in blobs if b is not None), np.uint64)
        dist = np.bitwise_count(theirs[at] ^ x[q]).astype(np.int32)
        keep = have[at] & (dist <= radius)
        q, ids, dist = q[keep], ids[keep], dist[keep]
        order = np.lexsort((ids, dist, q))
        return Hits(q[order], ids[order], dist[order])


class RedisRows(_Tables):
    """`BitRows` in Redis: one packed row per item."""

    def __init__(self, window: SharedWindow, prefix: str, width: int) -> None:
        super().__init__(window, prefix)
        self.width = int(width)

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        ids = np.asarray(ids, np.int64).ravel()
        rows = np.asarray(rows, np.uint8)
        if rows.shape != (len(ids), self.width):
            raise ValueError(f"{len(ids)} ids need ({len(ids)}, {self.width}) rows, got {rows.shape}")
        if len(ids):
            writes: list[tuple[str, int, bytes]] = []
            self._set_records(writes, ids, [r.tobytes() for r in rows])
            _put_fields(self.window, writes)

    def remove(self, ids: np.ndarray) -> None:
        writes: list[tuple[str, int, bytes]] = []
        self._drop_records(writes, np.asarray(ids, np.int64).ravel())
        _put_fields(self.window, writes)

    def rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, np.int64).ravel()
        blobs = self.records(ids)
        have = np.array([b is not None for b in blobs], bool)
        out = np.zeros((len(ids), self.width), np.uint8)
        if have.any():
            out[have] = np.frombuffer(b"".join(b for b in blobs if b is not None), np.uint8).reshape(-1, self.width)
        return have, out


def _fields(client: Any, wanted: list[tuple[str, int]]) -> list[bytes | None]:
    """The values of these (hash, field) pairs, in order (None: not there), read by a
    script a few thousand at a time: a command each cost more to write and parse here
    than Redis takes to answer them."""
    out: list[bytes | None] = []
    for part in _chunks(wanted, _A_CALL):
        out.extend(_script(client, _GET_FIELDS)(keys=[k for k, _ in part], args=[f for _, f in part]))
    return out


def _put_fields(window: SharedWindow, writes: list[tuple[str, int, bytes]]) -> None:
    """Set these (hash, field, value) writes, an empty value deleting its field; each hash
    written expires `window.ttl` after (by a script, as `_fields` reads)."""
    for part in _chunks(writes, _A_CALL):
        args: list[Any] = [window.ttl or 0]
        for _, field, value in part:
            args += [field, value]
        _script(window.client, _PUT_FIELDS)(keys=[k for k, _, _ in part], args=args)


@cache
def _script(client: Any, source: str) -> Any:  # (registered once a client: sent by its hash after)
    return client.register_script(source)


def _chunks(values: Iterable[Any], size: int) -> Iterable[list[Any]]:
    part: list[Any] = []
    for v in values:
        part.append(v)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part
