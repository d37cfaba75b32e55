"""Evidence as it flows between stages: chunks, per-source reports, and the aggregated context."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, computed_field, field_validator, model_validator

from researchcrew.contracts._base import Contract, Identifier, NonNegativeMs, SourceType, UnitFloat
from researchcrew.errors import FailureKind
from researchcrew.redaction import redact

# Conversation memory's source type: what the user said, cited and quoted differently.
MEMORY_SOURCE_TYPE = "memory"
# metadata["recalled_as"] of conversation memory that can be evidence (tools/memory_recall.py): the user's statement
# of a fact about themself, and the user's earlier questions for a question about the conversation itself.
EVIDENCE_RECALLS = frozenset({"user_statement", "conversation"})


def is_evidence(chunk: ContextChunk) -> bool:
    """Whether a chunk may be evidence: compared for agreement and contradictions, counted, cited (issue 20).

    Every source's passage may; of conversation memory only what the *user* said (``metadata["speaker"] ==
    "user"``), recalled as evidence (``EVIDENCE_RECALLS``). The assistant's own earlier answers never are: quoting
    them would cite the assistant to itself. Memory of unknown speaker counts as the assistant's.
    """
    if chunk.source_type != MEMORY_SOURCE_TYPE:
        return True
    return chunk.metadata.get("speaker") == "user" and chunk.metadata.get("recalled_as") in EVIDENCE_RECALLS


class ContextChunk(Contract):
    """One piece of evidence, with everything needed to cite it."""

    chunk_id: Identifier = Field(description="Stable id of the chunk, unique within one answer's evidence.")
    source_type: SourceType = Field(description='Where it came from: "rag", "web", "arxiv", "memory" or a custom type.')
    content: str = Field(min_length=1, max_length=200_000, description="The evidence text itself.")
    semantic_relevance: UnitFloat = Field(description="Calibrated relevance to the query, in [0, 1].")
    title: str | None = Field(default=None, max_length=2_000, description="Title of the document or page.")
    url: str | None = Field(default=None, max_length=4_000, description="Where a reader can open the source.")
    source_id: str | None = Field(
        default=None,
        max_length=512,
        description="The source's own id (arXiv id, knowledge-base document id, memory message id, ...).",
    )
    source_date: datetime | None = Field(default=None, description="Publication or last-update date of the source.")
    authors: list[str] = Field(default_factory=list, description="Authors, in the source's order.")
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Source-specific details (e.g. arXiv categories, section heading, position in the document).",
    )
    tool_name: str = Field(default="", max_length=128, description="Name of the tool that produced the chunk.")

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        return value

    @field_validator("source_date")
    @classmethod
    def _date_is_aware(cls, value: datetime | None) -> datetime | None:
        """Naive dates are taken as UTC so that recency arithmetic never mixes naive and aware datetimes."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


SourceStatus = Literal["success", "empty", "failed", "skipped"]


MAX_FAILURE_MESSAGE_CHARS = 4_000


class SourceFailure(Contract):
    """Why a source produced no usable results."""

    kind: FailureKind = Field(description="What went wrong, as a closed set of kinds.")
    message: str = Field(
        max_length=MAX_FAILURE_MESSAGE_CHARS,
        description="A human-readable reason, safe to show to a user: credentials in it (a URL's password, a "
        "token parameter, an Authorization value) are masked, and it is cut to 4,000 characters.",
    )
    status_code: int | None = Field(default=None, ge=100, le=599, description="HTTP status, when there was one.")

    @field_validator("message", mode="before")
    @classmethod
    def _safe_message(cls, value: Any) -> Any:
        """Whatever a driver put into the message, no credential leaves with it (see ``researchcrew.redaction``)."""
        if not isinstance(value, str):
            return value
        safe = redact(value)
        if len(safe) > MAX_FAILURE_MESSAGE_CHARS:
            safe = safe[: MAX_FAILURE_MESSAGE_CHARS - 1] + "…"
        return safe


class SourceReport(Contract):
    """What happened when one source was asked."""

    source_type: SourceType = Field(description="The source type of the tool.")
    tool_name: str = Field(max_length=128, description="Name of the tool that was called.")
    status: SourceStatus = Field(
        description="success: results; empty: answered with no results; failed: see `failure`; "
        "skipped: never called — excluded or not selected (no `failure`), or backing off after a recent failure "
        "(`failure` says which and when it is tried again)."
    )
    latency_ms: NonNegativeMs = Field(default=0.0, description="Wall time of the call in milliseconds.")
    chunk_count: int = Field(default=0, ge=0, description="How many chunks it contributed.")
    failure: SourceFailure | None = Field(
        default=None,
        description="Why it failed; set when status is failed, and when a skipped source is backing off.",
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_computed_fields(cls, data: Any) -> Any:
        """Serialized reports carry the computed error_kind/error_message; they are derived, so reading JSON back
        (a round trip) ignores them instead of rejecting them as unknown fields."""
        if isinstance(data, dict) and ("error_kind" in data or "error_message" in data):
            return {key: value for key, value in data.items() if key not in ("error_kind", "error_message")}
        return data

    @computed_field(description="The failure kind, or None.")  # type: ignore[prop-decorator]
    @property
    def error_kind(self) -> str | None:
        return self.failure.kind if self.failure else None

    @computed_field(description="The failure message, or None.")  # type: ignore[prop-decorator]
    @property
    def error_message(self) -> str | None:
        return self.failure.message if self.failure else None


class AggregatedContext(Contract):
    """All evidence the Retriever gathered for one query, in aggregated order, with per-source detail."""

    query_text: str = Field(description="The query the evidence was gathered for.")
    chunks: list[ContextChunk] = Field(default_factory=list, description="Evidence, preferred sources first.")
    source_reports: list[SourceReport] = Field(default_factory=list, description="One report per tool considered.")
    retrieved_at: datetime = Field(
        default_factory=lambda: datetime.now(UTC), description="When retrieval finished (UTC)."
    )

    def chunks_from(self, source_type: str) -> list[ContextChunk]:
        """The chunks one source contributed, in order."""
        return [chunk for chunk in self.chunks if chunk.source_type == source_type]

    def report_for(self, source_type: str) -> SourceReport | None:
        return next((r for r in self.source_reports if r.source_type == source_type), None)
