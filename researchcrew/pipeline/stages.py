"""The work behind each ResearchFlow stage, bundled so the Flow can be run with real agents or test doubles.

``ResearchStages`` holds the four agents and the policies the Flow applies between them: how a follow-up question
is made to stand alone (and how that falls back), how much of the run's deadline retrieval may use, how synthesis
falls back when time runs out, how a query is reformulated, when to ask clarifying questions instead of answering,
and how memory work is scheduled so that it never delays the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from researchcrew.contracts import (
    ContextChunk,
    EvaluatorInput,
    EvaluatorOutput,
    FinalResponse,
    MemoryInput,
    ProgressEvent,
    RetrieverInput,
    RetrieverOutput,
    StructuredOutcome,
    StructuredRequest,
    SynthesizerInput,
    SynthesizerOutput,
)
from researchcrew.contracts.tables import AnswerTable, TableRow
from researchcrew.errors import MemoryStoreError
from researchcrew.llm.pricing import Pricing
from researchcrew.memory.records import SessionSummary
from researchcrew.pipeline._support import Support, SupportScorer, relevance_support
from researchcrew.pipeline.clarify import Clarifier, never_clarify
from researchcrew.pipeline.follow_up._base import (
    FollowUpRewriter,
    Rewrite,
    SessionContextLoader,
    no_session_context,
    unchanged,
)
from researchcrew.pipeline.follow_up._rule import rule_rewrite
from researchcrew.pipeline.reformulate import Reformulator, deterministic_reformulation
from researchcrew.settings import ConfidenceSettings

if TYPE_CHECKING:
    from crewai import BaseLLM

logger = logging.getLogger(__name__)


class RetrieverLike(Protocol):
    async def run(self, request: RetrieverInput, /) -> RetrieverOutput: ...


class EvaluatorLike(Protocol):
    async def run(self, request: EvaluatorInput, /) -> EvaluatorOutput: ...


class SynthesizerLike(Protocol):
    async def run(self, request: SynthesizerInput, /) -> SynthesizerOutput: ...


class CitationValidator(Protocol):
    def __call__(self, response: FinalResponse, given_chunks: Sequence[ContextChunk], /) -> FinalResponse: ...


class TableSaver(Protocol):
    """Persists a structured answer's whole result set with its session (``MemoryStore.save_answer_table``)."""

    async def __call__(
        self,
        *,
        user_id: str,
        session_id: str,
        response_id: str,
        question: str,
        table: AnswerTable,
        rows: Sequence[TableRow],
    ) -> None: ...


class MemoryScheduler(Protocol):
    """Starts memory work for a finished answer and returns at once (True when work was scheduled)."""

    def __call__(self, memory_input: MemoryInput, /) -> bool: ...


def _ignore_event(_: ProgressEvent) -> None:
    return None


def _no_memory(_: MemoryInput) -> bool:
    return False


async def _rule_follow_up(question: str, summary: SessionSummary) -> Rewrite:
    return rule_rewrite(question, summary)


class StageTimes:
    """How long the stages after retrieval took in recent runs (evaluate, measure support, synthesize, validate,
    respond, and the Flow's steps between them), so that retrieval leaves them that much of the run's budget.

    A fixed reserve does not hold under load: at a load average of 15 on 2 cores those stages took about 1 s where
    0.3 s was reserved, and a 3 s budget ran 3.5–3.9 s. ``typical_s`` is a high quantile of the last ``window``
    runs, so one slow outlier (a first question loading a model) does not take retrieval's time for long.
    Shared by every run of one ``ResearchStages`` (thread-safe)."""

    def __init__(self, window: int = 20, quantile: float = 0.9) -> None:
        self.quantile = quantile
        self._seconds: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()

    def record(self, seconds: float) -> None:
        with self._lock:
            self._seconds.append(max(0.0, seconds))

    def typical_s(self) -> float | None:
        """The ``quantile`` of the recent times (nearest rank), or None before the first run."""
        with self._lock:
            ordered = sorted(self._seconds)
        if not ordered:
            return None
        return ordered[min(len(ordered) - 1, math.ceil(self.quantile * len(ordered)) - 1)]

    def __len__(self) -> int:
        return len(self._seconds)


