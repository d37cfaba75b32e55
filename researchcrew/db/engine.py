"""Engines and schema migrations for the memory store.

``create_engine(url)`` gives an async engine for any SQLAlchemy async URL:

* SQLite (``sqlite+aiosqlite:///path/memory.db``, the embedded default): WAL journal (readers never wait for the
  writer), foreign keys on, a busy timeout, and *explicit* transactions. The driver's own implicit BEGIN is turned
  off so that we emit it ourselves: plain ``BEGIN`` for reads, ``BEGIN IMMEDIATE`` on the write engine
  (``write_engine(engine)``), so a read-modify-write takes the database write lock up front instead of failing
  with "database is locked" when another process wrote in between. History and recall reads go through
  ``Reader`` instead (a plain pysqlite connection in a worker thread).
* PostgreSQL (``postgresql+asyncpg://user@host/db``): a pooled asyncpg engine with pre-ping, so a restarted
  server costs one failed checkout rather than a burst of errors.

``upgrade(engine)`` brings the schema to the newest Alembic revision (run on every open; a no-op when current),
holding a lock so that several processes opening the same database at once migrate it exactly once. Alembic itself
is imported only when a migration has to run: a database already at ``HEAD_REVISION`` is recognised with one
plain query, which keeps about 0.1 s of imports out of every process start.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy
from sqlalchemy import event, make_url, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.util import await_only
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from researchcrew.db import _aiosqlite_stop
from researchcrew.errors import ConfigurationError

if TYPE_CHECKING:
    from alembic.config import Config

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# The newest revision in MIGRATIONS_DIR, spelled out so that opening a current database needs no Alembic import.
# Bump it with every new revision (tests/memory_store/test_migrations.py checks it against the scripts).
HEAD_REVISION = "0013"
_VERSION_TABLE = "alembic_version"  # Alembic's default, which env.py keeps
SQLITE_BUSY_TIMEOUT_S = 30.0
# Any constant works; it only has to be the same in every process that migrates this database.
_PG_MIGRATION_LOCK = 0x5243_4D45  # "RCME"
_WRITE_OPTION = "researchcrew_write"


def create_engine(url: str, **engine_kwargs: Any) -> AsyncEngine:
    """An async engine for ``url``, configured for its backend (see the module docstring)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        _aiosqlite_stop.install()
        database = parsed.database or ""
        in_memory = database in ("", ":memory:") or parsed.query.get("mode") == "memory"
        if not in_memory:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
        if in_memory:
            # One shared connection, or every pooled connection would see its own empty database.
            kwargs["poolclass"] = StaticPool
        engine = create_async_engine(url, **{**kwargs, **engine_kwargs})
        _configure_sqlite(engine)
        return engine
    if backend == "postgresql":
        return create_async_engine(url, **{"pool_pre_ping": True, **engine_kwargs})
    raise ConfigurationError(
        f"the memory store supports SQLite and PostgreSQL, not {backend!r}: set memory.database_url to "
        "sqlite+aiosqlite:///path/memory.db or postgresql+asyncpg://user@host/db"
    )


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver (see the module docstring).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            _switch_to_wal(cursor)
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(_WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _is_sqlite_busy(error: BaseException) -> bool:
    # SQLITE_BUSY and its extended codes (BUSY_RECOVERY, BUSY_SNAPSHOT, ...) share the low byte.
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def _switch_to_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another connection holds the lock it needs.

    Turning a rollback-journal database into WAL needs an exclusive lock, and SQLite answers "database is locked"
    at once instead of waiting out the busy timeout. That happens when several processes (or engines) open a new
    database at the same moment, so it is retried here for as long as the busy timeout would have waited. WAL is
    stored in the file: once one connection has switched it, the others' pragma is a no-op.
    The sleep yields to the event loop (this runs inside SQLAlchemy's greenlet), so other openers keep going.
    """
    for attempt in Retrying(
        retry=retry_if_exception(_is_sqlite_busy),
        stop=stop_after_delay(SQLITE_BUSY_TIMEOUT_S),
        wait=wait_random_exponential(multiplier=0.005, max=0.25),
        sleep=lambda seconds: await_only(asyncio.sleep(seconds)),
        reraise=True,
    ):
        with attempt:
            cursor.execute("PRAGMA journal_mode=WAL")


class Reader:
    """Runs a synchronous read function ``fn(connection, *args)`` against the store's database.

    SQLite (a file): on a plain pysqlite engine over the same file, in a worker thread, so the whole function
    costs one thread hop (see memory/exchanges.py for why). PostgreSQL and in-memory SQLite: through the async
    engine's ``run_sync`` (asyncpg is natively async; an in-memory database exists only on its one connection).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._sync: Engine | None = None
        url = engine.url
        database = url.database or ""
        if url.get_backend_name() == "sqlite" and database not in ("", ":memory:") and "mode" not in url.query:
            self._sync = sqlalchemy.create_engine(
                url.set(drivername="sqlite+pysqlite"),
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            )

    @property
    def threaded(self) -> bool:
        """True when reads run on a plain pysqlite connection in a worker thread (see ``connect_sync``)."""
        return self._sync is not None

    def connect_sync(self) -> Connection:
        """A pysqlite connection, for code already running in a worker thread (only when ``threaded``)."""
        if self._sync is None:
            raise RuntimeError("this database is read through the async engine; use the Reader itself")
        return self._sync.connect()

    def connect_async(self) -> AsyncConnection:
        """An autocommit connection of the async engine (``async with reader.connect_async() as connection``)."""
        return self._autocommit.connect()

    async def __call__(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self._sync is not None:

            def run() -> T:
                with self.connect_sync() as connection:
                    return fn(connection, *args, **kwargs)

            return await asyncio.to_thread(run)
        # Autocommit: these reads need no snapshot across statements, and it saves the BEGIN and ROLLBACK
        # round trips to the server (asyncpg sends both).
        async with self.connect_async() as connection:
            return await connection.run_sync(fn, *args, **kwargs)

    def dispose(self) -> None:
        if self._sync is not None:
            self._sync.dispose()


def write_engine(engine: AsyncEngine) -> AsyncEngine:
    """The same engine (same pool) marked for writing: on SQLite its transactions start with BEGIN IMMEDIATE."""
    return engine.execution_options(**{_WRITE_OPTION: True})


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the packaged migrations; with ``connection``, env.py migrates over it."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest migration revision shipped with this version of researchcrew, read from the scripts."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def _current(connection: Connection) -> str | None:
    """What Alembic's ``MigrationContext.get_current_revision`` answers, without importing Alembic."""
    if not sqlalchemy.inspect(connection).has_table(_VERSION_TABLE):
        return None
    versions = connection.execute(text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalars().all()  # noqa: S608
    if len(versions) > 1:  # only with branches, which this package never ships
        raise RuntimeError(f"the memory store database has several migration heads: {sorted(versions)}")
    return versions[0] if versions else None


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_current)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` inside one transaction, under a cross-process lock.

    PostgreSQL runs DDL transactionally, so a failed migration leaves the old schema intact; the advisory lock
    makes concurrent openers wait for the first one. On SQLite, BEGIN IMMEDIATE plays the lock's part.
    """
    target = HEAD_REVISION if revision == "head" else revision
    async with engine.connect() as probe:
        if await probe.run_sync(_current) == target:
            return
    from alembic import command

    async with write_engine(engine).begin() as connection:
        if connection.dialect.name == "postgresql":
            await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        before = await connection.run_sync(_current)
        await connection.run_sync(lambda sync: command.upgrade(alembic_config(sync), revision))
        logger.info("memory store migrated from %s to %s", before or "an empty database", revision)


def dialect_name(session: AsyncSession) -> str:
    """``sqlite`` or ``postgresql``: the backend a session talks to."""
    return session.get_bind().dialect.name


def dialect_insert(dialect_name: str, table: Any) -> Any:
    """``INSERT`` with ``ON CONFLICT`` support for this dialect (SQLite and PostgreSQL spell it the same way)."""
    if dialect_name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    if dialect_name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)
    raise ConfigurationError(f"the memory store supports SQLite and PostgreSQL, not {dialect_name}")
