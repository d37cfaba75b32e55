"""The retrieval-tool interface of seed 003, and the result type that tells failure apart from "no results".

A tool implements ``_search``. Callers use either

* ``await tool.search(query, ...)`` → ``ToolResult`` (chunks, or the failure with its kind and reason, and the
  latency) — what the Retriever uses, because it must know *why* a source gave nothing; or
* ``await tool.execute(query, ...)`` → ``list[ContextChunk]`` — the seed's signature: never raises, and an error
  looks like an empty list (the failure is logged).

Inside ``_search`` a tool raises ``ToolError(kind, message)`` for failures it understands (mapping its SDK's
named exceptions), and ``search`` reports them as data. Anything else it raises is a bug: ``search`` logs the
traceback and reports it as ``internal_error``. ``timeout=`` bounds one call: when it is up, ``search`` reports the
timeout at once and does not wait for ``_search`` to unwind (``researchcrew.blocking.run_within``).

A tool whose calls wait in a queue of its own before anything is sent (arXiv: one request per 3 s, shared by every
worker) tells ``current_call().queued(...)`` when each request leaves. A timeout whose time went mostly on that
wait is then reported as ``ToolResult.queued``: the source was hardly asked, so it says nothing about the source's
health (``tools/health.py`` backs off only sources that were really unreachable, slow or rate-limited).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, get_args

from pydantic import Field, ValidationError

from researchcrew.blocking import BlockingBacklogError, run_within
from researchcrew.contracts._base import Contract
from researchcrew.contracts.chunks import ContextChunk, SourceFailure
from researchcrew.errors import FailureKind, ToolError

logger = logging.getLogger(__name__)


class ToolResult(Contract):
    """What one call of a tool produced: chunks, or a failure, and how long it took."""

    tool_name: str = Field(description="The tool that was called.")
    source_type: str = Field(description="Its source type.")
    chunks: list[ContextChunk] = Field(default_factory=list, description="Evidence found (empty on failure).")
    failure: SourceFailure | None = Field(default=None, description="Why the call failed; None when it worked.")
    latency_ms: float = Field(default=0.0, ge=0, description="Wall time of the call in milliseconds.")
    queued: bool = Field(
        default=False,
        description="The call timed out while it waited (mostly) for its turn in the tool's own queue, not for the "
        "source: it says nothing about the source's health.",
    )

    @property
    def ok(self) -> bool:
        return self.failure is None


class Tool(ABC):
    """A retrieval source. Subclasses set the class attributes and implement ``_search``."""

    name: ClassVar[str]
    description: ClassVar[str]
    source_type: ClassVar[str]
    # This source's own timeout, when its settings give it one (the web and arXiv tools); None: the Retriever's
    # `retrieval.timeout_per_source_s`. The Retriever passes the result as `search(timeout=...)`.
    timeout_s: float | None = None

    # `timeout=` is part of the seed's tool interface; it is applied with asyncio.timeout below.
    async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> ToolResult:  # noqa: ASYNC109
        """Run the tool and report chunks or the failure as data. Never raises (except on cancellation)."""
        started = time.perf_counter()
        failure: SourceFailure | None = None
        chunks: list[ContextChunk] = []
        call = CallProgress()
        queued = False
        token = _CALL.set(call)  # the task run_within makes copies this context: _search sees `call`
        try:
            self._check_arguments(query, kwargs)
            # Not asyncio.timeout: the answer must not wait for a tool's slow unwinding once its time is up.
            raw = await run_within(self._search(query, **kwargs), _time_left(timeout), what=self.name)
            chunks = validate_chunks(raw, self)
        except ToolError as error:
            failure = failure_of(error, tool_name=self.name)
            logger.warning("%s failed (%s): %s", self.name, failure.kind, failure.message)
        except TimeoutError:
            queued = call.timed_out_in_queue()
            message = f"{self.name} did not answer within {timeout:g} s"
            if queued:
                message += ": the time went on waiting for its turn in its own request queue, not on the source"
            failure = SourceFailure(kind="timeout", message=message)
            logger.warning("%s timed out after %s s%s", self.name, timeout, " in its own queue" if queued else "")
        except BlockingBacklogError as error:  # its worker threads are all held by calls past their time
            failure = SourceFailure(kind="timeout", message=str(error))
            logger.warning("%s was not started: %s", self.name, error)
        except Exception as error:  # the one outermost guard: a bug in a tool becomes a reported failure
            logger.exception("%s raised unexpectedly", self.name)
            failure = unexpected_failure(self.name, error)
        finally:
            _CALL.reset(token)
        return ToolResult(
            tool_name=self.name,
            source_type=self.source_type,
            chunks=chunks,
            failure=failure,
            latency_ms=(time.perf_counter() - started) * 1000,
            queued=queued,
        )

    def _check_arguments(self, query: str, kwargs: dict[str, Any]) -> None:
        """An option the tool does not take is the caller's mistake: report it as ``invalid_request``."""
        try:
            inspect.signature(self._search).bind(query, **kwargs)
        except TypeError as error:
            raise ToolError("invalid_request", f"{self.name} does not take these arguments: {error}") from error

    async def execute(self, query: str, **kwargs: Any) -> list[ContextChunk]:
        """The seed's interface: chunks, or an empty list when the tool failed (the failure is logged)."""
        return (await self.search(query, **kwargs)).chunks

    @abstractmethod
    async def _search(self, query: str, **kwargs: Any) -> Sequence[ContextChunk]:
        """Find evidence for ``query``. Raise ``ToolError`` for failures the tool understands."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, source_type={self.source_type!r})"


class CallProgress:
    """How far one ``Tool.search`` call got, for a tool whose requests wait in a queue of its own before they are
    sent (see the module docstring). ``current_call()`` gives it to ``_search``."""

    __slots__ = ("_sent_at", "started")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._sent_at: Callable[[], float | None] | None = None

    def queued(self, sent_at: Callable[[], float | None]) -> None:
        """This call waits in the tool's own queue: ``sent_at()`` is when (``time.monotonic()``) its request left
        for the source, or None while it still waits for its turn."""
        self._sent_at = sent_at

    def timed_out_in_queue(self, now: float | None = None) -> bool:
        """Whether a timeout of this call is the queue's, not the source's: its request was never sent, or the
        source had it for less than half of the call's time."""
        if self._sent_at is None:
            return False
        sent_at = self._sent_at()
        if sent_at is None:
            return True
        now = time.monotonic() if now is None else now
        return now - sent_at < (now - self.started) / 2


