"""The Retriever: asks every selected source at once, each under its own timeout, and aggregates what came back.

Deterministic fan-out is plain asyncio (no LLM): one task per selected tool, all started together, and the run
ends when the last one has answered or its time is up. A source that hangs, raises, returns garbage or is cut off
is reported in ``sources_failed`` with its reason while the others' evidence is kept.

Two layers bound each source, both counted from the moment the fan-out starts (a task that starts late under
load gets what is left of its time, not a fresh timeout):

1. ``Tool.search(timeout=...)`` applies the timeout itself and reports it as a ``timeout`` failure, without
   waiting for the tool to unwind (``researchcrew.blocking.run_within``);
2. the Retriever guards every call with ``asyncio.timeout_at`` a few milliseconds later, for tools that override
   ``search`` and ignore ``timeout=``, and stops *waiting* for a task that does not even stop when cancelled
   (abandoned and counted at INFO: expected under load, not an error).

Limit: a tool that blocks the event loop synchronously (``time.sleep``, a blocking SDK call not moved to a thread)
cannot be cut off by anything in asyncio — timers only fire when the loop regains control. Blocking SDK calls run
on a ``researchcrew.blocking.BlockingPool``, whose callers stop waiting when their time is up.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import ValidationError

from researchcrew.blocking import ABANDONED
from researchcrew.contracts.chunks import (
    MEMORY_SOURCE_TYPE,
    AggregatedContext,
    ContextChunk,
    SourceFailure,
    SourceReport,
    SourceStatus,
)
from researchcrew.contracts.retriever import RetrievalStatus, RetrieverInput, RetrieverOutput
from researchcrew.errors import ToolError
from researchcrew.pipeline.progress import report_source
from researchcrew.settings import RetrievalSettings
from researchcrew.tools.base import Tool, ToolResult, deadline_at, failure_of, unexpected_failure, validate_chunks
from researchcrew.tools.health import SourceHealth

logger = logging.getLogger(__name__)

# How long a cancelled tool task may take to unwind before the Retriever stops waiting for it.
_UNWIND_GRACE_S = 0.05
# Reserved keyword arguments the Retriever sets itself; tool_options may not override the timeout.
_RESERVED_OPTIONS = frozenset({"timeout"})
# Failure messages are shortened to this length in the summary error_message (the reports keep them whole).
_SUMMARY_MESSAGE_CHARS = 300
# ContextChunk.chunk_id's maximum length (contracts._base.Identifier).
_MAX_ID_CHARS = 256


def _guard_grace_s(budget_s: float) -> float:
    """How long after a tool's own timeout the Retriever's guard fires: long enough that a well-behaved tool
    reports its timeout itself even when the loop is slow (under load, GIL handoffs to busy worker threads and the
    scheduler take milliseconds each), so that the guard only catches tools that ignore ``timeout=``; 10 % of the
    budget, between 50 ms and 500 ms."""
    return min(0.5, max(0.05, 0.1 * budget_s))


# A widened search after a miss (RetrieverInput.relaxed): twice the results, at most this many; half the floor.
# Conversation memory is not widened: it is the conversation, and a lower floor recalls unrelated exchanges.
RELAXED_MAX_RESULTS = 40
RELAXED_FLOOR_FACTOR = 0.5


def _takes(tool: Tool, option: str) -> bool:
    """Whether the tool's search accepts ``option`` by name (a custom tool need not take a relevance floor)."""
    try:
        parameters = inspect.signature(tool._search).parameters
    except (TypeError, ValueError):
        return False
    return option in parameters


@dataclass(slots=True)
class _Outcome:
    """What one tool call contributed: its report and its chunks."""

    report: SourceReport
    chunks: list[ContextChunk] = field(default_factory=list)
    queued: bool = False  # it timed out waiting in the tool's own queue (ToolResult.queued), not for the source


