"""What the memory store takes and gives back: small, JSON-able pydantic models.

Inputs (``EntityMention``, ``EntityRelation``, ``OutboxWrite``) reject unknown fields, like the contracts. Records
read back from the store are plain snapshots; they never hold a database session.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, computed_field

from researchcrew.contracts.query import UserPreferences
from researchcrew.contracts.tables import AggregateResult, AnswerTable, TableColumn, TableRow

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
OutboxState = Literal["pending", "delivered", "dead"]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ---- conversation history -----------------------------------------------------------------------------------


class ExchangeRecord(_Record):
    """One stored question and answer (the seed's message pair), linked by ``response_id``."""

    response_id: str = Field(description="The answer's id; an exchange is stored once per response id.")
    user_id: str = Field(description="Whose conversation this is.")
    session_id: str = Field(description="The conversation (session) it belongs to.")
    query_id: str = Field(description="The question's id.")
    question: str = Field(description="The user's message: the question as asked.")
    answer: str = Field(description="The assistant's message: the answer text with [n] markers.")
    asked_at: datetime = Field(description="When the question was asked (UTC).")
    answered_at: datetime = Field(description="When the answer was produced (UTC).")
    stored_at: datetime = Field(description="When the store recorded it (UTC).")
    user_message_id: str = Field(description="Stable id of the user message (uuid5 of response id and role).")
    assistant_message_id: str = Field(description="Stable id of the assistant message.")
    sources_used: list[str] = Field(default_factory=list, description="Source types that contributed evidence.")
    source_reports: list[dict[str, Any]] = Field(
        default_factory=list, description="The answer's per-source reports, as JSON, as they were when stored."
    )
    citations: list[dict[str, Any]] = Field(default_factory=list, description="The answer's citations, as JSON.")
    confidence: float = Field(default=0.0, description="The answer's overall confidence.")
    answer_kind: str = Field(
        default="generated", description="generated / extractive / uncertainty / refusal / clarification."
    )
    context: dict[str, Any] | None = Field(default=None, description="Extra context stored with the turn.")
    created: bool = Field(
        default=False,
        exclude=True,
        description="Only on add_exchange's result: True when this call stored it, False when it already was.",
    )


class RecalledExchange(_Record):
    """An earlier exchange found relevant to a new query. Built by any ``MemoryRecall`` (local store or Zep)."""

    response_id: str = Field(description="Id of the earlier answer (or of the recalled message, for Zep).")
    user_id: str = Field(description="Whose memory it came from: always the user who asked.")
    session_id: str = Field(description="The session it was said in.")
    question: str = Field(default="", description="The earlier question (may be empty if only the answer is known).")
    answer: str = Field(default="", description="The earlier answer (may be empty if only the question is known).")
    relevance: Confidence = Field(description="Relevance to the new query in [0, 1] (cosine, clipped at 0).")
    asked_at: datetime | None = Field(default=None, description="When the earlier question was asked.")
    answered_at: datetime | None = Field(default=None, description="When it was answered.")
    citations: list[dict[str, Any]] = Field(default_factory=list, description="The earlier answer's citations.")
    sources_used: list[str] = Field(default_factory=list, description="Source types the earlier answer used.")
    origin: Literal["local", "zep"] = Field(default="local", description="Which memory produced the recall.")
    answer_kind: str | None = Field(
        default=None,
        description="What kind of answer was given then (generated, extractive, uncertainty, refusal, "
        "clarification), when known: an earlier answer that claimed nothing cannot support a new one.",
    )

    @classmethod
    def of(cls, record: ExchangeRecord, relevance: float) -> RecalledExchange:
        """A stored exchange, recalled with ``relevance``."""
        return cls(
            response_id=record.response_id,
            user_id=record.user_id,
            session_id=record.session_id,
            question=record.question,
            answer=record.answer,
            relevance=relevance,
            asked_at=record.asked_at,
            answered_at=record.answered_at,
            citations=record.citations,
            sources_used=record.sources_used,
            answer_kind=record.answer_kind,
        )


# ---- sessions -------------------------------------------------------------------------------------------------


class SessionTurn(_Record):
    """One exchange as a session's rolling summary keeps it: short, for rewriting follow-up questions."""

    question: str = Field(description="The question as the user asked it (shortened).")
    standalone: str = Field(description="The question as it was researched (the same unless it was a follow-up).")
    subjects: list[str] = Field(default_factory=list, description="What the question was about (0-2 phrases).")
    answer_gist: str = Field(default="", description="The answer's opening, without citation markers; may be empty.")
    answered: bool = Field(default=True, description="False when the answer said the evidence was insufficient.")
    asked_at: datetime | None = Field(default=None, description="When it was asked (UTC).")


class SessionSummary(_Record):
    """A session's rolling summary, bounded in size however long the session runs: the last few turns in full
    and the subjects of all of them (the most recent last). The Memory stage updates it after every exchange;
    the Flow's follow-up stage reads it before retrieval."""

    user_id: str = Field(description="Whose session.")
    session_id: str = Field(description="The session.")
    turns: int = Field(default=0, ge=0, description="Exchanges summarised so far (the whole session).")
    recent: list[SessionTurn] = Field(default_factory=list, description="The latest turns, oldest first.")
    topics: list[str] = Field(default_factory=list, description="Subjects of the session, the most recent last.")
    updated_at: datetime | None = Field(default=None, description="Last update (UTC); None if never stored.")

    @property
    def last_turn(self) -> SessionTurn | None:
        return self.recent[-1] if self.recent else None


# ---- entity graph ---------------------------------------------------------------------------------------------


class EntityMention(_Input):
    """An entity seen in one answer, as the extractor (memory/entities.py) found it."""

    name: Name = Field(description="The entity as written, e.g. 'SciFact' or 'BERT'.")
    type: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] = Field(
        default="other", description="Entity type (dataset, model, method, person, organization, paper, ...)."
    )
    confidence: Confidence = Field(default=0.5, description="How sure the extractor is that this is an entity.")
    context: str = Field(default="", max_length=2_000, description="A snippet of the sentence it appeared in.")


