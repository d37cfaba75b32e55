"""A watcher that proves awaited work does not block the event loop: a ticker task on the loop records the gaps
between its wake-ups while the work runs. On a blocked loop it does not tick at all until the work returns.

    async with LoopWatch(interval_s=0.01) as watch:
        await tool.search("...")
    assert watch.ticks > 20 and max(watch.gaps) < 0.1
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

from tests.loopback.server import Reply, Request


class _Ticker:
    """A task on the loop that runs ``_tick`` for the length of an ``async with`` block (the watchers below)."""

    _task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # let the ticker start before the watched work does
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class LoopWatch(_Ticker):
    def __init__(self, interval_s: float = 0.01) -> None:
        self.interval_s = interval_s
        self.gaps: list[float] = []

    @property
    def ticks(self) -> int:
        return len(self.gaps)

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.interval_s)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now


class LoopGatedReplies(_Ticker):
    """Proof that a client keeps its event loop running *while its request is in flight*, whatever the machine's
    load: the loopback server holds each reply until a ticker on the client's loop has run after the request
    arrived. A client that blocks its loop on the request never lets the ticker run, so the server gives up after
    ``give_up_s`` and ``every_reply_waited_for_the_loop`` is False (a wall-clock gap bound would be load-dependent).

        gate = LoopGatedReplies()
        with LoopbackServer(gate.holding(route)) as server:
            async with gate:
                await tool.search("...")
        assert gate.every_reply_waited_for_the_loop
    """

    def __init__(self, give_up_s: float = 20.0) -> None:
        self.give_up_s = give_up_s
        self._arrivals = 0
        self._loop_ran_after = 0  # the number of arrivals the loop has run after
        self._changed = threading.Condition()
        self.replies_held = 0
        self.replies_given_up = 0

    @property
    def every_reply_waited_for_the_loop(self) -> bool:
        return self.replies_held > 0 and self.replies_given_up == 0

    def holding(self, route: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
        """``route`` whose replies wait (on the server's thread) for the client's loop to run."""

        def held(request: Request) -> Reply:
            with self._changed:
                self._arrivals += 1
                arrival = self._arrivals
                self._changed.notify_all()
                self.replies_held += 1
                if not self._changed.wait_for(lambda: self._loop_ran_after >= arrival, timeout=self.give_up_s):
                    self.replies_given_up += 1
            return route(request)

        return held

    async def _tick(self) -> None:
        while True:
            with self._changed:
                if self._loop_ran_after < self._arrivals:
                    self._loop_ran_after = self._arrivals
                    self._changed.notify_all()
            await asyncio.sleep(0.005)
