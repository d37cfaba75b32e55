"""ResearchFlow: one question through guard → retrieve → evaluate → confidence → (reformulate → retrieve, at most
twice) → synthesize → validate citations → remember → respond, as a crewAI Flow with typed state.

The Flow only routes. Each stage's work lives in its agent (``ResearchStages``), which keeps the Flow testable with
fakes and keeps deterministic work out of any LLM. One deadline covers the whole run: every stage gets what is left
of it, and when it runs out the Flow answers with the evidence gathered so far and says so (``partial``).

crewAI's own memory stays off (``_skip_auto_memory``: it would build a LanceDB store on first use) and Flow events
are suppressed, so nothing is printed and no tracing is set up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from crewai.flow.flow import Flow, FlowState, listen, or_, router, start
from pydantic import ConfigDict, Field

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
    SynthesizerInput,
    UserPreferences,
)
from researchcrew.contracts.progress import Stage
from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.synthesizer import ConfidenceLevel
from researchcrew.pipeline.evidence_gate import evidence_confidence
from researchcrew.pipeline.guard import check_question
from researchcrew.pipeline.progress import ProgressReporter, reporting
from researchcrew.pipeline.responses import refusal_response, source_caveats, uncertainty_response

if TYPE_CHECKING:
    from researchcrew.pipeline.stages import ResearchStages

logger = logging.getLogger(__name__)

MAX_REFORMULATIONS = 2
_T = TypeVar("_T")


class ResearchState(FlowState):
    """Everything one run knows. Inputs first; the rest is filled in stage by stage. ``id`` (the run id) comes
    from crewAI's ``FlowState``; subclassing it also spares crewAI from building a new state class per run (a
    plain BaseModel state is wrapped in a fresh ``FlowState`` subclass on every Flow construction: ~8 ms)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    request: ResearchRequest | None = Field(default=None, description="What the caller asked for, unchanged.")
    query: Query | None = Field(default=None, description="The question as received (id, text, user, session).")
    preferences: UserPreferences = Field(
        default_factory=UserPreferences, description="The user's learned preferences with this request's options."
    )
    deadline_s: float = 30.0
    started_at: float = Field(default_factory=time.monotonic, description="time.monotonic() at the start.")

    searched: list[str] = Field(default_factory=list, description="Query texts sent to the sources, in order.")
    evidence: dict[str, ContextChunk] = Field(default_factory=dict, description="All chunks so far, by id.")
    retrieval: RetrieverOutput | None = None
    evaluation: EvaluatorOutput | None = None
    confidence_level: ConfidenceLevel = "insufficient"
    confidence: float = 0.0
    refusal: tuple[str, str] | None = Field(default=None, description="(reason, reply) when the guard refused.")
    caveats: list[str] = Field(default_factory=list)
    partial: bool = False
    response: FinalResponse | None = None