_CALL: ContextVar[CallProgress | None] = ContextVar("researchcrew_tool_call", default=None)


def current_call() -> CallProgress | None:
    """The ``Tool.search`` call this code runs in (None outside one, e.g. ``_search`` called directly)."""
    return _CALL.get()


# The loop time at which the current call's time is up, when the caller counts it from earlier than the call's start
# (the Retriever: from the fan-out's start, so that a task started late under load still ends on time).
_DEADLINE: ContextVar[float | None] = ContextVar("researchcrew_tool_deadline", default=None)


@contextmanager
def deadline_at(deadline: float) -> Iterator[None]:
    """Within the block, ``Tool.search(timeout=t)`` ends by ``deadline`` (loop time) too: it waits at most
    ``min(t, deadline - now)``, and reports its timeout as ``t``."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left(timeout: float | None) -> float | None:
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = max(0.0, deadline - asyncio.get_running_loop().time())
    return left if timeout is None else min(timeout, left)


FAILURE_KINDS: frozenset[str] = frozenset(get_args(FailureKind))
_KNOWN = ", ".join(sorted(FAILURE_KINDS))


def failure_of(error: ToolError, *, tool_name: str) -> SourceFailure:
    """A ``ToolError`` as data, whatever the tool put into it: a kind outside ``FailureKind`` becomes
    ``internal_error`` (the tool's bug, logged), a status code that is not an HTTP status is dropped, and the
    message is made safe to show (credentials masked, cut to length; see ``SourceFailure``). Never raises."""
    kind = error.kind if isinstance(error.kind, str) and error.kind in FAILURE_KINDS else None
    message = error.message if isinstance(error.message, str) else repr(error.message)
    if kind is None:
        logger.error("%s raised ToolError with an unknown kind %r (known: %s)", tool_name, error.kind, _KNOWN)
        message = f"{tool_name} reported a failure of an unknown kind ({error.kind!r}): {message}"
    status = error.status_code
    valid_status = isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599
    return SourceFailure(
        kind=kind or "internal_error",
        message=message or f"{tool_name} failed",
        status_code=status if valid_status else None,
    )


def unexpected_failure(tool_name: str, error: BaseException) -> SourceFailure:
    """What a user sees of a bug in a tool: its kind and the exception's type. The exception's text may quote
    anything (a connection URL, a row of data), so it stays in the log with the traceback."""
    return SourceFailure(
        kind="internal_error",
        message=f"{tool_name} failed unexpectedly ({type(error).__name__}); the details are in the log",
    )


def validate_chunks(raw: object, tool: Tool) -> list[ContextChunk]:
    """Check what a tool returned; anything but a sequence of valid chunks is a ``bad_response``.

    Chunks are re-validated (a tool may have built them with ``model_construct`` or mutated them) and stamped with
    the tool's name and source type when the tool left those out, so attribution is never lost.
    """
    if not isinstance(raw, list | tuple):
        raise ToolError("bad_response", f"{tool.name} returned {type(raw).__name__}, not a list of chunks")
    chunks: list[ContextChunk] = []
    for position, item in enumerate(raw):
        if not isinstance(item, ContextChunk):
            raise ToolError("bad_response", f"{tool.name} returned a {type(item).__name__} at position {position}")
        try:
            chunk = ContextChunk.model_validate(item.model_dump())
        except ValidationError as error:
            raise ToolError("bad_response", f"{tool.name} returned an invalid chunk: {error}") from error
        if not chunk.tool_name:
            chunk.tool_name = tool.name
        chunks.append(chunk)
    return chunks


def rank_relevance(position: int) -> float:
    """A relevance in [0, 1] for a source that ranks its results but gives no score (web search, arXiv).

    It is a prior from the rank alone, not a measured similarity: the first hit gets 0.9 (not 1.0 — being first
    says nothing about being a perfect match) and later hits decay harmonically (5th ≈ 0.64, 10th ≈ 0.47,
    50th ≈ 0.15). ``position`` is 1-based; anything below 1 counts as 1.
    """
    return 0.9 / (1.0 + 0.1 * (max(position, 1) - 1))