class EntityRelation(_Input):
    """A relation between two entities seen in one answer."""

    source: Name = Field(description="The first entity's name.")
    target: Name = Field(description="The second entity's name.")
    relation: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)] = Field(
        default="co_occurs_with", description="What links them, e.g. co_occurs_with, evaluated_on, introduced_by."
    )
    confidence: Confidence = Field(default=0.5, description="How sure the extractor is of the relation.")
    symmetric: bool = Field(
        default=False,
        description="True for undirected relations (co-occurrence): A–B and B–A are then the same relation. "
        "Directed relations record A→B; the inverse link B→A is kept too, marked inverse.",
    )


class EntityRecord(_Record):
    name: str = Field(description="The name as first recorded.")
    type: str = Field(description="The type of the most confident mention so far.")
    confidence: float = Field(description="Combined confidence of all mentions (noisy-OR).")
    mention_count: int = Field(description="In how many answers it was mentioned.")
    first_seen: datetime = Field(description="First mention (UTC).")
    last_seen: datetime = Field(description="Latest mention (UTC).")


class MentionRecord(_Record):
    entity: str = Field(description="The entity's name.")
    response_id: str = Field(description="The answer it was mentioned in.")
    confidence: float = Field(description="The extractor's confidence for this mention.")
    context: str = Field(description="Snippet of the sentence.")
    created_at: datetime = Field(description="When the mention was recorded (UTC).")


class RelationshipRecord(_Record):
    source: str = Field(description="Entity the link starts from.")
    target: str = Field(description="Entity the link points to.")
    relation: str = Field(description="The relation name.")
    inverse: bool = Field(description="True for the reverse link kept for a directed relation recorded target→source.")
    confidence: float = Field(description="Combined confidence of all observations (noisy-OR).")
    count: int = Field(description="How many times the relation was observed.")
    first_seen: datetime = Field(description="First observation (UTC).")
    last_seen: datetime = Field(description="Latest observation (UTC).")


# ---- preferences ----------------------------------------------------------------------------------------------


