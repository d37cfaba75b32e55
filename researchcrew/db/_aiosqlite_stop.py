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

from typing import Any


def install() -> None:
    """Add ``stop()`` to ``aiosqlite.Connection`` when the installed aiosqlite lacks it (idempotent). Must run
    before the first aiosqlite engine is created: SQLAlchemy reads ``hasattr(Connection, "stop")`` then."""
    import aiosqlite

    if hasattr(aiosqlite.Connection, "stop"):
        return
    aiosqlite.Connection.stop = _stop  # type: ignore[attr-defined]


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
