"""The one server-sent event pump of the service: a task's progress events from a queue, keep-alive comments while
it is quiet, then its result or its error, and on close nothing left behind.

The quick answer (``questions.event_stream``), a deep run's working segment (``deep_runs.SegmentWork.stream``) and
the OpenAI-compatible chat completion stream differ only in how they write an event, the result and a failure; they
pass those as functions to ``pump``. Whatever ends the stream — the task finished, the client went away (Starlette
closes the generator, or cancels the request while the pump waits) — every task the pump waited on is cancelled
*and awaited* before the stream closes: the work itself when it is still running, and the queue read under way
(a read left pending is what asyncio reports as "Task was destroyed but it is pending!").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio

logger = logging.getLogger(__name__)

E = TypeVar("E")
T = TypeVar("T")

KEEP_ALIVE = b": keep-alive\n\n"  # a comment line: keeps a quiet stream open through proxies


def sse(event: str, data: str, event_id: int | None = None) -> bytes:
    """One server-sent event. ``data`` is one line of JSON."""
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return f"{head}data: {data}\n\n".encode()


async def pump(
    task: asyncio.Task[T],
    events: asyncio.Queue[E],
    *,
    keep_alive_s: float,
    render: Callable[[E], bytes | None],
    finish: Callable[[asyncio.Task[T]], Iterable[bytes]],
    opening: Iterable[bytes] = (),
    on_close: Callable[[], Awaitable[None]] | None = None,
    closed_early: str = "event stream closed early; cancelled its work",
) -> AsyncGenerator[bytes, None]:
    """The stream of ``task``: ``opening``, then each event of ``events`` as ``render`` writes it (None: nothing
    to send), a keep-alive comment after ``keep_alive_s`` of quiet, and once the task is done and its events are
    sent, what ``finish`` makes of the done task (its result, or its error as the caller reports it).

    On close, however it comes: the task, if still running, is cancelled (``closed_early`` is logged), the pending
    queue read too, both are awaited, then ``on_close`` runs (e.g. giving the question slot back) — shielded, so a
    cancelled request still cleans up."""
    reading: asyncio.Task[E] | None = None
    try:
        for chunk in opening:
            yield chunk
        while True:
            reading = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait({reading, task}, timeout=keep_alive_s, return_when=asyncio.FIRST_COMPLETED)
            if reading in done:
                rendered = render(reading.result())
                reading = None
                if rendered:
                    yield rendered
                continue
            await _cancel(reading)
            reading = None
            if task in done and events.empty():
                break
            if not done:
                yield KEEP_ALIVE
        for chunk in finish(task):
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            if not task.done():
                logger.info(closed_early)
            await _cancel(task)
            if reading is not None:
                await _cancel(reading)
            if on_close is not None:
                await on_close()


async def _cancel(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` unless it is done, and wait until it is (its outcome is left to whoever reads it)."""
    if not task.done():
        task.cancel()
        await asyncio.wait({task})


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancel each of ``tasks`` that is still running and wait for all of them, shielded from the caller's own
    cancellation (a helper task of a request is never left pending)."""
    with anyio.CancelScope(shield=True):
        for task in tasks:
            await _cancel(task)


__all__ = ["KEEP_ALIVE", "cancel_and_wait", "pump", "sse"]
