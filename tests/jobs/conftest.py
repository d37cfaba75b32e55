"""Fixtures of the batch-job tests: the real PostgreSQL and Redis of this machine, and offline settings.

A test that needs PostgreSQL or Redis skips with the reason when the server is not there — except under CI
(``CI=true``), where a missing service is a failure: CI must never pass by skipping the fault tests.

The job store's database starts at the head revision: a copy of the session's migrated template (tests/conftest.py),
PostgreSQL and SQLite alike. Every job test opens it through ``MemoryStore.open`` (or a process that does), which
would migrate an empty one to the same revision first thing; copying is faster (a migration per test was seconds).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.services import REDIS_URL, fresh_postgres_database, reachable_redis


@dataclass
class RedisFixture:
    url: str
    prefix: str  # a key prefix of this test's own (RESEARCHCREW_REDIS__KEY_PREFIX)


@pytest.fixture
def redis_service() -> Iterator[RedisFixture]:
    import redis

    client = redis.Redis.from_url(reachable_redis(), socket_connect_timeout=2, socket_timeout=5)
    prefix = f"rctest{uuid.uuid4().hex[:10]}"
    try:
        yield RedisFixture(REDIS_URL, prefix)
    finally:
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture
def postgres_url(migrated_postgres_template: str) -> Iterator[str]:
    with fresh_postgres_database("rc_jobtest", template=migrated_postgres_template) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path, migrated_sqlite_file: Path) -> str:
    """The job store on SQLite (a copy of the migrated file)."""
    path = tmp_path / "memory.db"
    shutil.copyfile(migrated_sqlite_file, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """The job store on SQLite and on PostgreSQL (a module of one backend overrides this with one of the two)."""
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url"))
