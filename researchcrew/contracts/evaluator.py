"""The Evaluator's input and output (seed 003, "Evaluator Agent")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from researchcrew.contracts._base import Contract, NonNegativeMs, UnitFloat
from researchcrew.contracts.chunks import AggregatedContext, ContextChunk
from researchcrew.contracts.query import UserPreferences


class EvaluatorInput(Contract):
    """Evidence to score, deduplicate and cross-check, with the scoring configuration."""

    aggregated_context: AggregatedContext = Field(description="The Retriever's evidence.")
    quality_threshold: UnitFloat = Field(default=0.6, description="Chunks scoring below this are removed.")
    user_preferences: UserPreferences | None = Field(default=None, description="The asking user's preferences.")
    source_reputation_weights: dict[str, UnitFloat] | None = Field(
        default=None, description="Reputation per source type in [0, 1]; overrides the configured table."
    )
    recency_weight: UnitFloat = Field(default=0.2, description="Weight of recency in the quality score.")
    relevance_weight: UnitFloat = Field(default=0.4, description="Weight of semantic relevance in the quality score.")
    source_weight: UnitFloat = Field(default=0.3, description="Weight of source reputation in the quality score.")

    @model_validator(mode="after")
    def _some_weight(self) -> EvaluatorInput:
        if self.recency_weight + self.relevance_weight + self.source_weight <= 0:
            raise ValueError("at least one of recency_weight, relevance_weight, source_weight must be > 0")
        return self


class ScoredChunk(Contract):
    """A chunk that passed evaluation, with its quality score and the parts it was made of."""

    chunk: ContextChunk = Field(description="The evidence.")
    quality_score: UnitFloat = Field(description="Final quality score after any redundancy penalty.")
    source_reputation: UnitFloat = Field(description="Reputation component, before weighting.")
    recency: UnitFloat = Field(description="Recency component, before weighting.")
    relevance: UnitFloat = Field(description="Relevance component, before weighting.")
    redundancy_penalised: bool = Field(default=False, description="Whether the redundancy penalty was applied.")
    base_score: UnitFloat | None = Field(
        default=None, description="Quality score before the redundancy penalty (None when not computed)."
    )
    similar_to: str | None = Field(
        default=None, description="The better chunk this one largely repeats, when the penalty was applied."
    )


class FilteredContext(Contract):
    """Evidence ready for synthesis: scored, deduplicated, best first."""

    query_text: str = Field(description="The query the evidence answers.")
    chunks: list[ScoredChunk] = Field(default_factory=list, description="Kept evidence, best quality first.")


class QualityStatistics(Contract):
    """Counts and score distribution of one evaluation."""

    original_chunk_count: int = Field(ge=0, description="Chunks received.")
    filtered_chunk_count: int = Field(ge=0, description="Chunks kept.")
    removal_rate: float = Field(ge=0.0, le=100.0, description="Percentage of chunks removed.")
    average_quality_score: UnitFloat = Field(description="Mean quality score of the kept chunks (0 when none).")
    quality_distribution: dict[str, int] = Field(
        default_factory=dict, description='Score buckets over all received chunks, e.g. {"0.0-0.2": 1, ...}.'
    )


ContradictionKind = Literal["numeric", "polarity", "llm"]


class ContradictionRecord(Contract):
    """Two chunks that disagree, and on what."""

    chunk_id_a: str = Field(description="First chunk.")
    chunk_id_b: str = Field(description="Second chunk.")
    claim_a: str = Field(description="The claim as stated in the first chunk.")
    claim_b: str = Field(description="The claim as stated in the second chunk.")
    kind: ContradictionKind = Field(description="How it was detected.")
    subject: str | None = Field(default=None, description="What the claims are about (the quantity or topic).")
    confidence: UnitFloat = Field(default=0.5, description="How sure we are that this is a real contradiction.")
    explanation: str | None = Field(default=None, description="Why the claims conflict (or the LLM's verdict).")
    verdict_source: Literal["heuristic", "llm"] = Field(
        default="heuristic", description="heuristic: found by rules only; llm: confirmed by LLM adjudication."
    )


# not_evidence: conversation memory that is context, not evidence (the assistant's earlier answers; the user's earlier
# questions asked again beside a research question); ``contracts.chunks.is_evidence``.
RemovalCategory = Literal["below_threshold", "duplicate", "empty", "invalid", "not_evidence"]


class RemovalReason(Contract):
    """Why a chunk was removed."""

    chunk_id: str = Field(description="The removed chunk.")
    reason: RemovalCategory = Field(description="The kind of reason.")
    detail: str = Field(description="A human-readable explanation.")
    quality_score: UnitFloat | None = Field(default=None, description="Its score, when it was scored.")
    duplicate_of: str | None = Field(default=None, description="The chunk kept instead, for duplicates.")
    components: dict[str, float] | None = Field(
        default=None, description="The score's parts (reputation, recency, relevance, penalty), when scored."
    )


class EvaluatorOutput(Contract):
    """Evidence that passed, why the rest did not, and where the sources disagree."""

    filtered_context: FilteredContext = Field(description="Evidence that passed.")
    quality_stats: QualityStatistics = Field(description="Counts and score distribution.")
    contradictions_found: list[ContradictionRecord] = Field(default_factory=list, description="Disagreements found.")
    removal_rationale: list[RemovalReason] = Field(default_factory=list, description="One entry per removed chunk.")
    execution_time_ms: NonNegativeMs = Field(description="Wall time in milliseconds.")
    rejected_chunks: list[ScoredChunk] = Field(
        default_factory=list,
        description="Chunks removed for scoring below the threshold, best first: the best low-quality matches an "
        "uncertainty response can show. Duplicates are not listed here.",
    )
    dismissed_contradictions: list[ContradictionRecord] = Field(
        default_factory=list, description="Suspected contradictions the LLM judged not to be contradictions."
    )
