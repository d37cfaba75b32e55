"""`researchcrew usage --user U [--since 7d] [--json]`: what a user's answers spent, by day — questions, tokens and
their cost in US dollars — read from the usage ledger in the memory database (``memory/usage_ledger.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from researchcrew.cli._common import echo_json, with_runtime

if TYPE_CHECKING:
    from researchcrew.memory.usage_ledger import UsageDay
    from researchcrew.runtime import Runtime


@click.command()
@click.option("--user", "user_id", required=True, metavar="USER_ID", help="Whose usage to show.")
@click.option("--since", default="30d", show_default=True, help="7d, 24h, 2w, or an ISO date (UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print the days as JSON.")
def usage(user_id: str, since: str, as_json: bool) -> None:
    """A user's questions, tokens and cost by day."""
    from researchcrew.memory.usage_ledger import month_start, parse_since, summed

    try:
        start = parse_since(since)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--since") from error

    async def read(runtime: Runtime) -> tuple[list[UsageDay], float]:
        ledger = await runtime.usage_ledger()
        if ledger is None:  # a runtime that remembers always has one
            return [], 0.0
        return await ledger.by_day(user_id, since=start), await ledger.spent_since(user_id, month_start())

    days, month = with_runtime(read, hint="\n(usage is kept in the memory store: RESEARCHCREW_MEMORY__DATABASE_URL)")
    total = summed(days)
    if as_json:
        echo_json(
            {
                "user_id": user_id,
                "since": start.isoformat(),
                "days": [_day_json(day) for day in days],
                "total": _day_json(total) if total else None,
                "month_cost_usd": round(month, 9),
            }
        )
        return
    if not days:
        click.echo(f"No usage by {user_id} since {start:%Y-%m-%d %H:%M} UTC.")
        return
    click.echo(f"{'day':<10}  {'questions':>9}  {'prompt':>9}  {'completion':>10}  {'cost (USD)':>12}")
    for day in [*days, *([total] if total and len(days) > 1 else [])]:
        label = "total" if day is total and len(days) > 1 else f"{day.day:%Y-%m-%d}"
        unpriced = f"  + {day.unpriced} unpriced" if day.unpriced else ""
        click.echo(
            f"{label:<10}  {day.questions:>9}  {day.prompt_tokens:>9}  {day.completion_tokens:>10}  "
            f"{day.cost_usd:>12.6f}{unpriced}"
        )
    click.echo(f"This month so far: ${month:.6f}")


def _day_json(day: UsageDay) -> dict[str, Any]:
    return {
        "day": day.day.isoformat(),
        "questions": day.questions,
        "prompt_tokens": day.prompt_tokens,
        "completion_tokens": day.completion_tokens,
        "cost_usd": round(day.cost_usd, 9),
        "unpriced": day.unpriced,
    }
