"""DeepResearchFlow: a crewAI Flow for one deep research run (issue 14, seed 002), with crewAI's own
human-in-the-loop at its two pause points.

    probe ─► (clarify? ─► ask_clarification ⏸ ─► take_answer) ─► propose_plan ⏸ ─► apply_plan
          ─► research (each sub-question: the quick pipeline + reference following) ─► write_report
          ─► check_quality (one remediation retry below the threshold) ─► respond

``ask_clarification`` and ``propose_plan`` carry ``@human_feedback``. Their provider lets the run decide: a run that
approves automatically (batch jobs, ``--yes``) answers at once (no clarification is asked, the plan is approved
unchanged); otherwise the provider raises crewAI's ``HumanFeedbackPending``, ``kickoff_async`` returns it, and
crewAI hands the Flow state and the pending-feedback context to the Flow's ``FlowPersistence`` — ours stores them
in the memory database (``persistence``). ``DeepResearchFlow.from_pending(run_id, persistence, run=...)`` and
``resume_async(feedback)`` continue the run in any process; the feedback is the JSON of a ``ClarificationAnswer`` or
a ``PlanDecision`` (validated before the run is resumed, by ``runner``).

The Flow's state holds everything a resumed run needs; what only one working segment needs (stages, tools, the
LLM, the progress callback) comes in a ``DeepContext``. Time and tokens are one ``Budget`` for the whole run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from crewai.flow.async_feedback.types import HumanFeedbackPending, PendingFeedbackContext
from crewai.flow.flow import Flow, FlowState, listen, or_, router, start
from crewai.flow.human_feedback import HumanFeedbackResult, human_feedback
from pydantic import ConfigDict, Field

from researchcrew.contracts import ContextChunk, ProgressEvent, RetrieverInput, SourceReport, UserPreferences
from researchcrew.contracts.clarification import ClarificationAnswer, ClarificationRequest
from researchcrew.contracts.deep import (
    DeepOptions,
    DeepPhase,
    DeepProgressEvent,
    DeepReport,
    FollowedReference,
    PlanItem,
    QualityScores,
    ResearchPlan,
    Revision,
    SubQuestionReport,
)
from researchcrew.contracts.follow_up import TokenCount
from researchcrew.contracts.request import ResearchRequest
from researchcrew.deep._budget import Budget, Exhausted
from researchcrew.deep._facet_search import CHECK_RESULTS, searched_facets
from researchcrew.deep._facets import EXCLUDED_SOURCES, Facet
from researchcrew.deep._follow import ReferenceFollower
from researchcrew.deep._plan import apply_decision, llm_plan, plan_facets, read_decision, rule_plan, topic_of
from researchcrew.deep._quality import score_report, sections_by_position
from researchcrew.deep._remediate import flawed_sections, remediate, revision_note
from researchcrew.deep._report import ReportDraft, assemble_report, extractive_retry, llm_retry
from researchcrew.deep._research import SubQuestionResult, research_sub_question
from researchcrew.deep._shape import ReportShape
from researchcrew.deep._shape_plan import shaped_rule_plan
from researchcrew.embedding.embedder import loaded_embedder
from researchcrew.pipeline.assemble import pricing_for
from researchcrew.pipeline.clarify import (
    clarification_reason,
    llm_clarification,
    merge_reply,
    rule_clarification,
    summarize_evidence,
)
from researchcrew.pipeline.evidence_gate import evidence_confidence

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.embedding.embedder import Embedder
    from researchcrew.pipeline.stages import ResearchStages
    from researchcrew.settings import Settings
    from researchcrew.tools.base import Tool

logger = logging.getLogger(__name__)

CLARIFICATION_STEP = "ask_clarification"
PLAN_STEP = "propose_plan"
PROBE_CHARS = 600  # probe evidence kept in the state (for planning) is cut to this
PROBE_KEPT = 40
RESEARCH_RESERVE_S = 1.0  # kept back from research for putting the report together
MIN_SUBQUESTION_S = 1.0  # a sub-question with less time than this is not started
MIN_RETRY_S = 2.0
PLAN_EMBEDDING_MIN_S = 20.0  # a run with less time left plans from the probe's words alone
PLAN_CHECK_SHARE = 5  # checking the plan's candidate sub-questions may take a fifth of the time the run has left


@dataclass
class DeepContext:
    """What one working segment of a run needs besides the state."""

    settings: Settings
    stages: ResearchStages
    tools: Sequence[Tool]
    llm: BaseLLM | None
    auto_approve: bool
    on_event: Callable[[DeepProgressEvent], None]


class DeepState(FlowState):
    """Everything a deep run knows; saved at each pause, so it must say everything a resumed run needs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    request: ResearchRequest | None = Field(default=None, description="The request, as the caller sent it.")
    options: DeepOptions = Field(default_factory=DeepOptions, description="The run's options.")
    preferences: UserPreferences = Field(default_factory=UserPreferences, description="How answers are written.")
    deadline_s: float = Field(default=300.0, gt=0, description="Research seconds for the whole run.")
    token_budget: int | None = Field(default=None, description="LLM tokens for the whole run.")
    max_subquestions: int = Field(default=8, ge=1, le=20, description="Most plan items.")
    elapsed_s: float = Field(default=0.0, ge=0, description="Research seconds spent in earlier segments.")
    tokens_used: int = Field(default=0, ge=0, description="Tokens spent in earlier segments.")
    prompt_tokens_used: int = Field(default=0, ge=0, description="Of those, prompt tokens (for the run's cost).")
    completion_tokens_used: int = Field(default=0, ge=0, description="Of those, completion tokens.")
    question: str = Field(default="", description="The question researched (narrowed by a clarification).")
    probe: list[ContextChunk] = Field(default_factory=list, description="What a first search found (for planning).")
    probe_reports: list[SourceReport] = Field(default_factory=list, description="What each source did then.")
    searched: list[str] = Field(default_factory=list, description="Query texts of the probes.")
    clarification: ClarificationRequest | None = Field(default=None, description="The questions asked, if any.")
    clarification_answer: str | None = Field(default=None, description="The user's reply.")
    plan: ResearchPlan | None = Field(default=None, description="The proposed plan.")
    approved: ResearchPlan | None = Field(default=None, description="The approved plan.")
    cancelled: bool = Field(default=False, description="The user cancelled at the plan.")
    results: list[SubQuestionResult] = Field(default_factory=list, description="Per researched plan item.")
    references: list[FollowedReference] = Field(default_factory=list, description="References followed.")
    not_done: list[str] = Field(default_factory=list, description="What was not done, and why.")
    exhausted: Literal["deadline", "tokens"] | None = Field(default=None, description="The limit that stopped it.")
    report: DeepReport | None = Field(default=None, description="The result.")


