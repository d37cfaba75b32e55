"""Limits that hold across every process sharing one Redis: arXiv's pacing and a cap on concurrent Firecrawl calls.

Without Redis (``settings.redis.url`` unset) the same limits hold per process: ``tools/arxiv.py`` paces its own
requests, and ``ConcurrencyCap`` is an ``asyncio.Semaphore``. With Redis:

* ``SharedPacer.wait_turn()`` blocks until this process may send the next request of a paced resource (arXiv: one
  request per 3 s). One Lua script decides on the Redis server, with the server's clock, whether the interval has
  passed since the last request *granted* to anyone, and records the grant atomically; otherwise it answers how
  long to wait. Grants are therefore at least the interval apart whatever the number of processes or machines.
* ``ConcurrencyCap.slot()`` holds one of N slots while a call runs. Each holder is a member of a sorted set scored
  with its lease's end; acquiring drops expired holders first, so a process SIGKILLed mid-call gives its slot
  back when its lease (the call's timeout plus a margin) runs out instead of leaking it.

Why not a library: redis-rate-limiters' semaphore hands out tokens from a list and cannot take back the token of a
killed holder (the slot leaks until the whole key expires, which then recreates full capacity while holders still
run), and ``limits``' moving window counts whole seconds. Both scripts here are a dozen lines and tested against
the real Redis (tests/jobs/test_limits.py).

A Redis that cannot be reached fails the call as data (``ToolError("unreachable")``): pacing is a term of use, so
a source is not called without it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from researchcrew.errors import ToolError

if TYPE_CHECKING:
    import redis
    import redis.asyncio

    from researchcrew.settings import Settings

logger = logging.getLogger(__name__)

# KEYS[1]: the resource's key. ARGV[1]: interval in microseconds. Returns {0, the grant's server time in
# microseconds} (granted) or {microseconds to wait, 0}.
_PACE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if last >= 0 and now < last + interval then
  return {last + interval - now, 0}
end
redis.call('SET', KEYS[1], now, 'PX', math.floor(interval / 1000) + 1000)
return {0, now}
"""

# KEYS[1]: the holders' sorted set. ARGV: capacity, lease in ms, holder token. Returns 1 (acquired) or 0.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 1
end
return 0
"""


class SharedPacer:
    """At most one grant per ``interval_s`` for ``name``, across every process using this Redis (synchronous:
    it is called on the arXiv tool's worker thread right before each HTTP request)."""

    def __init__(self, client: redis.Redis, name: str, interval_s: float, *, max_wait_s: float = 600.0) -> None:
        self.key = name
        self.interval_s = interval_s
        self.max_wait_s = max_wait_s
        self._script = client.register_script(_PACE)

    def wait_turn(self) -> float:
        """Block until this process may send its request; returns the seconds waited."""
        started = time.monotonic()
        self.take_turn()
        return time.monotonic() - started

    def take_turn(self) -> int:
        """Block until this process may send its request; returns the grant's time on the Redis server's clock
        (microseconds since the epoch). Grants are spaced by at least the interval on that clock, the one that decides;
        the caller's own clock may see a grant later than it was made (a thread not scheduled at once under load),
        never earlier."""
        import redis

        started = time.monotonic()
        while True:
            try:
                wait_us, granted_us = (
                    int(value) for value in self._script(keys=[self.key], args=[int(self.interval_s * 1_000_000)])
                )
            except redis.RedisError as error:
                raise ToolError("unreachable", f"cannot reach Redis for the shared request pacing: {error}") from error
            if wait_us <= 0:
                return granted_us
            if time.monotonic() - started > self.max_wait_s:
                raise ToolError("timeout", f"waited {self.max_wait_s:g} s for a request slot ({self.key})")
            # A little jitter so that processes woken together do not ask at the same instant again.
            time.sleep(wait_us / 1_000_000 + random.uniform(0.0, 0.02))  # noqa: S311


class ConcurrencyCap:
    """At most ``capacity`` holders of ``slot()`` at once: shared through Redis when a client is given, else per
    process. ``lease_s`` bounds how long a dead holder keeps its slot (use the call's timeout plus a margin)."""

    def __init__(
        self, capacity: int, *, client: redis.asyncio.Redis | None = None, name: str = "", lease_s: float = 60.0
    ) -> None:
        self.capacity = capacity
        self.key = name
        self.lease_s = lease_s
        self._client = client
        self._script: Any = client.register_script(_ACQUIRE) if client is not None else None
        self._local = asyncio.Semaphore(capacity) if client is None else None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the duration of the block (waits for one; cancellation while waiting is clean)."""
        if self._local is not None:
            async with self._local:
                yield
            return
        token = uuid.uuid4().hex
        await self._acquire(token)
        try:
            yield
        finally:
            await asyncio.shield(self._release(token))

    async def _acquire(self, token: str) -> None:
        import redis

        pause = 0.02
        while True:
            try:
                acquired = await self._script(keys=[self.key], args=[self.capacity, int(self.lease_s * 1000), token])
            except redis.RedisError as error:
                raise ToolError("unreachable", f"cannot reach Redis for the shared concurrency cap: {error}") from error
            if int(acquired) == 1:
                return
            await asyncio.sleep(pause + random.uniform(0.0, pause))  # noqa: S311
            pause = min(pause * 2, 0.25)

    async def _release(self, token: str) -> None:
        import redis

        if self._client is None:
            return
        try:
            await self._client.zrem(self.key, token)
        except redis.RedisError as error:  # the lease runs out by itself
            logger.warning("could not release a slot of %s (it expires with its lease): %s", self.key, error)


class SharedLimits:
    """The process's Redis clients for shared limits (None of them without ``settings.redis.url``). Built by the
    runtime, closed by it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sync: redis.Redis | None = None
        self._async: redis.asyncio.Redis | None = None

    @property
    def shared(self) -> bool:
        return self.settings.redis.url is not None

    def key(self, *parts: str) -> str:
        return ":".join((self.settings.redis.key_prefix, "limits", *parts))

    def pacer(self, name: str, interval_s: float) -> SharedPacer | None:
        """The shared pacer of ``name`` (None without Redis or without an interval)."""
        if not self.shared or interval_s <= 0:
            return None
        if self._sync is None:
            import redis

            timeout = self.settings.redis.timeout_s
            self._sync = redis.Redis.from_url(
                self.settings.redis.url or "", socket_timeout=timeout, socket_connect_timeout=timeout
            )
        return SharedPacer(self._sync, self.key("pace", name), interval_s)

    def cap(self, name: str, capacity: int | None, *, lease_s: float) -> ConcurrencyCap | None:
        """The concurrency cap of ``name`` (None when there is no cap)."""
        if capacity is None:
            return None
        client = self.async_client()
        if client is None:
            return ConcurrencyCap(capacity)
        return ConcurrencyCap(capacity, client=client, name=self.key("cap", name), lease_s=lease_s)

    def async_client(self) -> redis.asyncio.Redis | None:
        """The process's async Redis client (None without ``redis.url``); also what source health shares."""
        if not self.shared:
            return None
        if self._async is None:
            import redis.asyncio

            timeout = self.settings.redis.timeout_s
            self._async = redis.asyncio.Redis.from_url(
                self.settings.redis.url or "", socket_timeout=timeout, socket_connect_timeout=timeout
            )
        return self._async

    async def aclose(self) -> None:
        if self._async is not None:
            client, self._async = self._async, None
            await client.aclose()
        if self._sync is not None:
            sync, self._sync = self._sync, None
            sync.close()
