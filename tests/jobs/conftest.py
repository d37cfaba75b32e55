"""Fixtures of the batch-job tests: the real PostgreSQL and Redis of this machine, and offline settings.

A test that needs PostgreSQL or Redis skips with the reason when the server is not there — except under CI
(``CI=true``), where a missing service is a failure: CI must never pass by skipping the fault tests.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.memory_store.conftest import PG_ADMIN_DB, PG_HOST, PG_PORT, _pg_admin

REDIS_URL = "redis://127.0.0.1:6379/0"


def service_missing(reason: str) -> None:
    """Skip (a developer's machine without the service) or fail (CI) with ``reason``."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: services are required, not skipped)")
    pytest.skip(reason)


@dataclass
class RedisFixture:
    url: str
    prefix: str  # a key prefix of this test's own (RESEARCHCREW_REDIS__KEY_PREFIX)


@pytest.fixture
def redis_service() -> Iterator[RedisFixture]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as error:
        service_missing(f"Redis is not available at {REDIS_URL}: {error}")
    prefix = f"rctest{uuid.uuid4().hex[:10]}"
    try:
        yield RedisFixture(REDIS_URL, prefix)
    finally:
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    name = f"rc_jobtest_{uuid.uuid4().hex[:12]}"
    try:
        user = asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    except ConnectionError as error:
        service_missing(f"PostgreSQL is not available at {PG_HOST}:{PG_PORT} (database {PG_ADMIN_DB!r}): {error}")
    try:
        yield f"postgresql+asyncpg://{user}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The job store on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
        return
    yield request.getfixturevalue("postgres_url")
