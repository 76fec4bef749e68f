"""Page items at ingest: repeated site blocks out of the main text, DOM sketches stored,
and the `dom` signal for candidate pairs.

Block frequencies live in the store per site (meta "site", else the host of meta "url",
else meta "source"), counted before a chunk's pages are cleaned, so pages of a big batch
from one site lose the site's boilerplate lines from the moment the site has enough
pages to tell (`block_min_pages`, `block_min_share`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from urllib.parse import urlparse

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from .config import Settings
from .extract.minhash import jaccard
from .extract.web import DOM_VERSION, BlockStats, block_hashes, dom_sketch, drop_repeated
from .items import LoadedItem
from .score.pairs import SignalValues
from .store.db import add_counts, load_signatures, replace_signatures, select_in
from .store.schema import Item, WebBlock, WebSite

DOM_KIND = "dom"


def site_of(meta: dict) -> str:
    site = meta.get("site")
    if not site and isinstance(meta.get("url"), str):
        site = urlparse(meta["url"]).hostname
    return str(site or meta.get("source") or "")[:255]


class WebStage:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> None:
        """Clean and store page texts and DOM sketches; pages propose no candidates of
        their own (a shared template is no evidence of duplication)."""
        pages = [(pk, li) for pk, li in changed if li.page is not None]
        if not pages:
            return
        by_site: dict[str, list[tuple[int, LoadedItem, list[int]]]] = defaultdict(list)
        for pk, li in pages:
            by_site[site_of(li.item.meta)].append((pk, li, block_hashes(li.page.text)))
        for site, members in by_site.items():
            stats = self._count_blocks(session, site, members)
            checker = stats.checker(site, self.settings.block_min_pages, self.settings.block_min_share)
            for _, li, _ in members:
                li.main_text = drop_repeated(li.page.text, checker)
        session.execute(update(Item), [
            {"pk": pk, "page_text": li.main_text, "page_date": li.page.date} for pk, li in pages
        ])
        self._store_dom(session, pages)

    def after_chunk(self) -> None:
        pass

    def finish(self) -> None:
        pass

    def _count_blocks(self, session: Session, site: str,
                      members: list[tuple[int, LoadedItem, list[int]]]) -> BlockStats:
        """Add this chunk's pages to the site's block counts; the counts now in force."""
        per_block = Counter(h for _, _, hashes in members for h in set(hashes))
        add_counts(session, WebSite, ("site",), "pages", [{"site": site, "pages": len(members)}])
        signed = {h: int(np.uint64(h).view(np.int64)) for h in per_block}
        add_counts(session, WebBlock, ("site", "block_hash"), "pages",
                   [{"site": site, "block_hash": signed[h], "pages": n} for h, n in per_block.items()])
        stats = BlockStats()
        stats.pages[site] = session.scalar(select(WebSite.pages).where(WebSite.site == site)) or 0
        counts: Counter = Counter()
        for block_hash, pages in select_in(session, "SELECT block_hash, pages FROM web_blocks "
                                           "WHERE site = {p} AND block_hash IN ({values})",
                                           list(signed.values()), (site,)):
            counts[int(np.int64(block_hash).view(np.uint64))] = pages
        stats.freq[site] = counts
        return stats

    @staticmethod
    def _store_dom(session: Session, pages: list[tuple[int, LoadedItem]]) -> None:
        simhash, minhash = dom_sketch([li.page.tag_paths for _, li in pages])
        replace_signatures(session, DOM_KIND, DOM_VERSION,
                           ((pk, simhash[i : i + 1].tobytes() + minhash[i].tobytes())
                            for i, (pk, _) in enumerate(pages)), fresh=True)


def dom_signal(session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
    """DOM similarity of each pair (a[i], b[i]); NaN where either item has no page."""
    out = np.full(len(a), np.nan)
    if len(a) == 0:
        return SignalValues(out)
    wanted = np.unique(np.concatenate([a, b])).tolist()
    rows = {pk: np.frombuffer(value, np.uint32, offset=8)
            for pk, value in load_signatures(session, DOM_KIND, DOM_VERSION, wanted).items()}
    have = np.array([int(x) in rows and int(y) in rows for x, y in zip(a.tolist(), b.tolist())], bool)
    if have.any():
        sig_a = np.stack([rows[int(x)] for x in a[have].tolist()])
        sig_b = np.stack([rows[int(y)] for y in b[have].tolist()])
        out[have] = jaccard(sig_a, sig_b)
    return SignalValues(out)