class Retriever:
    """Fans a query out to the selected tools concurrently and aggregates their evidence.

    Every tool whose source type is not excluded is called as ``tool.search(query, timeout=..., num_results=...,
    user_id=..., session_id=..., **tool_options[source_type])``, so a tool's ``_search`` must accept ``user_id``
    and ``session_id`` (or ``**kwargs``). ``tool_options`` may override ``num_results`` per source type, not the
    timeout. ``settings`` supplies the defaults for ``timeout_per_source`` and ``num_results`` when a
    ``RetrieverInput`` does not set them explicitly.
    """

    def __init__(
        self, tools: Sequence[Tool], *, settings: RetrievalSettings | None = None, health: SourceHealth | None = None
    ) -> None:
        for position, tool in enumerate(tools):
            if not isinstance(tool, Tool):
                raise TypeError(
                    f"tools[{position}] is a {type(tool).__name__}, not a researchcrew Tool "
                    "(subclass researchcrew.Tool and implement _search)"
                )
            try:
                SourceReport(source_type=tool.source_type, tool_name=tool.name, status="skipped")
            except (AttributeError, ValidationError) as error:
                raise ValueError(
                    f"tools[{position}] ({type(tool).__name__}) needs a `name` and a lower-case `source_type` "
                    f"such as 'rag' or 'web': {error}"
                ) from error
        self._tools: tuple[Tool, ...] = tuple(tools)
        self._settings = settings or RetrievalSettings()
        self.health = health

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    async def run(self, request: RetrieverInput) -> RetrieverOutput:
        """Ask every selected source concurrently; never raises except on cancellation."""
        started = time.perf_counter()
        num_results = request.num_results if request.num_results is not None else self._settings.num_results
        excluded = set(request.exclude_sources or ())

        outcomes: dict[int, _Outcome] = {}
        selected: list[tuple[int, Tool]] = []
        for index, tool in enumerate(self._tools):
            if tool.source_type in excluded:
                outcomes[index] = _Outcome(
                    SourceReport(source_type=tool.source_type, tool_name=tool.name, status="skipped")
                )
                report_source(outcomes[index].report)
            else:
                selected.append((index, tool))

        called = await self._healthy(selected, outcomes)
        if called:
            fanned = await self._fan_out(called, request, num_results=num_results)
            outcomes.update(fanned)
            if self.health is not None:
                # A timeout spent in the tool's own queue (arXiv's pacing) says nothing about the source.
                await self.health.record(
                    (tool.name, fanned[index].report.failure) for index, tool in called if not fanned[index].queued
                )

        return self._assemble(request, outcomes, selected, started)

    async def _healthy(self, selected: list[tuple[int, Tool]], outcomes: dict[int, _Outcome]) -> list[tuple[int, Tool]]:
        """The selected tools to call: a source backing off after a recent failure is reported as skipped, with
        the reason (``tools/health.py``), and not called."""
        if self.health is None or not selected:
            return selected
        skips = await self.health.skips([(tool.name, tool.source_type) for _, tool in selected])
        called: list[tuple[int, Tool]] = []
        for index, tool in selected:
            skip = skips.get(tool.name)
            if skip is None:
                called.append((index, tool))
                continue
            outcomes[index] = _Outcome(
                SourceReport(source_type=tool.source_type, tool_name=tool.name, status="skipped", failure=skip.failure)
            )
            report_source(outcomes[index].report)
        return called

    # Fan-out ------------------------------------------------------------------------------------------------
    def timeout_for(self, tool: Tool, request: RetrieverInput) -> float:
        """The one timeout of one source: the request's when it sets one, else the source's own setting (e.g.
        ``firecrawl.timeout_s``), else ``retrieval.timeout_per_source_s``; never more than the request's
        ``time_limit_s``."""
        if request.timeout_per_source is not None:
            timeout = request.timeout_per_source
        elif tool.timeout_s is not None:
            timeout = tool.timeout_s
        else:
            timeout = self._settings.timeout_per_source_s
        return timeout if request.time_limit_s is None else min(timeout, request.time_limit_s)

    async def _fan_out(
        self, selected: list[tuple[int, Tool]], request: RetrieverInput, *, num_results: int
    ) -> dict[int, _Outcome]:
        loop = asyncio.get_running_loop()
        now = loop.time()
        budgets = {index: self.timeout_for(tool, request) for index, tool in selected}
        tasks: dict[asyncio.Task[_Outcome], tuple[int, Tool]] = {}
        for index, tool in selected:
            budget_s = budgets[index]
            kwargs: dict[str, Any] = {
                "num_results": num_results,
                **request.tool_options.get(tool.source_type, {}),
                # After the options: a source always searches as the user who asks (no option can name another).
                "user_id": request.user_id,
                "session_id": request.session_id,
            }
            own = request.tool_options.get(tool.source_type, {})
            if request.relaxed and tool.source_type != MEMORY_SOURCE_TYPE:  # memory is the conversation, not a corpus
                if "num_results" not in own:
                    kwargs["num_results"] = min(RELAXED_MAX_RESULTS, 2 * num_results)
                if "min_relevance" not in own and _takes(tool, "min_relevance"):
                    kwargs["min_relevance"] = self._settings.min_relevance * RELAXED_FLOOR_FACTOR
            task = asyncio.create_task(
                self._call(tool, request.query_text, budget_s, now + budget_s, kwargs), name=f"retriever:{tool.name}"
            )
            tasks[task] = (index, tool)

        try:
            # Every task ends itself by its guard; the extra grace covers the step in which it unwinds.
            longest_s = max(budgets.values())
            _, pending = await asyncio.wait(
                tasks.keys(), timeout=longest_s + _guard_grace_s(longest_s) + _UNWIND_GRACE_S
            )
        except asyncio.CancelledError:
            await self._cancel(tasks)
            raise
        # Still running now means the task ignored its guard's cancellation: stop waiting for it.
        self._abandon(pending)

        outcomes: dict[int, _Outcome] = {}
        for task, (index, tool) in tasks.items():
            outcomes[index] = self._outcome_of(task, tool, budgets[index])
            if task in pending or task.cancelled():  # never reported by _call
                report_source(outcomes[index].report)
        return outcomes

    async def _call(self, tool: Tool, query: str, budget_s: float, deadline: float, kwargs: dict[str, Any]) -> _Outcome:
        """Call one tool under the guard and report its outcome the moment it is known (a progress event)."""
        outcome = await self._attempt(tool, query, budget_s, deadline, kwargs)
        report_source(outcome.report)
        return outcome

    async def _attempt(
        self, tool: Tool, query: str, budget_s: float, deadline: float, kwargs: dict[str, Any]
    ) -> _Outcome:
        """Call one tool under the guard and turn whatever happens into an outcome. Raises only CancelledError."""
        started = time.perf_counter()
        reserved = _RESERVED_OPTIONS & kwargs.keys()
        if reserved:
            message = f"tool_options may not set {sorted(reserved)}; use timeout_per_source"
            return self._failed(tool, SourceFailure(kind="invalid_request", message=message), started)
        try:
            # The task may start late when the loop is busy: the tool's own timeout still ends at the deadline
            # (before the guard's), counted from the fan-out's start.
            async with asyncio.timeout_at(deadline + _guard_grace_s(budget_s)):
                with deadline_at(deadline):
                    result = await tool.search(query, timeout=budget_s, **kwargs)
            chunks = self._checked(result, tool)
        except ToolError as error:
            failure = failure_of(error, tool_name=tool.name)
            logger.warning("%s: %s (%s)", tool.name, failure.message, failure.kind)
            return self._failed(tool, failure, started)
        except TimeoutError:
            logger.warning("%s ignored its %g s timeout and was cut off by the Retriever", tool.name, budget_s)
            failure = SourceFailure(kind="timeout", message=f"{tool.name} did not answer within {budget_s:g} s")
            return self._failed(tool, failure, started)
        except Exception as error:  # the outermost guard: a tool that overrides search() and raises is a bug
            logger.exception("%s raised out of search()", tool.name)
            return self._failed(tool, unexpected_failure(tool.name, error), started)

        latency_ms = (time.perf_counter() - started) * 1000
        if result.failure is not None:
            if chunks:
                logger.warning("%s reported a failure and %d chunks; the chunks are ignored", tool.name, len(chunks))
            return _Outcome(self._report(tool, "failed", latency_ms, 0, result.failure), queued=result.queued)
        return _Outcome(self._report(tool, "success" if chunks else "empty", latency_ms, len(chunks)), chunks)

    @staticmethod
    def _checked(result: object, tool: Tool) -> list[ContextChunk]:
        """A tool's answer must be a ToolResult of valid chunks; anything else is a ``bad_response``.

        ``Tool.search`` has validated the chunks already (once is enough); only a tool that overrides ``search``
        has its chunks checked here."""
        if not isinstance(result, ToolResult):
            raise ToolError("bad_response", f"{tool.name} returned {type(result).__name__}, not a ToolResult")
        if type(tool).search is Tool.search:
            return list(result.chunks)
        return validate_chunks(result.chunks, tool)

    async def _cancel(self, tasks: Iterable[asyncio.Task[_Outcome]]) -> None:
        """Cancel tool tasks and give them a moment to unwind, so that none is left behind when the run ends."""
        tasks = set(tasks)
        for task in tasks:
            task.cancel()
        _, stuck = await asyncio.wait(tasks, timeout=_UNWIND_GRACE_S)
        self._abandon(stuck)

    def _abandon(self, tasks: Iterable[asyncio.Task[_Outcome]]) -> None:
        """Tasks that do not stop when cancelled: cancel again and stop waiting for them (held and counted until
        they end; logged at INFO — under load a slow unwind is expected, not an error a user must read)."""
        for task in tasks:
            task.cancel()
            ABANDONED.add(cast("asyncio.Task[object]", task), task.get_name())

    def _outcome_of(self, task: asyncio.Task[_Outcome], tool: Tool, timeout: float) -> _Outcome:
        if not task.done():  # it ignored both its timeout and its cancellation
            message = f"{tool.name} did not answer within {timeout:g} s"
            failure = SourceFailure(kind="timeout", message=message)
        elif task.cancelled():  # cancelled from inside the tool, not by us
            failure = SourceFailure(kind="internal_error", message=f"{tool.name} was cancelled before it answered")
        else:
            return task.result()
        return _Outcome(self._report(tool, "failed", timeout * 1000, 0, failure))

    # Aggregation --------------------------------------------------------------------------------------------
    def _failed(self, tool: Tool, failure: SourceFailure, started: float) -> _Outcome:
        return _Outcome(self._report(tool, "failed", (time.perf_counter() - started) * 1000, 0, failure))

    @staticmethod
    def _report(
        tool: Tool, status: SourceStatus, latency_ms: float, chunk_count: int, failure: SourceFailure | None = None
    ) -> SourceReport:
        return SourceReport(
            source_type=tool.source_type,
            tool_name=tool.name,
            status=status,
            latency_ms=latency_ms,
            chunk_count=chunk_count,
            failure=failure,
        )

    def _assemble(
        self,
        request: RetrieverInput,
        outcomes: dict[int, _Outcome],
        selected: list[tuple[int, Tool]],
        started: float,
    ) -> RetrieverOutput:
        preference = {source: rank for rank, source in enumerate(request.preferred_sources or ())}
        order = sorted(outcomes, key=lambda i: (preference.get(self._tools[i].source_type, len(preference)), i))
        chunks = _unique_ids(chunk for i in order for chunk in outcomes[i].chunks)
        reports = [outcomes[i].report for i in sorted(outcomes)]

        answered = [r for r in reports if r.status in ("success", "empty")]
        # A source skipped because it is backing off after a failure counts as failed for the status and the
        # summary: it was selected and could not be searched (its report says why, and that it was not called).
        failed = [r for r in reports if r.status == "failed" or (r.status == "skipped" and r.failure is not None)]
        status: RetrievalStatus
        if not selected:
            status = "failed"
            excluded = sorted(request.exclude_sources or ())
            error_message: str | None = (
                "no source was selected: the Retriever has no tools"
                if not self._tools
                else f"no source was selected: every tool's source type is excluded (exclude_sources={excluded})"
            )
        else:
            status = "success" if not failed else "partial" if answered else "failed"
            error_message = "; ".join(_summary(r) for r in failed) or None

        output = RetrieverOutput(
            aggregated_context=AggregatedContext(query_text=request.query_text, chunks=chunks, source_reports=reports),
            retrieval_status=status,
            sources_used=_distinct(r.source_type for r in answered),
            sources_failed=_distinct(r.source_type for r in failed),
            error_message=error_message,
            execution_time_ms=(time.perf_counter() - started) * 1000,
        )
        logger.debug(
            "retrieval %s in %.1f ms: %d chunks, used %s, failed %s",
            status,
            output.execution_time_ms,
            len(chunks),
            output.sources_used,
            output.sources_failed,
        )
        return output


