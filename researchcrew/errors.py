"""The exception hierarchy of researchcrew.

Retrieval tools never let these escape ``Tool.search``/``Tool.execute``: a ``ToolError`` raised inside a tool is
turned into a ``SourceFailure`` (reported as data). Elsewhere they signal usage mistakes (fail fast, with a hint)
or a dependency that is down. HTTP status codes are chosen only in the API layer.
"""

from __future__ import annotations

from typing import Literal

FailureKind = Literal[
    "timeout",  # the source did not answer within its time budget
    "http_error",  # the source answered with an error status: HTTP 4xx/5xx (incl. 429 rate limits), or a Milvus
    # server's rate limit / internal error (its gRPC equivalent)
    "bad_response",  # the source answered, but with something we could not parse or trust
    "unreachable",  # no connection could be made (refused, DNS, TLS, ...)
    "not_configured",  # the source needs configuration it does not have (API key, URL, ...)
    "invalid_request",  # the call itself was wrong (unknown option, bad value)
    "internal_error",  # a bug: the tool raised something nobody expected (logged with its traceback)
]


class ResearchCrewError(Exception):
    """Base class of every error researchcrew raises on purpose."""


class ConfigurationError(ResearchCrewError):
    """Settings are missing or contradictory. The message says what to set."""


class ToolError(ResearchCrewError):
    """A retrieval tool could not produce results. Raised inside tools, reported by them as a ``SourceFailure``."""

    def __init__(self, kind: FailureKind, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message
        self.status_code = status_code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, message={self.message!r}, status_code={self.status_code!r})"


class KnowledgeBaseError(ResearchCrewError):
    """The knowledge base (Milvus) refused an operation or is unreachable."""


class KnowledgeBaseUnavailableError(KnowledgeBaseError):
    """Milvus could not be reached (connection refused, timed out, server gone); retrying later may work."""


class KnowledgeBaseTimeoutError(KnowledgeBaseUnavailableError):
    """Milvus did not answer within ``milvus.timeout_s`` (a hung or overloaded server)."""


class KnowledgeBaseLockedError(KnowledgeBaseUnavailableError):
    """Another process holds the Milvus Lite file (one process per file); the message names it and what to do."""


class KnowledgeBaseServerError(KnowledgeBaseError):
    """Milvus answered with an error status: it is rate-limiting, or failed internally. Retrying later may work."""


class KnowledgeBaseResponseError(KnowledgeBaseError):
    """Milvus answered with something we cannot use: a malformed or oversized response."""


class IngestError(ResearchCrewError):
    """A document could not be read or parsed for ingestion. The message names the file and the reason."""


class MemoryStoreError(ResearchCrewError):
    """The memory store (SQLite/PostgreSQL/Zep) refused an operation or is unreachable."""


class MemoryStoreUnavailableError(MemoryStoreError):
    """The memory store's database cannot be reached (connection refused, lost or timed out, its file cannot be
    opened); retrying later may work. The service answers 503 with ``Retry-After``. The message names the operation
    and the driver's words, never SQL or a password (``researchcrew.db.failures``)."""


class ModelUnavailableError(ResearchCrewError):
    """A model (embedding, reranker, LLM) could not be loaded or reached."""


class JobError(ResearchCrewError):
    """A batch job operation could not be done (see the subclasses)."""


class JobInputError(JobError):
    """A job's input is wrong (file, question, option, schedule, webhook); nothing was stored or queued. The
    message says what, and where (line numbers for files)."""


class JobNotFoundError(JobError):
    """No such job or run for this user (another user's jobs are never visible)."""


class JobConflictError(JobError):
    """The operation conflicts with the current state (a job of that name exists, a finished run cannot be
    cancelled, ...)."""


class QueueUnavailableError(JobError):
    """The Redis-backed job queue was asked for but cannot be used (not configured or unreachable)."""


class ServiceError(ResearchCrewError):
    """A researchcrew service answered a client's request with a problem (``status``, ``detail``) or not at all."""

    def __init__(self, detail: str, *, status: int | None = None, kind: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.kind = kind


class DeepResearchError(ResearchCrewError):
    """A deep research run cannot do what was asked. The subclasses say why; the message says what to do."""


class DeepRunNotFoundError(DeepResearchError):
    """No deep run has this id."""


class DeepRunForbiddenError(DeepResearchError):
    """The deep run belongs to another user."""


class DeepRunStateError(DeepResearchError):
    """The deep run is not in a state that allows this (not paused, waiting for something else, already resumed)."""


class DeepRunExpiredError(DeepResearchError):
    """The deep run was paused longer than allowed; start a new one."""


class PlanDecisionError(DeepResearchError):
    """A plan decision is invalid: no items, too many, an edit that empties one, an unknown item."""


class CollectionError(ResearchCrewError):
    """A usage mistake about document collections (a bad name, a name taken, an unknown member). The message says
    what to do."""


class CollectionNotFoundError(CollectionError):
    """No document collection has this name (or the asking user may not see it)."""


class CollectionConflictError(CollectionError):
    """A collection of that name exists already."""


class CollectionForbiddenError(CollectionError):
    """The collection exists but the asking user may not change it (only its owner may)."""


class DocumentError(ResearchCrewError):
    """A document of the knowledge base cannot be added, read or changed as asked (see the subclasses)."""


class DocumentInputError(DocumentError):
    """An uploaded file or URL cannot be ingested (wrong type, empty, corrupt, unreadable); nothing was stored.
    The message is the loader's reason. ``unsupported`` marks a file type no loader reads."""

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


class DocumentTooLargeError(DocumentError):
    """A file larger than ``documents.max_file_bytes``."""


class DocumentQuotaError(DocumentError):
    """The user holds as many documents, or as many bytes, as ``documents`` allows."""


class DocumentNotFoundError(DocumentError):
    """No such document for this user (another user's documents answer exactly like missing ones)."""


class DocumentForbiddenError(DocumentError):
    """The user may not add documents to the collection named, or change (delete, reindex) a document they only
    read: one of a shared collection that another member added."""


class TableNotFoundError(ResearchCrewError):
    """No such answer table in this user's session (another user's tables answer exactly like missing ones)."""
