"""SQL of the answer tables (issue 22): the whole result set of each structured answer, per user and session.

Every read filters on the user (and the session): a table id of another user's or another session's table reads as
nothing, which the doors answer with 404.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from researchcrew.contracts.tables import AnswerTable, TableRow
from researchcrew.db.models import AnswerTableRow
from researchcrew.memory.records import StoredAnswerTable

MAX_STORED_ROWS = 50_000  # a result set larger than this is stored cut (and says so in its notes)


async def save(
    session: AsyncSession,
    *,
    user_id: str,
    session_id: str,
    response_id: str,
    question: str,
    table: AnswerTable,
    rows: Sequence[TableRow],
    now: datetime,
) -> None:
    notes = list(table.notes)
    if len(rows) > MAX_STORED_ROWS:
        notes.append(f"Only the first {MAX_STORED_ROWS:,} of {len(rows):,} rows were kept for paging and export.")
    kept = list(rows[:MAX_STORED_ROWS])
    session.add(
        AnswerTableRow(
            table_id=table.table_id,
            user_id=user_id,
            session_id=session_id,
            response_id=response_id,
            question=question,
            title=table.title,
            columns=[column.model_dump(mode="json") for column in table.columns],
            rows=[row.model_dump(mode="json") for row in kept],
            aggregates=[aggregate.model_dump(mode="json") for aggregate in table.aggregates],
            notes=notes,
            total_rows=len(kept),
            page_size=max(1, len(table.rows)),
            shown=min(len(kept), table.offset + len(table.rows)),
            created_at=now,
        )
    )


def _record(row: AnswerTableRow) -> StoredAnswerTable:
    return StoredAnswerTable.model_validate(
        {
            "table_id": row.table_id,
            "user_id": row.user_id,
            "session_id": row.session_id,
            "response_id": row.response_id,
            "question": row.question,
            "title": row.title,
            "columns": row.columns,
            "rows": row.rows,
            "aggregates": row.aggregates,
            "notes": row.notes,
            "page_size": row.page_size,
            "shown": row.shown,
            "created_at": row.created_at,
        }
    )


async def one(session: AsyncSession, *, user_id: str, session_id: str, table_id: str) -> StoredAnswerTable | None:
    stmt = select(AnswerTableRow).where(
        AnswerTableRow.table_id == table_id,
        AnswerTableRow.user_id == user_id,
        AnswerTableRow.session_id == session_id,
    )
    row = (await session.execute(stmt)).scalar_one_or_none()
    return None if row is None else _record(row)


async def last(session: AsyncSession, *, user_id: str, session_id: str) -> StoredAnswerTable | None:
    stmt = (
        select(AnswerTableRow)
        .where(AnswerTableRow.user_id == user_id, AnswerTableRow.session_id == session_id)
        .order_by(AnswerTableRow.created_at.desc())
        .limit(1)
    )
    row = (await session.execute(stmt)).scalar_one_or_none()
    return None if row is None else _record(row)


async def of_user(session: AsyncSession, *, user_id: str) -> list[StoredAnswerTable]:
    stmt = select(AnswerTableRow).where(AnswerTableRow.user_id == user_id).order_by(AnswerTableRow.created_at)
    return [_record(row) for row in (await session.execute(stmt)).scalars()]


async def mark_shown(session: AsyncSession, *, user_id: str, table_id: str, shown: int) -> None:
    await session.execute(
        update(AnswerTableRow)
        .where(AnswerTableRow.table_id == table_id, AnswerTableRow.user_id == user_id)
        .values(shown=shown)
    )
