"""Blocking work (sync pymilvus, embedding, SQLAlchemy's sync parts) run where an answer does not wait for it.

A per-source timeout only holds if the caller can stop *waiting* the moment it is up. A thread cannot be stopped,
so ``BlockingPool.run`` runs the call on the pool's own threads and, when the awaiting task is cancelled (its
timeout, the run's deadline), returns at once and **abandons** the call: it finishes on its thread, its result or
exception is discarded, and it is counted (``abandoned``, ``abandoned_running``) and logged at DEBUG — expected
under load, nothing a user must read.

Abandoned work cannot pile up: only ``max_workers`` threads run calls; a queued call whose caller gives up is
cancelled before it starts (so the queue holds only calls somebody waits for), and a running one holds its thread
until it ends — so at most ``max_workers`` abandoned calls exist. While every thread is held by abandoned calls,
``run`` raises ``BlockingBacklogError`` at once instead of queueing behind work nobody waits for.

Why not ``asyncio.to_thread``: it too stops waiting on cancellation, but its threads are the loop's default
executor (``min(32, cores + 4)``: six on two cores), shared with everything else. Six knowledge-base searches
stuck past their timeout then starve memory recall, the evaluator and the support scorer of the next questions,
and its queue has no bound. Each kind of blocking work gets its own pool instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from researchcrew.errors import ResearchCrewError

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class BlockingBacklogError(ResearchCrewError):
    """Every thread of a blocking pool is held by calls still running past their callers' time."""


class BlockingPool:
    """A bounded set of threads for one kind of blocking work, whose callers may stop waiting (see the module)."""

    def __init__(self, name: str, *, max_workers: int = 4) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.name = name
        self.max_workers = max_workers
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending = 0  # submitted and not yet finished (queued or running)
        self._abandoned_running = 0  # of those, the ones nobody waits for any more
        self.abandoned = 0  # calls abandoned since the pool was made
        self.refused = 0  # calls refused because the pool was full

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def abandoned_running(self) -> int:
        """Abandoned calls still running on a thread."""
        return self._abandoned_running

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` on a pool thread (with the caller's context variables). Cancelling the caller
        returns at once; the call is then abandoned. Raises ``BlockingBacklogError`` while every thread is held by
        abandoned calls."""
        future = self._submit(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancel():  # already running: nobody can stop it, so nobody waits for it
                self._abandon(future)
            raise

    def _submit(self, call: Callable[[], T]) -> Future[T]:
        with self._lock:
            # Every thread held by work nobody waits for: a new call would only wait out its own time.
            if self._abandoned_running >= self.max_workers:
                self.refused += 1
                raise BlockingBacklogError(
                    f"{self.name}: all {self.max_workers} threads are held by earlier calls still running past "
                    "their callers' time; not started"
                )
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_workers, thread_name_prefix=self.name)
            executor = self._executor
            self._pending += 1
        try:
            future = executor.submit(call)
        except RuntimeError:  # shut down meanwhile
            with self._lock:
                self._pending -= 1
            raise
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future[T]) -> None:
        with self._lock:
            self._pending -= 1

    def _abandon(self, future: Future[T]) -> None:
        started = time.perf_counter()
        with self._lock:
            self.abandoned += 1
            self._abandoned_running += 1
            count = self.abandoned
        logger.debug("%s: a call outlived its caller's time; abandoned (%d so far), result discarded", self.name, count)

        def discard(done: Future[T]) -> None:
            with self._lock:
                self._abandoned_running -= 1
            failed = None if done.cancelled() else done.exception()
            logger.debug(
                "%s: an abandoned call ended %.2f s later%s; its result is discarded",
                self.name,
                time.perf_counter() - started,
                f" with {type(failed).__name__}" if failed is not None else "",
            )

        future.add_done_callback(discard)

    def stats(self) -> dict[str, int]:
        """Counters for diagnostics and benchmarks."""
        with self._lock:
            return {
                "pending": self._pending,
                "abandoned_running": self._abandoned_running,
                "abandoned": self.abandoned,
                "refused": self.refused,
            }

    def close(self) -> None:
        """Stop the threads once their current calls end; queued calls are cancelled. Never blocks."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return f"BlockingPool({self.name!r}, max_workers={self.max_workers})"


class AbandonedTasks:
    """Tasks nobody waits for any more (cancelled, still unwinding): held so they are not garbage-collected
    mid-flight (asyncio keeps only weak references), counted, and their outcome retrieved and discarded."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[object]] = set()
        self.count = 0

    def add(self, task: asyncio.Task[object], what: str) -> None:
        """Stop waiting for ``task`` (already cancelled by the caller: cancelling it again would interrupt a
        cleanup it shields)."""
        if task.done():
            self._discard(task)
            return
        self.count += 1
        self._running.add(task)
        logger.info("%s did not stop when cancelled; no longer waited for (%d so far)", what, self.count)
        task.add_done_callback(self._discard)

    def _discard(self, task: asyncio.Task[object]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned task's failure is not "never retrieved"

    @property
    def running(self) -> int:
        return len(self._running)

    def __bool__(self) -> bool:
        return bool(self._running)

    def __contains__(self, task: object) -> bool:
        return task in self._running


ABANDONED = AbandonedTasks()


async def run_within(coroutine: Coroutine[Any, Any, T], timeout: float | None, *, what: str) -> T:  # noqa: ASYNC109
    """Await ``coroutine`` for at most ``timeout`` seconds; raises ``TimeoutError`` when it is up.

    Unlike ``asyncio.timeout``, the caller is not held up by the coroutine's unwinding: on timeout (or when the
    caller is cancelled) it is cancelled, given one loop step, and then abandoned (``ABANDONED``) if it still runs
    — a ``finally`` that awaits a connection's close, a shielded cleanup or a swallowed cancellation can no longer
    stretch the timeout."""
    if timeout is None:
        return await coroutine
    task = asyncio.ensure_future(coroutine)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout))
    except asyncio.CancelledError:
        task.cancel()
        ABANDONED.add(task, what)
        raise
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.sleep(0)  # the usual case: it unwinds in one step
    ABANDONED.add(task, what)
    raise TimeoutError
