"""The embedded SQLite engine: several openers of one new database file all get in, in WAL mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from researchcrew.db import engine as db

OPENERS = 8
ROUNDS = 100  # without the retry in db._switch_to_wal, 5 of 6 runs of 60 rounds failed (2 cores)


async def _journal_mode(engine: AsyncEngine) -> str:
    async with engine.connect() as connection:
        return str((await connection.exec_driver_sql("PRAGMA journal_mode")).scalar_one())


async def test_engines_opening_a_new_file_at_once_all_switch_it_to_wal(tmp_path: Path) -> None:
    # SQLite answers "database is locked" at once, ignoring the busy timeout, to a connection that asks for WAL
    # while another is switching the same new file; that is what failed CI (MemoryStore.open from 4 tasks).
    for round_number in range(ROUNDS):
        engines = [db.create_engine(f"sqlite+aiosqlite:///{tmp_path}/round{round_number}.db") for _ in range(OPENERS)]
        try:
            assert await asyncio.gather(*(_journal_mode(engine) for engine in engines)) == ["wal"] * OPENERS
        finally:
            for engine in engines:
                await engine.dispose()


# A statement that runs for many seconds unless interrupted (a recursive count into a table).
_LONG_INSERT = (
    "INSERT INTO numbers WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 300000000) "
    "SELECT n FROM c"
)


async def test_a_write_cancelled_twice_mid_statement_does_not_keep_the_database_locked(tmp_path: Path) -> None:
    # CI failed with "database is locked" for every later write after a stopping job run cancelled its tasks twice
    # while one was inside a write transaction: with aiosqlite 0.21 (crewAI's pin) SQLAlchemy could neither roll
    # back nor close that connection, so it kept SQLite's write lock (db/_aiosqlite_stop.py).
    engine = db.create_engine(f"sqlite+aiosqlite:///{tmp_path}/cancel.db", connect_args={"timeout": 10.0})
    writer = db.write_engine(engine)
    try:
        async with writer.begin() as connection:
            await connection.exec_driver_sql("CREATE TABLE numbers (n INTEGER)")
        started = asyncio.Event()

        async def long_write() -> None:
            async with writer.begin() as connection:
                started.set()
                await connection.exec_driver_sql(_LONG_INSERT)

        task = asyncio.create_task(long_write())
        await started.wait()
        await asyncio.sleep(0.3)  # the statement is running on the driver's thread
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()  # a stopping process cancels again while the first cancellation is being handled
        await asyncio.gather(task, return_exceptions=True)
        async with writer.begin() as connection:  # before the fix: "database is locked" after the busy timeout
            await connection.exec_driver_sql("INSERT INTO numbers VALUES (-1)")
        async with engine.connect() as connection:
            count = (await connection.exec_driver_sql("SELECT count(*) FROM numbers")).scalar_one()
        assert count == 1  # the cancelled statement was rolled back; the later write is there
    finally:
        await engine.dispose()
