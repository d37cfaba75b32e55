"""ResearchFlow: one question through guard → rewrite (a follow-up made stand-alone) → retrieve → evaluate →
confidence → (reformulate → retrieve, at most twice) → (clarify?) → synthesize → validate citations → remember →
respond, as a Flow with typed state.

The ``clarify`` stage may ask clarifying questions instead of answering (seed 004) when the *question* is too vague
or too broad to answer well (``pipeline.vagueness``); it is considered once, on the first evidence, before any
reformulation. A *miss* on a clear question is never a reason to ask: the search is reworded (seed 000: at most
twice) and, when nothing on topic was found, widened (seed 004: relax filters and thresholds before bothering the
user: more results, a lower knowledge-base relevance floor, the request's filters dropped), and only then answered
with the uncertainty response. A clarification has ``answer_kind="clarification"``.

The Flow only routes. Each stage's work lives in its agent (``ResearchStages``), which keeps the Flow testable with
fakes and keeps deterministic work out of any LLM. One deadline covers the whole run: every stage gets what is left
of it, and when it runs out the Flow answers with the evidence gathered so far and says so (``partial``).

A rewritten follow-up is what the sources, the Evaluator and the Synthesizer see; the answer's ``query`` and what
memory stores stay the question as the user asked it, and ``FinalResponse.rewrite`` says what was researched. The
tokens the LLM stages spend are counted per stage (``llm.usage.UsageMeter``) into ``FinalResponse.token_usage``.

The Flow runs on ``pipeline.routing`` (crewAI's routing rules without crewAI's runtime): the pipeline needs no
crewAI to route, so an extractive answer never imports crewAI (issue 19); crewAI comes in with an LLM, where the
stages use it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from researchcrew.contracts import (
    AggregatedContext,
    ContextChunk,
    EvaluatorInput,
    EvaluatorOutput,
    FinalResponse,
    MemoryInput,
    ProgressEvent,
    Query,
    RetrieverInput,
    RetrieverOutput,
    SourceReport,
    SynthesizerInput,
    UserPreferences,
)
from researchcrew.contracts.chunks import is_evidence
from researchcrew.contracts.evaluator import ContradictionRecord
from researchcrew.contracts.follow_up import QuestionRewrite
from researchcrew.contracts.progress import Stage
from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.synthesizer import ConfidenceLevel, MemoryWriteStatus
from researchcrew.contracts.tables import AnswerTable, RouteDecision, StructuredRequest, TableRow
from researchcrew.llm.usage import UsageMeter
from researchcrew.pipeline._assessment import AnswerAssessment, assess_answer, band, uncertainty_reason
from researchcrew.pipeline._guard import check_question
from researchcrew.pipeline._hybrid import focused, hybrid_answer
from researchcrew.pipeline._long_text import with_long_text
from researchcrew.pipeline._routing import Flow, listen, or_, router, start
from researchcrew.pipeline._support import Support
from researchcrew.pipeline._tables import (
    StructuredRun,
    attach_table,
    label_clarification,
    long_text_evidence,
    route_after,
    row_claims,
    run_structured,
    shown_evidence,
    table_assessment,
    table_lead,
)
from researchcrew.pipeline.clarify import ClarificationInput, clarification_response, never_clarify
from researchcrew.pipeline.progress import ProgressReporter, reporting
from researchcrew.pipeline.responses import refusal_response, source_caveats, uncertainty_response
from researchcrew.pipeline.synthesize._confidence import coverage_metrics

if TYPE_CHECKING:
    from researchcrew.pipeline.stages import ResearchStages

logger = logging.getLogger(__name__)

MAX_REFORMULATIONS = 2
_T = TypeVar("_T")


class ResearchState(BaseModel):
    """Everything one run knows. Inputs first; the rest is filled in stage by stage."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str = Field(default_factory=lambda: str(uuid4()), description="The run id (progress events carry it).")

    request: ResearchRequest | None = Field(default=None, description="What the caller asked for, unchanged.")
    query: Query | None = Field(default=None, description="The question as received (id, text, user, session).")
    preferences: UserPreferences = Field(
        default_factory=UserPreferences, description="The user's learned preferences with this request's options."
    )
    deadline_s: float = 30.0
    started_at: float = Field(default_factory=time.monotonic, description="time.monotonic() at the start.")

    rewrite: QuestionRewrite | None = Field(
        default=None, description="The follow-up rewrite, when the question was researched in a stand-alone form."
    )
    searched: list[str] = Field(default_factory=list, description="Query texts sent to the sources, in order.")
    evidence: dict[str, ContextChunk] = Field(default_factory=dict, description="All chunks so far, by id.")
    retrieval: RetrieverOutput | None = None
    evaluation: EvaluatorOutput | None = None
    confidence_level: ConfidenceLevel = "insufficient"
    confidence: float = 0.0
    refusal: tuple[str, str] | None = Field(default=None, description="(reason, reply) when the guard refused.")
    caveats: list[str] = Field(default_factory=list)
    allow_clarification: bool = Field(
        default=True, description="Whether this run may ask clarifying questions (not when it answers one)."
    )
    partial: bool = False
    relaxed: bool = Field(
        default=False, description="Whether the next searches are widened (after a miss: nothing on topic was found)."
    )
    clarify_considered: bool = Field(default=False, description="Whether the clarify stage was consulted already.")
    response: FinalResponse | None = None
    route: RouteDecision | None = Field(default=None, description="The route the question took (issue 22).")
    memory_status: MemoryWriteStatus = Field(default="not_remembered", description="What happens to this exchange.")