class ResearchFlow(Flow[ResearchState]):
    """The research pipeline. Build one per question with ``ResearchFlow.for_question(...)``."""

    _skip_auto_memory: bool = True  # crewAI's own memory is not used (see module docstring)

    def __init__(self, stages: ResearchStages, **kwargs: Any) -> None:
        kwargs.setdefault("suppress_flow_events", True)
        kwargs.setdefault("tracing", False)
        super().__init__(**kwargs)
        self._stages = stages

    # Helpers -----------------------------------------------------------------------------------------------
    @property
    def research(self) -> ResearchState:
        """The typed state (crewAI's ``state`` is untyped for the type checker)."""
        return cast(ResearchState, self.state)

    def remaining_s(self) -> float:
        return self.research.deadline_s - (time.monotonic() - self.research.started_at)

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
        return _require(self.research.query, "a query")

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

    @listen(or_("proceed", "retry"))
    async def retrieve(self) -> None:
        started = time.monotonic()
        query = self._query()
        request = _require(self.research.request, "a request")
        text = self.state.searched[-1] if self.state.searched else query.text
        if not self.state.searched:
            self.state.searched.append(text)
        self._emit("retrieve", "started", query_text=text)
        budget = self._stages.retrieval_budget_s(self.remaining_s())
        output = await self._stages.retriever.run(
            RetrieverInput(
                query_text=text,
                user_id=query.user_id,
                session_id=query.session_id,
                preferred_sources=request.preferred_sources or self.state.preferences.preferred_sources or None,
                exclude_sources=request.exclude_sources or self.state.preferences.excluded_sources or None,
                timeout_per_source=budget,
                num_results=self._stages.num_results,
                tool_options=request.tool_options,
            )
        )
        self.state.retrieval = output
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
            query_text=self._query().text,
            chunks=list(self.state.evidence.values()),
            source_reports=retrieval.aggregated_context.source_reports,
        )
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

    @router(evaluate)
    async def assess_confidence(self) -> str:
        started = time.monotonic()
        self._emit("confidence", "started")
        evaluation = _require(self.state.evaluation, "evaluation output")
        kept = [scored.chunk for scored in evaluation.filtered_context.chunks]
        level, mean = evidence_confidence(kept)
        self.state.confidence_level, self.state.confidence = level, mean
        attempts = len(self.state.searched) - 1
        out_of_time = self.remaining_s() <= self._stages.synthesis_reserve_s
        if level in ("high", "medium"):
            decision = "sufficient"
        elif level == "low" and attempts < MAX_REFORMULATIONS and not out_of_time:
            decision = "low_confidence"
        elif level == "low" and out_of_time:
            # No time left to reformulate: answer from what we have, and say how weak it is.
            self.state.partial = True
            self.state.caveats.append("The time limit was reached before a better search could be tried.")
            decision = "sufficient"
        else:
            decision = "uncertain"
        self._emit(
            "confidence",
            "finished",
            started,
            level=level,
            mean_relevance=round(mean, 4),
            attempts=attempts,
            decision=decision,
        )
        return decision

    @router("low_confidence")
    async def reformulate(self) -> str:
        started = time.monotonic()
        self._emit("reformulate", "started", attempt=len(self.state.searched))
        evidence = sorted(self.state.evidence.values(), key=lambda c: c.semantic_relevance, reverse=True)[:5]
        new_text = (await self._stages.reformulate(self._query().text, list(self.state.searched), evidence)).strip()
        if not new_text or new_text in self.state.searched:
            # Searching the same words again cannot find anything new: explain what we have instead.
            self._emit("reformulate", "finished", started, query_text=None, decision="uncertain")
            return "uncertain"
        self.state.searched.append(new_text)
        self._emit("reformulate", "finished", started, query_text=new_text, decision="retry")
        return "retry"

    @listen("sufficient")
    async def synthesize(self) -> None:
        started = time.monotonic()
        evaluation = _require(self.state.evaluation, "evaluation output")
        self._emit("synthesize", "started", chunks=len(evaluation.filtered_context.chunks))
        synthesizer_input = SynthesizerInput(
            filtered_context=evaluation.filtered_context,
            original_query=self._query(),
            user_preferences=self.state.preferences,
            contradictions=evaluation.contradictions_found,
            max_response_length=self.state.preferences.max_response_length,
            min_response_length=min(
                self.state.preferences.min_response_length, self.state.preferences.max_response_length
            ),
            include_sections=self.state.preferences.include_sections,
            response_format=self.state.preferences.response_format,
        )
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
        self.state.response = self._stages.validate_citations(_require(self.state.response, "a draft"), given)
        stats = self.state.response.citation_stats
        self._emit(
            "validate",
            "finished",
            started,
            valid=stats.valid,
            removed=stats.removed,
            claims_removed=stats.claims_removed,
        )

    @listen("uncertain")
    async def explain_uncertainty(self) -> None:
        retrieval = _require(self.state.retrieval, "retrieval output")
        self.state.response = uncertainty_response(
            self._query(),
            searched=self.state.searched,
            best_matches=list(self.state.evidence.values()),
            source_reports=retrieval.aggregated_context.source_reports,
            confidence=self.state.confidence,
        )

    @listen(or_(check_citations, explain_uncertainty))
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
                context={"request": explicit} if (explicit := self._explicit_choices()) else None,
            )
        )
        self._emit("remember", "finished", started, scheduled=scheduled)

    @listen(or_(store_memory, "refused"))
    async def respond(self) -> FinalResponse:
        started = time.monotonic()
        self._emit("respond", "started")
        if self.state.refusal is not None:
            reason, reply = self.state.refusal
            self.state.response = refusal_response(self._query(), reply, reason)
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

    def _finalize(self) -> FinalResponse:
        """Attach what the whole run knows (sources, caveats, timing) to the answer, once."""
        response = _require(self.research.response, "an answer")
        reports = self.state.retrieval.aggregated_context.source_reports if self.state.retrieval else []
        caveats = list(dict.fromkeys([*response.caveats, *source_caveats(reports), *self.state.caveats]))
        response = response.model_copy(
            update={
                "source_reports": reports,
                "caveats": caveats,
                "partial": response.partial or self.state.partial,
                "reformulations": self.state.searched[1:],
                "contradictions": response.contradictions
                or (self.state.evaluation.contradictions_found if self.state.evaluation else []),
                "execution_time_ms": (time.monotonic() - self.state.started_at) * 1000,
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
) -> FinalResponse:
    """Run one question through a fresh ResearchFlow and return the answer. ``preferences`` are the user's
    learned ones with the request's options already applied (default: the request's options alone)."""
    flow_stages = stages.with_event_callback(on_event) if on_event else stages
    flow = ResearchFlow(flow_stages)
    state = ResearchState(
        request=request,
        query=Query(text=request.question, user_id=request.user_id, session_id=request.session_id),
        preferences=preferences or request.response.applied_to(UserPreferences()),
        deadline_s=request.deadline_s or stages.deadline_s,
    )
    # Sources and answer text are reported from inside the stages (pipeline/progress.py): the reporter travels in
    # a context variable that the Flow's tasks inherit.
    reporter = ProgressReporter(flow.state.id, state.started_at, flow_stages.on_event) if on_event else None
    with reporting(reporter):
        result = await flow.kickoff_async(inputs=state.model_dump(exclude={"id"}))
    if not isinstance(result, FinalResponse):  # a routing bug, not a user error
        raise RuntimeError(f"ResearchFlow ended without an answer (got {type(result).__name__})")
    return result


def _require(value: _T | None, what: str) -> _T:
    """State filled by an earlier stage; missing means the Flow's routing is broken, which is a bug."""
    if value is None:
        raise RuntimeError(f"ResearchFlow reached a stage without {what}; the routing is broken")
    return value


__all__ = ["ResearchFlow", "ResearchState", "run_question"]
