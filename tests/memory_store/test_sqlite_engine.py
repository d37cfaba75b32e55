"""The embedded SQLite engine: several openers of one new database file all get in, in WAL mode."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from researchcrew.db import engine as db
from researchcrew.db.failures import guarded

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


class _Ledger:
    """A repository whose one write awaits between its two statements (as a store's read-modify-write does)."""

    def __init__(self, engine: AsyncEngine, inside: asyncio.Event) -> None:
        self.writer = db.write_engine(engine)
        self.inside = inside

    @guarded("writing the ledger")
    async def write_two_rows(self) -> None:
        async with self.writer.begin() as connection:
            await connection.exec_driver_sql("INSERT INTO numbers VALUES (1)")
            self.inside.set()
            await asyncio.sleep(0.3)  # the caller is cancelled here, twice
            await connection.exec_driver_sql("INSERT INTO numbers VALUES (2)")


async def test_a_store_operation_cancelled_twice_mid_transaction_ends_before_the_cancellation(tmp_path: Path) -> None:
    # A batch run stopped in process cut a job store write between two statements; SQLAlchemy left that connection
    # to the garbage collector, and while the cancelled task's traceback kept it alive its open transaction held
    # SQLite's write lock: the questions could not be given back, nor claimed again on resume (CI, 2 in 60 runs
    # of test_an_interrupted_run_resumes_without_repeating_stored_answers; 0 in 100 with the guard's to_the_end).
    engine = db.create_engine(f"sqlite+aiosqlite:///{tmp_path}/ledger.db", connect_args={"timeout": 2.0})
    try:
        async with db.write_engine(engine).begin() as connection:
            await connection.exec_driver_sql("CREATE TABLE numbers (n INTEGER)")
        inside = asyncio.Event()
        ledger = _Ledger(engine, inside)
        task = asyncio.create_task(ledger.write_two_rows())
        await inside.wait()
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()
        kept = await asyncio.gather(task, return_exceptions=True)  # the traceback stays referenced, as in the run
        assert isinstance(kept[0], asyncio.CancelledError)  # the caller still learns it was cancelled
        async with db.write_engine(engine).begin() as connection:  # before: "database is locked" after 2 s
            await connection.exec_driver_sql("INSERT INTO numbers VALUES (3)")
        async with engine.connect() as connection:
            rows = (await connection.exec_driver_sql("SELECT n FROM numbers ORDER BY n")).scalars().all()
        assert rows == [1, 2, 3]  # the cut operation ended whole, and the next write went through
    finally:
        await engine.dispose()


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """What aiosqlite's threads die of during the test, with the project's aiosqlite shim installed."""
    from researchcrew.db import _aiosqlite_stop

    _aiosqlite_stop.install()
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


class _HeldThread:
    """Work that keeps aiosqlite's thread busy (``hold``, run on it) until the test lets it go (``release``)."""

    def __init__(self) -> None:
        self.busy = threading.Event()
        self._free_to_go = threading.Event()

    def hold(self) -> None:
        self.busy.set()
        self._free_to_go.wait(10)

    def release(self) -> None:
        self._free_to_go.set()


def test_a_forced_close_reached_after_its_loop_closed_ends_the_thread_quietly(
    thread_errors: list[BaseException | None],
) -> None:
    # SQLAlchemy does not wait for a forced close (db/_aiosqlite_stop.py), so the driver's thread may get to it after
    # the loop that asked is closed (a test, or a process, ending). CI failed a later test with the thread's
    # "RuntimeError: Event loop is closed": the close was reported to that loop.
    import aiosqlite

    from researchcrew.db import _aiosqlite_stop

    held = _HeldThread()

    async def open_then_stop_while_busy() -> aiosqlite.Connection:
        connection = await aiosqlite.connect(":memory:")
        connection._tx.put_nowait((_aiosqlite_stop._NOBODY_WAITS, held.hold))
        held.busy.wait(10)
        connection.stop()  # type: ignore[attr-defined]  # as SQLAlchemy's terminate does: not awaited
        return connection

    loop = asyncio.new_event_loop()
    connection = loop.run_until_complete(open_then_stop_while_busy())
    loop.close()
    held.release()  # the thread now closes the sqlite connection, then ends
    connection.join(10)
    assert not connection.is_alive()
    assert thread_errors == []


@pytest.mark.parametrize("outcome", ["a result", "an error"])
def test_a_statement_that_ends_after_its_loop_closed_leaves_the_thread_working(
    outcome: str, thread_errors: list[BaseException | None]
) -> None:
    # A caller that gave up on a statement (a source timeout cut a read) and whose loop then closed (a short CLI
    # process, a test ending): aiosqlite 0.21's thread reported the statement's outcome to that closed loop and died
    # with "Event loop is closed", which pytest pins on whichever test runs next. Nobody waits for that outcome.
    import aiosqlite

    held = _HeldThread()

    def slow_statement() -> int:
        held.hold()
        if outcome == "an error":
            raise sqlite3.OperationalError("interrupted")
        return 42

    async def ask_then_give_up() -> aiosqlite.Connection:
        connection = await aiosqlite.connect(":memory:")
        asked = asyncio.ensure_future(connection._execute(slow_statement))
        await asyncio.sleep(0)  # the statement is queued
        assert held.busy.wait(10)
        asked.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asked
        return connection

    loop = asyncio.new_event_loop()
    connection = loop.run_until_complete(ask_then_give_up())
    loop.close()
    held.release()  # the statement ends now; its outcome has no open loop to go to

    async def use_it_again() -> int:
        async with connection.execute("select 7") as cursor:
            row = await cursor.fetchone()
        await connection.close()
        return int(row[0]) if row else -1

    # The thread lived on and serves another loop (a thread that died answers nothing: 10 s, then a failure).
    assert asyncio.run(asyncio.wait_for(use_it_again(), 10)) == 7
    connection.join(10)
    assert not connection.is_alive()
    assert thread_errors == []
