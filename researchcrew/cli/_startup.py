"""Start-up checks of the long-running commands (`serve`, `worker`, `scheduler`).

Before a command hands over to uvicorn or taskiq it checks that the servers it needs answer. One that does not ends
the command in one line naming the setting, the address (password masked) and the error, with exit code 1: not
uvicorn's lifespan traceback, and not taskiq's process manager restarting a dying worker forever. A worker or a
scheduler may start before Redis does (a compose file, a reboot), so those two retry with exponential backoff for
``jobs.startup_timeout_s``, saying so in one line per failed attempt; `serve` tries once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from researchcrew.settings import Settings

STARTUP_TIMEOUT_SETTING = "RESEARCHCREW_JOBS__STARTUP_TIMEOUT_S"
_FIRST_WAIT_S = 0.5
_LONGEST_WAIT_S = 10.0


class Unreachable(Exception):
    """A dependency did not answer; the message is one line, credentials already masked."""


class DependencyUnavailable(click.ClickException):
    """A server the command needs cannot be reached: one line, exit code 1."""

    exit_code = 1


@dataclass(frozen=True)
class Dependency:
    """A server a command needs, as a user knows it: what it is, the setting that points at it, its address."""

    label: str  # "the memory database", "Redis"
    setting: str  # the environment variable
    address: str  # with its password masked
    probe: Callable[[], Awaitable[None]]  # raises Unreachable

    def failure(self, detail: str) -> str:
        return f"cannot reach {self.label} at {self.address} ({self.setting}): {detail}"


def describe(error: BaseException) -> str:
    """``error`` in one line: the innermost exception it was raised from that says something, type and message
    (a connection refused rather than the wrapper that names the operation), credentials masked."""
    from researchcrew.redaction import redact

    chosen = error
    cause = error.__cause__
    while cause is not None:
        if str(cause).strip():
            chosen = cause
        cause = cause.__cause__
    lines = str(chosen).strip().splitlines()
    return redact(f"{type(chosen).__name__}: {lines[0].strip().rstrip('.')}" if lines else type(chosen).__name__)


def memory_database(settings: Settings) -> Dependency:
    """The memory store (SQLite file or PostgreSQL): opened (connected and migrated) and closed again."""
    from researchcrew.redaction import mask_url

    async def probe() -> None:
        from researchcrew.errors import MemoryStoreError
        from researchcrew.runtime import open_runtime

        runtime = open_runtime(settings)  # opens nothing until asked; the runtime is the one place stores open
        try:
            await runtime.memory_store()
        except MemoryStoreError as error:
            if isinstance(error.__cause__, TimeoutError):
                timeout_s = settings.memory.connect_timeout_s
                raise Unreachable(
                    f"no answer within {timeout_s:g} s (RESEARCHCREW_MEMORY__CONNECT_TIMEOUT_S)"
                ) from error
            raise Unreachable(describe(error)) from error
        finally:
            await runtime.aclose()

    return Dependency(
        "the memory database",
        "RESEARCHCREW_MEMORY__DATABASE_URL",
        mask_url(settings.memory_database_url),
        probe,
    )


def redis(settings: Settings) -> Dependency:
    """The Redis of the job queue (and the shared limits): one PING."""
    from researchcrew.redaction import mask_url

    url = settings.redis.url
    if url is None:
        raise ValueError("redis.url is not set")

    async def probe() -> None:
        from redis.asyncio import Redis
        from redis.exceptions import RedisError

        timeout_s = settings.redis.timeout_s
        client = Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            await client.ping()
        except (RedisError, OSError) as error:
            raise Unreachable(describe(error)) from error
        finally:
            await client.aclose()

    return Dependency("Redis", "RESEARCHCREW_REDIS__URL", mask_url(url), probe)


async def _check(dependency: Dependency, retry_for_s: float, say: Callable[[str], None]) -> None:
    from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_before_delay, wait_exponential

    def announce(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait_s = state.next_action.sleep if state.next_action is not None else 0.0
        say(
            f"{dependency.failure(str(error))}; attempt {state.attempt_number}, retrying in {wait_s:.1f} s "
            f"(giving up after {retry_for_s:g} s, {STARTUP_TIMEOUT_SETTING})"
        )

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(Unreachable),
        # stop_before_delay: no wait that would end past the bound, so the command gives up within retry_for_s
        # (plus one probe's own timeout).
        stop=stop_before_delay(retry_for_s),
        wait=wait_exponential(multiplier=_FIRST_WAIT_S, min=_FIRST_WAIT_S, max=_LONGEST_WAIT_S),
        before_sleep=announce,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                await dependency.probe()
    except Unreachable as error:
        attempts = retrying.statistics.get("attempt_number", 1)
        tries = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
        raise DependencyUnavailable(dependency.failure(str(error)) + tries) from error


def require(
    dependencies: Sequence[Dependency], *, retry_for_s: float = 0.0, say: Callable[[str], None] | None = None
) -> None:
    """Check each of ``dependencies`` in turn, retrying one that does not answer for up to ``retry_for_s`` seconds
    (each failed attempt reported through ``say``, one line); raise ``DependencyUnavailable`` if one never does."""
    import asyncio

    from researchcrew.errors import ConfigurationError

    report = say or (lambda line: click.echo(line, err=True))

    async def check_all() -> None:
        for dependency in dependencies:
            await _check(dependency, retry_for_s, report)

    try:
        asyncio.run(check_all())
    except ConfigurationError as error:  # e.g. an unsupported database URL: exit code 2, as every setting mistake
        from researchcrew.cli._common import ConfigurationProblem
        from researchcrew.redaction import redact

        raise ConfigurationProblem(redact(str(error))) from error


def require_own_knowledge_base(command: str, settings: Settings, *, processes: int = 1) -> None:
    """A command that researches many questions (`worker`, `jobs run` in process) refuses to start on a Milvus Lite
    file another process holds — every question would fail "in use" — or that its own ``processes`` would share,
    in one line saying what to do (issue 19). A Milvus server, or no ``rag`` source, is no concern here."""
    if "rag" not in settings.enabled_sources or settings.milvus.uri is not None:
        return
    from pathlib import Path

    from researchcrew.knowledge.lite_lock import lite_lock_holder

    path = Path(settings.milvus_uri)
    remedy = (
        "give it a Milvus server (RESEARCHCREW_MILVUS__URI=http://host:19530), or run the jobs in the service "
        "(`researchcrew jobs run NAME` goes through a running `researchcrew serve` of the data folder)"
    )
    holder = lite_lock_holder(path)
    if holder is not None:
        raise DependencyUnavailable(
            f"{command} cannot use the knowledge base {path}: it is a Milvus Lite file, held by {holder.describe()}, "
            f"and only one process can open one; {remedy}"
        )
    if processes > 1:
        from researchcrew.cli._common import ConfigurationProblem

        raise ConfigurationProblem(
            f"{command} with {processes} processes cannot share the Milvus Lite file {path} (one process opens it); "
            + remedy
        )
