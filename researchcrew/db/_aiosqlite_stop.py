"""Give aiosqlite 0.21 the ``Connection.stop()`` that SQLAlchemy needs to close a connection it has to abandon.

Why: crewAI pins ``aiosqlite~=0.21.0``, and ``stop()`` arrived in aiosqlite 0.22.1. Without it SQLAlchemy 2.1 marks
the aiosqlite dialect ``has_terminate = False``. Then a connection whose task is cancelled twice inside a write
transaction (a stopping process cancels its tasks more than once; a timeout can fire while a shutdown cancels) cannot
be rolled back *or* closed: the pool drops it as it is. Its transaction stays open on the driver's thread and keeps
SQLite's write lock for the life of the process, so every later write waits out the busy timeout and fails with
"database is locked" (seen in CI: a job run stopped mid-answer could not give its questions back).

With ``stop()`` the pool's terminate path works: the statement the abandoned connection is running is interrupted,
the sqlite3 connection is closed on its own thread (which rolls back its transaction and frees the lock), and the
thread exits. The shim does what 0.22.1's ``stop()`` does, plus the interrupt; it is installed only when the method
is missing, so an aiosqlite that has it is used as it is.

The same aiosqlite reports every statement's result to the loop that asked for it, from the driver's thread. When
that loop has closed in the meantime (the caller gave up: a source timeout cut a read, and then the process or the
test ended), the report raised "Event loop is closed" in the thread, which died, and pytest failed whichever test
ran next. Nobody is waiting for such a result, so with the shim it goes nowhere (``_ReportsToAnOpenLoop``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any


def install() -> None:
    """Add ``stop()`` to ``aiosqlite.Connection`` when the installed aiosqlite lacks it (idempotent). Must run
    before the first aiosqlite engine is created: SQLAlchemy reads ``hasattr(Connection, "stop")`` then."""
    import aiosqlite

    if hasattr(aiosqlite.Connection, "stop"):
        return
    aiosqlite.Connection.stop = _stop  # type: ignore[attr-defined]
    opened = aiosqlite.Connection.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        opened(self, *args, **kwargs)
        self._tx = _WorkQueue()  # before the thread starts (``await connect(...)`` starts it)

    aiosqlite.Connection.__init__ = __init__  # type: ignore[method-assign]


def _stop(self: Any) -> None:
    """Close the connection on its thread after whatever it is running now, and end the thread; never waits."""
    connection = self._connection
    self._connection = None  # no new work is accepted ("Connection closed")
    if connection is not None:
        connection.interrupt()  # thread-safe: a long statement stops now instead of holding the lock
        # Nobody awaits a forced close (SQLAlchemy drops what stop() returns), so it is not reported to the loop:
        # by the time the thread gets to it that loop may be closed (a process or a test ending), and aiosqlite
        # 0.21's thread dies reporting to a closed loop ("Event loop is closed" in a thread, seen in CI).
        self._tx.put_nowait((_NOBODY_WAITS, connection.close))
    self._stop_running()


class _NobodyWaits:
    """What aiosqlite's thread reports a forced close to: it asks ``future.get_loop().call_soon_threadsafe(...)``
    and gets a no-op. A close that fails has nobody to tell either; the thread ends next anyway."""

    def get_loop(self) -> _NobodyWaits:
        return self

    def call_soon_threadsafe(self, *_: object) -> None:
        return None


_NOBODY_WAITS = _NobodyWaits()


class _ReportsToAnOpenLoop:
    """A statement's future as the driver's thread sees it: ``future.get_loop().call_soon_threadsafe(set_result,
    future, result)`` reaches the loop that asked, unless that loop has closed, when the result goes nowhere."""

    __slots__ = ("_future",)

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self._future = future

    def get_loop(self) -> _ReportsToAnOpenLoop:
        return self

    def call_soon_threadsafe(self, report: Callable[..., None], _: object, *outcome: object) -> None:
        loop = self._future.get_loop()
        try:
            loop.call_soon_threadsafe(report, self._future, *outcome)
        except RuntimeError:
            if not loop.is_closed():
                raise


class _WorkQueue(SimpleQueue[Any]):
    """aiosqlite's queue of work for its thread, each statement's future wrapped in ``_ReportsToAnOpenLoop``."""

    def put_nowait(self, item: Any) -> None:
        if isinstance(item, tuple) and isinstance(item[0], asyncio.Future):
            item = (_ReportsToAnOpenLoop(item[0]), item[1])
        super().put_nowait(item)
