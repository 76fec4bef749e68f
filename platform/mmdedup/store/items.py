"""Items and their assets: written by ingest, read by the signals and the results."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any, Iterator, Sequence

from sqlalchemy import Select, bindparam, delete, func, insert, or_, select, true, update
from sqlalchemy.orm import Session

from .db import dialect_insert, insert_rows, select_in
from .schema import Asset, Failure, Item, Pair, Signature, SignatureVersion, StoreState, Unsearched, digest_hex

ITEM_COLUMNS = ("id", "title", "text", "subtitles", "meta", "text_hash", "content_key", "fingerprint", "class_name", "item_time")
_TEXT_ROW = (Item.pk, Item.title, Item.text, Item.page_text, Item.subtitles)  # what the text signal signs from


# --- ingest ----------------------------------------------------------------------------


def fingerprints(session: Session, ids: list[str]) -> dict[str, tuple[int, str]]:
    """{id: (pk, fingerprint)} of the stored items among `ids`."""
    return {id_: (pk, digest_hex(fp)) for id_, pk, fp in select_in(
        session, "SELECT id, pk, fingerprint FROM items WHERE id IN ({values})", ids)}


def taken_ids(session: Session, ids: list[str], source: str) -> list[tuple[str, str | None]]:
    """(id, source) of the stored items among `ids` that came from another source."""
    return sorted((id_, other) for id_, other in select_in(
        session, "SELECT id, source FROM items WHERE id IN ({values})", ids) if other != source)


def insert_items(session: Session, rows: list[tuple], constants: dict[str, object]) -> dict[str, int]:
    """New items (tuples of ITEM_COLUMNS); {id: pk} of them. No RETURNING: on SQLite an
    ordered RETURNING runs one statement per row; one executemany and one SELECT of the
    new pks cost far less."""
    insert_rows(session, Item, ITEM_COLUMNS, rows, constants)
    return dict(select_in(session, "SELECT id, pk FROM items WHERE id IN ({values})", [r[0] for r in rows]))


def update_item(session: Session, pk: int, values: dict[str, object]) -> None:
    session.execute(update(Item).where(Item.pk == pk).values(**values))


def forget_derived(session: Session, pks: list[int]) -> int:
    """Drop what was derived from changed (or deleted) items' content: assets, signatures,
    pairs, a search still to run. Returns how many pairs went."""
    for table in (Asset, Signature, Unsearched):
        session.execute(delete(table).where(table.item_pk.in_(pks)))
    return session.execute(delete(Pair).where(or_(Pair.a_pk.in_(pks), Pair.b_pk.in_(pks)))).rowcount


def insert_assets(session: Session, rows: list[dict]) -> None:
    if rows:
        session.execute(insert(Asset), rows)


def full_keys(session: Session, pks: list[int]) -> dict[int, tuple[str, str | None]]:
    """{item pk: (content key, text hash)}: what a 64-bit key found (signals/exact_keys.py)
    is checked against."""
    return {pk: (digest_hex(key), digest_hex(text)) for pk, key, text in select_in(
        session, "SELECT pk, content_key, text_hash FROM items WHERE pk IN ({values})", pks)}


def open_failure_keys(session: Session, source: str) -> set[str]:
    return set(session.scalars(select(Failure.key).where(Failure.source == source,
                                                         Failure.resolved_at.is_(None))))


def resolve_failures(session: Session, source: str, keys: list[str], now: datetime) -> None:
    if keys:
        session.execute(update(Failure).where(Failure.source == source, Failure.key.in_(keys),
                                              Failure.resolved_at.is_(None)).values(resolved_at=now))


def drop_open_failures(session: Session, source: str, keys: list[str]) -> None:
    if keys:
        session.execute(delete(Failure).where(Failure.source == source, Failure.key.in_(keys),
                                              Failure.resolved_at.is_(None)))


def insert_failures(session: Session, rows: list[dict]) -> None:
    """Failure rows, their texts made storable (`storable`): a record fails for holding
    what a database refuses, and its failure row must not fail for the same reason."""
    if rows:
        session.execute(insert(Failure), [
            {**row, "key": failure_key(row["key"]),
             "item_id": None if row["item_id"] is None else storable(row["item_id"], _ITEM_ID_CHARS),
             "detail": storable(row["detail"], None)}
            for row in rows])


_KEY_CHARS = Failure.__table__.c.key.type.length
_ITEM_ID_CHARS = Failure.__table__.c.item_id.type.length


def failure_key(key: str) -> str:
    """A record's key as its failure row holds it (what a rerun matches it by)."""
    return storable(key, _KEY_CHARS)


def storable(text: str, limit: int | None) -> str:
    """`text` as every database stores it alike, readable: NUL and lone surrogates
    written as escapes (\\x00, \\ud800), and a text over `limit` characters cut, with
    a digest of the whole, so two long keys sharing a beginning stay distinct."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if limit is not None and len(text) > limit:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        text = f"{text[:limit - 20]}... {digest}"
    return text


# --- time ------------------------------------------------------------------------------


def class_times(session: Session, pks: list[int]) -> dict[int, tuple[str | None, datetime | None]]:
    """{pk: (content class, item time)} of these items."""
    out = {}
    for start in range(0, len(pks), 5000):
        out.update({pk: (name, moment) for pk, name, moment in session.execute(
            select(Item.pk, Item.class_name, Item.item_time).where(Item.pk.in_(pks[start:start + 5000]))).all()})
    return out


def items_to_time(session: Session, after: int, limit: int) -> list[tuple]:
    """(pk, meta, created_at, class, time) of the next `limit` items after pk `after`."""
    return [tuple(r) for r in session.execute(
        select(Item.pk, Item.meta, Item.created_at, Item.class_name, Item.item_time)
        .where(Item.pk > after).order_by(Item.pk).limit(limit)).all()]


def set_class_times(session: Session, rows: list[tuple[int, str | None, datetime]]) -> None:
    """Items' (pk, class, time)."""
    if rows:
        table = Item.__table__
        session.execute(table.update().where(table.c.pk == bindparam("key")).values(
            class_name=bindparam("name"), item_time=bindparam("moment")),
            [{"key": pk, "name": name, "moment": moment} for pk, name, moment in rows])