class _TheRunDecides:
    """crewAI's feedback provider for the deep Flow: the run answers at once or pauses (see the module docstring).
    Runs on a worker thread (crewAI calls providers through ``asyncio.to_thread``)."""

    def request_feedback(self, context: PendingFeedbackContext, flow: Any) -> str:
        deep = cast(DeepResearchFlow, flow)
        return deep.feedback_for(context)


_PROVIDER = _TheRunDecides()


def read_answer(feedback: str) -> ClarificationAnswer:
    """A resumed run's clarification feedback: the JSON of a ``ClarificationAnswer``, or plain text."""
    return ClarificationAnswer.from_feedback(feedback)


class DeepResearchFlow(Flow[DeepState]):
    """One deep research run. Start it with ``kickoff_async``; continue a paused one with ``from_pending``."""

    _skip_auto_memory: bool = True  # crewAI's own memory would build a LanceDB store; ours is the memory store

    def __init__(self, run: DeepContext | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("suppress_flow_events", True)
        kwargs.setdefault("tracing", False)
        super().__init__(**kwargs)
        if run is None:
            raise TypeError("DeepResearchFlow needs run=DeepContext(...)")
        self._run = run
        self._segment_started = time.monotonic()
        self._budget: Budget | None = None
        self._first: ReportDraft | None = None

    # ---- helpers --------------------------------------------------------------------------------------------------
    @property
    def deep(self) -> DeepState:
        return cast(DeepState, self.state)

    @property
    def budget(self) -> Budget:
        """The run's budget for this segment (built on first use: a resumed Flow gets its state after __init__)."""
        if self._budget is None:
            self._budget = Budget(
                deadline_s=self.deep.deadline_s,
                token_budget=self.deep.token_budget,
                spent_s=self.deep.elapsed_s,
                tokens_before=self.deep.tokens_used,
                count_before=TokenCount.of(self.deep.prompt_tokens_used, self.deep.completion_tokens_used, calls=0),
                pricing=pricing_for(self._run.settings, self._run.llm),
                llm=self._run.llm,
                started=self._segment_started,
            )
        return self._budget

    def save_progress(self) -> None:
        """Write the time and tokens spent so far into the state (before a pause, at the end)."""
        self.deep.elapsed_s = self.budget.elapsed_s()
        self.deep.tokens_used = self.budget.tokens_used()
        count = self.budget.token_count()
        self.deep.prompt_tokens_used, self.deep.completion_tokens_used = count.prompt_tokens, count.completion_tokens

    def _emit(
        self,
        phase: DeepPhase,
        status: Literal["started", "finished", "paused", "source", "text"],
        *,
        sub_question: int | None = None,
        stage_event: ProgressEvent | None = None,
        **detail: Any,
    ) -> None:
        event = DeepProgressEvent(
            run_id=self.deep.id,
            phase=phase,
            status=status,
            elapsed_ms=self.budget.elapsed_s() * 1000,
            sub_question=sub_question,
            detail=detail,
            stage_event=stage_event,
        )
        try:
            self._run.on_event(event)
        except Exception:  # a caller's callback must never break the run
            logger.exception("deep progress callback failed")

    def _shape(self) -> ReportShape:
        """The report's length and type (and a comparison's subjects, from the question researched)."""
        return ReportShape.of(self.deep.options, self.deep.question or self._request().question)

    def _request(self) -> ResearchRequest:
        if self.deep.request is None:  # a bug in the runner, not a user error
            raise RuntimeError("DeepResearchFlow started without a request")
        return self.deep.request

    def feedback_for(self, context: PendingFeedbackContext) -> str:
        """Called by the provider at each pause point: approve at once, or pause the run."""
        if self._run.auto_approve:
            return ""
        self.save_progress()
        raise HumanFeedbackPending(context=context, callback_info={"run_id": self.deep.id})

    async def _probe(self, text: str) -> None:
        """One fan-out for the question, wider than an answer's: what the clarification and the plan read."""
        request = self._request()
        stages = self._run.stages
        output = await stages.retriever.run(
            RetrieverInput(
                query_text=text,
                user_id=request.user_id,
                session_id=request.session_id,
                preferred_sources=request.preferred_sources,
                exclude_sources=request.exclude_sources,
                time_limit_s=max(0.05, self.budget.remaining_s() / 2),
                num_results=self._run.settings.deep.probe_results,
                tool_options=request.tool_options,
            )
        )
        ranked = sorted(output.aggregated_context.chunks, key=lambda chunk: chunk.semantic_relevance, reverse=True)
        self.deep.probe = [
            chunk.model_copy(update={"content": chunk.content[:PROBE_CHARS]}) for chunk in ranked[:PROBE_KEPT]
        ]
        self.deep.probe_reports = list(output.aggregated_context.source_reports)
        self.deep.searched.append(text)

    # ---- clarify --------------------------------------------------------------------------------------------------
    @start()
    async def probe(self) -> None:
        self.deep.question = self.deep.question or self._request().question
        self._emit("clarify", "started", question=self.deep.question)
        await self._probe(self.deep.question)

    @router(probe)
    async def route_clarification(self) -> str:
        settings = self._run.settings
        summary = summarize_evidence(self.deep.question, self.deep.searched, self.deep.probe, self.deep.probe_reports)
        allowed = not self._run.auto_approve and self.deep.options.clarify and settings.clarification.enabled
        level, _ = evidence_confidence(self.deep.probe)
        reason = clarification_reason(summary, level, overload_matches=settings.clarification.overload_matches)
        if not allowed or reason is None:
            self._emit("clarify", "finished", asked=False, matches=summary.total_matches, found=summary.found)
            return "plan"
        if self._run.llm is not None:
            request = await llm_clarification(
                self._run.llm,
                summary,
                reason,
                max_questions=settings.clarification.max_questions,
                timeout_s=min(settings.clarification.llm_timeout_s, max(0.5, self.budget.remaining_s())),
            )
        else:
            request = rule_clarification(summary, reason, max_questions=settings.clarification.max_questions)
        self.deep.clarification = request
        return "clarify"

    @listen("clarify")
    @human_feedback(message="Clarifying questions before planning", provider=_PROVIDER)
    async def ask_clarification(self) -> dict[str, Any]:
        clarification = self.deep.clarification
        if clarification is None:  # routing bug
            raise RuntimeError("ask_clarification reached without a clarification")
        self._emit("clarify", "paused", reason=clarification.reason, questions=len(clarification.questions))
        return clarification.model_dump(mode="json")

    @listen(ask_clarification)
    async def take_answer(self, feedback: HumanFeedbackResult) -> None:
        answer = read_answer(feedback.feedback)
        if answer.declines:
            self.deep.clarification_answer = "just answer"
        else:
            self.deep.clarification_answer = answer.answer.strip()
            self.deep.question = merge_reply(self.deep.question, answer.answer)
            await self._probe(self.deep.question)  # plan from evidence for the narrowed question
        self._emit(
            "clarify", "finished", asked=True, answer=self.deep.clarification_answer, question=self.deep.question
        )

    # ---- plan -----------------------------------------------------------------------------------------------------
    async def _facets(self, question: str, embedder: Embedder | None) -> list[Facet]:
        """The facets of the probe, each candidate sub-question checked by searching the sources as its research
        will (``_facet_search``) within a fifth of the time the run has left; inside the probe when checks are off."""
        deep, settings = self.deep, self._run.settings
        checks = settings.deep.plan_checks
        if checks == 0:
            return await asyncio.to_thread(
                plan_facets, question, deep.probe, max_items=deep.max_subquestions, embedder=embedder
            )
        request = self._request()
        excluded = list(dict.fromkeys([*(request.exclude_sources or ()), *EXCLUDED_SOURCES]))
        ends = time.monotonic() + self.budget.remaining_s() / PLAN_CHECK_SHARE

        async def search(text: str) -> list[ContextChunk]:
            left = ends - time.monotonic()
            if left <= 0:
                return []  # out of time for checks: the rest are judged inside the probe
            output = await self._run.stages.retriever.run(
                RetrieverInput(
                    query_text=text,
                    user_id=request.user_id,
                    session_id=request.session_id,
                    preferred_sources=request.preferred_sources,
                    exclude_sources=excluded,
                    time_limit_s=max(0.05, left),
                    num_results=CHECK_RESULTS,
                    tool_options=request.tool_options,
                )
            )
            return list(output.aggregated_context.chunks)

        return await searched_facets(
            question,
            topic_of(question),
            deep.probe,
            search=search,
            max_facets=deep.max_subquestions,
            embedder=embedder,
            max_checks=checks,
        )

    @listen(or_("plan", take_answer))
    @human_feedback(message="Approve, edit, reorder or cut the research plan", provider=_PROVIDER)
    async def propose_plan(self) -> dict[str, Any]:
        started = time.monotonic()
        self._emit("plan", "started")
        deep = self.deep
        focus = deep.clarification_answer if deep.clarification_answer not in (None, "just answer") else None
        question = deep.question.split(" (", 1)[0] if focus else deep.question
        summary = summarize_evidence(question, deep.searched, deep.probe, deep.probe_reports)
        shape = self._shape()
        # The knowledge base's embedder refines the facets when it is loaded (never loaded for this) and the run has
        # time for it (embedding the probe takes a fraction of a second on a busy machine; words alone are instant).
        embedder = loaded_embedder(self._run.settings) if self.budget.remaining_s() >= PLAN_EMBEDDING_MIN_S else None
        facets = await self._facets(question, embedder)
        checked = self._run.settings.deep.plan_checks > 0 and bool(deep.probe)
        plan = None
        if self._run.llm is not None:
            plan = await llm_plan(
                self._run.llm,
                deep.question,
                summary,
                deep.probe,
                max_items=deep.max_subquestions,
                focus=focus,
                timeout_s=min(self._run.settings.deep.llm_timeout_s, max(0.5, self.budget.remaining_s())),
                guidance=shape.guidance(),
                facets=facets,
                checked=checked,
            )
        if plan is None or plan.written_by == "rules":  # no LLM, or it failed: by rule, in the report's type
            shaped = shaped_rule_plan(
                question,
                summary,
                shape.report_type,
                subjects=shape.subjects,
                max_items=deep.max_subquestions,
                focus=focus,
                facets=facets,
            )
            plan = (
                shaped
                or plan
                or rule_plan(
                    question, summary, max_items=deep.max_subquestions, focus=focus, facets=facets, checked=checked
                )
            )
        deep.plan = plan.model_copy(update={"question": deep.question})
        detail: dict[str, Any] = {
            "items": [item.question for item in deep.plan.items],
            "written_by": deep.plan.written_by,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        }
        self._emit("plan", "finished" if self._run.auto_approve else "paused", **detail)
        return deep.plan.model_dump(mode="json")

    @listen(propose_plan)
    async def apply_plan(self, feedback: HumanFeedbackResult) -> None:
        plan = self.deep.plan
        if plan is None:  # routing bug
            raise RuntimeError("apply_plan reached without a plan")
        approved = apply_decision(plan, read_decision(feedback.feedback))
        self.deep.approved = approved
        self.deep.cancelled = approved is None
        self._emit(
            "plan",
            "finished",
            decision="cancel" if approved is None else "approve",
            items=[item.question for item in approved.items] if approved else [],
        )

    @router(apply_plan)
    async def route_after_plan(self) -> str:
        return "cancelled" if self.deep.cancelled else "approved"

    @listen("cancelled")
    async def cancel(self) -> None:
        self.save_progress()
        self._emit("respond", "finished", cancelled=True)

    # ---- research -------------------------------------------------------------------------------------------------
    def _follower(self) -> ReferenceFollower | None:
        settings = self._run.settings.deep
        if not self.deep.options.follow_references or settings.follow_depth == 0:
            return None
        excluded = set(self._request().exclude_sources or [])
        by_source = {tool.source_type: tool for tool in self._run.tools if tool.source_type not in excluded}

        def relay(record: FollowedReference) -> None:
            self._emit(
                "references",
                "finished",
                sub_question=record.sub_question,
                kind=record.kind,
                target=record.target[:200],
                outcome=record.outcome,
                score=record.score,
                reason=record.reason,
            )

        return ReferenceFollower(
            arxiv=by_source.get("arxiv"),
            knowledge=by_source.get("rag"),
            settings=settings,
            on_record=relay,
            user_id=self._request().user_id,
        )

    def _stop(self, position: int, items: int, exhausted: Exhausted) -> None:
        self.deep.exhausted = exhausted
        why = "the run's deadline was reached" if exhausted == "deadline" else "the run's token budget was spent"
        plan = self.deep.approved
        assert plan is not None  # noqa: S101 - research only runs with an approved plan
        for later in range(position, items + 1):
            item = plan.items[later - 1]
            self.deep.results.append(SubQuestionResult(item=item, status="not_researched", note=why))
            self.deep.not_done.append(f"Sub-question {later} (“{item.question}”) was not researched: {why}.")

    @listen("approved")
    async def research(self) -> None:
        plan = self.deep.approved
        assert plan is not None  # noqa: S101 - "approved" is only emitted with an approved plan
        request = self._request()
        follower = self._follower()
        settings = self._run.settings.deep
        items = len(plan.items)
        for position, item in enumerate(plan.items, start=1):
            exhausted = self.budget.exhausted(reserve_s=RESEARCH_RESERVE_S + MIN_SUBQUESTION_S)
            if exhausted is not None:
                self._stop(position, items, exhausted)
                break
            share = (self.budget.remaining_s() - RESEARCH_RESERVE_S) / (items - position + 1)
            deadline_s = max(MIN_SUBQUESTION_S, min(settings.subquestion_deadline_s, share))
            self._emit("research", "started", sub_question=position, question=item.question, deadline_s=deadline_s)

            def relay(event: ProgressEvent, position: int = position) -> None:
                self._emit("research", event.status, sub_question=position, stage_event=event, stage=event.stage)

            result = await research_sub_question(
                self._run.stages,
                item,
                index=position,
                request=request,
                preferences=self._shape().preferences(self.deep.preferences),
                deadline_s=deadline_s,
                budget=self.budget,
                follower=follower,
                on_stage_event=relay,
            )
            self.deep.results.append(result)
            self._emit(
                "research",
                "finished",
                sub_question=position,
                outcome=result.status,
                evidence=len(result.evidence),
                references_kept=sum(1 for r in result.references if r.outcome == "kept"),
                elapsed_ms=round(result.elapsed_ms, 1),
                tokens=result.tokens,
            )
        self.deep.references = list(follower.records) if follower is not None else []

    # ---- report and quality ---------------------------------------------------------------------------------------
    def _query(self) -> Any:
        from researchcrew.contracts import Query

        request = self._request()
        return Query(text=self.deep.question, user_id=request.user_id, session_id=request.session_id)

    @listen(research)
    async def write_report(self) -> None:
        started = time.monotonic()
        self._emit("report", "started", sub_questions=len(self.deep.results))
        plan = self.deep.approved
        assert plan is not None  # noqa: S101
        self._first = assemble_report(
            self._query(), plan, self.deep.results, self._run.settings.evaluation, self._shape()
        )
        response = self._first.response
        self._emit(
            "report",
            "finished",
            sections=len(response.sections),
            citations=len(response.citations),
            contradictions=len(self._first.contradictions),
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )

    async def _retry(self, scores: QualityScores) -> ReportDraft | None:
        """The one remediation retry, or None when there is no time, no budget, or the model failed."""
        plan, first = self.deep.approved, self._first
        assert plan is not None and first is not None  # noqa: S101
        settings = self._run.settings
        if self._run.llm is None:
            return extractive_retry(self._query(), plan, self.deep.results, settings.evaluation, self._shape())
        exhausted = self.budget.exhausted(reserve_s=MIN_RETRY_S)
        if exhausted is not None:
            if self.deep.exhausted is None:  # research already said what the limit stopped
                self.deep.not_done.append(f"The quality retry was skipped: the run's {exhausted} was reached.")
            self.deep.exhausted = self.deep.exhausted or exhausted
            return None
        try:
            return await llm_retry(
                self._run.llm,
                self._query(),
                plan,
                self.deep.results,
                scores.issues,
                settings.evaluation,
                timeout_s=min(settings.deep.llm_timeout_s, self.budget.remaining_s() - 0.5),
                shape=self._shape(),
            )
        except Exception as error:  # the outermost guard around the model call: keep the first report
            logger.warning("the remediation retry failed; keeping the first report", exc_info=True)
            self.deep.not_done.append(f"The quality retry failed ({type(error).__name__}: {error}).")
            return None

    async def _research_again(self, position: int, item: PlanItem) -> SubQuestionResult | None:
        """One sub-question researched once more (remediation), or None when the run has no time for it."""
        settings = self._run.settings.deep
        if self.budget.exhausted(reserve_s=RESEARCH_RESERVE_S + MIN_SUBQUESTION_S + MIN_RETRY_S) is not None:
            return None
        deadline_s = max(MIN_SUBQUESTION_S, min(settings.subquestion_deadline_s, self.budget.remaining_s() / 3))
        self._emit("research", "started", sub_question=position, question=item.question, deadline_s=deadline_s)

        def relay(event: ProgressEvent) -> None:
            self._emit("research", event.status, sub_question=position, stage_event=event, stage=event.stage)

        result = await research_sub_question(
            self._run.stages,
            item,
            index=position,
            request=self._request(),
            preferences=self._shape().preferences(self.deep.preferences),
            deadline_s=deadline_s,
            budget=self.budget,
            follower=None,
            on_stage_event=relay,
        )
        self._emit("research", "finished", sub_question=position, outcome=result.status, remediation=True)
        return result

    def _score(self, draft: ReportDraft, attempt: int) -> QualityScores:
        plan = self.deep.approved
        assert plan is not None  # noqa: S101
        return score_report(
            draft.response,
            plan,
            self.deep.question,
            attempt=attempt,
            threshold=self._run.settings.deep.quality_threshold,
            extra_removed=draft.extra_removed,
            evidence=[scored.chunk for scored in draft.evidence],
        )

    @listen(write_report)
    async def check_quality(self) -> None:
        """Score the report; with findings or below the threshold, remediate once (``_remediate``: flawed sections
        researched again or dropped, then the report put together again) and keep the rescored report when it is
        better."""
        plan, first = self.deep.approved, self._first
        assert plan is not None and first is not None  # noqa: S101
        self._emit("quality", "started")
        scores = [self._score(first, 1)]
        final, remediated = first, False
        revisions: list[Revision] = []
        failed = not scores[0].passed
        to_remedy = flawed_sections(scores[0].findings, failed=failed)
        if failed or to_remedy:
            self._emit(
                "quality",
                "finished",
                attempt=1,
                overall=scores[0].overall,
                passed=scores[0].passed,
                findings=[finding.model_dump() for finding in scores[0].findings],
                retry=True,
            )
            before = list(self.deep.results)
            if to_remedy:
                self.deep.results, revisions = await remediate(
                    self.deep.question, plan, before, scores[0].findings, self._research_again, failed=failed
                )
            retry = await self._retry(scores[0]) if failed or revisions or None in to_remedy else None
            if retry is not None:
                scores.append(self._score(retry, 2))
                if scores[1].overall > scores[0].overall:
                    final, remediated = retry, True
            if not remediated:
                self.deep.results = before
                revisions = []
        best = scores[-1] if remediated else scores[0]
        self._emit(
            "quality",
            "finished",
            attempt=len(scores),
            overall=best.overall,
            passed=best.passed,
            remediated=remediated,
            revisions=[revision.model_dump() for revision in revisions],
            scores=[score.model_dump() for score in scores],
        )
        self.deep.report = self._build_report(final, scores, remediated, revisions)

    def _build_report(
        self, final: ReportDraft, scores: list[QualityScores], remediated: bool, revisions: list[Revision]
    ) -> DeepReport:
        self.save_progress()
        deep, plan = self.deep, self.deep.approved
        assert plan is not None  # noqa: S101
        grouped, _ = sections_by_position(final.response.sections)
        kept = [record for record in deep.references if record.outcome == "kept"]
        sub_reports = []
        for position, result in enumerate(deep.results, start=1):
            cited = {n for section in grouped.get(position, []) for claim in section.claims for n in claim.citations}
            sub_reports.append(
                SubQuestionReport(
                    item=result.item,
                    status=result.status,
                    answer_kind=result.response.answer_kind if result.response else None,
                    citations=len(cited),
                    evidence=len(result.evidence),
                    references_kept=sum(1 for record in kept if record.sub_question == position),
                    elapsed_ms=result.elapsed_ms,
                    tokens=result.tokens,
                    cost_usd=result.response.cost.usd if result.response else 0.0,
                    note=result.note,
                )
            )
        partial = bool(deep.not_done) or deep.exhausted is not None
        final_scores = scores[-1] if remediated else scores[0]
        caveats = list(final.response.caveats)
        if not final_scores.passed:
            caveats.append(
                f"The report scored {final_scores.overall:.2f}, below the quality threshold "
                f"{final_scores.threshold:.2f}, after {len(scores)} attempt(s)."
            )
        caveats += [note for note in deep.not_done if note not in caveats]
        if revisions:
            caveats.append(revision_note(revisions))
        response = final.response.model_copy(
            update={
                "partial": partial,
                "caveats": caveats,
                "execution_time_ms": self.budget.elapsed_s() * 1000,
            }
        )
        return DeepReport(
            run_id=deep.id,
            question=deep.question,
            original_question=self._request().question,
            response=response,
            plan=plan,
            sub_questions=sub_reports,
            references=deep.references,
            quality=scores,
            remediated=remediated,
            revisions=revisions,
            clarification=deep.clarification,
            clarification_answer=deep.clarification_answer,
            partial=partial,
            not_done=deep.not_done,
            budget=self.budget.report(deep.exhausted),
            length=deep.options.length,
            report_type=deep.options.report_type,
            comparison=self._shape().table(response, plan),
            themes=self._shape().themes(response, plan),
        )

    @listen(check_quality)
    async def respond(self) -> DeepReport:
        report = self.deep.report
        assert report is not None  # noqa: S101
        self._emit("respond", "finished", partial=report.partial, remediated=report.remediated)
        return report
