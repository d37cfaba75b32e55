"""Filter expressions and date hints read from queries."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from pydantic import ValidationError

from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.filters import SearchFilters, parse_date_hint

TODAY = date(2026, 6, 15)


def test_expression_combines_fields_with_and() -> None:
    filters = SearchFilters(
        date_from=date(2020, 1, 1), source_keys=['a "quoted" key'], doc_ids=["d1", "d2"], metadata={"lang": "en"}
    )
    expression = filters.expression()
    assert f"{schema.DATE} > {schema.NO_DATE}" in expression  # undated chunks never pass a date filter
    assert f"{schema.DATE} >= {int(datetime(2020, 1, 1, tzinfo=UTC).timestamp())}" in expression
    assert 'source_key in ["a \\"quoted\\" key"]' in expression
    assert 'doc_id in ["d1", "d2"]' in expression
    assert 'metadata["lang"] == "en"' in expression
    assert expression.count(" and ") >= 4
    assert SearchFilters().expression() == ""


def test_years_become_whole_year_ranges() -> None:
    expression = SearchFilters(years=[2021, 2019, 2021]).expression()
    assert expression.count(" or ") == 1  # deduplicated: two years
    assert str(int(datetime(2019, 1, 1, tzinfo=UTC).timestamp())) in expression


@pytest.mark.parametrize(
    "bad",
    [
        {"date_from": date(2022, 1, 1), "date_to": date(2021, 1, 1)},
        {"metadata": {"bad key": 1}},
        {"years": [0]},
        {"unknown": 1},
    ],
)
def test_invalid_filters_are_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SearchFilters.model_validate(bad)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("vaccine trials in 2021", date(2021, 1, 1), date(2021, 12, 31)),
        ("what changed since 2019?", date(2019, 1, 1), None),
        ("results after 2019", date(2020, 1, 1), None),
        ("studies before 2010", None, date(2009, 12, 31)),
        ("work between 2015 and 2018", date(2015, 1, 1), date(2018, 12, 31)),
        ("papers 2015-2018 on sleep", date(2015, 1, 1), date(2018, 12, 31)),
        ("what did we learn last year", date(2025, 1, 1), date(2025, 12, 31)),
        ("progress over the past 3 years", date(2023, 6, 15), TODAY),
        ("recent advances in protein folding", date(2024, 6, 15), TODAY),
        ("this year's results", date(2026, 1, 1), TODAY),
    ],
)
def test_date_hints(query: str, start: date | None, end: date | None) -> None:
    hint = parse_date_hint(query, today=TODAY)
    assert hint is not None
    assert (hint.date_from, hint.date_to) == (start, end)


@pytest.mark.parametrize(
    "query",
    ["0-dimensional biomaterials lack inductive properties", "IL-6 levels after 24 hours", "ISO 9001 audits", ""],
)
def test_no_date_hint(query: str) -> None:
    assert parse_date_hint(query, today=TODAY) is None
