"""Signatures: every signal's stored values, one row per item and kind, of one version.

Signatures of different versions are never compared: every read names the version. Every
write happens under the store's write lock (store/locks.py) and carries its number (`seq`),
so an index reads only what was written since it last caught up.
"""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from .db import insert_rows, select_in
from .schema import Signature, utcnow


def replace_signatures(session: Session, kind: str, version: str,
                       rows: Iterable[tuple[int, bytes]], *, fresh: bool = False) -> None:
    """These items' signature of `kind`, whatever version they had, replaced by the given
    (item pk, value) rows of `version`: what every stage writes at ingest and re-signing.
    `fresh`: the items have no signatures (a stage's ingest step: new items, or changed
    ones whose old signatures went with their old content), so nothing is deleted first."""
    rows = [(int(pk), value) for pk, value in rows]
    if not rows:
        return
    seq = session.info.get("write_seq")
    if seq is None:
        raise RuntimeError("signatures are written under the store's write lock (store.locks.take_write_lock)")
    if not fresh:
        session.execute(delete(Signature).where(Signature.kind == kind,
                                                Signature.item_pk.in_([pk for pk, _ in rows])))
    insert_rows(session, Signature, ("item_pk", "value"), rows,
                {"kind": kind, "version": version, "created_at": utcnow(), "seq": seq})


def signatures_since(session: Session, kind: str, version: str, seq: int) -> dict[int, bytes]:
    """{item pk: value} of the signatures of `kind` and `version` written after write `seq`."""
    return dict(session.execute(select(Signature.item_pk, Signature.value).where(
        Signature.kind == kind, Signature.version == version, Signature.seq > seq)).all())


def count_signatures_through(session: Session, kind: str, version: str, seq: int) -> int:
    """How many signatures of `kind` and `version` written up to write `seq` remain."""
    return session.scalar(select(func.count()).select_from(Signature).where(
        Signature.kind == kind, Signature.version == version, Signature.seq <= seq)) or 0


def load_signatures(session: Session, kind: str, version: str,
                    pks: list[int] | None = None) -> dict[int, bytes]:
    """{item pk: value} of one signature kind and version, for these items (all if None);
    signatures of any other version are never returned, so they are never compared.

    Every candidate pair is scored with every signal, so this runs for thousands of pks
    per chunk and kind: a kind the store holds none of (pictures in a text corpus) is
    answered by one look, not a look per item."""
    if pks is None:
        query = select(Signature.item_pk, Signature.value).where(
            Signature.kind == kind, Signature.version == version)
        return dict(session.execute(query).all())
    if not pks or (len(pks) > 16 and not session.scalar(select(Signature.item_pk).where(
            Signature.kind == kind, Signature.version == version).limit(1))):
        return {}
    return dict(select_in(session, "SELECT item_pk, value FROM signatures WHERE kind = {p} "
                                   "AND version = {p} AND item_pk IN ({values})", pks, (kind, version)))


def count_signatures(session: Session, kind: str, version: str) -> int:
    return session.scalar(select(func.count()).select_from(Signature).where(
        Signature.kind == kind, Signature.version == version)) or 0


def has_other_version(session: Session, kind: str, version: str) -> bool:
    """Whether any stored signature of `kind` is of another version than `version`."""
    return session.scalar(select(Signature.item_pk).where(
        Signature.kind == kind, Signature.version != version).limit(1)) is not None


def has_any(session: Session, kind: str) -> bool:
    return session.scalar(select(Signature.item_pk).where(Signature.kind == kind).limit(1)) is not None
