"""``DeepResearch``: the plain async API of deep research runs, for every door (SDK, CLI, the chat service).

    deep = await runtime.deep_research()
    run = await deep.research(ResearchRequest(question="What is known about testing ML systems?", user_id="ada"))
    # run.status == "awaiting_human_feedback", run.awaiting == "clarification" or "plan_approval"
    run = await deep.answer_clarification(run.run_id, user_id="ada", answer="metamorphic testing, since 2019")
    run = await deep.resume_research(run.run_id, user_id="ada")              # → paused at the plan
    run = await deep.decide_plan(run.run_id, user_id="ada", decision=PlanDecision.edits(run.plan, cut=[3]))
    run = await deep.resume_research(run.run_id, user_id="ada")              # → completed: run.report

Submitting an answer or decision validates it against the paused run and stores it; ``resume_research`` then claims
the run (one process wins) and continues it to its next pause or its end. Both may happen in different processes,
and after a restart: the pause lives in the memory database. ``research(..., options=DeepOptions(auto_approve=True))``
runs to the end without pausing (batch jobs, ``--yes``). ``research_stream``/``resume_research_stream`` yield the
progress events and then the run. The method names are the operations' names at every door (SDK, CLI, HTTP
handlers): research, get_research_run, answer_clarification, decide_plan, resume_research, cancel_research,
export_report (a completed run's report as Markdown, HTML, PDF or DOCX).
Mistakes are named errors (``errors.DeepRunNotFoundError``, ``DeepRunForbiddenError``, ``DeepRunStateError``,
``DeepRunExpiredError``, ``PlanDecisionError``), each with one line saying what to do; the HTTP layer maps them to
404 (another user's run too, like an unknown id), 409, 410 and 422.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from crewai.flow.async_feedback.types import HumanFeedbackPending, PendingFeedbackContext

from researchcrew.contracts import MemoryInput, Query, UserPreferences
from researchcrew.contracts.clarification import ClarificationAnswer, ClarificationRequest
from researchcrew.contracts.deep import (
    DeepOptions,
    DeepProgressEvent,
    DeepReport,
    DeepRun,
    ExportFormat,
    PlanDecision,
    ResearchPlan,
)
from researchcrew.contracts.request import ResearchRequest
from researchcrew.deep._flow import CLARIFICATION_STEP, DeepContext, DeepResearchFlow, DeepState
from researchcrew.deep._plan import apply_decision
from researchcrew.deep._shape import ReportShape
from researchcrew.deep.persistence import DeepRuns, StagedFlowPersistence
from researchcrew.deep.store import AWAITING, RUNNING, DeepRunRecord
from researchcrew.errors import (
    DeepRunExpiredError,
    DeepRunForbiddenError,
    DeepRunNotFoundError,
    DeepRunStateError,
)
from researchcrew.pipeline.progress import events_then_result

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.deep.export import ExportedReport
    from researchcrew.pipeline.stages import MemoryScheduler, ResearchStages
    from researchcrew.settings import Settings
    from researchcrew.tools.base import Tool

logger = logging.getLogger(__name__)

LEASE_MARGIN_S = 300.0  # a working process owns a run for its deadline plus this, then another may take over
_FEEDBACK_NAMES = {"clarification": "an answer to its clarifying questions", "plan_approval": "a decision on its plan"}


@dataclass
class DeepResources:
    """What one working segment runs on: the pipeline's stages built on the run's LLM, the sources, the LLM."""

    stages: ResearchStages
    tools: Sequence[Tool]
    llm: BaseLLM | None


OpenResources = Callable[[], AbstractAsyncContextManager[DeepResources]]
Preferences = Callable[[ResearchRequest], Awaitable[UserPreferences]]
OnEvent = Callable[[DeepProgressEvent], None]


def _ignore(_: DeepProgressEvent) -> None:
    return None


def _now() -> datetime:
    return datetime.now(UTC)


class DeepResearch:
    """Deep research runs of one runtime (build it with ``Runtime.deep_research()``)."""

    def __init__(
        self,
        *,
        settings: Settings,
        runs: DeepRuns,
        open_resources: OpenResources,
        preferences: Preferences,
        remember: MemoryScheduler | None = None,
        on_finished: Callable[[ResearchRequest, str, DeepReport], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.runs = runs
        self._open = open_resources
        self._preferences = preferences
        self._remember = remember
        self._on_finished = on_finished  # the runtime writes the run's usage to the ledger

    # ---- starting ----------------------------------------------------------------------------------------------------
    async def research(
        self, request: ResearchRequest, options: DeepOptions | None = None, *, on_event: OnEvent | None = None
    ) -> DeepRun:
        """Start a run and carry it to its first pause (or, with ``auto_approve``, to its end)."""
        options = options or DeepOptions()
        deep = self.settings.deep
        state = DeepState(
            request=request,
            options=options,
            preferences=await self._preferences(request),
            deadline_s=options.deadline_s or deep.deadline_s,
            token_budget=options.token_budget or deep.token_budget,
            max_subquestions=ReportShape.of(options, request.question).plan_size(
                options.max_subquestions, deep.max_subquestions
            ),
        )
        async with self._open() as resources:
            persistence = StagedFlowPersistence()
            flow = DeepResearchFlow(self._context(resources, options.auto_approve, on_event), persistence=persistence)
            run_id = flow.state.id
            await self.runs.create(
                run_id=run_id,
                user_id=request.user_id,
                session_id=request.session_id,
                question=request.question,
                lease_until=_now() + timedelta(seconds=state.deadline_s + LEASE_MARGIN_S),
            )
            inputs = state.model_dump(exclude={"id"})
            return await self._drive(run_id, flow, persistence, request, lambda: flow.kickoff_async(inputs=inputs))

    async def research_stream(
        self, request: ResearchRequest, options: DeepOptions | None = None
    ) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        """``research`` as a stream: progress events, then the run (always last)."""
        async for item in _streamed(lambda on_event: self.research(request, options, on_event=on_event)):
            yield item

    # ---- looking ----------------------------------------------------------------------------------------------------
    async def get_research_run(self, run_id: str, *, user_id: str) -> DeepRun:
        """The run as it is now."""
        return view(await self._owned(run_id, user_id))

    async def export_report(self, run_id: str, *, user_id: str, format: ExportFormat | str = "md") -> ExportedReport:
        """The finished run's report as Markdown, HTML, PDF or DOCX (``DeepRunStateError`` while it is not
        completed; ``ConfigurationError`` for an unknown format)."""
        from researchcrew.deep.export import export_report, format_for

        chosen = format_for(None, format)  # a bad format fails before the store is read
        record = await self._owned(run_id, user_id)
        if record.status != "completed" or not record.report:
            raise DeepRunStateError(
                f"deep run {run_id!r} is {view(record).status}; only a completed run has a report to export"
            )
        report = DeepReport.model_validate(record.report)
        return await asyncio.to_thread(export_report, report, chosen)  # PDF and DOCX writing is CPU work

    # ---- feedback ---------------------------------------------------------------------------------------------------
    async def answer_clarification(self, run_id: str, *, user_id: str, answer: ClarificationAnswer | str) -> DeepRun:
        """Store the reply to the run's clarifying questions ("just answer" answers the question as asked). The
        run continues with ``resume_research``."""
        reply = ClarificationAnswer(answer=answer) if isinstance(answer, str) else answer
        await self._paused(run_id, user_id, "clarification")
        await self._submit(run_id, user_id, "clarification", reply.model_dump_json())
        return await self.get_research_run(run_id, user_id=user_id)

    async def decide_plan(self, run_id: str, *, user_id: str, decision: PlanDecision) -> DeepRun:
        """Store the decision on the run's plan after checking it against the plan (``PlanDecisionError`` says what
        is wrong). The run continues with ``resume_research``."""
        record = await self._paused(run_id, user_id, "plan_approval")
        apply_decision(_plan_of(record), decision)  # raises PlanDecisionError
        await self._submit(run_id, user_id, "plan_approval", decision.model_dump_json())
        return await self.get_research_run(run_id, user_id=user_id)

    async def cancel_research(self, run_id: str, *, user_id: str) -> DeepRun:
        """Cancel a paused run."""
        await self._paused(run_id, user_id, None)
        if not await self.runs.cancel(run_id, user_id=user_id):
            raise DeepRunStateError(f"deep run {run_id} is no longer paused; it cannot be cancelled now")
        return await self.get_research_run(run_id, user_id=user_id)

    # ---- resuming ---------------------------------------------------------------------------------------------------
    async def check_resumable(self, run_id: str, *, user_id: str) -> DeepRun:
        """The run, if ``resume_research`` would continue it now (its answer or decision stored, not working, not
        expired); else the error saying why not."""
        record = await self._owned(run_id, user_id)
        self._check_resumable(record)
        return view(record)

    async def resume_research(self, run_id: str, *, user_id: str, on_event: OnEvent | None = None) -> DeepRun:
        """Continue a paused run whose answer or decision has arrived, to its next pause or its end."""
        record = await self._owned(run_id, user_id)
        self._check_resumable(record)
        lease = _now() + timedelta(seconds=_deadline_of(record) + LEASE_MARGIN_S)
        if not await self.runs.claim(run_id, user_id=user_id, lease_until=lease):
            latest = await self._owned(run_id, user_id)
            self._check_resumable(latest)  # raises with the reason when the state says why
            raise DeepRunStateError(f"deep run {run_id} is being resumed by another request; wait for it")
        assert record.state is not None and record.pending is not None and record.feedback is not None  # noqa: S101
        request = ResearchRequest.model_validate(record.state["request"])
        async with self._open() as resources:
            persistence = StagedFlowPersistence()
            persistence.stage(run_id, record.state, PendingFeedbackContext.from_dict(record.pending))
            flow = cast(
                DeepResearchFlow,
                DeepResearchFlow.from_pending(
                    run_id, persistence, run=self._context(resources, auto_approve=False, on_event=on_event)
                ),
            )
            feedback = record.feedback
            return await self._drive(run_id, flow, persistence, request, lambda: flow.resume_async(feedback))

    async def resume_research_stream(self, run_id: str, *, user_id: str) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        """``resume_research`` as a stream: progress events, then the run (always last)."""
        async for item in _streamed(lambda on_event: self.resume_research(run_id, user_id=user_id, on_event=on_event)):
            yield item

    # ---- internals --------------------------------------------------------------------------------------------------
    def _context(self, resources: DeepResources, auto_approve: bool, on_event: OnEvent | None) -> DeepContext:
        return DeepContext(
            settings=self.settings,
            stages=resources.stages,
            tools=resources.tools,
            llm=resources.llm,
            auto_approve=auto_approve,
            on_event=on_event or _ignore,
        )

    async def _drive(
        self,
        run_id: str,
        flow: DeepResearchFlow,
        persistence: StagedFlowPersistence,
        request: ResearchRequest,
        work: Callable[[], Awaitable[Any]],
    ) -> DeepRun:
        """Run ``work`` (a kickoff or a resume) and store where it ended: a pause, a report, a cancellation, a
        failure."""
        from crewai.events.utils.console_formatter import (
            set_suppress_console_output,
            should_suppress_console_output,
        )

        previous = should_suppress_console_output()
        set_suppress_console_output(True)  # crewAI prints a panel when a Flow pauses
        try:
            result = await work()
        except asyncio.CancelledError:
            await asyncio.shield(self._abandon(run_id))
            raise
        except Exception as error:  # the outermost guard of a run: a bug ends the run as failed, reported as data
            logger.exception("deep run %s failed", run_id)
            await self.runs.finish(run_id, status="failed", error=f"{type(error).__name__}: {error}"[:2_000])
            return await self.get_research_run(run_id, user_id=request.user_id)
        finally:
            set_suppress_console_output(previous)
        if isinstance(result, HumanFeedbackPending):
            paused = persistence.take_pause(run_id)
            if paused is None:  # crewAI paused without saving: a bug in the integration
                raise RuntimeError(f"deep run {run_id} paused but its state was not handed over")
            state, context = paused
            await self.runs.pause(
                run_id,
                state=DeepState.model_validate(state).model_dump(mode="json"),
                pending=context.to_dict(),
                awaiting="clarification" if context.method_name == CLARIFICATION_STEP else "plan_approval",
                expires_at=_now() + timedelta(seconds=self.settings.deep.pause_ttl_s),
            )
        elif flow.deep.cancelled:
            await self.runs.finish(run_id, status="cancelled")
        elif flow.deep.report is not None:
            report = flow.deep.report
            await self.runs.finish(run_id, status="completed", report=report.model_dump(mode="json"))
            self._remember_report(request, report)
            if self._on_finished is not None:
                await self._on_finished(request, run_id, report)
        else:
            await self.runs.finish(run_id, status="failed", error="the run ended without a report")
        return await self.get_research_run(run_id, user_id=request.user_id)

    async def _abandon(self, run_id: str) -> None:
        """The caller stopped a working run: a resumed one goes back to its pause (its answer or decision must be
        sent again), one that never paused fails."""
        record = await self.runs.get(run_id)
        if record is None or record.status != RUNNING:
            return
        if record.state is not None and record.pending is not None and record.awaiting is not None:
            await self.runs.pause(
                run_id,
                state=record.state,
                pending=record.pending,
                awaiting=record.awaiting,
                expires_at=record.expires_at or _now() + timedelta(seconds=self.settings.deep.pause_ttl_s),
            )
        else:
            await self.runs.finish(run_id, status="failed", error="stopped by the caller before its first pause")

    def _remember_report(self, request: ResearchRequest, report: DeepReport) -> None:
        """The question and the report become one exchange of the conversation (in the background)."""
        if self._remember is None:
            return
        query = Query(text=request.question, user_id=request.user_id, session_id=request.session_id)
        response = report.response.model_copy(update={"query": query})
        self._remember(
            MemoryInput(
                query=query,
                final_response=response,
                session_id=request.session_id,
                user_id=request.user_id,
                context={"deep_run": report.run_id},
            )
        )

    async def _owned(self, run_id: str, user_id: str) -> DeepRunRecord:
        record = await self.runs.get(run_id)
        if record is None:
            raise DeepRunNotFoundError(f"no deep run {run_id!r}: check the id, or start a new run")
        if record.user_id != user_id:
            raise DeepRunForbiddenError(f"deep run {run_id!r} belongs to another user")
        return record

    async def _paused(self, run_id: str, user_id: str, kind: str | None) -> DeepRunRecord:
        """The run, if it is paused for ``kind`` (any kind when None); else the error saying why not."""
        record = await self._owned(run_id, user_id)
        if record.status != AWAITING:
            raise DeepRunStateError(_not_paused(record))
        if _expired(record):
            raise DeepRunExpiredError(
                f"deep run {run_id!r} was paused until {record.expires_at:%Y-%m-%d %H:%M} UTC and expired: "
                "start a new run"
            )
        if kind is not None and record.awaiting != kind:
            waits = _FEEDBACK_NAMES.get(record.awaiting or "", "nothing")
            raise DeepRunStateError(f"deep run {run_id!r} waits for {waits}, not {_FEEDBACK_NAMES[kind]}")
        return record

    async def _submit(self, run_id: str, user_id: str, kind: str, feedback: str) -> None:
        if not await self.runs.submit_feedback(run_id, user_id=user_id, awaiting=kind, feedback=feedback):
            await self._paused(run_id, user_id, kind)  # raises why, when the run changed meanwhile
            raise DeepRunStateError(f"deep run {run_id!r} changed while the feedback was stored; look it up again")

    def _check_resumable(self, record: DeepRunRecord) -> None:
        crashed = (
            record.status == RUNNING
            and record.pending is not None
            and record.lease_until is not None
            and record.lease_until < _now()
        )
        if record.status != AWAITING and not crashed:
            raise DeepRunStateError(_not_paused(record))
        if _expired(record):
            raise DeepRunExpiredError(
                f"deep run {record.run_id!r} was paused until {record.expires_at:%Y-%m-%d %H:%M} UTC and expired: "
                "start a new run"
            )
        if record.feedback is None:
            waits = _FEEDBACK_NAMES.get(record.awaiting or "", "feedback")
            raise DeepRunStateError(f"deep run {record.run_id!r} still waits for {waits}: send it before resuming")


def _expired(record: DeepRunRecord) -> bool:
    return record.expires_at is not None and record.expires_at <= _now()


def _not_paused(record: DeepRunRecord) -> str:
    if record.status == RUNNING:
        return f"deep run {record.run_id!r} is running; it takes feedback only when it pauses"
    return f"deep run {record.run_id!r} is {record.status}; it waits for nothing"


def _deadline_of(record: DeepRunRecord) -> float:
    state = record.state or {}
    return float(state.get("deadline_s", 300.0)) - float(state.get("elapsed_s", 0.0))


def _plan_of(record: DeepRunRecord) -> ResearchPlan:
    state = record.state or {}
    if not state.get("plan"):
        raise DeepRunStateError(f"deep run {record.run_id!r} has no plan yet")
    return ResearchPlan.model_validate(state["plan"])


def view(record: DeepRunRecord) -> DeepRun:
    """The run as callers see it."""
    state = record.state or {}
    report = DeepReport.model_validate(record.report) if record.report else None
    status = "expired" if record.status == AWAITING and _expired(record) else record.status
    plan_data = state.get("approved") or state.get("plan")
    plan = report.plan if report else (ResearchPlan.model_validate(plan_data) if plan_data else None)
    clarification_data = state.get("clarification")
    clarification = (
        report.clarification
        if report
        else (ClarificationRequest.model_validate(clarification_data) if clarification_data else None)
    )
    paused = record.status == AWAITING
    return DeepRun(
        run_id=record.run_id,
        user_id=record.user_id,
        session_id=record.session_id,
        question=record.question,
        status=status,
        awaiting=record.awaiting if paused else None,
        feedback_received=paused and record.feedback is not None,
        clarification=clarification,
        plan=plan,
        options=DeepOptions.model_validate(state["options"]) if state.get("options") else None,
        report=report,
        error=record.error,
        created_at=record.created_at,
        updated_at=record.updated_at,
        expires_at=record.expires_at if paused else None,
    )


async def _streamed(
    work: Callable[[OnEvent], Coroutine[Any, Any, DeepRun]],
) -> AsyncIterator[DeepProgressEvent | DeepRun]:
    """Events as ``work`` emits them, then its result. Closing the iterator early cancels the work."""
    async for item in events_then_result(work):
        yield item
