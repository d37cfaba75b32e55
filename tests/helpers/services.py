"""The servers some tests need (PostgreSQL, Redis), and what a test does when one (or ../shared) is missing.

On a developer's machine it skips, with the reason. Under ``CI=true`` it fails: CI runs on a machine that has these
servers, and a silently skipped test there would be a green lie.

    with fresh_postgres_database("rc_jobtest") as url:   # postgresql+asyncpg://...; dropped afterwards
        ...
    with fresh_postgres_database("rc_memtest", template=migrated) as url:   # a copy of ``migrated`` (fast)
        ...
    url = reachable_redis()                              # redis://127.0.0.1:6379/0, or skip/fail saying why

Where the servers are: ``RESEARCHCREW_TEST_PG_DSN`` (``postgresql://user@host:port/admin_db``, default
``postgresql://127.0.0.1:5432/test`` trying the users postgres and root) and ``RESEARCHCREW_TEST_REDIS_URL``
(default ``redis://127.0.0.1:6379/0``). They are read once, at import: the tests' own environment guard removes
``RESEARCHCREW_*`` variables before each test.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote, urlsplit

import pytest

_PG_DSN = urlsplit(os.environ.get("RESEARCHCREW_TEST_PG_DSN", "postgresql://127.0.0.1:5432/test"))
PG_HOST, PG_PORT, PG_ADMIN_DB = _PG_DSN.hostname or "127.0.0.1", _PG_DSN.port or 5432, _PG_DSN.path.strip("/") or "test"
# The user of the DSN, else whichever of these this machine's server trusts.
PG_USERS = (_PG_DSN.username,) if _PG_DSN.username else ("postgres", "root")
REDIS_URL = os.environ.get("RESEARCHCREW_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# Opening a memory store (imports, the schema check, a connection) takes well under a second on an idle machine and
# more than its 5 s default at load average 10+ (seen: "no answer within 5 s" for SQLite in a loaded CI run). Tests
# that do not test that timeout give it a minute, in-process (tests/conftest.py) and in the processes they start;
# it is a bound, not a wait: an open that works returns at once.
MEMORY_CONNECT_TIMEOUT = {"RESEARCHCREW_MEMORY__CONNECT_TIMEOUT_S": "60"}


def service_unavailable(reason: str) -> NoReturn:
    """Skip (locally) or fail (under CI=true) the current test because something it needs is absent."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} — CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)


def required_directory(path: Path, what: str) -> Path:
    """``path`` when it is a directory; else skip (locally) or fail (under CI=true) saying ``what`` is missing."""
    if not path.is_dir():
        service_unavailable(f"{what} not found at {path}")
    return path


async def pg_admin(statement: str) -> str:
    """Run one statement in the admin database as the first user the server accepts; returns that user."""
    import asyncpg

    errors: list[str] = []
    for user in PG_USERS:
        try:
            connection = await asyncpg.connect(
                host=PG_HOST, port=PG_PORT, user=user, password=_PG_DSN.password, database=PG_ADMIN_DB, timeout=3
            )
        except (OSError, asyncpg.PostgresError) as error:
            errors.append(f"{user}: {type(error).__name__}: {error}")
            continue
        try:
            await connection.execute(statement)
        finally:
            await connection.close()
        return user
    raise ConnectionError("; ".join(errors))


@contextmanager
def fresh_postgres_database(prefix: str, *, template: str | None = None) -> Iterator[str]:
    """A new PostgreSQL database for one test (its SQLAlchemy URL), dropped afterwards: empty, or a copy of the
    database ``template`` (which must have no open connection; copying is much faster than migrating)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template is not None else ""
    try:
        user = asyncio.run(pg_admin(f'CREATE DATABASE "{name}"{copy}'))
    except ConnectionError as error:
        service_unavailable(f"PostgreSQL is not available at {PG_HOST}:{PG_PORT} (database {PG_ADMIN_DB!r}): {error}")
    try:
        login = f"{quote(user)}:{quote(_PG_DSN.password)}" if _PG_DSN.password else quote(user)
        yield f"postgresql+asyncpg://{login}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def reachable_redis(url: str = REDIS_URL) -> str:
    """``url``, once Redis answers a ping there."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
    except (redis.RedisError, OSError) as error:
        service_unavailable(f"Redis is not available at {url}: {error}")
    finally:
        client.close()
    return url