@dataclass
class ResearchStages:
    """The agents and policies one ResearchFlow run uses."""

    retriever: RetrieverLike
    evaluator: EvaluatorLike
    fallback_evaluator: EvaluatorLike  # deterministic (no LLM): used when the deadline cuts evaluation short
    synthesizer: SynthesizerLike
    fallback_synthesizer: SynthesizerLike  # fast and LLM-free: used when the deadline cuts synthesis short
    validate_citations: CitationValidator
    remember: MemoryScheduler = _no_memory
    reformulate: Reformulator = deterministic_reformulation
    session_context: SessionContextLoader = no_session_context  # the session's rolling summary, for follow-ups
    follow_up: FollowUpRewriter = _rule_follow_up  # the LLM rewriter when one is configured; the rule is its fallback
    follow_up_budget_s: float = 8.0  # the most the follow-up stage may take (waiting for memory, reading, rewriting)
    clarify: Clarifier = never_clarify  # asks instead of answering when warranted; the default always answers
    on_event: Callable[[ProgressEvent], None] = _ignore_event
    deadline_s: float = 30.0
    quality_threshold: float = 0.6
    synthesis_reserve_s: float = 0.5  # time kept back from retrieval for writing the answer, at least
    # What the stages after retrieval took in recent runs: retrieval leaves them that much when it is more.
    after_retrieval: StageTimes = field(default_factory=StageTimes)
    llm: BaseLLM | None = field(default=None, repr=False)
    # Why exchanges cannot be remembered now (the memory store could not be opened); None when memory works or is
    # off by design. The Flow then says so in the answer (memory_status "unavailable" and a caveat).
    memory_unavailable: str | None = None
    # How well each piece of evidence supports the question (see pipeline/_support.py), and the bands it feeds.
    support: SupportScorer = relevance_support
    confidence: ConfidenceSettings = field(default_factory=ConfidenceSettings)
    # What the LLM stages' tokens cost (FinalResponse.cost); without a model every token is "price unknown".
    pricing: Pricing = field(default_factory=lambda: Pricing(None))
    # Issue 22: chooses the route and answers structured questions from annotations (None: every question is
    # answered by normal retrieval); ``save_table`` persists a structured answer's whole result set with its session
    # ("show the rest", CSV export); None: nothing is persisted, and the answer says so when it has more rows.
    structured: StructuredStage | None = None
    save_table: TableSaver | None = None
    structured_deadline_s: float = 10.0  # the most the structured stage may take of the run's deadline
    table_page_size: int = 10  # rows an answer shows; the rest are persisted

    def with_event_callback(self, on_event: Callable[[ProgressEvent], None]) -> ResearchStages:
        return dataclasses.replace(self, on_event=on_event)

    def after_retrieval_s(self) -> float:
        """The time the stages after retrieval need: ``synthesis_reserve_s``, or what they took in recent runs
        (``after_retrieval``) when that is more."""
        return max(self.synthesis_reserve_s, self.after_retrieval.typical_s() or 0.0)

    def retrieval_budget_s(self, remaining_s: float) -> float:
        """The most any source may take in this retrieval (its ``time_limit_s``): what the run has left, less the
        time the stages after it need (``after_retrieval_s``), but never less than half of what is left. Each
        source's own timeout comes from the settings (the Retriever applies it)."""
        reserve = min(self.after_retrieval_s(), max(self.synthesis_reserve_s, remaining_s / 2))
        return max(0.05, remaining_s - reserve)

    async def rewrite_follow_up(self, question: str, user_id: str, session_id: str, remaining_s: float) -> Rewrite:
        """The question to research: a follow-up made stand-alone from the session's summary, else the question
        unchanged. Never raises: a summary that cannot be read means no rewrite; a rewriter that fails or runs out
        of time is replaced by the deterministic rule."""
        budget = min(self.follow_up_budget_s, remaining_s - self.synthesis_reserve_s)
        if budget <= 0:
            return unchanged(question, "no time left for the follow-up rewrite")
        started = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(budget):
                summary = await self.session_context(user_id, session_id)
        except TimeoutError:
            logger.warning(
                "the session summary was not read within %.2f s; the question is researched as asked", budget
            )
            return unchanged(question, "the session's summary could not be read in time")
        except MemoryStoreError as error:
            logger.warning("the session summary could not be read (%s); the question is researched as asked", error)
            return unchanged(question, "the session's summary could not be read")
        except Exception:  # the outermost guard around a pluggable loader: a bug must not sink the question
            logger.exception("the session summary loader raised; the question is researched as asked")
            return unchanged(question, "the session's summary could not be read")
        if summary is None or summary.last_turn is None:
            return unchanged(question, "no earlier exchange in this session")
        left = budget - (asyncio.get_running_loop().time() - started)
        try:
            async with asyncio.timeout(max(0.05, left)):
                return await self.follow_up(question, summary)
        except TimeoutError:
            logger.warning("the follow-up rewrite hit its time budget; using the rule")
        except Exception:  # the outermost guard around a pluggable rewriter: a bug must not sink the question
            logger.exception("the follow-up rewriter raised; using the rule")
        return rule_rewrite(question, summary)

    async def measure_support(
        self, question: str, chunks: Sequence[ContextChunk], remaining_s: float
    ) -> dict[str, Support]:
        """How well each chunk supports the question, within the run's time: the scorer (an embedding model under
        load can take seconds) gets what is left less half the synthesis reserve; past that, each source's own
        relevance stands in, so the run's budget holds."""
        budget = remaining_s - self.synthesis_reserve_s / 2
        if budget > 0:
            try:
                async with asyncio.timeout(budget):
                    return await self.support(question, chunks)
            except TimeoutError:
                logger.warning("measuring support hit the run deadline after %.2f s; using source relevance", budget)
        return await relevance_support(question, chunks, self.confidence)

    async def evaluate(self, request: EvaluatorInput, remaining_s: float) -> tuple[EvaluatorOutput, bool]:
        """The evaluation, and whether the deadline forced the deterministic fallback. LLM adjudication of
        contradictions may take seconds; it gets what is left of the run minus the time synthesis needs."""
        budget = remaining_s - self.synthesis_reserve_s
        if budget > 0:
            try:
                async with asyncio.timeout(budget):
                    return await self.evaluator.run(request), False
            except TimeoutError:
                logger.warning("evaluation hit the run deadline after %.2f s; evaluating without the LLM", budget)
        return await self.fallback_evaluator.run(request), True

    async def synthesize(self, request: SynthesizerInput, remaining_s: float) -> tuple[FinalResponse, bool]:
        """The answer, and whether the deadline forced the fast fallback. The primary synthesizer gets what is
        left of the run minus a small margin for the fallback."""
        budget = remaining_s - min(0.25, self.synthesis_reserve_s / 2)
        if budget > 0:
            try:
                async with asyncio.timeout(budget):
                    return _with_coverage(await self.synthesizer.run(request)), False
            except TimeoutError:
                logger.warning("synthesis hit the run deadline after %.2f s; answering extractively", budget)
        return _with_coverage(await self.fallback_synthesizer.run(request)), True


def _with_coverage(output: SynthesizerOutput) -> FinalResponse:
    """The answer, carrying the coverage metrics the Synthesizer computed (they reach every door through it)."""
    return output.final_response.model_copy(update={"coverage": output.coverage_metrics})


class StructuredStage(Protocol):
    """Issue 22 (seed 004): chooses a route for a question and, on the structured or hybrid route, answers it from
    annotations (facts and table rows extracted at ingest). Never raises for a source failure: it says so in the
    outcome's route reason and returns no table."""

    async def run(self, request: StructuredRequest, /) -> StructuredOutcome: ...
