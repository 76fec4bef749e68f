"""The `dom` signal: how alike two pages' DOM structures are (the same site template).

Pages also lose their site's boilerplate here, before any signal reads their text: block
frequencies live in the store per site (meta "site", else the host of meta "url", else
meta "source"), counted before a chunk's pages are cleaned, so the pages of a big batch
from one site lose the site's repeated lines from the moment the site has enough pages to
tell (`block_min_pages`, `block_min_share`, `block_min_left`: extract/web.py says which
lines go). When lines of a site start to count, the site's pages stored before are cleaned
of them too and handed back to be signed again (`prepare`, `Signal.restate`). The DOM
sketch (SimHash and MinHash of the tag paths) is stored per page; pages propose no
candidates of their own (a shared template is no evidence of duplication), and the signal
only moves the fused mean of pairs whose content already agrees (score/fusion.py).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence
from urllib.parse import urlparse

import numpy as np
from sqlalchemy.orm import Session

from ..config import SignalSettings
from ..extract.minhash import jaccard
from ..extract.web import DOM_VERSION, BlockStats, block_hashes, block_levels, dom_sketch, drop_repeated
from ..input.items import LoadedItem
from ..store.pages import block_counts, count_blocks, reset_page_texts, set_page_texts, site_pages, total_pages
from .base import Signal


@dataclass(frozen=True)
class DomSettings(SignalSettings):
    weight: float = 0.2  # the MinHash Jaccard of tag paths, as it is (no calibration)


def site_of(meta: dict) -> str:
    site = meta.get("site")
    if not site and isinstance(meta.get("url"), str):
        site = urlparse(meta["url"]).hostname
    return str(site or meta.get("source") or "")[:255]


class DomSignal(Signal[np.ndarray, DomSettings]):
    name = "dom"
    settings_type = DomSettings
    listed = True
    exact_parts = ("html",)
    _hash_memo: dict[int, tuple[str, list[int]]] | None = None  # pk -> (text, block hashes)

    def version(self) -> str:
        return DOM_VERSION

    def prepare(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> list[int]:
        """Pages' main text without the lines repeated across their site, stored; and the
        site's pages stored before, cleaned of the lines that start to count only now
        (returned, to be signed again)."""
        pages = [(pk, li) for pk, li in changed if li.page is not None]
        if not pages:
            return []
        s = self.settings
        by_site: dict[str, list[tuple[LoadedItem, list[int]]]] = defaultdict(list)
        for _, li in pages:
            by_site[site_of(li.item.meta)].append((li, block_hashes(li.page.text)))
        chunk = {pk for pk, _ in changed}
        last = max(chunk) + 1
        again: list[tuple[int, str]] = []
        for site, members in by_site.items():
            per_block = Counter(h for _, hashes in members for h in set(hashes))
            stats = BlockStats()
            total, counts = count_blocks(session, site, len(members), per_block)
            stats.pages[site], stats.freq[site] = total, counts
            checker = stats.checker(site, s.block_min_pages, s.block_min_share)
            for li, _ in members:
                li.main_text = drop_repeated(li.page.text, checker, s.block_min_left)
            hashes = np.fromiter(per_block, np.uint64, len(per_block))
            now = block_levels([counts[h] for h in per_block], total, s.block_min_pages, s.block_min_share)
            was = block_levels([counts[h] - per_block[h] for h in per_block], total - len(members),
                               s.block_min_pages, s.block_min_share)
            if site and (now > was).any():
                again += self._clean_again(session, site, last, chunk, set(hashes[now > was].tolist()))
        set_page_texts(session, [(pk, li.main_text, li.page.date, site_of(li.item.meta)) for pk, li in pages])
        reset_page_texts(session, again)
        return [pk for pk, _ in again]

    def _clean_again(self, session: Session, site: str, before: int, chunk: set[int],
                     started: set[int]) -> list[tuple[int, str]]:
        """(pk, text) of the site's pages stored before pk `before`, not in `chunk`, that
        hold lines which start to count now (`started`), cleaned as a page of this chunk
        is. The first pages
        of a site come before its side matter is known to recur: without this they would
        keep it, and pair with each other on it, for good. Their stored text is cleaned
        again, so a line once dropped stays dropped; the last `block_recheck_pages` pages
        are looked at (a related-article list shows recent articles: its items recur on
        the pages around them)."""
        s = self.settings
        stored = [(pk, text, self._block_hashes(pk, text)) for pk, text in
                  site_pages(session, site, before, s.block_recheck_pages)]
        stored = [(pk, text, hashes) for pk, text, hashes in stored
                  if pk not in chunk and started.intersection(hashes)]
        if not stored:
            return []
        stats = BlockStats()
        stats.pages[site] = total_pages(session, site)
        stats.freq[site] = block_counts(session, site, sorted({h for _, _, hs in stored for h in hs}))
        checker = stats.checker(site, s.block_min_pages, s.block_min_share)
        out = []
        for pk, text, _ in stored:
            cleaned = drop_repeated(text, checker, s.block_min_left)
            if cleaned != text:
                out.append((pk, cleaned))
        return out

    def _block_hashes(self, pk: int, text: str) -> list[int]:
        """`block_hashes` of a stored page's text, remembered while the text stays: the
        same pages of a site are looked at again chunk after chunk, and normalising their
        lines each time was most of the cost of looking."""
        if self._hash_memo is None:
            self._hash_memo = {}
        memo = self._hash_memo
        held = memo.get(pk)
        if held is not None and held[0] == text:
            return held[1]
        hashes = block_hashes(text)
        memo[pk] = (text, hashes)
        if len(memo) > 4 * max(self.settings.block_recheck_pages, 1):  # oldest first out
            for old in list(memo)[: len(memo) // 2]:
                del memo[old]
        return hashes

    def extract(self, items: Sequence[LoadedItem]) -> list[bytes | None]:
        rows = [i for i, li in enumerate(items) if li.page is not None]
        out: list[bytes | None] = [None] * len(items)
        if rows:
            simhash, minhash = dom_sketch([items[i].page.tag_paths for i in rows])
            for k, i in enumerate(rows):
                out[i] = simhash[k : k + 1].tobytes() + minhash[k].tobytes()
        return out

    def pack(self, value: bytes) -> bytes:
        return value

    def unpack(self, blob: bytes) -> np.ndarray:
        """The MinHash part, what pairs compare."""
        return np.frombuffer(blob, np.uint32, offset=8)

    def similarity(self, a: list[np.ndarray], b: list[np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return jaccard(np.stack(a), np.stack(b)), {}
