"""A watcher that proves awaited work does not block the event loop: a ticker task on the loop records the gaps
between its wake-ups while the work runs. On a blocked loop it does not tick at all until the work returns.

    async with LoopWatch(interval_s=0.01) as watch:
        await tool.search("...")
    assert watch.ticks > 20 and max(watch.gaps) < 0.1
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import TracebackType


class LoopWatch:
    def __init__(self, interval_s: float = 0.01) -> None:
        self.interval_s = interval_s
        self.gaps: list[float] = []
        self._task: asyncio.Task[None] | None = None

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

    async def __aenter__(self) -> LoopWatch:
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
