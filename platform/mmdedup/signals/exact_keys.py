"""Exact copies found through an index of the items' content keys, not through SQL indexes.

An item's content key (everything it holds) and text hash (its normalised text) are
SHA-256 digests: random. A B-tree over random keys takes each chunk's new keys on as many
different pages, and every commit writes each of those pages again, so the bytes a store
writes per item grew with the store until those two indexes were most of its writes (and
a rising share of the CPU, as system time). Here the first 64 bits of each are kept the
way a signal keeps its values:

- a 16-byte signature per item (kind `exact`), appended in item order like every other
  signature, which costs a store a few dozen bytes an item and no random writes;
- two single-band tables of the band LSH (index/lsh.py): content keys and text hashes,
  opened from the index files, caught up with other processes' writes and saved like any
  signal's index (signals/base.py);
- a lookup's candidates are checked against the items' full digests by primary key
  (store/items.py), so a collision of 64 bits (or of the tables' 32-bit bucket keys) never
  makes a pair.

It is not one of the signals (signals/registry.py): it scores nothing and fusion never
sees it; ingest asks it for an item's exact copies and queries for a text's.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, NamedTuple, Sequence

import numpy as np
from sqlalchemy.orm import Session

from ..config import SignalSettings
from ..index.lsh import BandLSH
from ..index.redis_window import RedisBands, SharedWindow
from ..input.items import LoadedItem
from ..store.items import full_keys
from .base import Pairs, Signal

VERSION = "sha256-first64/1"


def key64(digest: str | None) -> int:
    """A SHA-256 hex digest's first 64 bits; 0 for none (no item's key is 0 but by 2**-64).
    A key that is not hex (written by hand into a store) is hashed first: every key maps
    to some number, and the full keys decide."""
    if not digest:
        return 0
    try:
        return int(digest[:16], 16)
    except ValueError:
        return int.from_bytes(hashlib.sha256(digest.encode()).digest()[:8], "big")


def _table() -> BandLSH:
    return BandLSH(0.5, num_perm=1, params=(1, 1))


class KeyTables(NamedTuple):
    content: BandLSH
    text: BandLSH


class ExactKeys(Signal[tuple[int, int], SignalSettings]):
    name = "exact"
    index_parts: ClassVar = {"content": BandLSH.load, "text": BandLSH.load}
    shared = True

    def version(self) -> str:
        return VERSION

    def extract(self, items: Sequence[LoadedItem]) -> list[tuple[int, int]]:
        return [(key64(li.content_key), key64(li.text_hash)) for li in items]

    def pack(self, value: tuple[int, int]) -> bytes:
        return np.array(value, np.uint64).tobytes()

    def unpack(self, blob: bytes) -> tuple[int, int]:
        content, text = np.frombuffer(blob, np.uint64).tolist()
        return content, text

    def unpack_many(self, blobs: list[bytes]) -> np.ndarray:
        return np.frombuffer(b"".join(blobs), np.uint64).reshape(-1, 2)

    def take(self, batch: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return batch[rows]

    def new_index(self) -> KeyTables:
        return KeyTables(_table(), _table())

    def shared_index(self, window: SharedWindow, prefix: str) -> KeyTables:
        return KeyTables(*(RedisBands(window, f"{prefix}:{part}", 0.5, num_perm=1, params=(1, 1)) for part in "ct"))

    def index_from_parts(self, parts: dict[str, Any]) -> KeyTables:
        return KeyTables(parts["content"], parts["text"])

    def parts_of(self, index: KeyTables) -> dict[str, Any]:
        return {"content": index.content, "text": index.text}

    def index_add(self, index: KeyTables, pks: np.ndarray, values: Any) -> None:
        keys = np.asarray(values, np.uint64).reshape(-1, 2)
        index.content.add(pks, keys[:, :1])
        has_text = keys[:, 1] != 0
        index.text.add(pks[has_text], keys[has_text, 1:])

    def index_remove(self, index: KeyTables, pks: np.ndarray) -> None:
        index.content.remove(pks)
        index.text.remove(pks)

    def search(self, index: KeyTables, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """(row, item pk) of the items whose content key may be the row's."""
        found = index.content.query(np.asarray(values, np.uint64).reshape(-1, 2)[:, :1])
        return found.query, found.ids

    def candidates(self, index: KeyTables, pks: np.ndarray, values: Any, among: np.ndarray | None = None) -> Pairs:
        """(item, other) rows, not made distinct or capped as the contract's are: `copies`
        keeps each item's earliest copies (`max_exact_pairs_per_item`), and a content
        key's bucket is read only as far as those (with the item itself), so a page
        stored a million times costs each copy that many entries, not a million."""
        keys = np.asarray(values, np.uint64).reshape(-1, 2)[:, :1]
        found = index.content.query(keys, first=self.settings.max_exact_pairs_per_item + 1)
        return np.stack([pks[found.query], found.ids], axis=1)

    # --- what ingest and queries ask ----------------------------------------------------

    def copies(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> dict[int, list[int]]:
        """{item pk: the other items with its content key, in pk order} for these new or
        changed items, once their keys are stored and indexed (`on_chunk`): copies in the
        store and within the chunk."""
        candidates = self.on_chunk(session, changed)
        if candidates is None:
            return {}
        # (each item finds itself, just indexed: only the others' keys are read)
        candidates = candidates[candidates[:, 0] != candidates[:, 1]]
        if not len(candidates):
            return {}
        keys = full_keys(session, np.unique(candidates).tolist())
        copies: dict[int, list[int]] = {}
        for pk, other in candidates.tolist():
            if keys[pk][0] == keys[other][0]:
                copies.setdefault(pk, []).append(other)
        return {pk: sorted(others) for pk, others in copies.items()}

    def with_text(self, text_hash: str | None) -> list[int]:
        """Stored items whose normalised text has this hash (a query's exact matches)."""
        if not text_hash:
            return []
        with self.sessions() as session:
            found = self.index(session).text.query(np.array([[key64(text_hash)]], np.uint64))
            keys = full_keys(session, found.ids.tolist())
        return sorted(pk for pk, (_, text) in keys.items() if text == text_hash)
