"""The work behind each ResearchFlow stage, bundled so the Flow can be run with real agents or test doubles.

``ResearchStages`` holds the four agents and the policies the Flow applies between them: how much of the run's
deadline retrieval may use, how synthesis falls back when time runs out, how a query is reformulated, when to ask
clarifying questions instead of answering, and how memory work is scheduled so that it never delays the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
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
    SynthesizerInput,
    SynthesizerOutput,
)
from researchcrew.pipeline.clarify import Clarifier, never_clarify
from researchcrew.pipeline.reformulate import Reformulator, deterministic_reformulation

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


class MemoryScheduler(Protocol):
    """Starts memory work for a finished answer and returns at once (True when work was scheduled)."""

    def __call__(self, memory_input: MemoryInput, /) -> bool: ...


def _ignore_event(_: ProgressEvent) -> None:
    return None


def _no_memory(_: MemoryInput) -> bool:
    return False


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
    clarify: Clarifier = never_clarify  # asks instead of answering when warranted; the default always answers
    on_event: Callable[[ProgressEvent], None] = _ignore_event
    deadline_s: float = 30.0
    timeout_per_source_s: float = 7.0
    num_results: int = 5
    quality_threshold: float = 0.6
    synthesis_reserve_s: float = 0.5  # time kept back from retrieval for writing the answer
    llm: BaseLLM | None = field(default=None, repr=False)

    def with_event_callback(self, on_event: Callable[[ProgressEvent], None]) -> ResearchStages:
        return dataclasses.replace(self, on_event=on_event)

    def retrieval_budget_s(self, remaining_s: float) -> float:
        """Per-source timeout for this retrieval: the configured one, cut so that synthesis still fits."""
        return max(0.05, min(self.timeout_per_source_s, remaining_s - self.synthesis_reserve_s))

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
                    return (await self.synthesizer.run(request)).final_response, False
            except TimeoutError:
                logger.warning("synthesis hit the run deadline after %.2f s; answering extractively", budget)
        output = await self.fallback_synthesizer.run(request)
        return output.final_response, True
