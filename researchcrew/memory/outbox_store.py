"""The outbox table's operations (SQL only; the delivery worker is memory/outbox.py, ``MemoryStore`` owns sessions).

Exactly-once enqueue: the idempotency key is unique; a second enqueue of the same key is a no-op, whether the
first is still pending or already delivered (until ``prune_delivered`` removes delivered rows).

Claiming is one statement, so two workers, in one process or several, never hold the same item:

    UPDATE memory_outbox SET lease_until = now + lease, claim_token = :token, attempts = attempts + 1
    WHERE id IN (SELECT id FROM memory_outbox WHERE <due> ORDER BY next_attempt_at, id LIMIT :n
                 [FOR UPDATE SKIP LOCKED])        -- PostgreSQL: concurrent claimers skip each other's rows
    RETURNING *

where <due> is "not delivered, next_attempt_at <= now, and not leased (or the lease ran out)". On SQLite the
statement runs under the database write lock (BEGIN IMMEDIATE), which serialises claimers. A worker that dies
mid-delivery loses its lease after ``lease_s`` and the item becomes due again, so nothing is lost; delivery
itself must be idempotent (Zep message ids), because such an item may have reached Zep before the crash.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from researchcrew.memory.db import dialect_insert, dialect_name
from researchcrew.memory.models import OutboxRow
from researchcrew.memory.records import OutboxItem, OutboxWrite

MAX_ERROR_CHARS = 4_000
_TABLE: Any = OutboxRow.__table__


def _item(row: Any) -> OutboxItem:
    return OutboxItem.model_validate(dict(row._mapping))


async def enqueue(session: AsyncSession, *, user_id: str, write: OutboxWrite, now: datetime) -> bool:
    stmt = (
        dialect_insert(dialect_name(session), OutboxRow)
        .values(
            idempotency_key=write.idempotency_key,
            user_id=user_id,
            kind=write.kind,
            payload=write.payload,
            created_at=now,
            next_attempt_at=now,
            attempts=0,
            failures=0,
        )
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(OutboxRow.id)
    )
    return (await session.execute(stmt)).scalar_one_or_none() is not None


def _due(now: datetime) -> list[Any]:
    return [
        _TABLE.c.delivered_at.is_(None),
        _TABLE.c.next_attempt_at <= now,
        or_(_TABLE.c.lease_until.is_(None), _TABLE.c.lease_until <= now),
    ]


async def claim_due(session: AsyncSession, *, limit: int, now: datetime, lease_s: float) -> list[OutboxItem]:
    due = select(_TABLE.c.id).where(*_due(now)).order_by(_TABLE.c.next_attempt_at, _TABLE.c.id).limit(limit)
    if dialect_name(session) == "postgresql":
        due = due.with_for_update(skip_locked=True)
    stmt = (
        update(_TABLE)
        # The due condition is repeated on the UPDATE so a row claimed by a concurrent statement is never taken.
        .where(_TABLE.c.id.in_(due.scalar_subquery()), *_due(now))
        .values(
            lease_until=now + timedelta(seconds=lease_s),
            claim_token=uuid.uuid4().hex,
            attempts=_TABLE.c.attempts + 1,
        )
        .returning(*_TABLE.c)
    )
    items = [_item(row) for row in (await session.execute(stmt)).all()]
    items.sort(key=lambda item: (item.next_attempt_at, item.id))
    return items


async def mark_delivered(session: AsyncSession, *, item_id: int, now: datetime) -> bool:
    stmt = (
        update(_TABLE)
        .where(_TABLE.c.id == item_id, _TABLE.c.delivered_at.is_(None))
        .values(delivered_at=now, lease_until=None, claim_token=None)
    )
    return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def mark_failed(session: AsyncSession, *, item_id: int, error: str, next_attempt_at: datetime) -> bool:
    stmt = (
        update(_TABLE)
        # A late failure report never un-delivers an item another worker delivered after this lease ran out.
        .where(_TABLE.c.id == item_id, _TABLE.c.delivered_at.is_(None))
        .values(
            failures=_TABLE.c.failures + 1,
            last_error=error[:MAX_ERROR_CHARS],
            next_attempt_at=next_attempt_at,
            lease_until=None,
            claim_token=None,
        )
    )
    return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def counts(session: AsyncSession, *, now: datetime) -> dict[str, int]:
    pending = _TABLE.c.delivered_at.is_(None)
    leased = pending & (_TABLE.c.lease_until > now)
    due = pending & (_TABLE.c.next_attempt_at <= now) & or_(_TABLE.c.lease_until.is_(None), _TABLE.c.lease_until <= now)
    stmt = select(
        func.count().filter(pending),
        func.count().filter(due),
        func.count().filter(leased),
        func.count().filter(_TABLE.c.delivered_at.is_not(None)),
        func.coalesce(func.sum(_TABLE.c.failures), 0),
        func.count().filter(pending & (_TABLE.c.failures > 0)),
    )
    row = (await session.execute(stmt)).one()
    names = ("pending", "due", "leased", "delivered", "failed_attempts", "failing")
    return {name: int(value or 0) for name, value in zip(names, row, strict=True)}


async def prune_delivered(session: AsyncSession, *, delivered_before: datetime) -> int:
    stmt = delete(_TABLE).where(_TABLE.c.delivered_at.is_not(None), _TABLE.c.delivered_at < delivered_before)
    return int((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def items_of(session: AsyncSession, *, user_id: str) -> list[OutboxItem]:
    rows = await session.execute(select(_TABLE).where(_TABLE.c.user_id == user_id).order_by(_TABLE.c.id))
    return [_item(row) for row in rows.all()]
