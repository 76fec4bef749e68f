"""A stream's SQL: where a followed file got to, and what each new item was found to be."""

from __future__ import annotations

from typing import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from .db import dialect_insert
from .pairs import EXACT_VERSION
from .schema import Item, Pair, StreamCursor, utcnow


def read_cursor(session: Session, source: str) -> StreamCursor | None:
    return session.get(StreamCursor, source)


def save_cursor(session: Session, source: str, inode: int, offset: int, line: int, out_bytes: int,
                last_lines: str) -> None:
    values = {"inode": inode, "offset": offset, "line": line, "out_bytes": out_bytes,
              "last_lines": last_lines, "updated_at": utcnow()}
    session.execute(dialect_insert(session, StreamCursor).values(source=source, **values)
                    .on_conflict_do_update(index_elements=["source"], set_=values))


def partners(session: Session, pks: Sequence[int]) -> dict[int, list[tuple[int, str, float, bool, str]]]:
    """{pk: [(the other item's pk and id, score, whether it is an exact copy, kind)]} of
    the stored pairs of these items."""
    out: dict[int, list[tuple[int, str, float, bool, str]]] = {pk: [] for pk in pks}
    for start in range(0, len(pks), 5000):
        part = list(pks[start:start + 5000])
        for mine, other in ((Pair.a_pk, Pair.b_pk), (Pair.b_pk, Pair.a_pk)):
            for pk, other_pk, score, version, other_id, kind in session.execute(
                    select(mine, other, Pair.score, Pair.model_version, Item.id, Pair.kind)
                    .join(Item, Item.pk == other).where(mine.in_(part))).all():
                out[pk].append((other_pk, other_id, score, version == EXACT_VERSION, kind))
    return out
