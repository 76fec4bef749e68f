"""Engine, sessions, and migration to head whenever a store is opened.

Migrating on open means a user never runs a separate upgrade step after installing a new
version; the same Alembic scripts serve the `alembic` command for operators.
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, delete, event, func, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from .schema import ModelVersion, Signature, utcnow

DB_FILENAME = "mmdedup.db"


def resolve_url(home: Path, db_url: str | None) -> str:
    """The database URL: an explicit one, else SQLite inside `home`."""
    if db_url:
        return db_url
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(home / DB_FILENAME).resolve()}"


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001
            # WAL lets readers (a report, a second CLI) run while an ingest writes;
            # foreign keys are off by default in SQLite and the schema relies on them.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(url: str) -> Config:
    """An Alembic config that finds the migrations shipped in the package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("mmdedup.migrations")))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def open_store(url: str) -> sessionmaker[Session]:
    engine = make_engine(url)
    migrate(engine)
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    with factory.begin() as session:
        yield session


def dialect_insert(session: Session, table: type):  # noqa: ANN201
    """INSERT into `table` as the session's database speaks it (SQLite's or PostgreSQL's),
    so that it has on_conflict_do_update."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def add_counts(session: Session, table: type, keys: tuple[str, ...], column: str,
               rows: list[dict[str, object]]) -> None:
    """INSERT rows, or add their `column` to the existing row's on a key conflict: one
    statement on SQLite and PostgreSQL alike (both speak ON CONFLICT)."""
    if not rows:
        return
    stmt = dialect_insert(session, table)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(keys),
        set_={column: getattr(table, column) + stmt.excluded[column]},
    )
    session.execute(stmt, rows)


def activate_version(session: Session, kind: str, version: str | None,
                     params: dict | None = None) -> tuple[ModelVersion | None, bool]:
    """Make `version` of model `kind` the active one, storing it (with `params`) if it is
    new; None: no version active, the defaults apply. Returns (its row, whether it was
    created now), so a new version's caller can store what belongs to it (frequencies,
    word weights) under the row's pk."""
    session.execute(update(ModelVersion).where(ModelVersion.kind == kind).values(active=False))
    if version is None:
        return None, False
    row = session.scalar(select(ModelVersion).where(ModelVersion.kind == kind,
                                                    ModelVersion.version == version))
    created = row is None
    if created:
        row = ModelVersion(kind=kind, version=version, params=params or {})
        session.add(row)
    row.active = True
    session.flush()
    return row, created


def replace_signatures(session: Session, kind: str, version: str,
                       rows: Iterable[tuple[int, bytes]]) -> None:
    """These items' signature of `kind`, whatever version they had, replaced by the given
    (item pk, value) rows of `version`: what every stage writes at ingest and re-signing."""
    rows = [(int(pk), value) for pk, value in rows]
    if not rows:
        return
    session.execute(delete(Signature).where(Signature.kind == kind,
                                            Signature.item_pk.in_([pk for pk, _ in rows])))
    now = utcnow()
    session.execute(insert(Signature), [
        {"item_pk": pk, "kind": kind, "version": version, "value": value, "created_at": now}
        for pk, value in rows])


def load_signatures(session: Session, kind: str, version: str,
                    pks: list[int] | None = None) -> dict[int, bytes]:
    """{item pk: value} of one signature kind and version, for these items (all if None);
    signatures of any other version are never returned, so they are never compared."""
    query = select(Signature.item_pk, Signature.value).where(
        Signature.kind == kind, Signature.version == version)
    if pks is None:
        return dict(session.execute(query).all())
    out: dict[int, bytes] = {}
    for start in range(0, len(pks), 5000):
        out.update(session.execute(query.where(Signature.item_pk.in_(pks[start:start + 5000]))).all())
    return out


def count_signatures(session: Session, kind: str, version: str) -> int:
    return session.scalar(select(func.count()).select_from(Signature).where(
        Signature.kind == kind, Signature.version == version)) or 0
