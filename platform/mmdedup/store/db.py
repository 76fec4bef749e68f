"""Engine, sessions, and migration to head whenever a store is opened to be written.

Migrating on open means a user never runs a separate upgrade step after installing a new
version; the same Alembic scripts serve the `alembic` command for operators. A store
opened only to be read is neither created nor migrated (a typo in a path must not leave
an empty store behind, and a read-only store must still answer): it is checked instead.
"""

from __future__ import annotations

import sqlite3
import weakref
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    event,
    inspect,
    make_url,
    select,
    text,
    update,
)
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker

from .errors import NoStore, StoreError, explain, shown_url
from .schema import Digest, ModelVersion
from .wal import WalCheckpointer

DB_FILENAME = "mmdedup.db"


def resolve_url(home: Path, db_url: str | None) -> str:
    """The database URL: an explicit one, else SQLite inside `home`."""
    if db_url:
        return db_url
    return f"sqlite:///{(home / DB_FILENAME).resolve()}"


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """The engine for `url` (SQLite or PostgreSQL, else a StoreError); `read_only`: its
    connections cannot write (SQLite opened read-only, PostgreSQL read-only transactions)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError("the database URL (--db or MMDEDUP_DATABASE_URL) cannot be read: give "
                         "one like postgresql+psycopg://user@host/db, or none for SQLite in "
                         "--home") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"mmdedup stores in SQLite or PostgreSQL, not {backend}: give --db "
                         "postgresql+psycopg://user@host/db, or no --db for SQLite in --home")
    try:
        return _engine(url, parsed.database or "", read_only)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise StoreError(f"the database driver of {parsed.drivername}:// is not installed "
                         f"({exc}): use postgresql+psycopg://..., whose driver comes with "
                         "mmdedup") from None


def _engine(url: str, path: str, read_only: bool) -> Engine:
    if url.startswith("sqlite"):
        if read_only:
            if not Path(path).is_file():
                raise NoStore(f"no SQLite database at {path}")
            uri = _read_only_uri(path)
            engine = create_engine(url, creator=lambda: sqlite3.connect(
                uri, uri=True, timeout=60, check_same_thread=False))
        else:
            engine = create_engine(url, connect_args={"timeout": 60})
            checkpointer = WalCheckpointer(path)
            event.listen(engine, "commit", lambda _conn: checkpointer.committed())
            event.listen(engine, "engine_disposed", lambda _engine: checkpointer.stop())
            weakref.finalize(engine, checkpointer.stop)  # (an engine dropped undisposed)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001
            # WAL lets readers (a report, a second CLI) run while an ingest writes;
            # foreign keys are off by default in SQLite and the schema relies on them.
            # 16 KiB pages (set before the first table; a no-op on an existing store)
            # hold a text's row and its token signature without overflow pages: that
            # and checkpoints of thousands of pages rather than 1,000 took the
            # database's share of ingesting a 400-word text from about 230 to 140 us.
            # A writer's commits leave the checkpoints to a thread of its engine
            # (wal.py), so no commit waits for one. A checkpoint leaves the WAL file at
            # the size it reached (a large chunk's); it is cut back to 64 MiB, so a
            # store's files are its data, not the largest write it ever took.
            cur = dbapi_conn.cursor()
            if not read_only:  # (a reader leaves the file as it is)
                cur.execute("PRAGMA page_size=16384")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA journal_size_limit=67108864")
                cur.execute("PRAGMA wal_autocheckpoint=0")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    engine = create_engine(url, pool_pre_ping=True)
    if read_only:
        @event.listens_for(engine, "connect")
        def _read_only(dbapi_conn, _record) -> None:  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("SET default_transaction_read_only = on")
            cur.close()
            dbapi_conn.commit()

    return engine


def _read_only_uri(path: str) -> str:
    """SQLite's URI for reading the store file without writing anything. mode=ro still
    needs the write-ahead log's index (-shm) file, which a read-only folder cannot get
    when the last writer removed it on closing; then every change is in the main file,
    and `immutable` reads it without one (the store is taken as it is: nothing can write
    a folder this user cannot)."""
    base = f"file:{quote(path)}"
    try:
        probe = sqlite3.connect(f"{base}?mode=ro", uri=True)
        try:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchall()
            return f"{base}?mode=ro"
        finally:
            probe.close()
    except sqlite3.OperationalError as exc:
        if Path(f"{path}-wal").exists():
            raise StoreError(f"cannot read the store {path} ({exc}): its folder is read-only "
                             "and its write-ahead log holds changes; open it once with write "
                             "access (any command) to fold them in") from None
        return f"{base}?immutable=1"


# The newest migration (tests/test_migrations.py holds it to Alembic's head): a store at it
# is opened without loading Alembic, which a command would otherwise pay 0.1 s to import.
SCHEMA_HEAD = "0019"


def alembic_config(url: str):  # noqa: ANN201 - an alembic.config.Config
    """An Alembic config that finds the migrations shipped in the package."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("mmdedup.migrations")))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


# What the migrations put in a store besides its tables (0006's first write number).
SEED_ROWS = {"store_state": [{"name": "writes", "value": 0}]}


def create_fresh(engine: Engine) -> None:
    """An empty database made a store at SCHEMA_HEAD straight from the mapped tables (the
    seed rows and Alembic's version row included): the same schema the migrations build
    (tests/test_migrations.py compares the two), without importing Alembic and running
    every migration, which cost a first ingest into a new store about half a second."""
    from .schema import Base

    version = Table("alembic_version", MetaData(),
                    Column("version_num", String(32), nullable=False),
                    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))
    with engine.begin() as conn:
        Base.metadata.create_all(conn)
        version.create(conn)
        for name, rows in SEED_ROWS.items():
            conn.execute(Base.metadata.tables[name].insert(), rows)
        conn.execute(version.insert(), [{"version_num": SCHEMA_HEAD}])


