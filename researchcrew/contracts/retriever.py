"""The Retriever's input and output (seed 003, "Retriever Agent")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from researchcrew.contracts._base import Contract, Identifier, NonNegativeMs, SourceType, SourceTypeKey, UnitFloat
from researchcrew.contracts.chunks import AggregatedContext
from researchcrew.contracts.query import MAX_QUERY_CHARS

RetrievalStatus = Literal["success", "partial", "failed"]


class RetrieverInput(Contract):
    """A request for evidence from the selected sources."""

    query_text: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The research question.")
    user_id: Identifier = Field(description="Who asks; memory recall is scoped to this user.")
    session_id: Identifier = Field(description="The conversation; memory recall may be scoped to it.")
    preferred_sources: list[SourceType] | None = Field(
        default=None, description="Source types whose results come first, in this order."
    )
    exclude_sources: list[SourceType] | None = Field(
        default=None, description="Source types that are not called at all."
    )
    quality_threshold: UnitFloat = Field(default=0.6, description="Quality threshold handed on to the Evaluator.")
    timeout_per_source: float | None = Field(
        default=None,
        gt=0,
        le=600,
        description="Seconds each source may take. None: each source's configured timeout (settings).",
    )
    time_limit_s: float | None = Field(
        default=None,
        gt=0,
        le=600,
        description="The most any source may take in this call (what the run has left); it caps each source's "
        "timeout. None: no cap.",
    )
    num_results: int | None = Field(
        default=None, ge=1, le=100, description="Results asked of each source. None: `retrieval.num_results`."
    )
    tool_options: dict[SourceTypeKey, dict[str, Any]] = Field(
        default_factory=dict,
        description='Extra options per source type, e.g. {"web": {"domains": ["arxiv.org"]}, '
        '"arxiv": {"sort_by": "date"}, "rag": {"filters": {...}}}.',
    )
    relaxed: bool = Field(
        default=False,
        description="A widened search after a miss (seed 004, relax before asking the user): twice the results per "
        "source, and half the relevance floor for sources that take one (the knowledge base's `min_relevance`) "
        "unless tool_options set it.",
    )

    @field_validator("query_text")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        stripped = value.strip()
        if not stripped:
            raise ValueError("query_text must not be blank")
        return stripped

    @model_validator(mode="after")
    def _preferred_not_excluded(self) -> RetrieverInput:
        both = set(self.preferred_sources or ()) & set(self.exclude_sources or ())
        if both:
            raise ValueError(f"sources both preferred and excluded: {sorted(both)}")
        return self


class RetrieverOutput(Contract):
    """Evidence from all sources that answered, and which did not."""

    aggregated_context: AggregatedContext = Field(description="The evidence and per-source detail.")
    retrieval_status: RetrievalStatus = Field(
        description="success: every selected source answered; partial: some did; failed: none did."
    )
    sources_used: list[SourceType] = Field(description="Source types that answered (with or without results).")
    sources_failed: list[SourceType] = Field(description="Source types that failed; see the source reports for why.")
    error_message: str | None = Field(default=None, description="Summary of failures, or None.")
    execution_time_ms: NonNegativeMs = Field(description="Wall time of the whole retrieval in milliseconds.")
