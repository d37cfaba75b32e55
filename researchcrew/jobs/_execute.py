"""Research one question of a run, whatever runs it (``jobs run`` in process, the embedded scheduler, a worker).

1. **Claim** the question's row (``JobStore.claim_item``). Answered already → nothing to do (a redelivery). Held
   by a live lease elsewhere → wait for that lease (the other worker finishes, or dies and its lease runs out and
   this one takes over; a holder on this host that is provably dead loses it at once). Never two workers on one
   question at once.
2. **Research** it through the runtime, renewing the lease every third of ``jobs.lease_s``. When every source
   failed for a transient reason (timeout, unreachable, HTTP 429/5xx) it is tried again with exponential backoff
   and jitter (tenacity), up to ``jobs.attempts`` times; a permanent failure (refused question, options a tool
   rejects, every source unconfigured) is not retried. A source skipped because it is backing off after a recent
   failure (``tools/health.py``) failed for that reason: the retry waits for its window to end (at most
   ``jobs.retry_backoff_max_s``), and a question that runs out of tries is stored as failed saying so.
3. **Store** the one result, fenced on the lease (a worker that lost its lease writes nothing), and, if it was
   the last question, **finish the run** (exactly one caller does, and gets to send the webhook).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt, wait_random_exponential

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import ConfigurationError, KnowledgeBaseUnavailableError, MemoryStoreError
from researchcrew.jobs._store import ItemOutcome, JobStore
from researchcrew.jobs.contracts import ItemFailure, QuestionOptions, RunInfo
from researchcrew.runtime import Runtime
from researchcrew.settings import JobsSettings

logger = logging.getLogger(__name__)

RunFinished = Callable[[RunInfo], Awaitable[None]]
_TRANSIENT_KINDS = frozenset({"timeout", "unreachable"})
RAG_SOURCE_TYPE = "rag"  # the knowledge base's source (researchcrew.tools.rag)


@dataclass
class _TransientOutcome(ItemOutcome):
    """A failed outcome worth another try (only ever returned between attempts, stored as a plain failure)."""

    retry_after_s: float = 0.0  # the soonest a source skipped for its backoff is tried again


def classify(response: FinalResponse) -> ItemOutcome:
    """What a finished answer means for the run: answered, uncertain, or failed (with the reason).

    A source skipped because it is backing off after a recent failure was selected and could not be searched: it
    counts as failed with that reason ("skipped: unreachable 40 s ago; next try in 20 s"), never as "no source was
    searched", and when it was the only one the question is tried again (a transient failure).

    A knowledge base that could not be opened (a Milvus Lite file held by another process, a Milvus server that does
    not answer: the rag source ``unreachable``) fails the question with that reason and is tried again, whatever the
    other sources found: a batch answer without the team's own documents is not the answer the job asks for, and an
    "uncertain" stored for it would make the run look ``completed`` (issue 19)."""
    called = [report for report in response.source_reports if report.status != "skipped" or report.failure is not None]
    failed = [
        {"source": report.source_type, "kind": report.failure.kind, "message": report.failure.message}
        for report in called
        if report.status in ("failed", "skipped") and report.failure is not None
    ]
    if response.answer_kind == "refusal":
        reason = " ".join(response.answer.split())[:500] or "the question was refused"
        return ItemOutcome("failed", response, ItemFailure(kind="refused", message=reason), failed)
    if not called:
        message = "no source was searched (every source is excluded or disabled)"
        return ItemOutcome("failed", response, ItemFailure(kind="no_sources", message=message), failed)
    closed = [report for report in called if _knowledge_base_closed(report)]
    if closed:
        reason = closed[0].failure.message if closed[0].failure is not None else "unreachable"
        failure = ItemFailure(
            kind="knowledge_base_unavailable", message=f"the knowledge base cannot be opened: {reason}"[:4000]
        )
        return _TransientOutcome("failed", response, failure, failed)
    if len(failed) == len(called):
        reasons = "; ".join(f"{entry['source']}: {entry['kind']} — {entry['message']}" for entry in failed)
        failure = ItemFailure(kind="sources_failed", message=f"every source failed: {reasons}"[:4000])
        transient = any(
            _is_transient(report.failure.kind, report.failure.status_code) for report in called if report.failure
        )
        kind = _TransientOutcome if transient else ItemOutcome
        return kind("failed", response, failure, failed)
    if response.answer_kind == "uncertainty" or response.confidence_level == "insufficient":
        return ItemOutcome("uncertain", response, None, failed)
    return ItemOutcome("answered", response, None, failed)


def _knowledge_base_closed(report: SourceReport) -> bool:
    """The knowledge base source could not reach its store at all (not: searched it and timed out)."""
    return (
        report.source_type == RAG_SOURCE_TYPE
        and report.status in ("failed", "skipped")
        and report.failure is not None
        and report.failure.kind == "unreachable"
    )


def _is_transient(kind: str, status_code: int | None) -> bool:
    if kind in _TRANSIENT_KINDS:
        return True
    return kind == "http_error" and (status_code is None or status_code == 429 or status_code >= 500)


class QuestionExecutor:
    """Researches questions of runs for one process (``name`` says which, in leases and logs)."""

    def __init__(
        self,
        runtime: Runtime,
        store: JobStore,
        settings: JobsSettings,
        *,
        name: str,
        on_run_finished: RunFinished | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.settings = settings
        self.name = name
        self.on_run_finished = on_run_finished
        self._contexts: dict[str, tuple[str, str, bool]] = {}

    async def research(self, run_id: str, index: int) -> str | None:
        """Research question ``index`` of run ``run_id`` unless it has its result already. Returns the stored
        status, or None when this call stored nothing (done elsewhere, run gone, lease lost)."""
        token = f"{self.name}:{uuid.uuid4().hex[:12]}"
        try:
            claim = await self.store.claim_item(run_id, index, token, self.settings.lease_s)
            while claim.state == "busy":
                if not await self.store.reclaim_dead_leases():  # a dead holder here: take it over now
                    await asyncio.sleep(self._wait_for(claim.lease_until))
                claim = await self.store.claim_item(run_id, index, token, self.settings.lease_s)
        except asyncio.CancelledError:  # stopped while claiming: a claim that was stored is given back too
            await _despite_cancellation(self.store.release_item(run_id, index, token))
            raise
        if claim.state != "claimed" or claim.item is None:
            logger.debug("run %s question %d: %s, nothing to do", run_id, index, claim.state)
            return None
        item = claim.item
        try:
            context = await self._run_context(run_id)
            if context is None:
                return None
            owner, job_name, remember = context
            work = self._research(item.question, item.options, owner, job_name, remember=remember)
            outcome = await self._leased(run_id, index, token, work)
        except asyncio.CancelledError:  # this process is stopping: give the question back for the next one
            await _despite_cancellation(self.store.release_item(run_id, index, token))
            raise
        if outcome is None:
            logger.warning("run %s question %d: lease lost to another worker; its result is theirs", run_id, index)
            return None
        if not await self.store.finish_item(run_id, index, token, outcome):
            logger.warning("run %s question %d: lease lost before storing; the result is discarded", run_id, index)
            return None
        finished = await self.store.finalize_run(run_id)
        if finished is not None and self.on_run_finished is not None:
            await self.on_run_finished(finished)
        return outcome.status

    async def _run_context(self, run_id: str) -> tuple[str, str, bool] | None:
        """The owner, job name and memory choice of a run (fixed for its lifetime: read once per process)."""
        cached = self._contexts.get(run_id)
        if cached is None:
            run = await self.store.run_row(run_id)
            job = await self.store.job_by_id(run.job_id)
            if job is None:
                return None
            cached = self._contexts[run_id] = (run.owner, job.name, job.remember)
            while len(self._contexts) > 1000:  # a long-lived worker sees many runs; keep the recent ones
                del self._contexts[next(iter(self._contexts))]
        return cached

    def _wait_for(self, lease_until: datetime | None) -> float:
        """How long to wait before asking again for a question another worker holds."""
        step = self.settings.lease_s / 3
        if lease_until is None:
            return step
        remaining = (lease_until - datetime.now(UTC)).total_seconds()
        return max(0.05, min(step, remaining + 0.05))

    async def _leased(self, run_id: str, index: int, token: str, work: Awaitable[ItemOutcome]) -> ItemOutcome | None:
        """Await ``work`` while renewing the lease; None (work cancelled) if the lease was lost."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.settings.lease_s / 3)
                if done:
                    return task.result()
                try:
                    kept = await self.store.renew_lease(run_id, index, token, self.settings.lease_s)
                except MemoryStoreError as error:  # the lease may still hold; storing is fenced anyway
                    logger.warning("run %s question %d: could not renew the lease: %s", run_id, index, error)
                    continue
                if not kept:
                    task.cancel()
                    return None
        finally:
            if not task.done():
                task.cancel()

    async def _research(
        self, question: str, options: dict[str, object], owner: str, job_name: str, *, remember: bool
    ) -> ItemOutcome:
        try:
            request = QuestionOptions.model_validate(options).request(
                question, user_id=owner, session_id=f"job:{job_name}"
            )
        except ValueError as error:
            return ItemOutcome("failed", failure=ItemFailure(kind="invalid_request", message=str(error)[:4000]))

        async def attempt() -> ItemOutcome:
            return await self._ask_once(request, remember=remember)

        exponential = wait_random_exponential(
            multiplier=self.settings.retry_backoff_s, max=self.settings.retry_backoff_max_s
        )

        def wait(state: RetryCallState) -> float:
            """The exponential wait, or until a skipped source's backoff ends (asking sooner only skips it again)."""
            outcome = state.outcome.result() if state.outcome is not None and not state.outcome.failed else None
            backoff_left = outcome.retry_after_s if isinstance(outcome, _TransientOutcome) else 0.0
            return min(self.settings.retry_backoff_max_s, max(exponential(state), backoff_left))

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.attempts),
            wait=wait,
            retry=retry_if_result(lambda outcome: isinstance(outcome, _TransientOutcome)),
            retry_error_callback=_last_outcome,
            before_sleep=lambda state: logger.info(
                "question %r: every source failed transiently; retry %d of %d",
                question[:80],
                state.attempt_number,
                self.settings.attempts - 1,
            ),
        )
        outcome: ItemOutcome = await retrying(attempt)
        return ItemOutcome(outcome.status, outcome.response, outcome.failure, outcome.sources_failed)

    async def _ask_once(self, request: ResearchRequest, *, remember: bool) -> ItemOutcome:
        try:
            response = await self.runtime.ask(request, remember=remember)
        except ConfigurationError as error:
            return ItemOutcome("failed", failure=ItemFailure(kind="error", message=str(error)[:4000]))
        except (MemoryStoreError, KnowledgeBaseUnavailableError) as error:  # a store that may come back
            failure = ItemFailure(kind="error", message=f"{type(error).__name__}: {error}"[:4000])
            return _TransientOutcome("failed", failure=failure)
        except Exception as error:  # the outermost guard of a batch: one question's bug must not sink the run
            logger.exception("question %r raised unexpectedly", request.question[:80])
            failure = ItemFailure(kind="error", message=f"{type(error).__name__}: {error}"[:4000])
            return ItemOutcome("failed", failure=failure)
        outcome = classify(response)
        if isinstance(outcome, _TransientOutcome):
            outcome.retry_after_s = await self._backoff_left(response)
        return outcome

    async def _backoff_left(self, response: FinalResponse) -> float:
        """Seconds until the first source skipped for its backoff in ``response`` is tried again (0: none was)."""
        names = [r.tool_name for r in response.source_reports if r.status == "skipped" and r.failure is not None]
        if not names:
            return 0.0
        now = datetime.now(UTC)
        left = [
            (state.retry_at - now).total_seconds()
            for state in await self.runtime.source_health().states(names)
            if state.status == "backing_off" and state.retry_at is not None
        ]
        return max(0.0, min(left)) + 0.05 if left else 0.0


async def _despite_cancellation(work: Awaitable[None]) -> None:
    """Give a question back while the process stops. The store finishes the write whatever cancellations arrive
    meanwhile (``db.failures.to_the_end``); its failure is logged, never raised over the caller's cancellation (it
    used to escape and end the run's task with the store's error): the question's lease runs out instead."""
    try:
        await work
    except MemoryStoreError as error:
        logger.warning("could not give a question back (its lease runs out instead): %s", error)


def _last_outcome(state: RetryCallState) -> ItemOutcome:
    """After the last attempt: the last outcome, stored as the question's failure."""
    if state.outcome is None:  # not reachable: tenacity calls this after an attempt
        raise RuntimeError("retry ended without an outcome")
    result: ItemOutcome = state.outcome.result()
    return result