def _has_tables(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(inspect(conn).get_table_names())


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def open_store(url: str, *, read_only: bool = False) -> sessionmaker[Session]:
    """Sessions on the store at `url`: created and migrated to head, or, `read_only`,
    checked to hold mmdedup's tables at head (NoStore, StoreError) and never written.
    A failure to reach or open the database is a StoreError saying what to do."""
    engine = make_engine(url, read_only=read_only)
    try:
        if read_only:
            try:
                check_schema(engine)
            except OlderSchema:
                _upgrade_if_writable(url)
                check_schema(engine)
        else:
            revision = current_revision(engine)
            if revision is None and not _has_tables(engine):
                create_fresh(engine)
            elif revision != SCHEMA_HEAD:
                migrate(engine)
    except Exception as exc:
        engine.dispose()
        problem = explain(exc, url)
        if problem is None:
            raise
        raise problem from exc
    return sessionmaker(engine, expire_on_commit=False)


class OlderSchema(StoreError):
    """The store's schema is an earlier one of this mmdedup's."""


def _upgrade_if_writable(url: str) -> None:
    """Bring an older store up to date for a command that only reads, as any command did
    before reads opened stores read-only (a user never runs an upgrade step of their
    own); where the store cannot be written, the older schema is reported instead."""
    engine = make_engine(url)
    try:
        migrate(engine)
    except Exception:  # read-only, or no right to alter: say what the schema is
        pass
    finally:
        engine.dispose()


def current_revision(engine: Engine) -> str | None:
    """The migration the store is at; None where it has no mmdedup tables."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def check_schema(engine: Engine) -> None:
    """That the database holds mmdedup's tables at the schema this version reads."""
    url = engine.url.render_as_string(hide_password=False)
    current = current_revision(engine)
    if current is None:
        raise NoStore(f"{shown_url(url)} holds no mmdedup tables")
    if current == SCHEMA_HEAD:
        return
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url))
    head = script.get_current_head()
    if current == head:
        return
    known = current is not None and any(r.revision == current for r in script.walk_revisions())
    if known:
        raise OlderSchema(f"the store {shown_url(url)} has an older schema ({current}; this "
                         f"mmdedup reads {head}): a command that writes (ingest, retrain) "
                         "upgrades it, or run `alembic upgrade head`")
    raise StoreError(f"the store {shown_url(url)} has schema {current}, which this mmdedup "
                     f"(schema {head}) does not know: use the mmdedup that wrote it")


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


def insert_rows(session: Session, table: type, columns: Sequence[str], rows: list[tuple],
                constants: dict[str, object] | None = None) -> None:
    """INSERT many rows given as tuples of `columns`, plus `constants` shared by every row.

    SQLAlchemy's executemany builds and type-processes a parameter dict per row (~25 us
    a row for a signature, more than SQLite's insert itself). Here: one plain INSERT in
    the driver's parameter style, the dates and JSON columns' bind processors applied
    once to each constant and per row only where a row column needs one, the constants
    appended to each row tuple, and the driver's own executemany (COPY on PostgreSQL).
    """
    if not rows:
        return
    constants = constants or {}
    conn = session.connection()
    dialect = conn.dialect
    cols = table.__table__.c
    names = [*columns, *constants]

    def processor(name: str):  # noqa: ANN202
        kind = cols[name].type
        return kind._cached_bind_processor(dialect) if isinstance(kind, (JSON, DateTime, Digest)) else None

    fixed = tuple(p(v) if (p := processor(n)) and v is not None else v for n, v in constants.items())
    procs = [processor(n) for n in columns]
    if any(procs):
        rows = [tuple(p(v) if p and v is not None else v for p, v in zip(procs, row)) for row in rows]
    params = [row + fixed for row in rows] if fixed else rows
    table_name = cols[names[0]].table.name
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        # PostgreSQL through psycopg: COPY, one stream a batch, where executemany sends a
        # statement a row (pipelined, but the server still parses, plans and returns each).
        with conn.connection.driver_connection.cursor() as cursor:
            with cursor.copy(f"COPY {table_name} ({', '.join(names)}) FROM STDIN") as copy:
                for row in params:
                    copy.write_row(row)
        return
    conn.exec_driver_sql(_insert_sql(dialect.paramstyle, table_name, tuple(names)), params)


# Positional parameter marks of the drivers the store supports: SQLite's "?" and the
# "%s" that psycopg and pg8000 take.
_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


@lru_cache(maxsize=64)
def _insert_sql(paramstyle: str, table: str, names: tuple[str, ...]) -> str:
    mark = _MARKS[paramstyle]
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"


def select_in(session: Session, sql: str, values: Sequence, params: tuple = ()) -> list[tuple]:
    """Rows of `sql` for every one of `values`, asked in batches through the driver.
    `sql` has {p} for each of `params` and ({values}) for the batch. SQLAlchemy's
    expanding IN coerces and renders every value in Python (about 30 us each here), which
    cost more than the database's lookups when thousands of pairs are scored a chunk."""
    conn = session.connection()
    mark = _MARKS[conn.dialect.paramstyle]
    rows: list[tuple] = []
    for start in range(0, len(values), 5000):
        part = list(values[start:start + 5000])
        text = sql.format(p=mark, values=", ".join([mark] * len(part)))
        rows += conn.exec_driver_sql(text, (*params, *part)).all()
    return rows