class ResearchFlow(Flow):
    """The research pipeline for one question: ``await ResearchFlow(stages, state).kickoff()`` (or
    ``run_question``)."""

    def __init__(self, stages: ResearchStages, state: ResearchState) -> None:
        self.state = state
        self._stages = stages
        self._supports: dict[str, Support] = {}  # chunk id → how well it supports the question (_support.py)
        self._failures: dict[str, SourceReport] = {}  # tool name → its first failure in this run
        self._meter = UsageMeter()
        # time.monotonic() when the last retrieval ended, or when its time limit did if it ran past it
        self._retrieved_at: float | None = None
        self._structured: StructuredRun | None = None  # what the structured stage gave (issue 22)
        self._long_text: list[ContextChunk] = []  # the long-text route's passages, added to each retrieval
        self._table_rows: list[TableRow] = []  # the structured answer's whole result set, cited

    # Helpers -----------------------------------------------------------------------------------------------
    @property
    def research(self) -> ResearchState:
        """The run's state (``state``; the name the stages' code has used since the Flow was crewAI's)."""
        return self.state

    def remaining_s(self) -> float:
        return self.research.deadline_s - (time.monotonic() - self.research.started_at)

    @property
    def retrieved_at(self) -> float | None:
        """``time.monotonic()`` when this run's last retrieval ended, or when its time limit ended if it ran past it
        (the overrun is then counted with the stages after it, which the next runs reserve time for); None: it
        retrieved nothing."""
        return self._retrieved_at

    def _emit(
        self, stage: Stage, status: Literal["started", "finished"], started: float | None = None, **detail: Any
    ) -> None:
        now = time.monotonic()
        event = ProgressEvent(
            run_id=self.state.id,
            stage=stage,
            status=status,
            elapsed_ms=(now - self.state.started_at) * 1000,
            duration_ms=None if started is None else (now - started) * 1000,
            detail=detail,
        )
        try:
            self._stages.on_event(event)
        except Exception:  # a caller's callback must never break the run
            logger.exception("progress callback failed")

    def _query(self) -> Query:
        """The question as the user asked it."""
        return _require(self.research.query, "a query")

    def _researched_query(self) -> Query:
        """The question as it is researched: the stand-alone form of a follow-up, else the question as asked."""
        query = self._query()
        rewrite = self.research.rewrite
        return query if rewrite is None else query.model_copy(update={"text": rewrite.standalone})

    def _explicit_choices(self) -> dict[str, Any]:
        return self.research.request.explicit_choices() if self.research.request else {}

    # Stages ------------------------------------------------------------------------------------------------
    @start()
    async def guard(self) -> None:
        started = time.monotonic()
        self._emit("guard", "started")
        verdict = check_question(self._query().text)
        if not verdict.allowed:
            self.state.refusal = (verdict.reason, verdict.reply)
        self._emit("guard", "finished", started, allowed=verdict.allowed, reason=verdict.reason or None)

    @router(guard)
    async def route_after_guard(self) -> str:
        return "refused" if self.state.refusal else "proceed"

    @listen("proceed")
    async def rewrite_follow_up(self) -> None:
        started = time.monotonic()
        query = self._query()
        self._emit("rewrite", "started")
        with self._meter.stage("follow_up"):
            result = await self._stages.rewrite_follow_up(
                query.text, query.user_id, query.session_id, self.remaining_s()
            )
        if result.method is not None:
            self.state.rewrite = QuestionRewrite(
                original=query.text, standalone=result.question, method=result.method, reason=result.reason[:500]
            )
        self._emit(
            "rewrite",
            "finished",
            started,
            rewritten=result.rewritten,
            original=query.text,
            standalone=result.question if result.rewritten else None,
            method=result.method,
            reason=result.reason,
        )

    @router(rewrite_follow_up)
    async def choose_route(self) -> str:
        """Issue 22: the structured stage decides the route and, on the structured or hybrid route, answers from
        annotations. Its rows' passages join the evidence; a structured table answers without normal retrieval,
        anything less falls back to it (``route.tried`` says so); an ambiguous label is asked about."""
        stage = self._stages.structured
        if stage is None:
            return "search"
        started = time.monotonic()
        query = self._query()
        self._emit("route", "started")
        budget = min(self._stages.structured_deadline_s, self.remaining_s() - self._stages.synthesis_reserve_s)
        if budget <= 0:
            run = StructuredRun(None, "no time left for the structured search")
        else:
            with self._meter.stage("routing"):  # the route prompt's tokens, when an LLM routes
                run = await run_structured(
                    stage,
                    StructuredRequest(
                        question=self._researched_query().text,
                        user_id=query.user_id,
                        collections=self._requested_collections(),
                        page_size=self._stages.table_page_size,
                        deadline_s=budget,
                    ),
                )
        self._structured = run
        self._long_text = long_text_evidence(run)
        outcome = run.outcome
        asks = bool(outcome and outcome.clarification and self.research.allow_clarification)
        answered = run.table is not None and outcome is not None and outcome.route.route == "structured"
        self.state.route = route_after(run, retrieval=not answered and not asks)
        if outcome is not None and run.table is not None:
            for chunk in shown_evidence(outcome):
                self.state.evidence.setdefault(chunk.chunk_id, chunk)
        route = self.state.route
        self._emit(
            "route",
            "finished",
            started,
            route=route.route if route else None,
            intent=route.intent if route else None,
            reason=route.reason if route else run.failure,
            decided_by=route.decided_by if route else None,
            tried=list(route.tried) if route else [],
            rows=run.table.total_rows if run.table else 0,
            long_text_passages=len(self._long_text),
            clarification=list(outcome.clarification) if asks and outcome else [],
        )
        if asks and outcome is not None:
            self.state.response = label_clarification(query, self._researched_query().text, outcome.clarification, [])
            return "clarify"
        return "search"

    def _requested_collections(self) -> list[str] | None:
        """The collections the request limits the knowledge base to (its ``rag`` filters), if any."""
        request = self.research.request
        options = request.tool_options.get("rag", {}) if request else {}
        filters = options.get("filters") if isinstance(options, dict) else None
        found = filters.get("collections") if isinstance(filters, dict) else getattr(filters, "collections", None)
        return [str(name) for name in found] if isinstance(found, list | tuple) else None

    def _structured_retrieval(self, text: str) -> RetrieverOutput | None:
        """The structured answer's passages as the first retrieval's output (no source searched), when the
        structured route answered with a table; else None."""
        run = self._structured
        route = self.state.route
        if run is None or run.outcome is None or run.table is None or self.state.retrieval is not None:
            return None
        if route is None or route.route != "structured":
            return None
        chunks = shown_evidence(run.outcome)
        return RetrieverOutput(
            aggregated_context=AggregatedContext(query_text=text, chunks=chunks),
            retrieval_status="success",
            sources_used=list(dict.fromkeys(chunk.source_type for chunk in chunks)),
            sources_failed=[],
            execution_time_ms=0.0,
        )

    @listen(or_("search", "retry"))
    async def retrieve(self) -> None:
        started = time.monotonic()
        query = self._researched_query()
        request = _require(self.research.request, "a request")
        text = self.state.searched[-1] if self.state.searched else query.text
        if not self.state.searched:
            self.state.searched.append(text)
        structured = self._structured_retrieval(text)
        if structured is not None:  # answered from annotations: no source is searched
            self._emit("retrieve", "started", query_text=text, structured=True)
            self.state.retrieval = structured
            self._emit(
                "retrieve",
                "finished",
                started,
                retrieval_status="success",
                chunks=len(structured.aggregated_context.chunks),
                sources_used=structured.sources_used,
                sources_failed=[],
                structured=True,
            )
            return
        budget = self._stages.retrieval_budget_s(self.remaining_s())
        limit_ends = time.monotonic() + budget
        self._emit("retrieve", "started", query_text=text, time_limit_s=round(budget, 3))
        tool_options = request.tool_options
        if self.state.relaxed:  # widened after a miss: the request's own filters are dropped too (seed 004)
            tool_options = {source: _without_filters(options) for source, options in tool_options.items()}
        output = await self._stages.retriever.run(
            RetrieverInput(
                query_text=text,
                user_id=query.user_id,
                session_id=query.session_id,
                preferred_sources=request.preferred_sources or self.state.preferences.preferred_sources or None,
                exclude_sources=request.exclude_sources or self.state.preferences.excluded_sources or None,
                time_limit_s=budget,
                tool_options=tool_options,
                relaxed=self.state.relaxed,
            )
        )
        output = with_long_text(output, self._long_text)
        self.state.retrieval = self._with_earlier_failures(output)
        self._retrieved_at = min(time.monotonic(), limit_ends)
        for chunk in output.aggregated_context.chunks:
            known = self.state.evidence.get(chunk.chunk_id)
            if known is None or chunk.semantic_relevance > known.semantic_relevance:
                self.state.evidence[chunk.chunk_id] = chunk
        self._emit(
            "retrieve",
            "finished",
            started,
            retrieval_status=output.retrieval_status,
            chunks=len(output.aggregated_context.chunks),
            sources_used=output.sources_used,
            sources_failed=output.sources_failed,
        )

    @listen(retrieve)
    async def evaluate(self) -> None:
        started = time.monotonic()
        self._emit("evaluate", "started", chunks=len(self.state.evidence))
        retrieval = _require(self.state.retrieval, "retrieval output")
        context = AggregatedContext(
            query_text=self._researched_query().text,
            chunks=list(self.state.evidence.values()),
            source_reports=retrieval.aggregated_context.source_reports,
        )
        with self._meter.stage("adjudication"):  # the Evaluator calls the LLM only to adjudicate contradictions
            evaluation, timed_out = await self._stages.evaluate(
                EvaluatorInput(
                    aggregated_context=context,
                    quality_threshold=self._stages.quality_threshold,
                    user_preferences=self.state.preferences,
                ),
                self.remaining_s(),
            )
        if timed_out:
            self.state.partial = True
            self.state.caveats.append(
                "The time limit was reached while cross-checking the evidence; contradictions were checked "
                "without the language model."
            )
        self.state.evaluation = evaluation
        self._emit(
            "evaluate",
            "finished",
            started,
            kept=evaluation.quality_stats.filtered_chunk_count,
            removed=len(evaluation.removal_rationale),
            contradictions=len(evaluation.contradictions_found),
        )

    def _with_earlier_failures(self, output: RetrieverOutput) -> RetrieverOutput:
        """A source that failed in this run's first search and was then skipped for its backoff (a reworded or
        widened search) is reported with the failure that says why, not as "skipped" (tools/health.py)."""
        reports = []
        for report in output.aggregated_context.source_reports:
            earlier = self._failures.get(report.tool_name)
            if report.status == "failed":
                self._failures.setdefault(report.tool_name, report)
            elif report.status == "skipped" and report.failure is not None and earlier is not None:
                report = earlier
            reports.append(report)
        if reports == output.aggregated_context.source_reports:
            return output
        context = output.aggregated_context.model_copy(update={"source_reports": reports})
        return output.model_copy(update={"aggregated_context": context})

    @router(evaluate)
    async def assess_confidence(self) -> str:
        """The evidence gate: answer when the best evidence supports the *question asked* well enough (support is
        measured the same way for every source, pipeline/_support.py); reformulate when it is weak (and widen the
        search when nothing on topic was found: a miss); else give the uncertainty answer. A question too vague or
        too broad to answer well gets clarifying questions instead, decided on the first evidence."""
        started = time.monotonic()
        self._emit("confidence", "started")
        evaluation = _require(self.state.evaluation, "evaluation output")
        kept = [scored.chunk for scored in evaluation.filtered_context.chunks]
        supports = await self._stages.measure_support(self._researched_query().text, kept, self.remaining_s())
        self._supports.update(supports)
        best = max((support.score for support in supports.values()), default=0.0)
        settings = self._stages.confidence
        self.state.confidence_level, self.state.confidence = band(best, settings), best
        attempts = len(self.state.searched) - 1
        out_of_time = self.remaining_s() <= self._stages.after_retrieval_s()
        # Worth searching again: evidence on topic but weak, or a miss — the sources answered but nothing on topic
        # came back. When every source failed there is nothing to reword or widen: searching again at once would
        # only call the failing sources again (a batch job retries the question later instead).
        retrieval = self.state.retrieval
        answered = retrieval is None or retrieval.retrieval_status != "failed"
        miss = answered and best < settings.reformulate_min_support
        worth_another_search = best >= settings.reformulate_min_support or miss
        if best >= settings.answer_min_support or self._structured_table():
            decision = "sufficient"  # a structured table answers: its rows matched the question's fields
        elif worth_another_search and attempts < MAX_REFORMULATIONS and not out_of_time:
            decision = "low_confidence"
        else:
            decision = "uncertain"
            if out_of_time and worth_another_search and attempts < MAX_REFORMULATIONS:
                self.state.partial = True
                self.state.caveats.append("The time limit was reached before a better search could be tried.")
        self._emit(
            "confidence",
            "finished",
            started,
            level=self.state.confidence_level,
            best_support=round(best, 4),
            attempts=attempts,
            decision=decision,
        )
        if attempts == 0 and not self._structured_table() and await self._clarify_or("") == "clarify":
            return "clarify"  # the question itself is unclear: ask before searching again
        if decision == "low_confidence" and miss and not self.state.relaxed:
            self.state.relaxed = True
            self.state.caveats.append(
                "Nothing on topic was found at first, so the search was reworded and widened (more results, a lower "
                "relevance floor, filters dropped)."
            )
        return decision

    @router("low_confidence")
    async def reformulate(self) -> str:
        started = time.monotonic()
        self._emit("reformulate", "started", attempt=len(self.state.searched))
        evidence = sorted(self.state.evidence.values(), key=lambda c: c.semantic_relevance, reverse=True)[:5]
        with self._meter.stage("reformulation"):
            new_text = await self._stages.reformulate(
                self._researched_query().text, list(self.state.searched), evidence
            )
        new_text = new_text.strip()
        if not new_text or new_text in self.state.searched:
            if self.state.relaxed and len(self.state.searched) == 1:
                # No other wording, but the widened search has not been tried: search the same words, widened.
                self.state.searched.append(self.state.searched[-1])
                self._emit("reformulate", "finished", started, query_text=self.state.searched[-1], decision="retry")
                return "retry"
            # Searching the same words again cannot find anything new: explain what we have instead.
            self._emit("reformulate", "finished", started, query_text=None, decision="uncertain")
            return "uncertain"
        self.state.searched.append(new_text)
        self._emit("reformulate", "finished", started, query_text=new_text, decision="retry")
        return "retry"

    @router("sufficient")
    async def gate_answer(self) -> str:
        """Enough evidence to answer (whether to ask was decided on the first evidence)."""
        return "write_answer"

    @router("uncertain")
    async def gate_uncertainty(self) -> str:
        """Too little to answer, after rewording and widening the search: explain the uncertainty."""
        return "explain"

    async def _clarify_or(self, otherwise: str) -> str:
        """Ask the clarify stage once per run; "clarify" (with the response set) when it asks, else ``otherwise``."""
        if (
            self.state.clarify_considered
            or not self.research.allow_clarification
            or self._stages.clarify is never_clarify
        ):
            return otherwise  # nothing to consider: no events either
        self.state.clarify_considered = True
        started = time.monotonic()
        self._emit("clarify", "started")
        reports = self.state.retrieval.aggregated_context.source_reports if self.state.retrieval else []
        request = await self._stages.clarify(
            ClarificationInput(
                question=self._researched_query().text,
                searched=list(self.state.searched),
                chunks=list(self.state.evidence.values()),
                source_reports=reports,
                confidence_level=self.state.confidence_level,
            )
        )
        self._emit(
            "clarify",
            "finished",
            started,
            asked=request is not None,
            reason=request.reason if request else None,
            matches=request.total_matches if request else None,
        )
        if request is None:
            return otherwise
        self.state.response = clarification_response(self._query(), request, reports)
        return "clarify"

    @listen("write_answer")
    async def synthesize(self) -> None:
        started = time.monotonic()
        evaluation = _require(self.state.evaluation, "evaluation output")
        self._emit("synthesize", "started", chunks=len(evaluation.filtered_context.chunks))
        context = evaluation.filtered_context
        if (table := self._hybrid_table()) is not None and self._structured and self._structured.outcome:
            context = focused(context, self._structured.outcome)  # the rows' documents say what "they" found
        synthesizer_input = SynthesizerInput(
            filtered_context=context,
            original_query=self._researched_query(),
            user_preferences=self.state.preferences,
            contradictions=evaluation.contradictions_found,
            max_response_length=self.state.preferences.max_response_length,
            min_response_length=min(
                self.state.preferences.min_response_length, self.state.preferences.max_response_length
            ),
            include_sections=self.state.preferences.include_sections,
            response_format=self.state.preferences.response_format,
            table=table,  # the rows the answer states before the text: evidence for the writer
        )
        timed_out = False
        if self._table_answers():  # the rows are the answer: a lead line here, the table after validation
            response = table_lead(self._researched_query(), _require(self._structured, "a structured run"))
        else:
            with self._meter.stage("synthesis"):
                response, timed_out = await self._stages.synthesize(synthesizer_input, self.remaining_s())
        if timed_out:
            self.state.partial = True
            self.state.caveats.append(
                "The time limit was reached while writing the answer; this is an extractive answer from the "
                "evidence gathered so far."
            )
        self.state.response = response
        self._emit(
            "synthesize",
            "finished",
            started,
            answer_kind=response.answer_kind,
            method=response.generation_method,
            timed_out=timed_out,
        )

    @listen(synthesize)
    async def check_citations(self) -> None:
        started = time.monotonic()
        self._emit("validate", "started")
        evaluation = _require(self.state.evaluation, "evaluation output")
        given = [scored.chunk for scored in evaluation.filtered_context.chunks]
        if self._table_answers():  # each shown row is a statement cited by its passage
            await self._attach_table()
            self.state.response = self._table_assessed(row_claims(_require(self.state.response, "a table answer")))
        else:
            self.state.response = self._assessed(
                self._stages.validate_citations(_require(self.state.response, "a draft"), given)
            )
            await self._attach_table(given)
        stats = self.state.response.citation_stats
        self._emit(
            "validate",
            "finished",
            started,
            valid=stats.valid,
            removed=stats.removed,
            claims_removed=stats.claims_removed,
        )

    @listen("clarify")
    async def ask_clarification(self) -> None:
        """The clarification was written by the gate; nothing to synthesize or validate."""
        _require(self.research.response, "a clarification")

    @listen("explain")
    async def explain_uncertainty(self) -> None:
        retrieval = _require(self.state.retrieval, "retrieval output")
        reports = retrieval.aggregated_context.source_reports
        response = uncertainty_response(
            self._query(),
            searched=self.state.searched,
            # Conversation memory that is context (the assistant's earlier answers) is never cited, not even here.
            best_matches=[chunk for chunk in self.state.evidence.values() if is_evidence(chunk)],
            source_reports=reports,
            confidence=self.state.confidence,
        )
        reason = uncertainty_reason(self.state.confidence, self._stages.confidence, reports, len(self.state.evidence))
        self.state.response = response.model_copy(update={"final_reason": reason})

    def _table_answers(self) -> bool:
        """Whether the structured route answered with a table (its rows are the answer, not passages to quote)."""
        route = self.state.route
        return self._structured_table() and route is not None and route.route == "structured"

    def _contradictions(self, response: FinalResponse) -> list[ContradictionRecord]:
        """The disagreements the answer presents: none for a table answer (its rows are different records, not
        sources that disagree about one value), else the answer's own or the evaluation's."""
        if self._table_answers():
            return []
        evaluation = self.state.evaluation
        return response.contradictions or (evaluation.contradictions_found if evaluation else [])

    def _hybrid_table(self) -> AnswerTable | None:
        """The table the structured stage found on the hybrid route (the answer states it, then the passages)."""
        route = self.state.route
        run = self._structured
        if run is None or route is None or route.route != "hybrid":
            return None
        return run.table

    def _structured_table(self) -> bool:
        """Whether the structured stage answered with a table (structured or hybrid route)."""
        return self._structured is not None and self._structured.table is not None

    async def _attach_table(self, given: list[ContextChunk] | None = None) -> None:
        """The structured table joins the answer (rows cited, the first page shown) and its whole result set is
        persisted with the session for "show the rest" and export. On the hybrid route the table's answer comes
        first and the passages' synthesis after it, checked again against ``given`` and the rows' passages
        (``pipeline/_hybrid.py``). A store that fails is said, not raised."""
        run = self._structured
        response = self.state.response
        if run is None or run.outcome is None or run.table is None or response is None:
            return
        if self._hybrid_table() is not None:
            validate = self._stages.validate_citations
            response, self._table_rows = hybrid_answer(response, run.outcome, validate, given or [])
        else:
            response, self._table_rows = attach_table(response, run.outcome)
        self.state.response = response
        table = response.table
        if table is None:
            return
        query = self._query()
        save = self._stages.save_table
        problem: str | None = None
        if save is None:
            problem = "no conversation store is open"
        else:
            try:
                async with asyncio.timeout(max(0.5, min(5.0, self.remaining_s()))):
                    await save(
                        user_id=query.user_id,
                        session_id=query.session_id,
                        response_id=response.response_id,
                        question=self._researched_query().text,
                        table=table,
                        rows=self._table_rows,
                    )
            except TimeoutError:
                problem = "saving it took too long"
            except Exception as error:  # a store failure is data: the answer stands without paging
                logger.warning("the answer table of %s was not saved: %s", response.response_id, error)
                problem = f"the conversation store failed ({type(error).__name__})"
        if problem is not None and table.more_rows:
            self.state.caveats.append(
                f"The other {table.more_rows} rows of this table could not be kept for paging or export: {problem}."
            )

    def _table_assessed(self, response: FinalResponse) -> FinalResponse:
        """A table answer with its confidence from the structured evidence (``table_assessment``): exact value
        matches with provenance, not how similar the passages are to the question."""
        run = _require(self._structured, "a structured run")
        assessment = table_assessment(_require(run.outcome, "a structured outcome"), self._stages.confidence)
        return _with_assessment(response, assessment)

    def _assessed(self, response: FinalResponse) -> FinalResponse:
        """The written answer with its confidence computed over the evidence it cites (pipeline/_assessment.py):
        level, one-line reason, and the caveat its band calls for."""
        evaluation = _require(self.state.evaluation, "evaluation output")
        assessment = assess_answer(
            response,
            evaluation.filtered_context.chunks,
            self._supports,
            self._contradictions(response),
            self._stages.confidence,
        )
        return _with_assessment(response, assessment)

    @listen(or_(check_citations, explain_uncertainty, ask_clarification))
    async def store_memory(self) -> None:
        started = time.monotonic()
        self._emit("remember", "started")
        response = self._finalize()
        scheduled = self._stages.remember(
            MemoryInput(
                query=self._query(),
                final_response=response,
                session_id=self._query().session_id,
                user_id=self._query().user_id,
                context=self._memory_context(),
            )
        )
        unavailable = self._stages.memory_unavailable
        if scheduled:
            self.state.memory_status = "scheduled"
        elif unavailable is not None:
            self.state.memory_status = "unavailable"
            self.state.caveats.append(f"This exchange was not remembered: {unavailable}")
        self._emit("remember", "finished", started, scheduled=scheduled, memory_status=self.state.memory_status)

    @listen(or_(store_memory, "refused"))
    async def respond(self) -> FinalResponse:
        started = time.monotonic()
        self._emit("respond", "started")
        if self.state.refusal is not None:
            reason, reply = self.state.refusal
            refused = refusal_response(self._query(), reply, reason)
            self.state.response = refused.model_copy(update={"final_reason": f"refused: {reason}"[:500]})
        response = self._finalize()
        self._emit(
            "respond",
            "finished",
            started,
            answer_kind=response.answer_kind,
            confidence_level=response.confidence_level,
            partial=response.partial,
        )
        return response

    def _memory_context(self) -> dict[str, Any] | None:
        """What memory stores with the exchange besides the question as asked: the explicit choices (for learning
        preferences) and, for a follow-up, the question as it was researched."""
        context: dict[str, Any] = {}
        if explicit := self._explicit_choices():
            context["request"] = explicit
        if self.research.rewrite is not None:
            context["standalone_question"] = self.research.rewrite.standalone
        return context or None

    def _finalize(self) -> FinalResponse:
        """Attach what the whole run knows (sources, caveats, timing, the follow-up rewrite, token usage) to the
        answer, once. Its ``query`` is the question as asked, also when a rewrite was researched."""
        response = _require(self.research.response, "an answer")
        retrieval, evaluation = self.state.retrieval, self.state.evaluation
        reports = retrieval.aggregated_context.source_reports if retrieval else []
        caveats = list(dict.fromkeys([*response.caveats, *source_caveats(reports), *self.state.caveats]))
        coverage = response.coverage
        if coverage is None and evaluation is not None:  # no synthesis ran: nothing cited, the evidence as found
            coverage = coverage_metrics(self._researched_query().text, [], evaluation.filtered_context.chunks)
        response = response.model_copy(
            update={
                "source_reports": reports,
                "caveats": caveats,
                "partial": response.partial or self.state.partial,
                "reformulations": self.state.searched[1:],
                "contradictions": self._contradictions(response),
                "execution_time_ms": (time.monotonic() - self.state.started_at) * 1000,
                "coverage": coverage,
                "quality": evaluation.quality_stats if evaluation else None,
                "removals": evaluation.removal_rationale if evaluation else [],
                "retrieval_status": retrieval.retrieval_status if retrieval else None,
                "memory_status": self.state.memory_status,
                "query": self._query(),
                "rewrite": self.research.rewrite,
                "route": response.route or self.state.route,
                "token_usage": (usage := self._meter.usage()),
                "cost": self._stages.pricing.cost(usage),
            }
        )
        self.state.response = response
        return response


