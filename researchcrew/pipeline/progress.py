"""Fine-grained progress from inside the stages: each source as it answers or fails, the answer text as it is
written.

The Flow reports stage starts and ends itself. Finer events come from deep inside shared objects (the Retriever's
fan-out tasks, the synthesizers, a crewAI stream callback), which serve many runs at once, so the run's
``ProgressReporter`` travels in a context variable: the Flow sets it around a stage (``reporting``), the tasks the
stage creates inherit it, and ``report_source`` / ``report_text`` find it there (and do nothing outside a run).

A reporter may be called from another thread (crewAI emits streamed LLM chunks on the thread that reads the
stream): the event is then handed to the run's event loop, so callbacks such as ``asyncio.Queue.put_nowait`` are
always called on their own loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, TypeVar

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.progress import ProgressEvent, Stage

logger = logging.getLogger(__name__)

TextMode = Literal["section", "token"]
EventT = TypeVar("EventT")
ResultT = TypeVar("ResultT")


class ProgressReporter:
    """Builds the fine-grained events of one run and delivers them to its callback, on the run's event loop."""

    def __init__(self, run_id: str, started_at: float, deliver: Callable[[ProgressEvent], None]) -> None:
        self.run_id = run_id
        self.started_at = started_at  # time.monotonic() at the start of the run
        self._deliver = deliver
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._writer: str | None = None
        self._wrote = False

    def source(self, report: SourceReport) -> None:
        self._send("retrieve", "source", source=report)

    def text(self, piece: str, *, writer: str, mode: TextMode) -> None:
        """The next piece of the answer from ``writer`` (e.g. ``llm``, ``extractive``). A new writer after another
        one wrote something starts over (``reset``)."""
        if not piece:
            return
        reset = self._wrote and writer != self._writer
        self._writer, self._wrote = writer, True
        self._send("synthesize", "text", text=piece, detail={"mode": mode, "writer": writer, "reset": reset})

    def _send(self, stage: Stage, status: Literal["source", "text"], **fields: Any) -> None:
        event = ProgressEvent(
            run_id=self.run_id,
            stage=stage,
            status=status,
            elapsed_ms=(time.monotonic() - self.started_at) * 1000,
            **fields,
        )
        if threading.get_ident() == self._thread:
            self._safely(event)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._safely, event)

    def _safely(self, event: ProgressEvent) -> None:
        try:
            self._deliver(event)
        except Exception:  # a caller's callback must never break the run
            logger.exception("progress callback failed")


_current: ContextVar[ProgressReporter | None] = ContextVar("researchcrew_progress", default=None)


@contextmanager
def reporting(reporter: ProgressReporter | None) -> Iterator[None]:
    """Make ``reporter`` the current run's for the code inside (and the tasks it creates)."""
    token = _current.set(reporter)
    try:
        yield
    finally:
        _current.reset(token)


def current_reporter() -> ProgressReporter | None:
    return _current.get()


def report_source(report: SourceReport) -> None:
    reporter = _current.get()
    if reporter is not None:
        reporter.source(report)


def report_text(piece: str, *, writer: str, mode: TextMode) -> None:
    reporter = _current.get()
    if reporter is not None:
        reporter.text(piece, writer=writer, mode=mode)


async def events_then_result(
    work: Callable[[Callable[[EventT], None]], Coroutine[Any, Any, ResultT]],
) -> AsyncIterator[EventT | ResultT]:
    """Run ``work(on_event)`` and yield each event it emits as it comes, then its result (always last). Closing
    the iterator early cancels the work: a client that stops listening stops the run it started."""
    events: asyncio.Queue[EventT] = asyncio.Queue()
    task = asyncio.create_task(work(events.put_nowait))
    try:
        while not task.done() or not events.empty():
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        yield task.result()
    finally:
        if not task.done():
            task.cancel()
