"""Per-user limits: a request rate (the ``limits`` package, moving window) and a number of questions running at
once. With ``redis.url`` both are kept in Redis, so they hold across processes and machines; without it,
each process counts on its own.

Running questions are leases in a Redis sorted set per user (member: a random lease id, score: when it expires),
taken and released by one Lua script each, so a crashed process's leases expire by themselves instead of blocking
the user forever. When Redis fails the limits fail open (the request goes on and a warning is logged): an outage of
the limiter must not become an outage of the service.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any

from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from researchcrew.settings import RedisSettings, ServiceSettings

if TYPE_CHECKING:
    from redis.asyncio import ConnectionPool, Redis

logger = logging.getLogger(__name__)

_ACQUIRE = """
local now = redis.call('TIME')
local now_s = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_s)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now_s + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
  return 1
end
return 0
"""


class QuestionSlot:
    """One running question of a user; ``release()`` (idempotent) gives the place back. ``hand_over()`` marks it as
    owned by the work it was handed to (a stream, a task), which releases it when done (``slots.question_slot``)."""

    def __init__(self, throttle: Throttle, user_id: str, lease: str | None) -> None:
        self._throttle = throttle
        self.user_id = user_id
        self._lease = lease
        self._released = False
        self.handed_over = False

    def hand_over(self) -> QuestionSlot:
        self.handed_over = True
        return self

    async def release(self) -> None:
        if self._released:
            return
        self._released = True
        await self._throttle._release(self.user_id, self._lease)

    async def __aenter__(self) -> QuestionSlot:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()


class Throttle:
    """The per-user rate and concurrency limits of one service process."""

    def __init__(self, settings: ServiceSettings, redis: RedisSettings | None = None) -> None:
        self.settings = settings
        self.items: list[RateLimitItem] = parse_many(settings.rate_limit)
        redis = redis or RedisSettings()
        url = redis.url
        self._key_prefix = f"{redis.key_prefix}:service"
        self.shared = url is not None
        self._redis: Redis | None = None
        storage: Storage
        self._pool: ConnectionPool | None = None
        if url is not None:
            from redis.asyncio import ConnectionPool, Redis

            # One pool for both limits; its connections time out rather than hang.
            self._pool = ConnectionPool.from_url(
                url, socket_timeout=redis.timeout_s, socket_connect_timeout=redis.timeout_s
            )
            options: dict[str, Any] = {"connection_pool": self._pool}
            storage = RedisStorage(
                "async+" + url,
                implementation="redispy",
                wrap_exceptions=True,
                key_prefix=f"{self._key_prefix}:rate",
                **options,
            )
            self._redis = Redis(connection_pool=self._pool)
            self._acquire_script = self._redis.register_script(_ACQUIRE)
        else:
            storage = MemoryStorage()
        self._storage = storage
        self._limiter = MovingWindowRateLimiter(storage)
        self._running: dict[str, int] = {}

    async def hit(self, user_id: str) -> int | None:
        """Count one request of ``user_id``: None when allowed, else the seconds to wait (Retry-After)."""
        try:
            for item in self.items:
                if not await self._limiter.hit(item, user_id):
                    reset_at, _ = await self._limiter.get_window_stats(item, user_id)
                    return max(1, math.ceil(reset_at - time.time()))
        except (StorageError, OSError) as error:
            logger.warning("rate limiter unavailable, letting the request through: %s", error)
        return None

    async def question_slot(self, user_id: str, *, lease_s: float) -> QuestionSlot | None:
        """A place for one more running question of ``user_id``, or None when they have the most allowed. The
        place is held until released, or for ``lease_s`` at most (longer than any question may run)."""
        limit = self.settings.max_concurrent_questions
        if self._redis is None:
            if self._running.get(user_id, 0) >= limit:
                return None
            self._running[user_id] = self._running.get(user_id, 0) + 1
            return QuestionSlot(self, user_id, None)
        from redis.exceptions import RedisError

        lease = uuid.uuid4().hex
        try:
            taken = await self._acquire_script(keys=[self._running_key(user_id)], args=[limit, lease_s, lease])
        except (RedisError, OSError) as error:
            logger.warning("concurrency limiter unavailable, letting the question through: %s", error)
            return QuestionSlot(self, user_id, None)
        return QuestionSlot(self, user_id, lease) if int(taken) == 1 else None

    async def _release(self, user_id: str, lease: str | None) -> None:
        if self._redis is None:
            remaining = self._running.get(user_id, 0) - 1
            if remaining > 0:
                self._running[user_id] = remaining
            else:
                self._running.pop(user_id, None)
            return
        if lease is None:  # taken while Redis was down
            return
        from redis.exceptions import RedisError

        try:
            await self._redis.zrem(self._running_key(user_id), lease)
        except (RedisError, OSError) as error:
            logger.warning("could not release a question lease (it expires by itself): %s", error)

    def running(self, user_id: str) -> int:
        """Questions of ``user_id`` running in this process (without Redis)."""
        return self._running.get(user_id, 0)

    async def ping(self) -> bool:
        """Whether the shared store answers (True without Redis)."""
        if self._redis is None:
            return True
        from redis.exceptions import RedisError

        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    def _running_key(self, user_id: str) -> str:
        return f"{self._key_prefix}:running:{user_id}"