class StoredPreferences(_Record):
    """A user's preferences plus the counters they are inferred from (so inference accumulates over time)."""

    preferences: UserPreferences = Field(default_factory=UserPreferences, description="The current preferences.")
    format_requests: dict[str, int] = Field(
        default_factory=dict, description="Response format → how often the user asked for it."
    )
    source_requests: dict[str, int] = Field(
        default_factory=dict, description="Source type → how often the user asked for (preferred) it."
    )
    source_exclusions: dict[str, int] = Field(
        default_factory=dict, description="Source type → how often the user excluded it."
    )
    exchanges_seen: int = Field(default=0, ge=0, description="Exchanges the counters were accumulated over.")
    updated_at: datetime | None = Field(default=None, description="Last change (UTC); None if never saved.")

    def same_as(self, other: StoredPreferences) -> bool:
        """Equal in everything but the timestamp."""
        return self.model_dump(exclude={"updated_at"}) == other.model_dump(exclude={"updated_at"})


# ---- outbox ---------------------------------------------------------------------------------------------------


class OutboxWrite(_Input):
    """A write to enqueue (see ``MemoryStore.enqueue_outbox``)."""

    kind: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(
        description="What to do, e.g. 'zep.add_messages'; the worker dispatches on it."
    )
    payload: dict[str, Any] = Field(description="JSON-able arguments of the write.")
    idempotency_key: Annotated[str, StringConstraints(min_length=1, max_length=512)] = Field(
        description="Unique per logical write; enqueuing the same key again is a no-op."
    )


class OutboxItem(_Record):
    """A queued write as a worker sees it after claiming it."""

    id: int = Field(description="Row id; pass it to mark_delivered / mark_failed / mark_dead.")
    user_id: str = Field(description="Whose data the write carries (forget_user removes pending writes too).")
    kind: str = Field(description="What to do.")
    payload: dict[str, Any] = Field(description="Its arguments.")
    idempotency_key: str = Field(description="Unique key of the logical write.")
    created_at: datetime = Field(description="When it was enqueued (UTC).")
    next_attempt_at: datetime = Field(description="When it is (was) due (UTC).")
    lease_until: datetime | None = Field(default=None, description="Claimed until then; None when not claimed.")
    claim_token: str | None = Field(default=None, description="Token of the claim that leased it.")
    attempts: int = Field(description="How many times it was claimed for delivery (this claim included).")
    failures: int = Field(description="How many delivery attempts failed.")
    last_error: str | None = Field(default=None, description="The latest failure.")
    delivered_at: datetime | None = Field(default=None, description="When it was delivered; None while pending.")
    dead_at: datetime | None = Field(
        default=None, description="When the destination refused it for good (never retried); None otherwise."
    )

    @computed_field(description="pending (being delivered or waiting), delivered, or dead.")  # type: ignore[prop-decorator]
    @property
    def state(self) -> OutboxState:
        if self.delivered_at is not None:
            return "delivered"
        return "dead" if self.dead_at is not None else "pending"


# ---- answer tables (issue 22) -------------------------------------------------------------------------------


class StoredAnswerTable(_Record):
    """The whole result set of one structured answer, as persisted with its session: ``page`` gives any slice of it
    as the ``AnswerTable`` the doors show; ``shown`` is where the session's next "show the rest" starts."""

    table_id: str
    user_id: str
    session_id: str
    response_id: str
    question: str
    title: str
    columns: list[TableColumn]
    rows: list[TableRow]
    aggregates: list[AggregateResult] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    page_size: int = 10
    shown: int = 0
    created_at: datetime

    @property
    def total_rows(self) -> int:
        return len(self.rows)

    def page(self, offset: int, limit: int) -> AnswerTable:
        """Rows ``offset`` .. ``offset + limit`` (clamped to the result set) as an ``AnswerTable``."""
        start = max(0, min(offset, len(self.rows)))
        return AnswerTable(
            table_id=self.table_id,
            title=self.title,
            columns=self.columns,
            rows=self.rows[start : start + max(0, limit)],
            offset=start,
            total_rows=len(self.rows),
            aggregates=self.aggregates,
            notes=self.notes,
        )