def _summary(report: SourceReport) -> str:
    failure = report.failure
    if failure is None:  # pragma: no cover - failed reports always carry a failure
        return f"{report.source_type}: failed"
    message = failure.message
    if len(message) > _SUMMARY_MESSAGE_CHARS:
        message = message[: _SUMMARY_MESSAGE_CHARS - 1] + "…"
    return f"{report.source_type}: {failure.kind} ({message})"


def _distinct(items: Iterable[str]) -> list[str]:
    """Unique items in first-seen order (two tools may share a source type)."""
    return list(dict.fromkeys(items))


def _unique_ids(chunks: Iterator[ContextChunk]) -> list[ContextChunk]:
    """Chunk ids must be unique within one answer's evidence, because citations point at them.

    The same chunk returned twice (same id, same content, e.g. by two tools over one collection) is kept once; a
    *different* chunk that reuses an id gets the producing tool's name appended, so that both stay citable.
    """
    seen: dict[str, ContextChunk] = {}
    result: list[ContextChunk] = []
    for chunk in chunks:
        previous = seen.get(chunk.chunk_id)
        if previous is not None:
            if previous.content == chunk.content:
                continue
            chunk = chunk.model_copy(update={"chunk_id": _free_id(chunk, seen)})
        seen[chunk.chunk_id] = chunk
        result.append(chunk)
    return result


def _free_id(chunk: ContextChunk, taken: dict[str, ContextChunk]) -> str:
    attempt = 1
    while True:
        suffix = f"@{chunk.tool_name[:48]}" + (f"~{attempt}" if attempt > 1 else "")
        candidate = chunk.chunk_id[: _MAX_ID_CHARS - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        attempt += 1
