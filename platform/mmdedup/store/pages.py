"""Web pages' site statistics (how many of a site's pages carry each text block) and
their cleaned main text."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from .db import add_counts, select_in
from .schema import Item, WebBlock, WebSite


def count_blocks(session: Session, site: str, pages: int, per_block: Counter) -> tuple[int, Counter]:
    """Add `pages` pages holding these blocks (block hash -> pages) to the site's counts;
    (the site's pages, its count of each of these blocks) now in force."""
    add_counts(session, WebSite, ("site",), "pages", [{"site": site, "pages": pages}])
    signed = {h: int(np.uint64(h).view(np.int64)) for h in per_block}
    add_counts(session, WebBlock, ("site", "block_hash"), "pages",
               [{"site": site, "block_hash": signed[h], "pages": n} for h, n in per_block.items()])
    total = session.scalar(select(WebSite.pages).where(WebSite.site == site)) or 0
    counts: Counter = Counter()
    for block_hash, n in select_in(session, "SELECT block_hash, pages FROM web_blocks "
                                   "WHERE site = {p} AND block_hash IN ({values})",
                                   list(signed.values()), (site,)):
        counts[int(np.int64(block_hash).view(np.uint64))] = n
    return total, counts


def set_page_texts(session: Session, rows: list[tuple[int, str | None, datetime | None]]) -> None:
    """(item pk, main text, publication date) of pages."""
    if rows:
        session.execute(update(Item), [{"pk": pk, "page_text": text, "page_date": date}
                                       for pk, text, date in rows])
