# The public API of researchcrew: the one list of what `import researchcrew` offers. Type checkers read this stub
# (`name as name` marks a re-export); at run time `researchcrew/__init__.py` reads it too (lazy_loader.attach_stub)
# and loads each name on first use.
from .assistant import (
    ResearchAssistant as ResearchAssistant,
)
from .contracts import (
    AggregatedContext as AggregatedContext,
)
from .contracts import (
    ContextChunk as ContextChunk,
)
from .contracts import (
    ContradictionRecord as ContradictionRecord,
)
from .contracts import (
    CoverageMetrics as CoverageMetrics,
)
from .contracts import (
    EvaluatorInput as EvaluatorInput,
)
from .contracts import (
    EvaluatorOutput as EvaluatorOutput,
)
from .contracts import (
    FilteredContext as FilteredContext,
)
from .contracts import (
    FinalResponse as FinalResponse,
)
from .contracts import (
    MemoryInput as MemoryInput,
)
from .contracts import (
    MemoryOutput as MemoryOutput,
)
from .contracts import (
    ProgressEvent as ProgressEvent,
)
from .contracts import (
    QualityStatistics as QualityStatistics,
)
from .contracts import (
    Query as Query,
)
from .contracts import (
    RemovalReason as RemovalReason,
)
from .contracts import (
    RetrieverInput as RetrieverInput,
)
from .contracts import (
    RetrieverOutput as RetrieverOutput,
)
from .contracts import (
    SourceFailure as SourceFailure,
)
from .contracts import (
    SourceReport as SourceReport,
)
from .contracts import (
    SynthesizerInput as SynthesizerInput,
)
from .contracts import (
    SynthesizerOutput as SynthesizerOutput,
)
from .contracts import (
    UserPreferences as UserPreferences,
)
from .contracts.request import (
    ResearchRequest as ResearchRequest,
)
from .contracts.request import (
    ResponseOptions as ResponseOptions,
)
from .errors import (
    ConfigurationError as ConfigurationError,
)
from .errors import (
    IngestError as IngestError,
)
from .errors import (
    KnowledgeBaseError as KnowledgeBaseError,
)
from .errors import (
    MemoryStoreError as MemoryStoreError,
)
from .errors import (
    ModelUnavailableError as ModelUnavailableError,
)
from .errors import (
    ResearchCrewError as ResearchCrewError,
)
from .errors import (
    ToolError as ToolError,
)
from .jobs.api import (
    Jobs as Jobs,
)
from .knowledge.collection import (
    KnowledgeBase as KnowledgeBase,
)
from .pipeline.retrieve import (
    Retriever as Retriever,
)
from .runtime import (
    Runtime as Runtime,
)
from .runtime import (
    open_runtime as open_runtime,
)
from .settings import (
    Settings as Settings,
)
from .tools.base import (
    Tool as Tool,
)
from .tools.base import (
    ToolResult as ToolResult,
)
