"""The chat service's sessions: one row per conversation (table ``service_sessions``, Alembic revision 0008).

A session row holds what the exchanges table does not: the owner, a title, when it was created and last used. Its
exchanges are the ones filed under the same (user_id, session_id), so reading a session is one indexed filter on
``memory_exchanges``. Every method takes the user id, and a session of another user is exactly as absent as one
that never existed (``None`` / ``False``): the API turns both into the same 404.

Deleting a session deletes its exchanges (and their messages and entity mentions) and gives the user a new memory
epoch, so every process's recall cache reloads that user instead of recalling a deleted exchange. Entity totals
learned from those exchanges are kept (``memory forget`` removes everything).

Open it on the runtime's memory store: ``ChatSessions(await runtime.memory_store())``.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from researchcrew.db.failures import guarded
from researchcrew.db.models import ChatSessionRow, ExchangeRow, MentionRow, MessageRow, UserStateRow
from researchcrew.db.session import Sessions
from researchcrew.memory import exchanges
from researchcrew.memory.records import ExchangeRecord
from researchcrew.memory.store import MemoryStore

logger = logging.getLogger(__name__)

MAX_TITLE_CHARS = 200


class ChatSession(BaseModel):
    """A conversation as the API lists it."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(description="The session's id (made by the service).")
    title: str = Field(description="The session's title; the first question's opening until it is renamed.")
    created_at: datetime = Field(description="When the session was created (UTC).")
    updated_at: datetime = Field(description="When it was last asked a question or renamed (UTC).")
    exchanges: int = Field(default=0, ge=0, description="How many answered questions it holds.")


