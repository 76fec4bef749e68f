"""Model versions: TF-IDF document frequencies and learned word weights, read and written.

Each model is a row of `model_versions` (its kind, version and parameters), one active per
kind; what belongs to a version (frequencies, words) hangs off the row's pk.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from .db import insert_rows
from .schema import DocFreq, ModelVersion, WordWeight

_TERMS_A_QUERY = 5000  # bound parameters a statement (SQLite allows 32,766)


def active_row(session: Session, kind: str) -> ModelVersion | None:
    return session.scalar(select(ModelVersion).where(ModelVersion.kind == kind,
                                                     ModelVersion.active.is_(True)))


def active_version(session: Session, kind: str) -> str | None:
    return session.scalar(select(ModelVersion.version).where(ModelVersion.kind == kind,
                                                             ModelVersion.active.is_(True)))


def active_versions(session: Session, kinds: tuple[str, ...]) -> dict[str, str]:
    return dict(session.execute(select(ModelVersion.kind, ModelVersion.version).where(
        ModelVersion.kind.in_(kinds), ModelVersion.active.is_(True))).all())


def count_versions(session: Session, kind: str) -> int:
    """How many versions of `kind` were ever stored, active or not."""
    return session.scalar(select(func.count()).select_from(ModelVersion).where(ModelVersion.kind == kind))


def versions_before(session: Session, kind: str, pk: int) -> list[ModelVersion]:
    """The rows of `kind` stored before the row `pk`, newest first."""
    return list(session.scalars(select(ModelVersion).where(
        ModelVersion.kind == kind, ModelVersion.pk < pk).order_by(ModelVersion.pk.desc())))


def doc_freqs(session: Session, model_pk: int, terms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(term hashes uint64, document frequencies) of a TF-IDF version: all of them, or
    those of `terms` (uint64 hashes) that it holds."""
    query = select(DocFreq.term_hash, DocFreq.df).where(DocFreq.model_pk == model_pk)
    if terms is None:
        rows = session.execute(query).all()
    else:
        wanted = np.unique(np.asarray(terms, np.uint64)).view(np.int64).tolist()
        rows = [r for i in range(0, len(wanted), _TERMS_A_QUERY)
                for r in session.execute(query.where(DocFreq.term_hash.in_(wanted[i:i + _TERMS_A_QUERY])))]
    keys = np.fromiter((r[0] for r in rows), np.int64, len(rows)).view(np.uint64)
    return keys, np.fromiter((r[1] for r in rows), np.int64, len(rows))


def add_doc_freqs(session: Session, model_pk: int, keys: np.ndarray, df: np.ndarray) -> None:
    """Frequencies of a new TF-IDF version; `keys` sorted, `df` aligned with them."""
    rows = list(zip(keys.view(np.int64).tolist(), df.tolist()))
    insert_rows(session, DocFreq, ("term_hash", "df"), rows, {"model_pk": model_pk})


def pending_row(session: Session, kind: str) -> ModelVersion | None:
    """The one row of `kind` (a model being built step by step, e.g. a TF-IDF refresh)."""
    return session.scalar(select(ModelVersion).where(ModelVersion.kind == kind).order_by(ModelVersion.pk).limit(1))


def version_row(session: Session, kind: str, version: str) -> ModelVersion | None:
    return session.scalar(select(ModelVersion).where(ModelVersion.kind == kind, ModelVersion.version == version))


def new_row(session: Session, kind: str, version: str, params: dict) -> ModelVersion:
    row = ModelVersion(kind=kind, version=version, params=params, active=False)
    session.add(row)
    session.flush()
    return row


def delete_row(session: Session, row: ModelVersion) -> None:
    """A model row and what hangs off it (frequencies, words)."""
    session.execute(delete(DocFreq).where(DocFreq.model_pk == row.pk))
    session.execute(delete(WordWeight).where(WordWeight.model_pk == row.pk))
    session.delete(row)
    session.flush()


def add_doc_freq_counts(session: Session, model_pk: int, keys: np.ndarray, counts: np.ndarray) -> None:
    """Add document counts to a version's frequencies (a refresh counting a batch of
    texts): one INSERT .. ON CONFLICT DO UPDATE through the driver, which SQLite and
    PostgreSQL both speak; the row-by-row ORM path cost more than the counting."""
    if not len(keys):
        return
    conn = session.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = (f"INSERT INTO doc_freqs (model_pk, term_hash, df) VALUES ({mark}, {mark}, {mark}) "
           "ON CONFLICT (model_pk, term_hash) DO UPDATE SET df = doc_freqs.df + excluded.df")
    conn.exec_driver_sql(sql, list(zip([model_pk] * len(keys), np.asarray(keys, np.uint64).view(np.int64).tolist(),
                                       np.asarray(counts, np.int64).tolist())))


def word_weights(session: Session, model_pk: int) -> list[tuple[str, float]]:
    """(word, multiplier) of a word-weight version, by word."""
    return [tuple(r) for r in session.execute(select(WordWeight.word, WordWeight.weight)
                                              .where(WordWeight.model_pk == model_pk)
                                              .order_by(WordWeight.word)).all()]


def add_word_weights(session: Session, model_pk: int, rows: list[tuple[str, float]]) -> None:
    if rows:
        session.execute(insert(WordWeight), [{"model_pk": model_pk, "word": w, "weight": m}
                                             for w, m in rows])
