"""The usage ledger (issue 23): what each answer and deep run spent, per user, in the memory database.

Every answer a runtime with a database gives is written here (remembered or not: a batch job's answers cost money
too), and every finished deep run. It feeds the per-user usage view (questions, tokens and cost by day) and the
monthly budget. A cost whose price is unknown is stored as NULL and counted apart — a budget can only be held
against what has a price, and the view says how many answers it could not price.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.follow_up import TokenCount
from researchcrew.db.models import UsageRow
from researchcrew.db.session import Sessions

UsageKind = Literal["answer", "deep_run"]
_RELATIVE = re.compile(r"^(\d{1,4})([dhw])$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


@dataclass(frozen=True)
class UsageDay:
    """One user's usage on one day (UTC)."""

    day: date
    questions: int  # answers and deep runs
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float  # of what had a price
    unpriced: int  # answers whose model had no price (their cost is not in cost_usd)


class UsageLedger:
    """Reads and writes ``usage_answers`` (see the module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._sessions = Sessions.of(engine)

    async def record(
        self,
        *,
        user_id: str,
        kind: UsageKind,
        response_id: str,
        tokens: TokenCount,
        cost: AnswerCost,
        at: datetime | None = None,
    ) -> None:
        async with self._sessions.write.begin() as session:
            session.add(
                UsageRow(
                    user_id=user_id,
                    at=at or datetime.now(UTC),
                    kind=kind,
                    response_id=response_id,
                    prompt_tokens=tokens.prompt_tokens,
                    completion_tokens=tokens.completion_tokens,
                    calls=tokens.calls,
                    cost_usd=cost.usd,
                    model=cost.model,
                )
            )

    async def by_day(self, user_id: str, *, since: datetime) -> list[UsageDay]:
        """The user's usage per day from ``since`` on, oldest first (days without usage are left out)."""
        day = func.date(UsageRow.at)
        statement = (
            select(
                day,
                func.count(),
                func.coalesce(func.sum(UsageRow.prompt_tokens), 0),
                func.coalesce(func.sum(UsageRow.completion_tokens), 0),
                func.coalesce(func.sum(UsageRow.cost_usd), 0.0),
                func.count() - func.count(UsageRow.cost_usd),
            )
            .where(UsageRow.user_id == user_id, UsageRow.at >= since)
            .group_by(day)
            .order_by(day)
        )
        async with self._sessions.read() as session:
            rows = (await session.execute(statement)).all()
        return [
            UsageDay(
                day=value if isinstance(value, date) else date.fromisoformat(str(value)),
                questions=int(count),
                prompt_tokens=int(prompt),
                completion_tokens=int(completion),
                cost_usd=float(cost),
                unpriced=int(unpriced),
            )
            for value, count, prompt, completion, cost, unpriced in rows
        ]

    async def spent_since(self, user_id: str, since: datetime) -> float:
        """US dollars the user's priced answers cost from ``since`` on."""
        statement = select(func.coalesce(func.sum(UsageRow.cost_usd), 0.0)).where(
            UsageRow.user_id == user_id, UsageRow.at >= since
        )
        async with self._sessions.read() as session:
            spent = (await session.execute(statement)).scalar_one()
        return float(spent or 0.0)

    async def forget(self, user_id: str) -> int:
        async with self._sessions.write.begin() as session:
            result = await session.execute(delete(UsageRow).where(UsageRow.user_id == user_id))
            return int(result.rowcount)  # type: ignore[attr-defined]


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``7d``, ``24h``, ``2w`` (that long ago) or an ISO date/time (UTC when no zone is given)."""
    now = now or datetime.now(UTC)
    value = text.strip()
    relative = _RELATIVE.match(value)
    if relative:
        return now - int(relative[1]) * _UNITS[relative[2]]
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"since={text!r} is neither a span such as 7d, 24h or 2w nor an ISO date") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def summed(days: list[UsageDay]) -> UsageDay | None:
    if not days:
        return None
    return UsageDay(
        day=days[0].day,
        questions=sum(d.questions for d in days),
        prompt_tokens=sum(d.prompt_tokens for d in days),
        completion_tokens=sum(d.completion_tokens for d in days),
        cost_usd=sum(d.cost_usd for d in days),
        unpriced=sum(d.unpriced for d in days),
    )


def month_start(now: datetime | None = None) -> datetime:
    """The first instant of the current calendar month (UTC): a monthly budget counts from there."""
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


__all__ = ["UsageDay", "UsageKind", "UsageLedger", "month_start", "parse_since", "summed"]
