"""The exception hierarchy of researchcrew.

Retrieval tools never let these escape ``Tool.search``/``Tool.execute``: a ``ToolError`` raised inside a tool is
turned into a ``SourceFailure`` (reported as data). Elsewhere they signal usage mistakes (fail fast, with a hint)
or a dependency that is down. HTTP status codes are chosen only in the API layer.
"""

from __future__ import annotations

from typing import Literal

FailureKind = Literal[
    "timeout",  # the source did not answer within its time budget
    "http_error",  # the source answered with an HTTP error status (4xx/5xx, incl. 429 rate limits)
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


class IngestError(ResearchCrewError):
    """A document could not be read or parsed for ingestion. The message names the file and the reason."""


class MemoryStoreError(ResearchCrewError):
    """The memory store (SQLite/PostgreSQL/Zep) refused an operation or is unreachable."""


class ModelUnavailableError(ResearchCrewError):
    """A model (embedding, reranker, LLM) could not be loaded or reached."""


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
