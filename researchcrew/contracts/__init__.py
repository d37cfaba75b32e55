"""Pydantic models of the seed contract (seed 003): what flows between the four stages."""

from researchcrew.contracts.chunks import (
    AggregatedContext,
    ContextChunk,
    SourceFailure,
    SourceReport,
    SourceStatus,
)
from researchcrew.contracts.evaluator import (
    ContradictionRecord,
    EvaluatorInput,
    EvaluatorOutput,
    FilteredContext,
    QualityStatistics,
    RemovalReason,
    ScoredChunk,
)
from researchcrew.contracts.follow_up import QuestionRewrite, TokenCount, TokenUsage
from researchcrew.contracts.memory import MemoryInput, MemoryOutput
from researchcrew.contracts.progress import ProgressEvent
from researchcrew.contracts.query import Query, ResponseFormat, UserPreferences
from researchcrew.contracts.retriever import RetrievalStatus, RetrieverInput, RetrieverOutput
from researchcrew.contracts.synthesizer import (
    AnswerSection,
    Citation,
    CitationStats,
    CitedPassage,
    Claim,
    ConfidenceLevel,
    CoverageMetrics,
    FinalResponse,
    SynthesizerInput,
    SynthesizerOutput,
)
from researchcrew.contracts.tables import (
    AggregateResult,
    AnswerTable,
    RouteDecision,
    StructuredOutcome,
    StructuredRequest,
    TableColumn,
    TableRow,
)

__all__ = [
    "AggregateResult",
    "AggregatedContext",
    "AnswerSection",
    "AnswerTable",
    "Citation",
    "CitationStats",
    "CitedPassage",
    "Claim",
    "ConfidenceLevel",
    "ContextChunk",
    "ContradictionRecord",
    "CoverageMetrics",
    "EvaluatorInput",
    "EvaluatorOutput",
    "FilteredContext",
    "FinalResponse",
    "MemoryInput",
    "MemoryOutput",
    "ProgressEvent",
    "QualityStatistics",
    "Query",
    "QuestionRewrite",
    "RemovalReason",
    "ResponseFormat",
    "RetrievalStatus",
    "RetrieverInput",
    "RetrieverOutput",
    "RouteDecision",
    "ScoredChunk",
    "SourceFailure",
    "SourceReport",
    "SourceStatus",
    "StructuredOutcome",
    "StructuredRequest",
    "SynthesizerInput",
    "SynthesizerOutput",
    "TableColumn",
    "TableRow",
    "TokenCount",
    "TokenUsage",
    "UserPreferences",
]
