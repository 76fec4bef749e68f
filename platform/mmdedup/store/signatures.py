"""Signatures: every signal's stored values, one row per item and kind, of one version.

Signatures of different versions are never compared: every read names the version. Every
write happens under the store's write lock (store/locks.py) and carries its number (`seq`),
so an index reads only what was written since it last caught up.

A version is named by its row in `signature_versions` (schema.SignatureVersion); callers
speak in version strings and this module keeps the numbers, remembered per engine once
committed (they never change or go away).
"""

from __future__ import annotations

import weakref
from datetime import datetime
from typing import Any, Iterable

import numpy as np
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from .db import insert_rows, select_in
from .schema import Failure, Item, Signature, SignatureVersion

# {engine: {(kind, version): id}} of committed version rows.
_KNOWN: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], int]] = weakref.WeakKeyDictionary()
_NEW = "new_signature_versions"  # session.info: (transaction, rows it made, not yet committed)


def version_id(session: Session, kind: str, version: str, *, create: bool = False) -> int | None:
    """The number of a version of `kind`; None when no signature was ever stored under it
    (unless `create`: then a new row, made under the caller's write lock)."""
    key = (kind, version)
    known = _KNOWN.setdefault(session.get_bind().engine, {})
    if key in known:
        return known[key]
    transaction = session.get_transaction()
    if _NEW not in session.info or session.info[_NEW][0] is not transaction:
        session.info[_NEW] = (transaction, {})
    made = session.info[_NEW][1]
    if key in made:
        return made[key]
    found = session.scalar(select(SignatureVersion.id).where(
        SignatureVersion.kind == kind, SignatureVersion.version == version))
    if found is not None:
        known[key] = found
        return found
    if not create:
        return None
    made[key] = session.execute(insert(SignatureVersion).values(kind=kind, version=version)
                                .returning(SignatureVersion.id)).scalar_one()
    return made[key]


def _version_ids(session: Session, kind: str) -> dict[int, str]:
    """{number: version} of every version of `kind` ever stored."""
    return dict(session.execute(select(SignatureVersion.id, SignatureVersion.version)
                                .where(SignatureVersion.kind == kind)).all())


def version_names(session: Session) -> dict[int, tuple[str, str]]:
    """{number: (kind, version)} of every version: what reports and scripts print."""
    return {vid: (kind, version) for vid, kind, version in session.execute(
        select(SignatureVersion.id, SignatureVersion.kind, SignatureVersion.version)).all()}


def replace_signatures(session: Session, kind: str, version: str,
                       rows: Iterable[tuple[int, bytes]], *, fresh: bool = False) -> None:
    """These items' signature of `kind`, whatever version they had, replaced by the given
    (item pk, value) rows of `version`: what every stage writes at ingest and re-signing.
    `fresh`: the items have no signatures (a stage's ingest step: new items, or changed
    ones whose old signatures went with their old content), so nothing is deleted first."""
    rows = [(int(pk), value) for pk, value in rows]
    if not rows:
        return
    seq = _write_seq(session, "written")
    if not fresh:
        session.execute(delete(Signature).where(Signature.kind == kind,
                                                Signature.item_pk.in_([pk for pk, _ in rows])))
    insert_rows(session, Signature, ("item_pk", "value"), rows,
                {"kind": kind, "version_id": version_id(session, kind, version, create=True), "seq": seq})


def _write_seq(session: Session, verb: str) -> int:
    """The number of the write this transaction holds the lock for; signatures change only
    under it."""
    seq = session.info.get("write_seq")
    if seq is None:
        raise RuntimeError(f"signatures are {verb} under the store's write lock (store.locks.take_write_lock)")
    return seq


def signatures_since(session: Session, kind: str, version: str, seq: int) -> dict[int, bytes]:
    """{item pk: value} of the signatures of `kind` and `version` written after write `seq`
    that the candidate indexes hold (not evicted)."""
    vid = version_id(session, kind, version)
    if vid is None:
        return {}
    return dict(session.execute(select(Signature.item_pk, Signature.value).where(
        Signature.version_id == vid, Signature.seq > seq, Signature.evicted_seq.is_(None))).all())


