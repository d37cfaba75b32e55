"""Source health: a source that just failed for a reason that lasts is skipped for a while, not tried as if new.

Offline, every question paid about 3 s for arXiv to fail again. Now a source that failed as **unreachable**, **timed
out** or was **rate-limited** (HTTP 429) is skipped for a backoff window — ``initial_backoff_s × factor^(n − 1)``
after its n-th such failure in a row, capped at ``max_backoff_s`` (``SourceHealthSettings``) — and the Retriever
reports it as ``skipped`` with the reason, e.g. "skipped: unreachable 40 s ago; next try in 20 s". When the window
has passed, the next question tries the source again; a success resets it. Other failures (a bad response, a
missing key, a bug) say nothing about whether the source is there, and change nothing.

State is per process, and shared by every process using one Redis when ``redis.url`` is set (one hash per source,
``<prefix>:health:<tool name>``, written by one Lua script so that concurrent failures count in order). Health is
advice: a Redis that does not answer falls back to this process's own state (logged once), it never fails a
question. Failure messages are stored and shown redacted (``SourceFailure`` masks credentials already).

The clock is injectable (wall time: processes on several machines compare it) so tests need not wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.contracts.chunks import SourceFailure
from researchcrew.errors import FailureKind
from researchcrew.redaction import redact
from researchcrew.settings import SourceHealthSettings

if TYPE_CHECKING:
    import redis.asyncio

logger = logging.getLogger(__name__)

BackoffKind = Literal["unreachable", "timeout", "rate_limited"]
_STORED_MESSAGE_CHARS = 500

# KEYS[1]: the source's hash. ARGV: now (s), kind, message, initial_s, factor, max_s. Returns the retry time.
_RECORD_FAILURE = """
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local window = tonumber(ARGV[4]) * tonumber(ARGV[5]) ^ (failures - 1)
local cap = tonumber(ARGV[6])
if window > cap then window = cap end
local retry_at = tonumber(ARGV[1]) + window
redis.call('HSET', KEYS[1], 'kind', ARGV[2], 'message', ARGV[3], 'at', ARGV[1], 'retry_at', tostring(retry_at))
redis.call('PEXPIRE', KEYS[1], math.floor((window + cap) * 1000))
return tostring(retry_at)
"""


def backoff_kind(failure: SourceFailure) -> BackoffKind | None:
    """Whether a failure is one a source is backed off for, and which."""
    if failure.kind in ("unreachable", "timeout"):
        return failure.kind
    if failure.kind == "http_error" and failure.status_code == 429:
        return "rate_limited"
    return None


def _seconds(value: float) -> str:
    seconds = max(0, round(value))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7_200:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3_600)} h"


class SourceState(Contract):
    """One source's health as ``/readyz`` and ``researchcrew status`` show it."""

    name: str = Field(max_length=128, description="The tool's name (e.g. `academic_search`).")
    source_type: str | None = Field(default=None, max_length=64, description="Its source type, when known.")
    status: Literal["healthy", "backing_off"] = Field(
        description="healthy: questions try it; backing_off: skipped until `retry_at`."
    )
    failures: int = Field(default=0, ge=0, description="Backoff-worthy failures in a row (0 when healthy).")
    last_failure_kind: BackoffKind | None = Field(default=None, description="Kind of the last such failure.")
    last_failure_message: str | None = Field(
        default=None, max_length=_STORED_MESSAGE_CHARS, description="Its message, credentials masked."
    )
    last_failure_at: datetime | None = Field(default=None, description="When it last failed so (UTC).")
    retry_at: datetime | None = Field(default=None, description="When it is tried again (UTC), if it failed.")

    def describe(self, now: datetime | None = None) -> str:
        """One line: "healthy", or "backing off until 12:00:40 UTC (unreachable 40 s ago: ...)"."""
        if self.status == "healthy":
            return "healthy" if self.last_failure_at is None else f"healthy (last {self._failed_ago(now)})"
        assert self.retry_at is not None  # noqa: S101 - backing off always has a retry time
        message = f": {self.last_failure_message}" if self.last_failure_message else ""
        return f"backing off until {self.retry_at:%H:%M:%S} UTC ({self._failed_ago(now)}{message})"

    def _failed_ago(self, now: datetime | None) -> str:
        now = now or datetime.now(UTC)
        kind = (self.last_failure_kind or "failure").replace("_", "-")
        if self.last_failure_at is None:
            return kind
        return f"{kind} {_seconds((now - self.last_failure_at).total_seconds())} ago"


@dataclass
class _Entry:
    failures: int
    kind: BackoffKind
    message: str
    at: float
    retry_at: float

    @classmethod
    def from_hash(cls, values: dict[Any, Any]) -> _Entry | None:
        fields = {_text(key): _text(value) for key, value in values.items()}
        try:
            kind = fields["kind"]
            if kind not in ("unreachable", "timeout", "rate_limited"):
                return None
            return cls(
                failures=int(fields["failures"]),
                kind=kind,  # type: ignore[arg-type]
                message=fields.get("message", ""),
                at=float(fields["at"]),
                retry_at=float(fields["retry_at"]),
            )
        except (KeyError, ValueError):  # written by something else, or half-written: no opinion
            return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Skip:
    """A source to skip now, and the report's failure saying why."""

    failure: SourceFailure


