"""``MemoryStore``: the built-in memory (SQLAlchemy async; SQLite by default, PostgreSQL by URL).

One object holds a user's conversation history (with an embedding per exchange for semantic recall), the entity
graph, learned preferences and the persisted outbox of writes to Zep. Everything is keyed by ``user_id``; no read
ever crosses users. Open it with ``await MemoryStore.open(url)`` (which migrates the schema to the newest
revision, keeping data) and ``await store.close()`` it at the end, or use ``async with``.

Every method raises ``MemoryStoreError`` when the database cannot be reached or refuses the operation, and
``ValueError`` for usage mistakes. Records are the pydantic models of ``researchcrew.memory.records``.

Where things live: history and recall reads in ``exchanges.py`` (synchronous functions run by ``db.Reader``),
the recall cache in ``recall.py``, the entity and preferences SQL in ``_graph_store.py``, the outbox SQL in
``_outbox_store.py``; the tables in ``researchcrew/db/models.py`` and their history in ``researchcrew/db/migrations/``.
Export and forget cover every table keyed by the user, also other domains' (deep runs, chat sessions, jobs).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from researchcrew.blocking import BlockingPool
from researchcrew.db import session as db_session
from researchcrew.db.engine import Reader, create_engine, dialect_insert, upgrade
from researchcrew.db.failures import guarded
from researchcrew.db.models import (
    AnswerTableRow,
    ChatSessionRow,
    DeepRunRow,
    EntityRow,
    ExchangeRow,
    MentionRow,
    MessageRow,
    OutboxRow,
    PreferencesRow,
    RelationshipRow,
    SessionSummaryRow,
    UsageRow,
    UserStateRow,
)
from researchcrew.errors import MemoryStoreError, ModelUnavailableError
from researchcrew.memory import _answer_tables as answer_tables
from researchcrew.memory import _graph_store as graph_store
from researchcrew.memory import _outbox_store as outbox_store
from researchcrew.memory import _session_store as session_store
from researchcrew.memory import exchanges
from researchcrew.memory.recall import (
    DEFAULT_CACHE_MAX_VECTORS,
    DEFAULT_LEXICAL_WEIGHT,
    UserVectors,
    Vector,
    VectorCache,
    encode_vector,
)
from researchcrew.memory.records import (
    EntityMention,
    EntityRecord,
    EntityRelation,
    ExchangeRecord,
    OutboxItem,
    OutboxWrite,
    RecalledExchange,
    RelationshipRecord,
    SessionSummary,
    StoredAnswerTable,
    StoredPreferences,
)
from researchcrew.redaction import mask_url

if TYPE_CHECKING:
    from researchcrew.contracts.query import Query
    from researchcrew.contracts.synthesizer import FinalResponse
    from researchcrew.contracts.tables import AnswerTable, TableRow
    from researchcrew.embedding.embedder import Embedder
    from researchcrew.settings import EmbeddingSettings, Settings

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
_MESSAGE_NAMESPACE = uuid.UUID("6f1c2a52-3d1e-4d4b-9a57-6b1e2c0d9e10")
RECALL_WORKERS = 4  # recalls at once (each embeds the query; on SQLite it also reads and searches)
EMBEDDED_ANSWER_CHARS = 1_000  # the question plus the answer's opening is what recall matches against


def message_id(response_id: str, role: str) -> str:
    """The stable id of one message of an exchange (the same on every retry and in every process)."""
    return str(uuid.uuid5(_MESSAGE_NAMESPACE, f"{response_id}:{role}"))


def exchange_text(question: str, answer: str) -> str:
    """The text embedded for recall."""
    return f"{question}\n{answer[:EMBEDDED_ANSWER_CHARS]}"


def _utcnow() -> datetime:
    return datetime.now(UTC)


_Method = Callable[Concatenate["MemoryStore", P], Coroutine[Any, Any, T]]


def _guarded(operation: str, *, finish_when_cancelled: bool = True) -> Callable[[_Method[P, T]], _Method[P, T]]:
    """``db.failures.guarded`` for the memory store: failures name "memory store <operation>"; reads on an answer's
    deadline pass ``finish_when_cancelled=False``."""
    return guarded(f"memory store {operation}", finish_when_cancelled=finish_when_cancelled)


class MemoryStore:
    """The built-in memory store. Implements ``MemoryRecall``. Create it with ``await MemoryStore.open(url)``."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        embedder: Embedder | None = None,
        embedding_settings: EmbeddingSettings | None = None,
        cache_max_vectors: int = DEFAULT_CACHE_MAX_VECTORS,
        lexical_weight: float = DEFAULT_LEXICAL_WEIGHT,
    ) -> None:
        self.engine = engine
        self.lexical_weight = lexical_weight  # weight of the lexical side of hybrid recall (recall.py)
        # A consistent snapshot across statements; writes start with BEGIN IMMEDIATE on SQLite (db/session.py).
        self._read, self._write = db_session.Sessions.of(engine)
        self._reader = Reader(engine)  # history and recall reads: one thread hop on SQLite (see exchanges.py)
        self._embedder = embedder
        self._embedding_settings = embedding_settings
        self._embedder_lock = asyncio.Lock()
        self.vectors = VectorCache(cache_max_vectors)
        # Recall's blocking part (embedding the query; on SQLite the reads and the search too) runs here, not on the
        # loop's shared default executor: a recall past its time is abandoned, not waited for (researchcrew.blocking).
        self.recall_pool = BlockingPool("memory-recall", max_workers=RECALL_WORKERS)

    # ---- lifecycle -----------------------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        url: str,
        *,
        embedder: Embedder | None = None,
        embedding_settings: EmbeddingSettings | None = None,
        cache_max_vectors: int = DEFAULT_CACHE_MAX_VECTORS,
        lexical_weight: float = DEFAULT_LEXICAL_WEIGHT,
    ) -> MemoryStore:
        """Connect to ``url`` and migrate its schema to the newest revision.

        ``embedder`` embeds exchanges and recall queries; without one, ``get_embedder(embedding_settings)`` is
        loaded on first use (export, forget, entities and the outbox never need it).
        """
        try:
            engine = create_engine(url)
        except OSError as error:  # the SQLite file's folder cannot be created
            raise MemoryStoreError(f"cannot open the memory store at {mask_url(url)}: {error}") from error
        try:
            await upgrade(engine)
        except (SQLAlchemyError, OSError) as error:
            await engine.dispose()
            safe_url = engine.url.render_as_string(hide_password=True)
            raise MemoryStoreError(f"cannot open the memory store at {safe_url}: {error}") from error
        return cls(
            engine,
            embedder=embedder,
            embedding_settings=embedding_settings,
            cache_max_vectors=cache_max_vectors,
            lexical_weight=lexical_weight,
        )

    @classmethod
    async def from_settings(cls, settings: Settings, *, embedder: Embedder | None = None) -> MemoryStore:
        """The store configured by ``settings.memory`` (default: ``memory.db`` in the data directory). Opening
        (connecting and migrating) is bounded by ``memory.connect_timeout_s``: a server that does not answer is a
        ``MemoryStoreError``, not a hang."""
        if settings.memory.database_url is None:
            settings.ensure_data_dir()
        timeout_s = settings.memory.connect_timeout_s
        url = settings.memory_database_url
        try:
            async with asyncio.timeout(timeout_s):
                return await cls.open(
                    url,
                    embedder=embedder,
                    embedding_settings=settings.embedding,
                    lexical_weight=settings.memory.lexical_weight,
                )
        except TimeoutError as error:
            raise MemoryStoreError(
                f"cannot open the memory store at {mask_url(url)}: no answer within {timeout_s:g} s "
                "(RESEARCHCREW_MEMORY__CONNECT_TIMEOUT_S)"
            ) from error

    async def close(self) -> None:
        self.recall_pool.close()
        self.vectors.clear()
        await self.dispose_connections()

    async def dispose_connections(self) -> None:
        """Close every pooled connection; the next operation connects afresh (after a fork, a server restart)."""
        self._reader.dispose()
        await self.engine.dispose()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    def __repr__(self) -> str:
        return f"MemoryStore({self.engine.url.render_as_string(hide_password=True)!r})"

    async def ping(self) -> None:
        """One round trip to the database (the readiness probe); the driver's own exception when it fails."""
        await db_session.ping(self.engine)

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[AsyncSession]:
        async with self._write.begin() as session:
            yield session

    async def _get_embedder(self) -> Embedder:
        if self._embedder is None:
            async with self._embedder_lock:
                if self._embedder is None:
                    from researchcrew.embedding.embedder import get_embedder
                    from researchcrew.settings import EmbeddingSettings

                    settings = self._embedding_settings or EmbeddingSettings()
                    self._embedder = await asyncio.to_thread(get_embedder, settings)
        return self._embedder

    # ---- conversation history ------------------------------------------------------------------------------
    @_guarded("add_exchange")
    async def add_exchange(
        self,
        *,
        user_id: str,
        session_id: str,
        query: Query,
        response: FinalResponse,
        context: dict[str, Any] | None = None,
    ) -> ExchangeRecord:
        """Store the message pair (question, answer) of one response, with its sources, citations and embedding.

        Idempotent on ``response.response_id``: storing it again returns the stored record with ``created=False``.
        If the embedding model cannot be loaded the exchange is still stored (history matters more than recall),
        without an embedding, and a warning is logged.
        """
        if query.user_id != user_id or query.session_id != session_id:
            raise ValueError(
                f"query belongs to user {query.user_id!r}/session {query.session_id!r}, "
                f"not {user_id!r}/{session_id!r}: refusing to file it under another conversation"
            )
        existing = await self._exchange(response.response_id)
        if existing is not None:
            return self._owned(existing, user_id)
        blob, model_name = await self._embed_exchange(query.text, response.answer)
        now = _utcnow()
        async with self._writing() as session:
            # First bump the user's version: it locks the user's row, so this user's writes commit in id order
            # (what the recall cache relies on; see recall.py).
            await session.execute(
                dialect_insert(self.backend, UserStateRow)
                .values(user_id=user_id, epoch=uuid.uuid4().hex, generation=1, updated_at=now)
                .on_conflict_do_update(
                    index_elements=["user_id"],
                    set_={"generation": UserStateRow.generation + 1, "updated_at": now},
                )
            )
            values: dict[str, Any] = {
                "response_id": response.response_id,
                "user_id": user_id,
                "session_id": session_id,
                "query_id": query.query_id,
                "asked_at": query.asked_at,
                "answered_at": response.created_at,
                "stored_at": now,
                "sources_used": [r.source_type for r in response.source_reports if r.status == "success"],
                "source_reports": [r.model_dump(mode="json") for r in response.source_reports],
                "citations": [c.model_dump(mode="json") for c in response.citations],
                "context": context,
                "confidence": response.confidence,
                "answer_kind": response.answer_kind,
            }
            add = dialect_insert(self.backend, ExchangeRow).values(**values, embedding=blob, embedding_model=model_name)
            exchange_id = (
                await session.execute(
                    add.on_conflict_do_nothing(index_elements=["response_id"]).returning(ExchangeRow.id)
                )
            ).scalar_one_or_none()
            if exchange_id is not None:
                messages = {
                    "user": (query.text, query.asked_at),
                    "assistant": (response.answer, response.created_at),
                }
                await session.execute(
                    insert(MessageRow),
                    [
                        {
                            "message_id": message_id(response.response_id, role),
                            "exchange_id": exchange_id,
                            "user_id": user_id,
                            "session_id": session_id,
                            "role": role,
                            "content": content,
                            "created_at": created_at,
                        }
                        for role, (content, created_at) in messages.items()
                    ],
                )
        if exchange_id is None:  # stored meanwhile by a concurrent call: return what is stored
            stored = await self._exchange(response.response_id)
            if stored is None:  # pragma: no cover - only if it was deleted between our insert and this read
                raise MemoryStoreError(f"exchange {response.response_id} vanished right after it was stored")
            return self._owned(stored, user_id)
        return ExchangeRecord(
            **values,
            question=query.text,
            answer=response.answer,
            user_message_id=message_id(response.response_id, "user"),
            assistant_message_id=message_id(response.response_id, "assistant"),
            created=True,
        )

    @staticmethod
    def _owned(record: ExchangeRecord, user_id: str) -> ExchangeRecord:
        if record.user_id != user_id:
            # Response ids are uuids; a clash means a caller reused one. Never hand out another user's exchange.
            raise MemoryStoreError(f"response id {record.response_id} is already stored for another user")
        return record

    async def _embed_exchange(self, question: str, answer: str) -> tuple[bytes | None, str | None]:
        try:
            embedder = await self._get_embedder()
            vectors = await asyncio.to_thread(embedder.embed_documents, [exchange_text(question, answer)])
        except ModelUnavailableError as error:
            logger.warning("storing the exchange without a recall embedding: %s", error)
            return None, None
        return encode_vector(vectors[0]), getattr(embedder, "model_name", type(embedder).__name__)

    async def _exchange(self, response_id: str) -> ExchangeRecord | None:
        return await self._reader(exchanges.by_response_id, response_id)

    @_guarded("history", finish_when_cancelled=False)
    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]:
        """The latest ``limit`` exchanges of the session (of all the user's sessions when None), oldest first."""
        return await self._reader(exchanges.latest, user_id, session_id, limit)

    # ---- sessions ------------------------------------------------------------------------------------------
    @_guarded("session_summary", finish_when_cancelled=False)
    async def session_summary(self, *, user_id: str, session_id: str) -> SessionSummary | None:
        """The session's rolling summary, or None when none was stored yet (one primary-key read)."""
        async with self._read() as session:
            return await session_store.get(session, user_id=user_id, session_id=session_id)

    @_guarded("update_session_summary")
    async def update_session_summary(
        self, *, user_id: str, session_id: str, update: Callable[[SessionSummary | None], SessionSummary]
    ) -> SessionSummary:
        """Atomic read-modify-write of the session's summary: ``update`` gets the stored one (None at first) and
        returns the new one. Concurrent updates of one session serialise."""
        async with self._writing() as session:
            return await session_store.update_summary(
                session, user_id=user_id, session_id=session_id, update_fn=update, now=_utcnow()
            )

    @_guarded("last_session", finish_when_cancelled=False)
    async def last_session(self, *, user_id: str) -> str | None:
        """The session of the user's most recently asked, remembered question (what ``ask --continue`` continues)."""
        async with self._read() as session:
            return await session_store.last_session(session, user_id=user_id)

    # ---- recall --------------------------------------------------------------------------------------------
    @_guarded("recall", finish_when_cancelled=False)
    async def recall(
        self,
        *,
        user_id: str,
        query_text: str,
        session_id: str | None = None,
        limit: int = 3,
        min_relevance: float = 0.0,
    ) -> list[RecalledExchange]:
        """Hybrid recall over the user's exchanges (``MemoryRecall``; dense + lexical, see recall.py): embed the
        query, bring the user's cached vectors and lexical index up to date (one indexed read, plus any new rows),
        one matrix-vector product and one pass over the query terms' postings, read the hits."""
        if limit <= 0 or not query_text.strip():
            return []
        try:
            embedder = await self._get_embedder()
        except ModelUnavailableError as error:
            raise MemoryStoreError(f"recall needs the embedding model: {error}") from error
        if self._reader.threaded:  # SQLite: embedding, reads and search in one worker-thread hop
            found = await self.recall_pool.run(
                self._recall_in_thread, embedder, query_text, user_id, session_id, limit, min_relevance
            )
        else:  # PostgreSQL: the version check runs while the query is embedded
            embedding = asyncio.ensure_future(self.recall_pool.run(embedder.embed_query, query_text))
            try:
                async with self._reader.connect_async() as connection:
                    vectors = await connection.run_sync(self._refresh, user_id, embedder.dimension)
                    query_vector = await embedding
                    found = await connection.run_sync(
                        self._hits, vectors, user_id, query_vector, session_id, limit, min_relevance, query_text
                    )
            finally:
                embedding.cancel()  # only matters when the database failed first; the thread finishes on its own
        return [RecalledExchange.of(record, score) for record, score in found]

    def _recall_in_thread(
        self, embedder: Embedder, query_text: str, user_id: str, session_id: str | None, limit: int, floor: float
    ) -> list[tuple[ExchangeRecord, float]]:
        query_vector = embedder.embed_query(query_text)
        with self._reader.connect_sync() as connection:
            vectors = self._refresh(connection, user_id, len(query_vector))
            return self._hits(connection, vectors, user_id, query_vector, session_id, limit, floor, query_text)

    def _refresh(self, connection: Connection, user_id: str, dimension: int) -> UserVectors:
        """The user's cached vectors, brought up to date (see recall.py)."""
        return self.vectors.refresh(
            user_id, dimension, lambda known: exchanges.vector_delta(connection, user_id, known)
        )

    def _hits(
        self,
        connection: Connection,
        vectors: UserVectors,
        user_id: str,
        query_vector: Vector,
        session_id: str | None,
        limit: int,
        floor: float,
        query_text: str = "",
    ) -> list[tuple[ExchangeRecord, float]]:
        """Search the vectors and read the hits: (record, relevance), best first."""
        hits = vectors.search(
            query_vector,
            session_id=session_id,
            limit=limit,
            min_relevance=floor,
            query_text=query_text,
            lexical_weight=self.lexical_weight,
        )
        if not hits:
            return []
        by_id = exchanges.by_ids(connection, user_id, [row_id for row_id, _ in hits])
        # A row deleted between the search and the read (a concurrent forget) is skipped.
        return [(by_id[row_id], score) for row_id, score in hits if row_id in by_id]

    # ---- entity graph --------------------------------------------------------------------------------------
    @_guarded("record_entities")
    async def record_entities(
        self, *, user_id: str, response_id: str, mentions: Sequence[EntityMention]
    ) -> tuple[int, int]:
        """Record the entities one answer mentions; returns (added, updated).

        An entity is identified by its normalised name within the user's graph. A new one is added; a known one
        mentioned by a new answer is updated (mention count + 1, last seen, confidence combined by noisy-OR, a
        specific type replacing a generic one). Every mention is kept in the mentions table, one per (entity,
        answer): recording the same answer again (a retry) changes nothing and counts as neither.
        """
        async with self._writing() as session:
            return await graph_store.record_entities(
                session, user_id=user_id, response_id=response_id, mentions=mentions, now=_utcnow()
            )

    @_guarded("record_relationships")
    async def record_relationships(
        self, *, user_id: str, relations: Sequence[EntityRelation], response_id: str | None = None
    ) -> int:
        """Record relations between entities; returns how many were new.

        Each relation is kept in both directions (the inverse link marked ``inverse``), so ``relationships(
        entity_name=X)`` finds X's links whichever side X was on. Entities a relation names that were never
        mentioned are created (type "other"). A repeat updates count, confidence (noisy-OR) and last seen; with
        ``response_id``, repeats from the same answer (several sentences, or a retry) count once.
        """
        async with self._writing() as session:
            return await graph_store.record_relationships(
                session, user_id=user_id, relations=relations, response_id=response_id, now=_utcnow()
            )

    @_guarded("entities", finish_when_cancelled=False)
    async def entities(self, *, user_id: str, query_text: str | None = None, limit: int = 20) -> list[EntityRecord]:
        """The user's entities, most mentioned first; with ``query_text``, only those it names (then those
        sharing a word with it)."""
        async with self._read() as session:
            return await graph_store.entities(session, user_id=user_id, query_text=query_text, limit=limit)

    @_guarded("relationships", finish_when_cancelled=False)
    async def relationships(self, *, user_id: str, entity_name: str | None = None) -> list[RelationshipRecord]:
        """Every relation as recorded (no inverse links); with ``entity_name``, all links from that entity,
        inverse ones included."""
        async with self._read() as session:
            return await graph_store.relationships(session, user_id=user_id, entity_name=entity_name)

    # ---- preferences ---------------------------------------------------------------------------------------
    @_guarded("get_preferences", finish_when_cancelled=False)
    async def get_preferences(self, *, user_id: str) -> StoredPreferences:
        """The user's stored preferences and counters (defaults when nothing was saved)."""
        async with self._read() as session:
            return await graph_store.get_preferences(session, user_id=user_id)

    @_guarded("save_preferences")
    async def save_preferences(self, *, user_id: str, preferences: StoredPreferences) -> bool:
        """Store them; True when they differ from what was stored (``updated_at`` is ignored and set now)."""
        async with self._writing() as session:
            return await graph_store.save_preferences(session, user_id=user_id, preferences=preferences, now=_utcnow())

    @_guarded("update_preferences")
    async def update_preferences(
        self, *, user_id: str, update: Callable[[StoredPreferences], StoredPreferences]
    ) -> tuple[StoredPreferences, bool]:
        """Atomic read-modify-write: ``update`` gets a copy of the stored preferences and returns the new ones.
        Returns (the preferences now stored, whether they changed). Concurrent updates of one user serialise."""
        async with self._writing() as session:
            return await graph_store.update_preferences(session, user_id=user_id, update=update, now=_utcnow())

    # ---- outbox --------------------------------------------------------------------------------------------
    @_guarded("enqueue_outbox")
    async def enqueue_outbox(self, *, user_id: str, kind: str, payload: dict[str, Any], idempotency_key: str) -> bool:
        """Persist a write for the worker to deliver. False when that key is already queued or delivered."""
        write = OutboxWrite(kind=kind, payload=payload, idempotency_key=idempotency_key)
        async with self._writing() as session:
            return await outbox_store.enqueue(session, user_id=user_id, write=write, now=_utcnow())

    @_guarded("claim_due_outbox")
    async def claim_due_outbox(
        self, *, limit: int = 100, now: datetime | None = None, lease_s: float = 30.0
    ) -> list[OutboxItem]:
        """Lease up to ``limit`` due items for ``lease_s`` seconds; no other claimer gets them meanwhile."""
        async with self._writing() as session:
            return await outbox_store.claim_due(session, limit=limit, now=now or _utcnow(), lease_s=lease_s)

    @_guarded("mark_delivered")
    async def mark_delivered(self, item_id: int) -> None:
        """The item reached its destination; it is never claimed again."""
        async with self._writing() as session:
            await outbox_store.mark_delivered(session, item_ids=[item_id], now=_utcnow())

    @_guarded("mark_delivered_many")
    async def mark_delivered_many(self, item_ids: Sequence[int]) -> int:
        """Several items reached their destination: one transaction (one commit, one write lock) for all of them.
        Returns how many were not already marked delivered."""
        if not item_ids:
            return 0
        async with self._writing() as session:
            return await outbox_store.mark_delivered(session, item_ids=item_ids, now=_utcnow())

    @_guarded("mark_failed")
    async def mark_failed(self, item_id: int, *, error: str, next_attempt_at: datetime) -> None:
        """Delivery failed: release the lease and retry at ``next_attempt_at`` (no effect once delivered or dead)."""
        async with self._writing() as session:
            await outbox_store.mark_failed(session, item_id=item_id, error=error, next_attempt_at=next_attempt_at)

    @_guarded("mark_dead")
    async def mark_dead(self, item_id: int, *, error: str) -> bool:
        """The destination refused the write for good: it is kept with ``error`` (export lists it, state "dead")
        but never claimed again, and no longer counts as pending. False when it was already delivered or dead."""
        async with self._writing() as session:
            return await outbox_store.mark_dead(session, item_id=item_id, error=error, now=_utcnow())

    @_guarded("outbox_counts")
    async def outbox_counts(self, *, now: datetime | None = None) -> dict[str, int]:
        """pending (neither delivered nor dead), due, leased, delivered, dead (refused for good), failed_attempts
        (sum over all rows), failing (pending with ≥1 failure)."""
        async with self._read() as session:
            return await outbox_store.counts(session, now=now or _utcnow())

    @_guarded("prune_outbox")
    async def prune_outbox(self, *, delivered_before: datetime) -> int:
        """Delete items delivered before then. Their keys can then be enqueued again: keep them as long as a
        duplicate enqueue could still arrive."""
        async with self._writing() as session:
            return await outbox_store.prune_delivered(session, delivered_before=delivered_before)

    # ---- answer tables (issue 22) ---------------------------------------------------------------------------
    @_guarded("save_answer_table")
    async def save_answer_table(
        self,
        *,
        user_id: str,
        session_id: str,
        response_id: str,
        question: str,
        table: AnswerTable,
        rows: Sequence[TableRow],
    ) -> None:
        """Persist a structured answer's whole result set (``rows``; ``table`` is the page the answer showed) with
        its session, for "show the rest" and CSV export."""
        async with self._writing() as session:
            await answer_tables.save(
                session,
                user_id=user_id,
                session_id=session_id,
                response_id=response_id,
                question=question,
                table=table,
                rows=rows,
                now=_utcnow(),
            )

    @_guarded("answer_table", finish_when_cancelled=False)
    async def answer_table(self, *, user_id: str, session_id: str, table_id: str) -> StoredAnswerTable | None:
        """The table ``table_id`` of the user's session; None when there is none (or it is another's)."""
        async with self._read() as session:
            return await answer_tables.one(session, user_id=user_id, session_id=session_id, table_id=table_id)

    @_guarded("last_answer_table", finish_when_cancelled=False)
    async def last_answer_table(self, *, user_id: str, session_id: str) -> StoredAnswerTable | None:
        """The session's latest answer table, if any."""
        async with self._read() as session:
            return await answer_tables.last(session, user_id=user_id, session_id=session_id)

    @_guarded("mark_table_shown")
    async def mark_table_shown(self, *, user_id: str, table_id: str, shown: int) -> None:
        """Record that the session has seen the table's rows up to ``shown`` (where "show the rest" goes on)."""
        async with self._writing() as session:
            await answer_tables.mark_shown(session, user_id=user_id, table_id=table_id, shown=shown)

    # ---- privacy -------------------------------------------------------------------------------------------
    @_guarded("export_user")
    async def export_user(self, *, user_id: str) -> dict[str, Any]:
        """Everything stored about the user, JSON-able (embeddings left out: they are derived from the text).

        ``outbox`` lists every write queued for Zep with its ``state``: pending, delivered (until pruned) or dead
        (refused for good, with the reason in ``last_error``)."""
        async with self._read() as session:
            stmt = exchanges.exchange_select().where(ExchangeRow.user_id == user_id)
            stmt = stmt.order_by(ExchangeRow.asked_at, ExchangeRow.id)
            history = [exchanges.record(row) for row in (await session.execute(stmt)).all()]
            entities = await graph_store.entities(session, user_id=user_id, query_text=None, limit=1_000_000)
            mentions = await graph_store.mentions(session, user_id=user_id)
            relations = await graph_store.relationships(session, user_id=user_id, entity_name=None)
            has_preferences = (
                await session.execute(select(PreferencesRow.user_id).where(PreferencesRow.user_id == user_id))
            ).first() is not None
            preferences = await graph_store.get_preferences(session, user_id=user_id)
            sessions = await session_store.sessions_of(session, user_id=user_id)
            outbox = await outbox_store.items_of(session, user_id=user_id)
            tables = await answer_tables.of_user(session, user_id=user_id)
            deep_runs = (
                await session.execute(
                    select(DeepRunRow.__table__).where(DeepRunRow.user_id == user_id).order_by(DeepRunRow.created_at)
                )
            ).all()
            usage = (
                await session.execute(
                    select(UsageRow.__table__).where(UsageRow.user_id == user_id).order_by(UsageRow.at, UsageRow.id)
                )
            ).all()
            chat_sessions = (
                await session.execute(
                    select(ChatSessionRow.session_id, ChatSessionRow.title, ChatSessionRow.created_at)
                    .where(ChatSessionRow.user_id == user_id)
                    .order_by(ChatSessionRow.created_at, ChatSessionRow.id)
                )
            ).all()
        return {
            "user_id": user_id,
            "exported_at": _utcnow().isoformat(),
            "exchanges": [e.model_dump(mode="json") for e in history],
            "entities": [e.model_dump(mode="json") for e in entities],
            "entity_mentions": [m.model_dump(mode="json") for m in mentions],
            "relationships": [r.model_dump(mode="json") for r in relations],
            "preferences": preferences.model_dump(mode="json") if has_preferences else None,
            "session_summaries": [s.model_dump(mode="json") for s in sessions],
            "outbox": [i.model_dump(mode="json") for i in outbox],
            "deep_runs": [_json_row(row) for row in deep_runs],
            "usage": [_json_row(row) for row in usage],
            "sessions": [
                {"session_id": sid, "title": title, "created_at": created.isoformat()}
                for sid, title, created in chat_sessions
            ],
            "answer_tables": [table.model_dump(mode="json") for table in tables],
        }

    @_guarded("forget_user")
    async def forget_user(self, *, user_id: str, then_enqueue: Sequence[OutboxWrite] = ()) -> dict[str, int]:
        """Delete everything stored about the user, in one transaction; returns rows deleted per table.

        Pending outbox writes of the user are deleted too (they carry the user's data). ``then_enqueue`` is
        enqueued in the same transaction, e.g. a write that deletes the user in Zep as well.
        """
        counts: dict[str, int] = {}
        async with self._writing() as session:
            for name, table in (
                ("entity_mentions", MentionRow),
                ("relationships", RelationshipRow),
                ("entities", EntityRow),
                ("messages", MessageRow),
                ("exchanges", ExchangeRow),
                ("preferences", PreferencesRow),
                ("session_summaries", SessionSummaryRow),
                ("outbox", OutboxRow),
                ("deep_runs", DeepRunRow),
                ("sessions", ChatSessionRow),  # the chat service's session titles
                ("usage", UsageRow),  # what each answer spent (the usage view and the budget)
                ("answer_tables", AnswerTableRow),  # structured answers' result sets (issue 22)
            ):
                core: Any = table.__table__
                result = await session.execute(delete(core).where(core.c.user_id == user_id))
                counts[name] = int(result.rowcount)  # type: ignore[attr-defined]
            # Batch jobs hold the user's questions and answers too; their runs and results go with them (cascade).
            from researchcrew.db.job_tables import JobRow

            result = await session.execute(delete(JobRow).where(JobRow.owner == user_id))
            counts["jobs"] = int(result.rowcount)  # type: ignore[attr-defined]
            # Bookkeeping, not the user's data (not counted): its removal tells other processes' caches to drop
            # the user (a user seen again gets a new epoch).
            await session.execute(delete(UserStateRow).where(UserStateRow.user_id == user_id))
            now = _utcnow()
            for write in then_enqueue:
                await outbox_store.enqueue(session, user_id=user_id, write=write, now=now)
        self.vectors.forget(user_id)
        logger.info("forgot user %s: %s", user_id, counts)
        return counts


def _json_row(row: Any) -> dict[str, Any]:
    """A table row as JSON-able values (datetimes as ISO text)."""
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in row._mapping.items()}
