"""``GET /v1/usage``: what the caller's answers spent, by day — questions, tokens and their cost in US dollars — and
how this month stands against the monthly budget when one is set (``service.monthly_budget_usd``)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from researchcrew.memory.usage_ledger import UsageDay, month_start, parse_since, summed
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import ApiProblem, problem_responses
from researchcrew.service._state import Service

# What `since` may look like (a calendar date's validity, e.g. no 30 February, is checked when it is read).
SINCE_PATTERN = r"^(\d{1,4}[hdw]|\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?)$"

router = APIRouter(prefix="/v1/usage", tags=["usage"], responses=problem_responses(400, 401, 422, 503))


class UsageQuery(BaseModel):
    """The view's query: an unknown parameter is refused (422), as on every list route."""

    model_config = ConfigDict(extra="forbid")

    since: str = Field(
        default="30d",
        max_length=40,
        pattern=SINCE_PATTERN,
        description="How far back: 7d, 24h, 2w, or an ISO date or date-time (UTC when no zone is given).",
    )


class DayUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    day: date = Field(description="The day (UTC).")
    questions: int = Field(description="Answers and deep runs that day.")
    prompt_tokens: int = Field(description="Tokens sent to the language model.")
    completion_tokens: int = Field(description="Tokens the language model wrote.")
    cost_usd: float = Field(description="What the priced answers cost, in US dollars.")
    unpriced: int = Field(description="Answers whose model has no known price (not in cost_usd).")


class UsageView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str = Field(description="Whose usage this is.")
    since: datetime = Field(description="Counted from (UTC).")
    days: list[DayUsage] = Field(description="Usage per day, oldest first; days without usage are left out.")
    total: DayUsage | None = Field(description="The sum over the days (its date is the first day); None: no usage.")
    month_cost_usd: float = Field(description="What this calendar month's priced answers cost so far.")
    monthly_budget_usd: float | None = Field(description="The monthly budget, when one is set.")


def _day(usage: UsageDay) -> DayUsage:
    return DayUsage(
        day=usage.day,
        questions=usage.questions,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=round(usage.cost_usd, 9),
        unpriced=usage.unpriced,
    )


@router.get("", response_model=UsageView, summary="Your questions, tokens and cost by day")
async def usage(
    service: Service,
    user: CurrentUser,
    query: Annotated[UsageQuery, Query()],
) -> UsageView:
    try:
        start = parse_since(query.since)
    except ValueError as error:
        raise ApiProblem(422, str(error), kind="invalid-since") from error
    ledger = await service.runtime.usage_ledger()
    if ledger is None:
        raise ApiProblem(503, "Usage is not recorded: this service runs without a database.")
    user_id = user.user_id
    days = await ledger.by_day(user_id, since=start)
    total = summed(days)
    return UsageView(
        user_id=user_id,
        since=start,
        days=[_day(d) for d in days],
        total=_day(total) if total is not None else None,
        month_cost_usd=round(await ledger.spent_since(user_id, month_start()), 9),
        monthly_budget_usd=service.settings.service.monthly_budget_usd,
    )
