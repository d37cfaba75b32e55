"""What a database failure means: an outage (retry later) or a failed operation.

The one guard around every repository's database calls (``guarded``: accounts, chat sessions, documents,
collections, jobs, deep runs, memory) turns SQLAlchemy's and the driver's exceptions into one of two errors with
``store_failure``:

* ``MemoryStoreUnavailableError`` when the database cannot be reached: connection refused, lost or timed out, the
  server shutting down, the SQLite file that cannot be opened (SQLAlchemy's ``OperationalError`` and
  ``InterfaceError``, a ``DBAPIError`` that invalidated its connection, ``ConnectionError``/``TimeoutError``);
* ``MemoryStoreError`` otherwise.

Either message names the operation and the driver's own words, masked by ``researchcrew.redaction``: never the SQL
statement or its parameters (SQLAlchemy puts both into ``str(error)``), never a password.

The guards also run each operation **to its end when its caller is cancelled** (``to_the_end``), then pass the
cancellation on. A transaction cut by a cancellation (a stopping process cancels its tasks, often more than once)
is neither committed, rolled back nor closed: SQLAlchemy leaves its connection to the garbage collector, and while
the cancelled task's traceback keeps it alive, its open transaction holds SQLite's write lock, so every later write
of the process waits out the busy timeout and fails with "database is locked" (reproduced: 3 in 200 stops of a
batch run). A store operation is a few milliseconds; waiting for it costs a stop nothing. Reads on an answer's
deadline (memory recall) opt out with ``finish_when_cancelled=False``: a read holds no lock, and a source timeout
must cut it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

from researchcrew.errors import MemoryStoreError, MemoryStoreUnavailableError
from researchcrew.redaction import public_text

_MAX_CHAIN = 8
logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
_Method = Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` (or what it was raised from) says the database cannot be reached right now."""
    current: BaseException | None = error
    for _ in range(_MAX_CHAIN):
        if current is None:
            return False
        if isinstance(current, MemoryStoreUnavailableError):
            return True
        if isinstance(current, (OperationalError, InterfaceError)):
            return True
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, (ConnectionError, TimeoutError, socket.gaierror)):
            return True
        current = current.__cause__
    return False


def driver_reason(error: BaseException) -> str:
    """The driver's words for ``error``, without the statement, its parameters or a credential."""
    cause = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    text = str(cause).strip()
    return public_text(f"{type(cause).__name__}: {text}" if text else type(cause).__name__)


def store_failure(operation: str, error: BaseException) -> MemoryStoreError:
    """The error to raise for ``error`` met while ``operation`` (e.g. "checking an API key") ran."""
    if is_outage(error):
        return MemoryStoreUnavailableError(
            f"{operation} failed: the database cannot be reached ({driver_reason(error)})"
        )
    return MemoryStoreError(f"{operation} failed: {driver_reason(error)}")


async def to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile (any number of times); then raise the
    caller's cancellation, or give ``work``'s result or error (see the module docstring for why)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait((task,))  # unlike awaiting the task, a cancelled wait leaves the task running
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled() and task.exception() is not None:
            logger.warning("a database operation failed while its caller was stopping: %s", task.exception())
        raise asyncio.CancelledError
    return task.result()


def guarded(operation: str, *, finish_when_cancelled: bool = True) -> Callable[[_Method[P, T]], _Method[P, T]]:
    """A repository method whose database failures become ``store_failure(operation, ...)`` (the cause stays
    chained, the failure logged), run to its end when its caller is cancelled — except reads on an answer's deadline
    (``finish_when_cancelled=False``), which hold no lock and must stop at a source timeout. The one guard of every
    repository (accounts, chat sessions, documents, collections, jobs, deep runs, memory)."""

    def decorate(method: _Method[P, T]) -> _Method[P, T]:
        @functools.wraps(method)
        async def wrapper(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            work = method(self, *args, **kwargs)
            try:
                return await (to_the_end(work) if finish_when_cancelled else work)
            except (SQLAlchemyError, OSError) as error:
                logger.warning("%s failed: %s", operation, error)
                raise store_failure(operation, error) from error

        return wrapper

    return decorate


__all__ = ["driver_reason", "guarded", "is_outage", "store_failure", "to_the_end"]
