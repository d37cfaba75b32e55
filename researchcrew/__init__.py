"""researchcrew: a research assistant on crewAI whose answers cite every claim.

The public API is listed in ``__all__`` (pinned by a test). Every name is resolved on first access (PEP 562), so
that ``import researchcrew`` — which every ``researchcrew`` CLI call does — costs almost nothing, and the heavy
parts (pydantic model building, crewAI, torch, pymilvus) load only when used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from researchcrew.assistant import ResearchAssistant
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
        ProgressEvent,
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
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.pipeline.retrieve import RetrieverAgent
    from researchcrew.settings import Settings
    from researchcrew.tools.base import Tool, ToolResult

_CONTRACTS = "researchcrew.contracts"
_ERRORS = "researchcrew.errors"

# Public name → the module that defines it.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "AggregatedContext",
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
            "RemovalReason",
            "RetrieverInput",
            "RetrieverOutput",
            "SourceFailure",
            "SourceReport",
            "SynthesizerInput",
            "SynthesizerOutput",
            "UserPreferences",
        ],
        _CONTRACTS,
    ),
    **dict.fromkeys(
        [
            "ConfigurationError",
            "IngestError",
            "KnowledgeBaseError",
            "MemoryStoreError",
            "ModelUnavailableError",
            "ResearchCrewError",
            "ToolError",
        ],
        _ERRORS,
    ),
    "Settings": "researchcrew.settings",
    "Tool": "researchcrew.tools.base",
    "ToolResult": "researchcrew.tools.base",
    "RetrieverAgent": "researchcrew.pipeline.retrieve",
    "KnowledgeBase": "researchcrew.knowledge.collection",
    "ResearchAssistant": "researchcrew.assistant",
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
    "ProgressEvent",
    "QualityStatistics",
    "Query",
    "RemovalReason",
    "ResearchAssistant",
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


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
