"""Model versions: TF-IDF document frequencies and learned word weights, read and written.

Each model is a row of `model_versions` (its kind, version and parameters), one active per
kind; what belongs to a version (frequencies, words) hangs off the row's pk.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from .db import insert_rows
from .schema import DocFreq, ModelVersion, WordWeight


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


def doc_freqs(session: Session, model_pk: int) -> tuple[np.ndarray, np.ndarray]:
    """(term hashes uint64, document frequencies) of a TF-IDF version."""
    rows = session.execute(select(DocFreq.term_hash, DocFreq.df).where(DocFreq.model_pk == model_pk)).all()
    keys = np.fromiter((r[0] for r in rows), np.int64, len(rows)).view(np.uint64)
    return keys, np.fromiter((r[1] for r in rows), np.int64, len(rows))


def add_doc_freqs(session: Session, model_pk: int, keys: np.ndarray, df: np.ndarray) -> None:
    """Frequencies of a new TF-IDF version; `keys` sorted, `df` aligned with them."""
    rows = list(zip(keys.view(np.int64).tolist(), df.tolist()))
    insert_rows(session, DocFreq, ("term_hash", "df"), rows, {"model_pk": model_pk})


def word_weights(session: Session, model_pk: int) -> list[tuple[str, float]]:
    """(word, multiplier) of a word-weight version, by word."""
    return [tuple(r) for r in session.execute(select(WordWeight.word, WordWeight.weight)
                                              .where(WordWeight.model_pk == model_pk)
                                              .order_by(WordWeight.word)).all()]


def add_word_weights(session: Session, model_pk: int, rows: list[tuple[str, float]]) -> None:
    if rows:
        session.execute(insert(WordWeight), [{"model_pk": model_pk, "word": w, "weight": m}
                                             for w, m in rows])
