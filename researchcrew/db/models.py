"""The tables of researchcrew's database, as SQLAlchemy 2 declarative models on ``db.base.Base``.

The schema itself is owned by the Alembic migrations in ``researchcrew/db/migrations/versions``; these models
must describe the head revision exactly (``tests/memory_store/test_migrations.py`` compares them). Importing this
module gives the whole schema: conversation memory (``memory_*``), deep runs, the chat service's users, keys and
sessions here, and the batch jobs' tables (``db/job_tables.py``). Each domain's repository lives beside its domain
(``memory/store.py``, ``jobs/_store.py``, ``service/accounts.py``, ``service/chat_sessions.py``,
``deep/store.py``, ``knowledge/collections_store.py``). Every table carries the user's id so that recall, export and
forget are one indexed filter per table and can never cross users.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

# The batch-job tables share this database and this metadata (so that Alembic and the schema test see them).
from researchcrew.db import document_tables as _document_tables  # noqa: F401
from researchcrew.db import job_tables as _job_tables  # noqa: F401
from researchcrew.db._base import ID_LENGTH, Base, utcnow


class ExchangeRow(Base):
    """One question and its answer: the unit of conversation history and of recall."""

    __tablename__ = "memory_exchanges"
    __table_args__ = (
        Index("ix_memory_exchanges_user_id_id", "user_id", "id"),
        Index("ix_memory_exchanges_user_session_asked", "user_id", "session_id", "asked_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    response_id: Mapped[str] = mapped_column(String(ID_LENGTH), unique=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    session_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    query_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    asked_at: Mapped[datetime]
    answered_at: Mapped[datetime]
    stored_at: Mapped[datetime] = mapped_column(default=utcnow)
    sources_used: Mapped[list[Any]] = mapped_column(default=list)
    source_reports: Mapped[list[Any]] = mapped_column(default=list)
    citations: Mapped[list[Any]] = mapped_column(default=list)
    context: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    confidence: Mapped[float] = mapped_column(Float, default=0.0)
    answer_kind: Mapped[str] = mapped_column(String(32), default="generated")
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    embedding_model: Mapped[str | None] = mapped_column(String(512), default=None)


class UserStateRow(Base):
    """A user's memory version: what the recall cache compares to know whether to re-read (see recall.py).

    ``epoch`` is random and new whenever the row is created (so a user forgotten and seen again is a different
    epoch); ``generation`` is bumped by every write of an exchange, which updates this row *first*, so one
    user's writes are serialised and commit in id order. Holds no personal data beyond the user id.
    """

    __tablename__ = "memory_users"

    user_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    epoch: Mapped[str] = mapped_column(String(32))
    generation: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime]


class MessageRow(Base):
    """One side of an exchange (the user's question or the assistant's answer), in conversation order."""

    __tablename__ = "memory_messages"
    __table_args__ = (Index("ix_memory_messages_exchange_id", "exchange_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # Deterministic (uuid5 of response id and role): a mirror such as Zep can use it as an idempotency key.
    message_id: Mapped[str] = mapped_column(String(64), unique=True)
    exchange_id: Mapped[int] = mapped_column(ForeignKey("memory_exchanges.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    session_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    role: Mapped[str] = mapped_column(String(16))  # "user" | "assistant"
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]


class EntityRow(Base):
    """A named thing a user's conversations mention; one row per (user, normalised name)."""

    __tablename__ = "memory_entities"
    __table_args__ = (UniqueConstraint("user_id", "normalized_name", name="uq_memory_entities_user_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    name: Mapped[str] = mapped_column(String(512))
    normalized_name: Mapped[str] = mapped_column(String(512))
    entity_type: Mapped[str] = mapped_column(String(64))
    confidence: Mapped[float] = mapped_column(Float)
    mention_count: Mapped[int] = mapped_column(Integer, default=0)
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]


class MentionRow(Base):
    """One mention of an entity in one answer; at most one per (entity, response)."""

    __tablename__ = "memory_entity_mentions"
    __table_args__ = (
        UniqueConstraint("entity_id", "response_id", name="uq_memory_mentions_entity_response"),
        Index("ix_memory_entity_mentions_user_id", "user_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entity_id: Mapped[int] = mapped_column(ForeignKey("memory_entities.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    response_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    confidence: Mapped[float] = mapped_column(Float)
    context: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RelationshipRow(Base):
    """A directed link between two entities. Every relation is stored twice: as recorded and its inverse."""

    __tablename__ = "memory_relationships"
    __table_args__ = (
        UniqueConstraint(
            "user_id", "source_entity_id", "target_entity_id", "relation", "inverse", name="uq_memory_relationships"
        ),
        Index("ix_memory_relationships_source", "source_entity_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    source_entity_id: Mapped[int] = mapped_column(ForeignKey("memory_entities.id", ondelete="CASCADE"))
    target_entity_id: Mapped[int] = mapped_column(ForeignKey("memory_entities.id", ondelete="CASCADE"))
    relation: Mapped[str] = mapped_column(String(128))
    inverse: Mapped[bool] = mapped_column(Boolean, default=False)
    confidence: Mapped[float] = mapped_column(Float)
    count: Mapped[int] = mapped_column(Integer, default=1)
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    # The answer that last observed it: a relation counts once per answer, so a retried memory run is a no-op.
    last_response_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), default=None)


class PreferencesRow(Base):
    """A user's learned preferences and the counters they are inferred from."""

    __tablename__ = "memory_preferences"

    user_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    preferences: Mapped[dict[str, Any]]
    counters: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]


class SessionSummaryRow(Base):
    """A session's rolling summary (``records.SessionSummary``): bounded JSON, rewritten after every exchange."""

    __tablename__ = "memory_session_summaries"

    user_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    turns: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[dict[str, Any]]  # {"recent": [...], "topics": [...]}
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class OutboxRow(Base):
    """A write to an external memory (Zep) waiting for delivery; delivered exactly once by idempotency key.

    Pending while ``delivered_at`` and ``dead_at`` are both NULL; ``dead_at`` is set when the destination refused
    the write for good (kept for export and inspection, never retried)."""

    __tablename__ = "memory_outbox"
    __table_args__ = (
        Index("ix_memory_outbox_due", "delivered_at", "next_attempt_at"),
        Index("ix_memory_outbox_user_id", "user_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    idempotency_key: Mapped[str] = mapped_column(String(512), unique=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    next_attempt_at: Mapped[datetime]
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    claim_token: Mapped[str | None] = mapped_column(String(64), default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    delivered_at: Mapped[datetime | None] = mapped_column(default=None)
    dead_at: Mapped[datetime | None] = mapped_column(default=None)


class DeepRunRow(Base):
    """A deep research run (issue 14): its status, the crewAI Flow state and pending-feedback context saved at its
    last pause (so another process can resume it), the user's answer or decision waiting to be applied, and the
    report once it is done."""

    __tablename__ = "memory_deep_runs"
    __table_args__ = (Index("ix_memory_deep_runs_user_created", "user_id", "created_at"),)

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    session_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    question: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32))
    awaiting: Mapped[str | None] = mapped_column(String(32), default=None)
    state: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    pending: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    feedback: Mapped[str | None] = mapped_column(Text, default=None)
    report: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
    lease_until: Mapped[datetime | None] = mapped_column(default=None)


class ServiceUserRow(Base):
    """A user of the HTTP service (``researchcrew users add``). Revoked users keep their row (and their memory)."""

    __tablename__ = "service_users"

    user_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class ApiKeyRow(Base):
    """One API key: its public id and the SHA-256 of its secret part; the key itself is never stored."""

    __tablename__ = "service_api_keys"
    __table_args__ = (Index("ix_service_api_keys_user_id", "user_id"),)

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class ChatSessionRow(Base):
    """A conversation of one user: its title and times. Its exchanges are those with the same (user, session)."""

    __tablename__ = "service_sessions"
    __table_args__ = (
        UniqueConstraint("user_id", "session_id", name="uq_service_sessions_user_session"),
        Index("ix_service_sessions_user_updated", "user_id", "updated_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    title: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class KbCollectionRow(Base):
    """A named shared document collection (``researchcrew collections add``); its readers are its owner and its
    members. ``shared`` and users' private ``user:<id>`` collections have no row: they exist implicitly."""

    __tablename__ = "kb_collections"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Who made it over HTTP (may change its members and remove it); None: made on the command line (operator).
    owner_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), default=None)
    created_at: Mapped[datetime]


class KbCollectionMemberRow(Base):
    """One reader of a named shared collection."""

    __tablename__ = "kb_collection_members"
    __table_args__ = (Index("ix_kb_collection_members_user_id", "user_id"),)

    collection: Mapped[str] = mapped_column(
        String(64), ForeignKey("kb_collections.name", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    added_at: Mapped[datetime]


ALL_TABLES = tuple(Base.metadata.sorted_tables)


class UsageRow(Base):
    """What one answer or deep run spent (issue 23): its tokens and their cost, for the per-user usage view and the
    monthly budget. Written for every answer a runtime with a database gives, remembered or not."""

    __tablename__ = "usage_answers"
    __table_args__ = (Index("ix_usage_answers_user_at", "user_id", "at"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(String(16))  # answer | deep_run
    response_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    calls: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float | None] = mapped_column(Float, default=None)  # None: the model's price is unknown
    model: Mapped[str | None] = mapped_column(String(255), default=None)


class AnswerTableRow(Base):
    """The whole result set of a structured answer (issue 22): every row found, for "show the rest" and CSV export.
    ``shown`` is how many rows the session has seen so far (the next "show the rest" starts there)."""

    __tablename__ = "memory_answer_tables"
    __table_args__ = (Index("ix_memory_answer_tables_user_session", "user_id", "session_id", "created_at"),)

    table_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    session_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    response_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    question: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(String(500))
    columns: Mapped[list[Any]]
    rows: Mapped[list[Any]]
    aggregates: Mapped[list[Any]]
    notes: Mapped[list[Any]]
    total_rows: Mapped[int] = mapped_column(Integer)
    page_size: Mapped[int] = mapped_column(Integer)
    shown: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]