async def run_question(
    stages: ResearchStages,
    request: ResearchRequest,
    *,
    preferences: UserPreferences | None = None,
    on_event: Callable[[ProgressEvent], None] | None = None,
    allow_clarification: bool = True,
    started_at: float | None = None,
) -> FinalResponse:
    """Run one question through a fresh ResearchFlow and return the answer. ``preferences`` are the user's
    learned ones with the request's options already applied (default: the request's options alone).
    ``allow_clarification=False`` always answers (a reply to clarifying questions must not get more of them).
    ``started_at`` (``time.monotonic()``) is when the caller started on the question: the run's deadline counts
    from then (default: now), so that a door's own work before the Flow is inside the budget too."""
    flow_stages = stages.with_event_callback(on_event) if on_event else stages
    state = ResearchState(
        request=request,
        query=Query(text=request.question, user_id=request.user_id, session_id=request.session_id),
        preferences=preferences or request.response.applied_to(UserPreferences()),
        deadline_s=request.deadline_s or stages.deadline_s,
        allow_clarification=allow_clarification,
        **({"started_at": started_at} if started_at is not None else {}),
    )
    # Sources and answer text are reported from inside the stages (pipeline/progress.py): the reporter travels in
    # a context variable that the Flow's tasks inherit.
    flow = ResearchFlow(flow_stages, state)
    reporter = ProgressReporter(state.id, state.started_at, flow_stages.on_event) if on_event else None
    with reporting(reporter):
        result = await flow.kickoff()
    if flow.retrieved_at is not None:  # what the next runs' retrieval leaves for the stages after it
        stages.after_retrieval.record(time.monotonic() - flow.retrieved_at)
    if not isinstance(result, FinalResponse):  # a routing bug, not a user error
        raise RuntimeError(f"ResearchFlow ended without an answer (got {type(result).__name__})")
    return result