def count_signatures_through(session: Session, kind: str, version: str, seq: int) -> int:
    """How many signatures of `kind` and `version` written up to write `seq` remain and
    were not evicted by then: what an index caught up to `seq` holds. (Evicted ones were
    written before they were evicted, so both counts read an index, not the rows.)"""
    vid = version_id(session, kind, version)
    if vid is None:
        return 0
    written = session.scalar(select(func.count()).select_from(Signature).where(
        Signature.version_id == vid, Signature.seq <= seq)) or 0
    return written - (session.scalar(select(func.count()).select_from(Signature).where(
        Signature.version_id == vid, Signature.evicted_seq <= seq)) or 0)


def evicted_since(session: Session, kind: str, version: str, seq: int) -> np.ndarray:
    """The items whose signature of `kind` and `version` an eviction after write `seq` took
    out of the candidate indexes."""
    vid = version_id(session, kind, version)
    if vid is None:
        return np.zeros(0, np.int64)
    return np.unique(np.asarray(session.scalars(select(Signature.item_pk).where(
        Signature.version_id == vid, Signature.evicted_seq > seq)).all(), np.int64))


def evict_signatures(session: Session, before: datetime, since: datetime | None, written_after: int) -> int:
    """Take out of the candidate indexes the signatures of items whose time is before
    `before` (marked with this write, held under the write lock): those whose time is at or
    after `since` (None: any), where the horizon moved since the last eviction, and those
    written after write `written_after` (the last eviction's): items that arrived late, or
    were signed again, behind the horizon. Returns how many items were taken out."""
    seq = _write_seq(session, "evicted")
    moved = select(Item.pk).where(Item.item_time < before)
    if since is not None:
        moved = moved.where(Item.item_time >= since)
    session.execute(update(Signature).where(Signature.evicted_seq.is_(None), Signature.item_pk.in_(moved))
                    .values(evicted_seq=seq).execution_options(synchronize_session=False))
    # (By the (version, write) and (version, evicted) indexes: the writes since, not the history.)
    versions = list(session.scalars(select(SignatureVersion.id)))
    if since is not None:
        behind = select(Item.pk).where(Item.pk == Signature.item_pk, Item.item_time < before).exists()
        session.execute(update(Signature).where(
            Signature.version_id.in_(versions), Signature.seq > written_after, Signature.evicted_seq.is_(None),
            behind).values(evicted_seq=seq).execution_options(synchronize_session=False))
    return session.scalar(select(func.count(Signature.item_pk.distinct())).where(
        Signature.version_id.in_(versions), Signature.evicted_seq == seq)) or 0


def restore_evicted(session: Session) -> int:
    """Every evicted signature back in the candidate indexes (as written by this write, so
    that indexes catch up with it): the windows changed, and the next eviction takes out
    what their new horizon leaves behind. Returns how many."""
    seq = _write_seq(session, "restored")
    return session.execute(update(Signature).where(Signature.evicted_seq.is_not(None))
                           .values(evicted_seq=None, seq=seq).execution_options(synchronize_session=False)
                           ).rowcount or 0


def load_signatures(session: Session, kind: str, version: str,
                    pks: list[int] | None = None) -> dict[int, bytes]:
    """{item pk: value} of one signature kind and version, for these items (if None: all
    that the candidate indexes hold, the evicted left out); signatures of any other version
    are never returned, so they are never compared.

    Every candidate pair is scored with every signal, so this runs for thousands of pks
    per chunk and kind: a kind the store holds none of (pictures in a text corpus) is
    answered by one look, not a look per item."""
    vid = version_id(session, kind, version)
    if vid is None:
        return {}
    if pks is None:
        query = select(Signature.item_pk, Signature.value).where(Signature.version_id == vid,
                                                                 Signature.evicted_seq.is_(None))
        return dict(session.execute(query).all())
    if not pks or (len(pks) > 16 and not session.scalar(select(Signature.item_pk).where(
            Signature.version_id == vid).limit(1))):
        return {}
    # (`+version_id`: a plain expression, so that SQLite's planner seeks the items by the
    # primary key instead of reading every signature of the version through its index.)
    return dict(select_in(session, "SELECT item_pk, value FROM signatures WHERE kind = {p} "
                                   "AND +version_id = {p} AND item_pk IN ({values})", pks, (kind, vid)))


def count_signatures(session: Session, kind: str, version: str) -> int:
    vid = version_id(session, kind, version)
    if vid is None:
        return 0
    return session.scalar(select(func.count()).select_from(Signature).where(
        Signature.version_id == vid)) or 0


