# The public API of researchcrew: the one list of what `import researchcrew` offers. Type checkers read this stub;
# at run time `researchcrew/__init__.py` reads it too (lazy_loader.attach_stub) and loads each name on first use.
from .assistant import ResearchAssistant
from .contracts import (
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
from .contracts.request import ResearchRequest, ResponseOptions
from .errors import (
    ConfigurationError,
    IngestError,
    KnowledgeBaseError,
    MemoryStoreError,
    ModelUnavailableError,
    ResearchCrewError,
    ToolError,
)
from .knowledge.collection import KnowledgeBase
from .pipeline.retrieve import RetrieverAgent
from .runtime import Runtime, open_runtime
from .settings import Settings
from .tools.base import Tool, ToolResult
