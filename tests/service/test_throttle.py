"""Per-user limits: counted in-process without Redis; shared by every process (here: every Throttle) with it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from researchcrew.service._throttle import Throttle
from researchcrew.settings import RedisSettings, ServiceSettings
from tests.loopback.server import closed_port
from tests.service.support import redis_url


def _user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"  # Redis outlives tests: every test counts a fresh user


async def test_without_redis_each_process_counts_on_its_own() -> None:
    settings = ServiceSettings(rate_limit="2/minute", max_concurrent_questions=1)
    first, second = Throttle(settings), Throttle(settings)
    assert [await first.hit("ada") for _ in range(3)][:2] == [None, None]
    assert await second.hit("ada") is None  # another process: its own count
    slot = await first.question_slot("ada", lease_s=30)
    assert slot is not None and await first.question_slot("ada", lease_s=30) is None
    await slot.release()
    await slot.release()  # idempotent: gives back one place only
    assert first.running("ada") == 0


@pytest.mark.redis
async def test_with_redis_the_rate_limit_holds_across_processes() -> None:
    url, user = redis_url(), _user()
    settings = ServiceSettings(rate_limit="5/minute")
    redis = RedisSettings(url=url)
    processes = [Throttle(settings, redis) for _ in range(3)]
    try:
        outcomes = [await processes[i % 3].hit(user) for i in range(8)]
        assert outcomes[:5] == [None] * 5
        assert all(isinstance(wait, int) and 1 <= wait <= 60 for wait in outcomes[5:])
        assert await processes[0].hit(_user()) is None  # per user
    finally:
        for throttle in processes:
            await throttle.aclose()


@pytest.mark.redis
async def test_with_redis_concurrent_questions_are_counted_across_processes() -> None:
    url, user = redis_url(), _user()
    settings = ServiceSettings(max_concurrent_questions=2)
    redis = RedisSettings(url=url)
    a, b = Throttle(settings, redis), Throttle(settings, redis)
    try:
        slots = await asyncio.gather(a.question_slot(user, lease_s=30), b.question_slot(user, lease_s=30))
        assert all(slot is not None for slot in slots)
        assert await a.question_slot(user, lease_s=30) is None
        assert await b.question_slot(user, lease_s=30) is None
        await slots[0].release()  # type: ignore[union-attr]
        assert await b.question_slot(user, lease_s=30) is not None
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.redis
async def test_a_crashed_processs_leases_expire() -> None:
    url, user = redis_url(), _user()
    settings = ServiceSettings(max_concurrent_questions=1)
    redis = RedisSettings(url=url)
    crashed, alive = Throttle(settings, redis), Throttle(settings, redis)
    try:
        assert await crashed.question_slot(user, lease_s=0.3) is not None  # never released
        assert await alive.question_slot(user, lease_s=30) is None
        await asyncio.sleep(0.5)
        assert await alive.question_slot(user, lease_s=30) is not None
    finally:
        await crashed.aclose()
        await alive.aclose()


async def test_when_redis_is_down_the_limits_fail_open(caplog: pytest.LogCaptureFixture) -> None:
    settings = ServiceSettings(rate_limit="1/minute", max_concurrent_questions=1)
    throttle = Throttle(settings, RedisSettings(url=f"redis://127.0.0.1:{closed_port()}/0", timeout_s=2))
    try:
        assert await throttle.hit("ada") is None and await throttle.hit("ada") is None
        slot = await throttle.question_slot("ada", lease_s=30)
        assert slot is not None and await throttle.question_slot("ada", lease_s=30) is not None
        await slot.release()
        assert not await throttle.ping()
        assert "letting the request through" in caplog.text
    finally:
        await throttle.aclose()