def has_other_version(session: Session, kind: str, version: str) -> bool:
    """Whether any stored signature of `kind` is of another version than `version`."""
    others = [vid for vid, name in _version_ids(session, kind).items() if name != version]
    return bool(others) and session.scalar(select(Signature.item_pk).where(
        Signature.version_id.in_(others)).limit(1)) is not None


def count_other_versions(session: Session, kind: str, version: str, untried: str | None = None) -> int:
    """How many stored signatures of `kind` are of another version than `version`: what
    a re-sign after an upgrade has to sign (its progress bar's total). `untried`: a
    re-sign's failure source; the items it failed on (an open failure) are not counted."""
    others = [vid for vid, name in _version_ids(session, kind).items() if name != version]
    if not others:
        return 0
    query = select(func.count()).select_from(Signature).where(Signature.version_id.in_(others))
    if untried is not None:
        failed = select(Failure.pk).join(Item, Item.id == Failure.item_id).where(
            Item.pk == Signature.item_pk, Failure.source == untried, Failure.resolved_at.is_(None))
        query = query.where(~failed.exists())
    return session.scalar(query) or 0


def has_any(session: Session, kind: str) -> bool:
    ids = list(_version_ids(session, kind))
    return bool(ids) and session.scalar(select(Signature.item_pk).where(
        Signature.version_id.in_(ids)).limit(1)) is not None


def signatures_by_kind(session: Session) -> dict[str, int]:
    """{kind: signatures stored}, counted over the (version, write) index, not the rows."""
    return {kind: n for kind, n in session.execute(
        select(SignatureVersion.kind, func.count())
        .join(Signature, Signature.version_id == SignatureVersion.id)
        .group_by(SignatureVersion.kind)).all()}


def versions_stored(session: Session, kind: str | None = None) -> set[tuple[str, str]]:
    """(kind, version) of every version some signature (of `kind`) is stored under."""
    query = select(SignatureVersion.kind, SignatureVersion.version).where(
        select(Signature.item_pk).where(Signature.version_id == SignatureVersion.id).exists())
    if kind is not None:
        query = query.where(SignatureVersion.kind == kind)
    return {tuple(row) for row in session.execute(query).all()}


def stale_pks(session: Session, kind: str, version: str, after: int, limit: int) -> list[int]:
    """Up to `limit` item pks above `after`, in order, whose `kind` signature is of another
    version than `version`: a re-sign walks them a chunk at a time."""
    others = [vid for vid, name in _version_ids(session, kind).items() if name != version]
    if not others:
        return []
    return list(session.scalars(select(Signature.item_pk).where(
        Signature.version_id.in_(others), Signature.item_pk > after)
        .order_by(Signature.item_pk).limit(limit)))


def move_signatures(session: Session, kind: str, to_kind: str, version: str, limit: int) -> int:
    """Move up to `limit` signatures of `kind` and `version` to `to_kind` (the same version,
    named by to_kind's number for it), replacing what those items held there: a finished
    TF-IDF refresh moving its signatures into place, a batch a step. Returns how many moved.

    Rows are picked in the (version, write) index's order, not by item pk: moved rows leave
    the version, so each batch is the index's first `limit` entries, where ordering by pk
    would sort every row still to move, each step."""
    seq = _write_seq(session, "written")
    vid = version_id(session, kind, version)
    if vid is None:
        return 0
    pks = list(session.scalars(select(Signature.item_pk).where(Signature.version_id == vid).limit(limit)))
    if pks:
        session.execute(delete(Signature).where(Signature.kind == to_kind, Signature.item_pk.in_(pks)))
        session.execute(update(Signature).where(Signature.kind == kind, Signature.item_pk.in_(pks))
                        .values(kind=to_kind, version_id=version_id(session, to_kind, version, create=True),
                                seq=seq, evicted_seq=None))
    return len(pks)


def delete_other_versions(session: Session, kind: str, keep: list[str], limit: int | None = None) -> int:
    """Delete up to `limit` (all if None) signatures of `kind` whose version is not in
    `keep`; returns how many."""
    doomed = [vid for vid, name in _version_ids(session, kind).items() if name not in keep]
    if not doomed:
        return 0
    where = Signature.version_id.in_(doomed)
    if limit is None:
        return session.execute(delete(Signature).where(where)).rowcount or 0
    pks = list(session.scalars(select(Signature.item_pk).where(where).limit(limit)))
    if pks:
        session.execute(delete(Signature).where(Signature.kind == kind, Signature.item_pk.in_(pks)))
    return len(pks)
