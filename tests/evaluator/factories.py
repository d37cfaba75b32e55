"""Builders for evaluator tests: chunks and requests with a fixed retrieval time, so recency is reproducible."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from researchcrew.contracts import AggregatedContext, ContextChunk, EvaluatorInput

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HALF_LIFE = timedelta(days=1826.25)  # EvaluationSettings' default recency half-life


def chunk(
    chunk_id: str,
    content: str,
    *,
    source_type: str = "web",
    relevance: float = 0.9,
    date: datetime | None = NOW,
    **fields: Any,
) -> ContextChunk:
    return ContextChunk(
        chunk_id=chunk_id,
        source_type=source_type,
        content=content,
        semantic_relevance=relevance,
        source_date=date,
        **fields,
    )


def request(chunks: list[ContextChunk], **fields: Any) -> EvaluatorInput:
    context = AggregatedContext(query_text="what does the evidence say?", chunks=chunks, retrieved_at=NOW)
    return EvaluatorInput(aggregated_context=context, **fields)
