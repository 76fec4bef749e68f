"""Job locks: named rows in `job_locks` that keep two runs of a job (a retrain on two
machines) from overlapping. The row's primary key is the lock: the database lets only one
transaction insert it."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, insert, update
from sqlalchemy.orm import Session

from .schema import JobLock


def insert_lock(session: Session, name: str, holder: str, now: datetime, ttl: timedelta) -> None:
    """INSERT the lock's row: raises IntegrityError when it is held (the row exists), so
    run it in a transaction of its own and catch that."""
    session.execute(insert(JobLock).values(name=name, holder=holder, acquired_at=now,
                                           expires_at=now + ttl))


def take_over_expired_lock(session: Session, name: str, holder: str, now: datetime,
                           ttl: timedelta) -> bool:
    """Take over a lock past its expiry (a run that crashed): an UPDATE that matches only
    while the row is expired, so of two takers only one changes it. Whether this one did."""
    taken = session.execute(update(JobLock).where(JobLock.name == name, JobLock.expires_at < now)
                            .values(holder=holder, acquired_at=now, expires_at=now + ttl))
    return taken.rowcount == 1


def lock_row(session: Session, name: str) -> JobLock | None:
    """The lock's row (who holds it, since when), None when it is free."""
    return session.get(JobLock, name)


def release_lock(session: Session, name: str, holder: str) -> None:
    """Delete the lock's row if `holder` still holds it (not one that took it over)."""
    session.execute(delete(JobLock).where(JobLock.name == name, JobLock.holder == holder))
