"""Ingest runs: one row per ingest, its source, status and counts."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from .schema import IngestRun, utcnow


def start_run(session: Session, source: str) -> int:
    run = IngestRun(source=source)
    session.add(run)
    session.flush()
    return run.pk


def finish_run(session: Session, run_pk: int, counts: dict) -> None:
    session.execute(update(IngestRun).where(IngestRun.pk == run_pk).values(
        status="done", finished_at=utcnow(), counts=counts))


def run_counts(session: Session) -> list[dict]:
    """The counts each finished ingest run recorded (its report), oldest first."""
    return list(session.execute(select(IngestRun.counts).where(IngestRun.status == "done")
                                .order_by(IngestRun.pk)).scalars())
