"""researchcrew: a research assistant on crewAI whose answers cite every claim.

The public API is listed in ``__all__`` (pinned by a test). Heavy parts (the Flow, crewAI) are imported on first
attribute access so that ``import researchcrew`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from researchcrew.contracts import (
    AggregatedContext,
    ContextChunk,
    ContradictionRecord,
    CoverageMetrics,
    EvaluatorInput,
    EvaluatorOutput,
    FilteredContext,
    FinalResponse,
    MemoryInput,
    MemoryOutput,
    QualityStatistics,
    Query,
    RemovalReason,
    RetrieverInput,
    RetrieverOutput,
    SourceFailure,
    SourceReport,
    SynthesizerInput,
    SynthesizerOutput,
    UserPreferences,
)
from researchcrew.errors import (
    ConfigurationError,
    IngestError,
    KnowledgeBaseError,
    MemoryStoreError,
    ModelUnavailableError,
    ResearchCrewError,
    ToolError,
)
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool, ToolResult

# Public names defined in modules that are expensive to import, resolved on first access.
_LAZY: dict[str, str] = {
    "RetrieverAgent": "researchcrew.agents.retriever",
    "KnowledgeBase": "researchcrew.knowledge.collection",
}

__all__ = [
    "AggregatedContext",
    "ConfigurationError",
    "ContextChunk",
    "ContradictionRecord",
    "CoverageMetrics",
    "EvaluatorInput",
    "EvaluatorOutput",
    "FilteredContext",
    "FinalResponse",
    "IngestError",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "MemoryInput",
    "MemoryOutput",
    "MemoryStoreError",
    "ModelUnavailableError",
    "QualityStatistics",
    "Query",
    "RemovalReason",
    "ResearchCrewError",
    "RetrieverAgent",
    "RetrieverInput",
    "RetrieverOutput",
    "Settings",
    "SourceFailure",
    "SourceReport",
    "SynthesizerInput",
    "SynthesizerOutput",
    "Tool",
    "ToolError",
    "ToolResult",
    "UserPreferences",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'researchcrew' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
