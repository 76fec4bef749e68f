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
    add_counts(session, WebBlock, ("site", "block_hash"), "pages",
               [{"site": site, "block_hash": _signed(h), "pages": n} for h, n in per_block.items()])
    return total_pages(session, site), block_counts(session, site, list(per_block))


def block_counts(session: Session, site: str, hashes: list[int]) -> Counter:
    """On how many of the site's pages each of these blocks (unsigned hashes) is; a block
    never seen is left out (0)."""
    counts: Counter = Counter()
    for block_hash, n in select_in(session, "SELECT block_hash, pages FROM web_blocks "
                                   "WHERE site = {p} AND block_hash IN ({values})",
                                   sorted({_signed(h) for h in hashes}), (site,)):
        counts[int(np.int64(block_hash).view(np.uint64))] = n
    return counts


def _signed(h: int) -> int:
    return int(np.uint64(h).view(np.int64))


def total_pages(session: Session, site: str) -> int:
    """How many pages of the site have been counted."""
    return session.scalar(select(WebSite.pages).where(WebSite.site == site)) or 0


def site_pages(session: Session, site: str, before: int, limit: int) -> list[tuple[int, str]]:
    """(pk, main text) of the site's last `limit` pages stored before pk `before` that
    have a main text, newest first."""
    if limit <= 0:
        return []
    return [tuple(r) for r in session.execute(
        select(Item.pk, Item.page_text).where(Item.page_site == site, Item.pk < before,
                                              Item.page_text.is_not(None))
        .order_by(Item.pk.desc()).limit(limit)).all()]


def set_page_texts(session: Session, rows: list[tuple[int, str | None, datetime | None, str | None]]) -> None:
    """(item pk, main text, publication date, site) of pages."""
    if rows:
        session.execute(update(Item), [{"pk": pk, "page_text": text, "page_date": date, "page_site": site}
                                       for pk, text, date, site in rows])


def reset_page_texts(session: Session, rows: list[tuple[int, str]]) -> None:
    """(item pk, main text) of stored pages cleaned again."""
    if rows:
        session.execute(update(Item), [{"pk": pk, "page_text": text} for pk, text in rows])