def title_from(question: str) -> str:
    """A title from a question: its first line, shortened at a word boundary."""
    text = " ".join(question.split())
    if len(text) <= 80:
        return text
    return text[:80].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ChatSessions:
    """Sessions of the chat service, per user, in the memory store's database."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._read, self._write = Sessions.of(store.engine)

    @guarded("creating a session")
    async def create(self, user_id: str, *, title: str = "") -> ChatSession:
        now = _utcnow()
        row = ChatSessionRow(
            session_id=uuid.uuid4().hex, user_id=user_id, title=title[:MAX_TITLE_CHARS], created_at=now, updated_at=now
        )
        async with self._write.begin() as session:
            session.add(row)
        return ChatSession(session_id=row.session_id, title=row.title, created_at=now, updated_at=now)

    @guarded("recording a conversation's session")
    async def ensure(self, user_id: str, session_id: str, *, first_question: str) -> bool:
        """Make the session if the user has none of this id (an OpenAI conversation's, see
        ``openai_compat/conversation.py``). True when it was made now. A session that exists is found with a read
        (on SQLite a write transaction would queue behind every other writer)."""
        now = _utcnow()
        stmt = select(ChatSessionRow.id).where(
            ChatSessionRow.user_id == user_id, ChatSessionRow.session_id == session_id
        )
        async with self._read() as session:
            if (await session.execute(stmt)).first() is not None:
                return False
        try:
            async with self._write.begin() as session:
                if (await session.execute(stmt)).first() is not None:
                    return False
                session.add(
                    ChatSessionRow(
                        session_id=session_id,
                        user_id=user_id,
                        title=title_from(first_question),
                        created_at=now,
                        updated_at=now,
                    )
                )
        except IntegrityError:  # made at the same moment by a concurrent request of the same conversation
            return False
        logger.info("new session %s of user %s from an OpenAI conversation", session_id, user_id)
        return True

    @guarded("listing sessions")
    async def list_sessions(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[ChatSession]:
        """The user's sessions, most recently used first."""
        counts = (
            select(ExchangeRow.session_id, func.count().label("n"))
            .where(ExchangeRow.user_id == user_id)
            .group_by(ExchangeRow.session_id)
            .subquery()
        )
        stmt = (
            select(ChatSessionRow, func.coalesce(counts.c.n, 0))
            .outerjoin(counts, counts.c.session_id == ChatSessionRow.session_id)
            .where(ChatSessionRow.user_id == user_id)
            .order_by(ChatSessionRow.updated_at.desc(), ChatSessionRow.id.desc())
            .limit(limit)
            .offset(offset)
        )
        async with self._read() as session:
            rows = (await session.execute(stmt)).all()
        return [_session(row, count) for row, count in rows]

    @guarded("reading a session")
    async def get(self, user_id: str, session_id: str) -> ChatSession | None:
        async with self._read() as session:
            row = await self._row(session, user_id, session_id)
            if row is None:
                return None
            stmt = select(func.count()).where(ExchangeRow.user_id == user_id, ExchangeRow.session_id == session_id)
            count = (await session.execute(stmt)).scalar_one()
        return _session(row, count)

    @guarded("reading a session's exchanges")
    async def exchanges_of(self, user_id: str, session_id: str, *, limit: int = 100) -> list[ExchangeRecord]:
        """The session's latest ``limit`` exchanges, oldest first (empty for a session that is not the user's)."""
        async with self.store.engine.connect() as connection:
            return await connection.run_sync(exchanges.latest, user_id, session_id, limit)

    @guarded("renaming a session")
    async def rename(self, user_id: str, session_id: str, title: str) -> ChatSession | None:
        async with self._write.begin() as session:
            row = await self._row(session, user_id, session_id)
            if row is None:
                return None
            row.title, row.updated_at = title[:MAX_TITLE_CHARS], _utcnow()
        return await self.get(user_id, session_id)

    @guarded("recording a question in a session")
    async def touch(self, user_id: str, session_id: str, *, question: str | None = None) -> bool:
        """Mark the session used now; an untitled one takes its title from ``question``. False: not the user's."""
        async with self._write.begin() as session:
            row = await self._row(session, user_id, session_id)
            if row is None:
                return False
            row.updated_at = _utcnow()
            if not row.title and question:
                row.title = title_from(question)
        return True

    @guarded("deleting a session")
    async def delete(self, user_id: str, session_id: str) -> bool:
        """Delete the session and its exchanges. False when the user has no such session."""
        async with self._write.begin() as session:
            row = await self._row(session, user_id, session_id)
            if row is None:
                return False
            response_ids = select(ExchangeRow.response_id).where(
                ExchangeRow.user_id == user_id, ExchangeRow.session_id == session_id
            )
            await session.execute(
                delete(MentionRow).where(MentionRow.user_id == user_id, MentionRow.response_id.in_(response_ids))
            )
            await session.execute(
                delete(MessageRow).where(MessageRow.user_id == user_id, MessageRow.session_id == session_id)
            )
            removed = await session.execute(
                delete(ExchangeRow).where(ExchangeRow.user_id == user_id, ExchangeRow.session_id == session_id)
            )
            if removed.rowcount:  # type: ignore[attr-defined]
                # A new epoch: every process's recall cache reloads this user (see memory/recall.py).
                await session.execute(
                    update(UserStateRow)
                    .where(UserStateRow.user_id == user_id)
                    .values(epoch=uuid.uuid4().hex, generation=UserStateRow.generation + 1, updated_at=_utcnow())
                )
            await session.delete(row)
        self.store.vectors.forget(user_id)
        logger.info("deleted session %s of user %s", session_id, user_id)
        return True

    @staticmethod
    async def _row(session: AsyncSession, user_id: str, session_id: str) -> ChatSessionRow | None:
        stmt = select(ChatSessionRow).where(ChatSessionRow.user_id == user_id, ChatSessionRow.session_id == session_id)
        return (await session.execute(stmt)).scalar_one_or_none()


def _session(row: ChatSessionRow, count: int) -> ChatSession:
    return ChatSession(
        session_id=row.session_id,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        exchanges=int(count),
    )
