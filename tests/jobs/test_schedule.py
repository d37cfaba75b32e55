"""Schedules: cron and time zones checked on input; slots in the schedule's own zone; the catch-up policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from researchcrew.jobs._schedule import check_cron, check_timezone, due_slots, latest_slot, next_slot, slot_key

BERLIN = "Europe/Berlin"


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("0 6 * * FOO", "invalid cron expression"),
        ("61 * * * *", "invalid cron expression"),
        ("* * * *", "needs 5 fields"),
        ("0 0 6 * * MON", "needs 5 fields"),
        ("", "needs 5 fields"),
    ],
)
def test_invalid_cron_expressions_say_what_is_wrong(expression: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_cron(expression)


def test_a_valid_cron_is_normalised() -> None:
    assert check_cron("  0   6 * *  MON ") == "0 6 * * MON"


def test_an_unknown_time_zone_is_refused_with_suggestions() -> None:
    with pytest.raises(ValueError, match=r"unknown time zone 'berlin'.*Europe/Berlin"):
        check_timezone("berlin")
    assert check_timezone("Europe/Berlin") == BERLIN


def test_monday_six_in_berlin_is_six_berlin_time_in_winter_and_in_summer() -> None:
    winter = next_slot("0 6 * * MON", BERLIN, datetime(2026, 1, 7, tzinfo=UTC))
    summer = next_slot("0 6 * * MON", BERLIN, datetime(2026, 7, 8, tzinfo=UTC))
    assert winter == datetime(2026, 1, 12, 5, 0, tzinfo=UTC)  # UTC+1
    assert summer == datetime(2026, 7, 13, 4, 0, tzinfo=UTC)  # UTC+2


def test_the_latest_slot_includes_the_instant_itself() -> None:
    slot = datetime(2026, 1, 12, 5, 0, tzinfo=UTC)
    assert latest_slot("0 6 * * MON", BERLIN, slot) == slot
    assert latest_slot("0 6 * * MON", BERLIN, slot + timedelta(days=3)) == slot
    assert latest_slot("0 6 * * MON", BERLIN, slot - timedelta(seconds=1)) == slot - timedelta(days=7)


def test_catch_up_runs_only_the_latest_missed_slot_and_never_one_before_the_job() -> None:
    created = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)
    now = datetime(2026, 3, 1, 2, 25, tzinfo=UTC)  # six 20-minute slots missed since creation
    missed, upcoming = due_slots("*/20 * * * *", "UTC", now=now, created_at=created, catch_up="latest")
    assert missed == datetime(2026, 3, 1, 2, 20, tzinfo=UTC)
    assert upcoming == datetime(2026, 3, 1, 2, 40, tzinfo=UTC)
    assert due_slots("*/20 * * * *", "UTC", now=now, created_at=created, catch_up="skip")[0] is None
    young = due_slots("*/20 * * * *", "UTC", now=now, created_at=now - timedelta(minutes=1), catch_up="latest")
    assert young[0] is None  # its only past slot is older than the job


def test_slot_keys_are_utc_to_the_second() -> None:
    local = datetime(2026, 1, 12, 6, 0, 0, 123456, tzinfo=__import__("zoneinfo").ZoneInfo(BERLIN))
    assert slot_key(local) == "2026-01-12T05:00:00+00:00"
