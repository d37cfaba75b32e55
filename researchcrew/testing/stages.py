"""Scripted stand-ins for the pipeline's stages, to test code around the research Flow without models or services.

    retriever = ScriptedRetriever([relevant_chunk("a", 0.8), relevant_chunk("b", 0.7)])
    stages = scripted_stages(retriever)                    # pass-through evaluator, a synthesizer citing [1]
    answer = await run_question(stages, ResearchRequest(question="What is attention?"))
    assert retriever.requests[0].query_text == "What is attention?"

Each stage records what it was asked; ``delay_s`` makes one slow, to test deadlines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from researchcrew.contracts import (
    AggregatedContext,
    AnswerSection,
    Claim,
    ContextChunk,
    CoverageMetrics,
    EvaluatorInput,
    EvaluatorOutput,
    FilteredContext,
    FinalResponse,
    QualityStatistics,
    RetrieverInput,
    RetrieverOutput,
    ScoredChunk,
    SourceReport,
    SynthesizerInput,
    SynthesizerOutput,
)
from researchcrew.pipeline.stages import ResearchStages


def relevant_chunk(chunk_id: str, relevance: float, content: str = "Evidence text about transformers.") -> ContextChunk:
    """A knowledge-base chunk with the given relevance (what the Flow's confidence bands read)."""
    return ContextChunk(
        chunk_id=chunk_id,
        source_type="rag",
        content=content,
        semantic_relevance=relevance,
        title=f"Doc {chunk_id}",
        tool_name="rag_search",
    )


class ScriptedRetriever:
    """Answers each call with the next list of chunks (the last list repeats); records the requests."""

    def __init__(self, *answers: list[ContextChunk]) -> None:
        self.answers = list(answers)
        self.requests: list[RetrieverInput] = []

    async def run(self, request: RetrieverInput) -> RetrieverOutput:
        self.requests.append(request)
        chunks = self.answers[min(len(self.requests), len(self.answers)) - 1]
        report = SourceReport(
            source_type="rag", tool_name="rag_search", status="success" if chunks else "empty", chunk_count=len(chunks)
        )
        return RetrieverOutput(
            aggregated_context=AggregatedContext(query_text=request.query_text, chunks=chunks, source_reports=[report]),
            retrieval_status="success",
            sources_used=["rag"],
            sources_failed=[],
            execution_time_ms=1.0,
        )


class PassThroughEvaluator:
    """Keeps every chunk, scored by its relevance; optionally slow."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def run(self, request: EvaluatorInput) -> EvaluatorOutput:
        await asyncio.sleep(self.delay_s)
        chunks = request.aggregated_context.chunks
        scored = [
            ScoredChunk(
                chunk=c,
                quality_score=c.semantic_relevance,
                source_reputation=0.8,
                recency=0.5,
                relevance=c.semantic_relevance,
            )
            for c in chunks
        ]
        return EvaluatorOutput(
            filtered_context=FilteredContext(query_text=request.aggregated_context.query_text, chunks=scored),
            quality_stats=QualityStatistics(
                original_chunk_count=len(chunks),
                filtered_chunk_count=len(chunks),
                removal_rate=0.0,
                average_quality_score=0.5,
            ),
            execution_time_ms=0.1,
        )


class CitingSynthesizer:
    """Writes one claim citing [1]; optionally slow."""

    def __init__(self, delay_s: float = 0.0, kind: str = "generated") -> None:
        self.delay_s = delay_s
        self.kind = kind
        self.calls = 0

    async def run(self, request: SynthesizerInput) -> SynthesizerOutput:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        first = request.filtered_context.chunks[0].chunk
        response = FinalResponse(
            query=request.original_query,
            answer=f"{first.content} [1]",
            answer_kind=self.kind,
            sections=[AnswerSection(claims=[Claim(text=first.content, citations=[1])])],
            confidence=0.7,
            confidence_level="medium",
        )
        return SynthesizerOutput(
            final_response=response,
            generation_method="standard",
            coverage_metrics=CoverageMetrics(query_addressed=1, source_diversity=1, information_completeness=1),
            execution_time_ms=1.0,
        )


def keep_citations(response: FinalResponse, given: Sequence[ContextChunk]) -> FinalResponse:
    """A citation check that changes nothing (the real one is ``synthesize.citations.validate_citations``)."""
    return response


def recording_memory(calls: list[object]) -> Callable[[object], bool]:
    """A memory scheduler that appends each ``MemoryInput`` to ``calls`` instead of storing it."""

    def remember(memory_input: object) -> bool:
        calls.append(memory_input)
        return True

    return remember


def scripted_stages(retriever: ScriptedRetriever, **overrides: Any) -> ResearchStages:
    """``ResearchStages`` around ``retriever``: a pass-through evaluator, a synthesizer that cites [1] (extractive
    when the deadline forces the fallback), citations kept as written. Any ``ResearchStages`` field can be given."""
    options: dict[str, Any] = {
        "retriever": retriever,
        "evaluator": PassThroughEvaluator(),
        "fallback_evaluator": PassThroughEvaluator(),
        "synthesizer": CitingSynthesizer(),
        "fallback_synthesizer": CitingSynthesizer(kind="extractive"),
        "validate_citations": keep_citations,
    }
    options.update(overrides)
    return ResearchStages(**options)