def state(session: Session, name: str) -> int | None:
    """A named counter of the store (`store_state`), None when never set."""
    return session.scalar(select(StoreState.value).where(StoreState.name == name))


def set_state(session: Session, name: str, value: int) -> None:
    session.execute(dialect_insert(session, StoreState).values(name=name, value=value)
                    .on_conflict_do_update(index_elements=["name"], set_={"value": value}))


def content_keys(session: Session, since: datetime | None = None, batch: int = 50_000) -> Iterator[list[str]]:
    """The content keys of the stored items (of those whose time is `since` or later),
    a batch at a time."""
    last = 0
    while True:
        query = select(Item.pk, Item.content_key).where(Item.pk > last)
        if since is not None:
            query = query.where(Item.item_time >= since)
        rows = session.execute(query.order_by(Item.pk).limit(batch)).all()
        if not rows:
            return
        yield [key for _, key in rows]
        last = rows[-1][0]


STORE_ID = "store_id"


def store_id(session: Session) -> int | None:
    """A random number that names this store where others are named too (the keys of a
    shared window in Redis); None until `new_store_id` set it."""
    return state(session, STORE_ID)


def new_store_id(session: Session) -> int:
    """The store's id, drawn now if it has none (under the write lock)."""
    found = state(session, STORE_ID)
    if found is None:
        found = secrets.randbits(48)
        set_state(session, STORE_ID, found)
    return found


def _of_class(class_name: str | None, listed: Sequence[str]) -> Any:
    """Items of this class; None: of any class not `listed`, or of none (windows' "*")."""
    if class_name is not None:
        return Item.class_name == class_name
    return or_(Item.class_name.is_(None), Item.class_name.not_in(list(listed))) if listed else true()


def newest_item_time(session: Session, class_name: str | None = None, listed: Sequence[str] = ()) -> datetime | None:
    """The latest item time of this class (None: of the classes not `listed`; by the
    (class, time) or the time index)."""
    return session.scalar(select(Item.item_time).where(_of_class(class_name, listed), Item.item_time.is_not(None))
                          .order_by(Item.item_time.desc()).limit(1))


def expired_items(session: Session, class_name: str | None, before: datetime,
                  listed: Sequence[str] = ()) -> dict[int, str]:
    """{pk: id} of the items of this class (None: of the classes not `listed`) whose time
    is before `before` (by the (class, time) or the time index)."""
    return dict(session.execute(select(Item.pk, Item.id).where(
        _of_class(class_name, listed), Item.item_time < before)).all())


# --- texts -----------------------------------------------------------------------------


def count_texts(session: Session) -> int:
    """Items with text: each has a text signature (of one version or another), counted over
    the signatures' (version, write) index rather than by reading every item."""
    return session.scalar(select(func.count()).select_from(Signature).join(SignatureVersion).where(
        SignatureVersion.kind == "text")) or 0


def scan_texts(session: Session, after: int, through: int | None = None,
               limit: int = 2000) -> list[tuple[int, str | None, str | None, str | None]]:
    """(pk, title, text, page text) of the next `limit` items with text after pk `after`
    (up to pk `through`, if given), in pk order: what a TF-IDF refresh counts and re-signs,
    a batch a step."""
    query = _texts_through(through).where(Item.pk > after)
    return [tuple(r) for r in session.execute(query.order_by(Item.pk).limit(limit)).all()]


def newest_texts(session: Session, through: int, limit: int) -> list[tuple[int, str | None, str | None, str | None]]:
    """(pk, title, text, page text) of the `limit` last items with text up to pk `through`:
    the sample a TF-IDF refresh judges its new weights on (the newest texts are those the
    active weights have seen least)."""
    query = _texts_through(through).order_by(Item.pk.desc()).limit(limit)
    return [tuple(r) for r in session.execute(query).all()]


def _texts_through(through: int | None) -> Select:
    """(pk, title, text, page text, subtitles) of the items with text, up to pk `through`
    if given."""
    query = select(*_TEXT_ROW).where(Item.text_hash.is_not(None))
    return query if through is None else query.where(Item.pk <= through)


def last_text_pk(session: Session) -> int:
    """The largest pk of an item with text (0 if none). Walked back from the last pk, not
    MAX() under the filter: text_hash has no index, and MAX() with a WHERE reads every item."""
    return session.scalar(select(Item.pk).where(Item.text_hash.is_not(None))
                          .order_by(Item.pk.desc()).limit(1)) or 0


def texts_of(session: Session, pks: list[int]) -> list[tuple[int, str | None, str | None, str | None, str | None]]:
    """(pk, title, text, page text, subtitles) of these items."""
    rows = []
    for start in range(0, len(pks), 5000):
        rows += session.execute(select(*_TEXT_ROW).where(Item.pk.in_(pks[start:start + 5000]))).all()
    return rows