class SourceHealth:
    """Tracks which sources are backing off (see the module docstring). One per runtime."""

    def __init__(
        self,
        settings: SourceHealthSettings | None = None,
        *,
        client: redis.asyncio.Redis | None = None,
        key_prefix: str = "researchcrew",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or SourceHealthSettings()
        self._client = client
        self._script: Any = client.register_script(_RECORD_FAILURE) if client is not None else None
        self._prefix = key_prefix
        self._clock = clock
        self._local: dict[str, _Entry] = {}
        self._known: dict[str, str] = {}  # tool name → source type, for display
        self._shared_down = False

    @property
    def shared(self) -> bool:
        return self._client is not None

    def key(self, name: str) -> str:
        return f"{self._prefix}:health:{name}"

    # The Retriever's side ----------------------------------------------------------------------------------------
    async def skips(self, sources: Sequence[tuple[str, str]]) -> dict[str, Skip]:
        """Of ``(tool name, source type)`` pairs, the ones to skip now, each with its reason."""
        for name, source_type in sources:
            self._known[name] = source_type
        if not self.settings.enabled or not sources:
            return {}
        entries = await self._read([name for name, _ in sources])
        now = self._clock()
        skips: dict[str, Skip] = {}
        for name, entry in entries.items():
            if entry is not None and now < entry.retry_at:
                reason = (
                    f"skipped: {entry.kind.replace('_', '-')} {_seconds(now - entry.at)} ago; "
                    f"next try in {_seconds(entry.retry_at - now)}"
                )
                kind: FailureKind = "http_error" if entry.kind == "rate_limited" else entry.kind
                status = 429 if entry.kind == "rate_limited" else None
                skips[name] = Skip(SourceFailure(kind=kind, message=reason, status_code=status))
        return skips

    async def record(self, outcomes: Iterable[tuple[str, SourceFailure | None]]) -> None:
        """What the called sources did: ``None`` for an answer (resets the source), else its failure."""
        if not self.settings.enabled:
            return
        healed: list[str] = []
        failed: list[tuple[str, BackoffKind, str]] = []
        for name, failure in outcomes:
            if failure is None:
                healed.append(name)
                continue
            kind = backoff_kind(failure)
            if kind is not None:
                failed.append((name, kind, redact(failure.message)[:_STORED_MESSAGE_CHARS]))
        if not healed and not failed:
            return
        now = self._clock()
        for name in healed:
            self._local.pop(name, None)
        for name, kind, message in failed:
            previous = self._local.get(name)
            failures = (previous.failures if previous else 0) + 1
            window = self.settings.backoff_s(failures)
            self._local[name] = _Entry(failures, kind, message, now, now + window)
            logger.info("%s failed (%s); skipped for %s", name, kind, _seconds(window))
        if self._client is not None:
            await self._write_shared(healed, failed, now)

    # Display --------------------------------------------------------------------------------------------------
    async def states(self, names: Sequence[str] | None = None) -> list[SourceState]:
        """Every known source's state (the given names, else those seen by this process or stored in Redis)."""
        wanted = list(names) if names is not None else sorted(set(self._known) | set(self._local))
        if names is None and self._client is not None:
            wanted = sorted(set(wanted) | set(await self._shared_names()))
        entries = await self._read(wanted)
        now = self._clock()
        return [self._state(name, entries.get(name), now) for name in wanted]

    def _state(self, name: str, entry: _Entry | None, now: float) -> SourceState:
        if entry is None:
            return SourceState(name=name, source_type=self._known.get(name), status="healthy")
        return SourceState(
            name=name,
            source_type=self._known.get(name),
            status="backing_off" if now < entry.retry_at else "healthy",
            failures=entry.failures,
            last_failure_kind=entry.kind,
            last_failure_message=redact(entry.message)[:_STORED_MESSAGE_CHARS] or None,
            last_failure_at=datetime.fromtimestamp(entry.at, UTC),
            retry_at=datetime.fromtimestamp(entry.retry_at, UTC),
        )

    # Storage --------------------------------------------------------------------------------------------------
    async def _read(self, names: list[str]) -> dict[str, _Entry | None]:
        if self._client is None or not names:
            return {name: self._local.get(name) for name in names}
        import redis

        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.hgetall(self.key(name))
                rows = await pipe.execute()
        except (redis.RedisError, OSError) as error:
            self._shared_unavailable(error)
            return {name: self._local.get(name) for name in names}
        self._shared_back()
        return {name: _Entry.from_hash(row) if row else None for name, row in zip(names, rows, strict=True)}

    async def _write_shared(self, healed: list[str], failed: list[tuple[str, BackoffKind, str]], now: float) -> None:
        import redis

        assert self._client is not None  # noqa: S101 - only called with a client
        settings = self.settings
        try:
            if healed:
                await self._client.delete(*(self.key(name) for name in healed))
            for name, kind, message in failed:
                args = [repr(now), kind, message, settings.initial_backoff_s, settings.factor, settings.max_backoff_s]
                await self._script(keys=[self.key(name)], args=args)
        except (redis.RedisError, OSError) as error:
            self._shared_unavailable(error)
            return
        self._shared_back()

    async def _shared_names(self) -> list[str]:
        import redis

        assert self._client is not None  # noqa: S101 - only called with a client
        prefix = self.key("")
        try:
            keys = [_text(key) async for key in self._client.scan_iter(match=f"{prefix}*", count=100)]
        except (redis.RedisError, OSError) as error:
            self._shared_unavailable(error)
            return []
        return [key.removeprefix(prefix) for key in keys]

    def _shared_unavailable(self, error: BaseException) -> None:
        if not self._shared_down:
            logger.warning("source health: Redis does not answer (%s); using this process's own state", error)
        self._shared_down = True

    def _shared_back(self) -> None:
        if self._shared_down:
            logger.info("source health: Redis answers again; health is shared again")
        self._shared_down = False
