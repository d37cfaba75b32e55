"""The session-summary part of the memory store (SQL only; ``MemoryStore`` owns the sessions).

A summary is one row per (user, session) holding bounded JSON (``records.SessionSummary``). Updates are
read-modify-write in one write transaction: on PostgreSQL the row is created first and then locked with
``SELECT ... FOR UPDATE``, on SQLite the write transaction's ``BEGIN IMMEDIATE`` serialises writers, so two
exchanges of one session remembered at the same time both land in the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from researchcrew.db.engine import dialect_insert, dialect_name
from researchcrew.db.models import ExchangeRow, SessionSummaryRow
from researchcrew.memory.records import SessionSummary


def _from_row(row: SessionSummaryRow) -> SessionSummary:
    body: dict[str, Any] = dict(row.summary or {})
    return SessionSummary.model_validate(
        {
            "user_id": row.user_id,
            "session_id": row.session_id,
            "turns": row.turns,
            "recent": body.get("recent", []),
            "topics": body.get("topics", []),
            "updated_at": row.updated_at,
        }
    )


def _body(summary: SessionSummary) -> dict[str, Any]:
    return summary.model_dump(mode="json", include={"recent", "topics"})


async def get(
    session: AsyncSession, *, user_id: str, session_id: str, for_update: bool = False
) -> SessionSummary | None:
    stmt = select(SessionSummaryRow).where(
        SessionSummaryRow.user_id == user_id, SessionSummaryRow.session_id == session_id
    )
    if for_update:
        stmt = stmt.with_for_update()
    row = (await session.scalars(stmt)).one_or_none()
    return _from_row(row) if row is not None else None


async def update_summary(
    session: AsyncSession,
    *,
    user_id: str,
    session_id: str,
    update_fn: Callable[[SessionSummary | None], SessionSummary],
    now: datetime,
) -> SessionSummary:
    """Apply ``update_fn`` to the stored summary (None when there is none yet) and store its result."""
    created = (
        await session.execute(
            dialect_insert(dialect_name(session), SessionSummaryRow)
            .values(user_id=user_id, session_id=session_id, turns=0, summary={}, created_at=now, updated_at=now)
            .on_conflict_do_nothing(index_elements=["user_id", "session_id"])
            .returning(SessionSummaryRow.user_id)
        )
    ).first() is not None
    current = await get(session, user_id=user_id, session_id=session_id, for_update=True)
    new = update_fn(None if created or current is None else current)
    if (new.user_id, new.session_id) != (user_id, session_id):
        raise ValueError(
            f"a summary of {new.user_id!r}/{new.session_id!r} cannot be stored as {user_id!r}/{session_id!r}"
        )
    await session.execute(
        update(SessionSummaryRow)
        .where(SessionSummaryRow.user_id == user_id, SessionSummaryRow.session_id == session_id)
        .values(turns=new.turns, summary=_body(new), updated_at=now)
    )
    return new.model_copy(update={"updated_at": now})


async def sessions_of(session: AsyncSession, *, user_id: str) -> list[SessionSummary]:
    stmt = select(SessionSummaryRow).where(SessionSummaryRow.user_id == user_id).order_by(SessionSummaryRow.updated_at)
    return [_from_row(row) for row in (await session.scalars(stmt)).all()]


async def last_session(session: AsyncSession, *, user_id: str) -> str | None:
    """The session of the user's most recently asked question, or None. By the time asked, not stored: memory is
    written in the background, so an earlier question of another session may be stored after a later one."""
    stmt = (
        select(ExchangeRow.session_id)
        .where(ExchangeRow.user_id == user_id)
        .order_by(ExchangeRow.asked_at.desc(), ExchangeRow.id.desc())
        .limit(1)
    )
    return (await session.execute(stmt)).scalar_one_or_none()
