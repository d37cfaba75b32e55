"""Schedules: five-field cron expressions read in an IANA time zone, and the slots they define.

A *slot* is one instant a schedule fires (a ``datetime`` in UTC); its *key* (``slot_key``) is what makes a slot
run once: ``job_runs`` is unique on ``(job_id, slot_key)``. croniter computes slots in the schedule's own zone,
so "0 6 * * MON" in Europe/Berlin is 06:00 Berlin time in winter and in summer (a wall time that does not exist
on the day clocks spring forward fires at the first instant after the gap).

Catch-up policy (``settings.jobs.catch_up``): a scheduler that was down, or started after a slot passed, runs the
most recent missed slot once (``latest``) — never every missed slot — or none (``skip``). Slots from before the
job was created never run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

CRON_FIELDS = 5


def check_cron(expression: str) -> str:
    """The expression, normalised (single spaces); ``ValueError`` saying what is wrong otherwise."""
    normalised = " ".join(expression.split())
    fields = normalised.split(" ") if normalised else []
    if len(fields) != CRON_FIELDS:
        raise ValueError(
            f"invalid cron expression {expression!r}: it needs 5 fields (minute hour day-of-month month "
            f'day-of-week, e.g. "0 6 * * MON"), not {len(fields)}'
        )
    try:
        croniter(normalised, datetime(2025, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (CroniterBadCronError, CroniterBadDateError, ValueError, KeyError) as error:
        raise ValueError(f"invalid cron expression {expression!r}: {error}") from None
    return normalised


def check_timezone(name: str) -> str:
    """The IANA zone name; ``ValueError`` (with a hint) for a zone this machine does not know."""
    name = name.strip()
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, IsADirectoryError):
        hint = ""
        lowered = name.lower()
        close = sorted(zone for zone in available_timezones() if lowered and lowered in zone.lower())[:3]
        if close:
            hint = f" (did you mean {', '.join(close)}?)"
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC{hint}") from None
    return name


def next_slot(cron: str, timezone: str, after: datetime) -> datetime:
    """The first slot strictly after ``after``, in UTC."""
    local = after.astimezone(ZoneInfo(timezone))
    found: datetime = croniter(cron, local).get_next(datetime)
    return found.astimezone(UTC)


def latest_slot(cron: str, timezone: str, at_or_before: datetime) -> datetime:
    """The last slot at or before ``at_or_before``, in UTC."""
    local = at_or_before.astimezone(ZoneInfo(timezone))
    candidate = croniter(cron, local).get_prev(datetime)
    following = next_slot(cron, timezone, candidate)
    # croniter's get_prev is strictly before; the instant itself counts as "at or before".
    return following if following <= at_or_before else candidate.astimezone(UTC)


def slot_key(slot: datetime) -> str:
    """The identity of a slot: its UTC instant to the second, ISO 8601."""
    return slot.astimezone(UTC).replace(microsecond=0).isoformat()


def due_slots(
    cron: str, timezone: str, *, now: datetime, created_at: datetime, catch_up: str
) -> tuple[datetime | None, datetime]:
    """The slot to catch up on now (None: nothing missed, or policy ``skip``) and the next slot to come.

    The caller decides whether the catch-up slot really was missed (no run exists for it)."""
    upcoming = next_slot(cron, timezone, now)
    if catch_up != "latest":
        return None, upcoming
    latest = latest_slot(cron, timezone, now)
    return (latest if latest >= created_at else None), upcoming