def _without_filters(options: dict[str, Any]) -> dict[str, Any]:
    """A source's options with its filters relaxed — except the collections to search: where to look is the user's
    choice (the page's Collections toggles), not a filter a widened search may drop."""
    kept = {name: value for name, value in options.items() if name != "filters"}
    filters = options.get("filters")
    collections = filters.get("collections") if isinstance(filters, dict) else getattr(filters, "collections", None)
    if collections is not None:
        kept["filters"] = {"collections": collections}
    return kept


def _require(value: _T | None, what: str) -> _T:
    """State filled by an earlier stage; missing means the Flow's routing is broken, which is a bug."""
    if value is None:
        raise RuntimeError(f"ResearchFlow reached a stage without {what}; the routing is broken")
    return value


def _with_assessment(response: FinalResponse, assessment: AnswerAssessment) -> FinalResponse:
    """``response`` with an assessment's confidence, level, reason and caveat (the synthesizer's own "Confidence
    is ..." band note is replaced by the one for this band)."""
    caveats = [caveat for caveat in response.caveats if not caveat.startswith("Confidence is ")]
    if assessment.caveat is not None:
        caveats.append(assessment.caveat)
    return response.model_copy(
        update={
            "confidence": assessment.confidence,
            "confidence_level": assessment.level,
            "final_reason": assessment.reason,
            "caveats": caveats,
        }
    )


__all__ = ["ResearchFlow", "ResearchState", "run_question"]
