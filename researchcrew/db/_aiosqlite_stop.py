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
"""

from __future__ import annotations

import asyncio
from typing import Any


def install() -> None:
    """Add ``stop()`` to ``aiosqlite.Connection`` when the installed aiosqlite lacks it (idempotent). Must run
    before the first aiosqlite engine is created: SQLAlchemy reads ``hasattr(Connection, "stop")`` then."""
    import aiosqlite

    if hasattr(aiosqlite.Connection, "stop"):
        return
    aiosqlite.Connection.stop = _stop  # type: ignore[attr-defined]


def _stop(self: Any) -> asyncio.Future[None] | None:
    """Close the connection on its thread after whatever it is running now, and end the thread; never waits."""
    connection = self._connection
    self._connection = None  # no new work is accepted ("Connection closed")
    future: asyncio.Future[None] | None = None
    if connection is not None:
        try:
            future = asyncio.get_running_loop().create_future()
        except RuntimeError:
            # Garbage collection outside a loop: the thread cannot report back, and closing here (another thread)
            # is refused by sqlite3. Dropping the last reference closes it when the thread lets go of it.
            pass
        else:
            connection.interrupt()  # thread-safe: a long statement stops now instead of holding the lock
            self._tx.put_nowait((future, connection.close))
    self._stop_running()
    return future
