"""Dates as loaders meet them become aware datetimes, or None — never an exception."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.knowledge.loaders.dates import parse_date


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-05-17T10:00:00Z", datetime(2023, 5, 17, 10, tzinfo=UTC)),
        ("2023-05-17", datetime(2023, 5, 17, tzinfo=UTC)),
        ("2023-05", datetime(2023, 5, 1, tzinfo=UTC)),
        ("2023", datetime(2023, 1, 1, tzinfo=UTC)),
        ("May 3, 2021", datetime(2021, 5, 3, tzinfo=UTC)),
        ("D:20220315101500+01'00'", datetime(2022, 3, 15, 10, 15, tzinfo=timezone(timedelta(hours=1)))),
        ("D:20220315101500Z", datetime(2022, 3, 15, 10, 15, tzinfo=UTC)),
        (1_700_000_000, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        (1_700_000_000_000, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),  # milliseconds
        (1999, datetime(1999, 1, 1, tzinfo=UTC)),
        (date(2020, 2, 29), datetime(2020, 2, 29, tzinfo=UTC)),
        (datetime(2020, 1, 1, 12), datetime(2020, 1, 1, 12, tzinfo=UTC)),  # naive is taken as UTC
        ("not a date", None),
        ("", None),
        (None, None),
        (True, None),
        (12.5, None),
        ({"year": 2020}, None),
    ],
)
def test_parse_date(value: Any, expected: datetime | None) -> None:
    assert parse_date(value) == expected


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e308, -1e308])
def test_non_finite_and_huge_numbers_are_not_dates(value: float) -> None:
    assert parse_date(value) is None


@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(allow_nan=True), st.datetimes(), st.dates()))
def test_parse_date_never_raises_and_is_always_aware(value: Any) -> None:
    parsed = parse_date(value)
    assert parsed is None or parsed.tzinfo is not None
