"""The outbox table's operations (SQL only; the delivery worker is memory/outbox.py, ``MemoryStore`` owns sessions).

A row is in one of three states: *pending* (``delivered_at`` and ``dead_at`` both NULL), *delivered* (``delivered_at``
set) or *dead* (``dead_at`` set: the destination refused the write for good; it is kept, listed by export, counted
apart, never claimed again).

Exactly-once enqueue: the idempotency key is unique; a second enqueue of the same key is a no-op, whether the
first is still pending, delivered (until ``prune_delivered`` removes delivered rows) or dead.

Claiming is one statement, so two workers, in one process or several, never hold the same item. On PostgreSQL:

    WITH picked AS MATERIALIZED (SELECT id FROM memory_outbox WHERE <due> ORDER BY next_attempt_at, id LIMIT :n
                                 FOR UPDATE SKIP LOCKED)
    UPDATE memory_outbox SET lease_until = now + lease, claim_token = :token, attempts = attempts + 1
    FROM picked WHERE memory_outbox.id = picked.id AND <due> RETURNING *

The CTE must be materialized: written as ``WHERE id IN (SELECT … LIMIT :n FOR UPDATE SKIP LOCKED)``, PostgreSQL
may run the subquery once per candidate row, each run skipping the rows the previous runs locked, so the UPDATE
took every due row whatever the limit. On SQLite the same ``IN (subquery)`` form runs once, under the database
write lock (BEGIN IMMEDIATE), which serialises claimers.

<due> is "pending, next_attempt_at <= now, and not leased (or the lease ran out)". A worker that dies
mid-delivery loses its lease after ``lease_s`` and the item becomes due again, so nothing is lost; delivery
itself must be idempotent (Zep message ids), because such an item may have reached Zep before the crash.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from researchcrew.db.engine import dialect_insert, dialect_name
from researchcrew.db.models import OutboxRow
from researchcrew.memory.records import OutboxItem, OutboxWrite

MAX_ERROR_CHARS = 4_000
_IDS_PER_STATEMENT = 500  # well under SQLite's bound-parameter limit
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


def _pending() -> Any:
    return _TABLE.c.delivered_at.is_(None) & _TABLE.c.dead_at.is_(None)


def _due(now: datetime) -> Any:
    return (
        _pending()
        & (_TABLE.c.next_attempt_at <= now)
        & or_(_TABLE.c.lease_until.is_(None), _TABLE.c.lease_until <= now)
    )


async def claim_due(session: AsyncSession, *, limit: int, now: datetime, lease_s: float) -> list[OutboxItem]:
    if limit <= 0:
        return []
    due = select(_TABLE.c.id).where(_due(now)).order_by(_TABLE.c.next_attempt_at, _TABLE.c.id).limit(limit)
    claim = update(_TABLE).values(
        lease_until=now + timedelta(seconds=lease_s),
        claim_token=uuid.uuid4().hex,
        attempts=_TABLE.c.attempts + 1,
    )
    if dialect_name(session) == "postgresql":
        # Materialized, so the LIMIT applies once (see the module docstring); concurrent claimers skip each
        # other's locked rows.
        picked = due.with_for_update(skip_locked=True).cte("picked").prefix_with("MATERIALIZED")
        claim = claim.where(_TABLE.c.id == picked.c.id, _due(now))
    else:
        # The due condition is repeated on the UPDATE so a row claimed by a concurrent statement is never taken.
        claim = claim.where(_TABLE.c.id.in_(due.scalar_subquery()), _due(now))
    items = [_item(row) for row in (await session.execute(claim.returning(*_TABLE.c))).all()]
    items.sort(key=lambda item: (item.next_attempt_at, item.id))
    return items


async def mark_delivered(session: AsyncSession, *, item_ids: Sequence[int], now: datetime) -> int:
    """Mark the items delivered (one statement per 500 ids, in the caller's transaction); returns how many were
    not delivered before.

    A dead item that is delivered after all (a worker whose lease ran out got it through) becomes delivered: the
    write did reach its destination."""
    ids = sorted(set(item_ids))  # sorted: concurrent callers lock rows in the same order (no deadlock)
    marked = 0
    for start in range(0, len(ids), _IDS_PER_STATEMENT):
        stmt = (
            update(_TABLE)
            .where(_TABLE.c.id.in_(ids[start : start + _IDS_PER_STATEMENT]), _TABLE.c.delivered_at.is_(None))
            .values(delivered_at=now, dead_at=None, lease_until=None, claim_token=None)
        )
        marked += int((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]
    return marked


async def mark_dead(session: AsyncSession, *, item_id: int, error: str, now: datetime) -> bool:
    """The destination refused the write for good: keep it, with the reason, and never claim it again."""
    stmt = (
        update(_TABLE)
        .where(_TABLE.c.id == item_id, _pending())
        .values(
            dead_at=now,
            failures=_TABLE.c.failures + 1,
            last_error=error[:MAX_ERROR_CHARS],
            lease_until=None,
            claim_token=None,
        )
    )
    return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def mark_failed(session: AsyncSession, *, item_id: int, error: str, next_attempt_at: datetime) -> bool:
    stmt = (
        update(_TABLE)
        # A late failure report never revives an item another worker delivered (or declared dead) after this
        # lease ran out.
        .where(_TABLE.c.id == item_id, _pending())
        .values(
            failures=_TABLE.c.failures + 1,
            last_error=error[:MAX_ERROR_CHARS],
            next_attempt_at=next_attempt_at,
            lease_until=None,
            claim_token=None,
        )
    )
    return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


COUNT_NAMES = ("pending", "due", "leased", "delivered", "dead", "failed_attempts", "failing")


async def counts(session: AsyncSession, *, now: datetime) -> dict[str, int]:
    pending = _pending()
    stmt = select(
        func.count().filter(pending),
        func.count().filter(_due(now)),
        func.count().filter(pending & (_TABLE.c.lease_until > now)),
        func.count().filter(_TABLE.c.delivered_at.is_not(None)),
        func.count().filter(_TABLE.c.dead_at.is_not(None)),
        func.coalesce(func.sum(_TABLE.c.failures), 0),
        func.count().filter(pending & (_TABLE.c.failures > 0)),
    )
    row = (await session.execute(stmt)).one()
    return {name: int(value or 0) for name, value in zip(COUNT_NAMES, row, strict=True)}


async def prune_delivered(session: AsyncSession, *, delivered_before: datetime) -> int:
    stmt = delete(_TABLE).where(_TABLE.c.delivered_at.is_not(None), _TABLE.c.delivered_at < delivered_before)
    return int((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def items_of(session: AsyncSession, *, user_id: str) -> list[OutboxItem]:
    rows = await session.execute(select(_TABLE).where(_TABLE.c.user_id == user_id).order_by(_TABLE.c.id))
    return [_item(row) for row in rows.all()]
