"""Search filters (dates, sources, documents, metadata) and the date hints read from a query's wording.

``SearchFilters`` becomes a Milvus boolean expression over the scalar fields of the collection. Date hints are
what seed 000 calls ``metadata_hints``: "in 2021", "since 2019", "between 2015 and 2018", "last year", "the past
3 years", "recent". A query that carries one is searched twice (filtered and unfiltered, then merged — see
``search``), so a hint narrows the evidence towards the period without hiding a strong match from outside it.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pydantic import Field, field_validator, model_validator

from researchcrew.contracts._base import Contract
from researchcrew.knowledge import _schema as schema

MetadataValue = str | int | float | bool

RECENT_WINDOW_YEARS = 2  # what "recent"/"latest" means when a query says no more


class SectionRef(Contract):
    """A section of a document: its source key and the heading its chunks carry (None: the whole document)."""

    source_key: str = Field(min_length=1, max_length=8_192, description="The document's source key.")
    heading: str | None = Field(
        default=None, max_length=2_048, description="The section's heading as stored ('' for text before any)."
    )


class SearchFilters(Contract):
    """Restrict a knowledge-base search. Every set field must match (AND); lists match any member (OR)."""

    date_from: datetime | date | None = Field(default=None, description="Only chunks dated on/after this.")
    date_to: datetime | date | None = Field(
        default=None, description="Only chunks dated on/before this (a date means the whole day)."
    )
    years: list[int] = Field(default_factory=list, max_length=200, description="Only chunks from these years.")
    source_keys: list[str] = Field(default_factory=list, max_length=10_000, description="Only these source keys.")
    sources: list[str] = Field(default_factory=list, max_length=10_000, description="Only these sources.")
    doc_ids: list[str] = Field(default_factory=list, max_length=10_000, description="Only these documents.")
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict, description="Equality on document metadata fields, e.g. {'category': 'cs.CL'}."
    )
    sections: list[SectionRef] = Field(
        default_factory=list,
        max_length=1_000,
        description="Only chunks of these sections (a document's source key and a heading; any of them). The "
        "long-text route drills down into the sections whose summaries match the question.",
    )
    collections: list[str] | None = Field(
        default=None,
        max_length=10_000,
        description="Only chunks of these document collections (an empty list matches nothing); None: any. The "
        "RAG tool sets it to what the asking user may read (see `knowledge/access.py`).",
    )

    @field_validator("years")
    @classmethod
    def _plausible_years(cls, value: list[int]) -> list[int]:
        for year in value:
            if not 1 <= year <= 9998:
                raise ValueError(f"year {year} is out of range")
        return sorted(set(value))

    @field_validator("metadata")
    @classmethod
    def _metadata_keys(cls, value: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
        for key in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}", key):
                raise ValueError(f"metadata filter key {key!r} must be an identifier")
        return value

    @model_validator(mode="after")
    def _ordered_range(self) -> SearchFilters:
        low, high = self.epoch_range()
        if low is not None and high is not None and low > high:
            raise ValueError("date_from is after date_to")
        return self

    @property
    def has_dates(self) -> bool:
        return bool(self.date_from or self.date_to or self.years)

    def epoch_range(self) -> tuple[int | None, int | None]:
        low = _epoch_start(self.date_from) if self.date_from is not None else None
        high = _epoch_end(self.date_to) if self.date_to is not None else None
        return low, high

    def merged(self, other: SearchFilters) -> SearchFilters:
        """These filters with the date constraints of ``other`` added (used for date hints)."""
        return self.model_copy(update={"date_from": other.date_from, "date_to": other.date_to, "years": other.years})

    def expression(self) -> str:
        """The Milvus filter expression; an empty string means no filter."""
        clauses: list[str] = []
        low, high = self.epoch_range()
        if low is not None or high is not None or self.years:
            clauses.append(f"{schema.DATE} > {schema.NO_DATE}")
        if low is not None:
            clauses.append(f"{schema.DATE} >= {low}")
        if high is not None:
            clauses.append(f"{schema.DATE} <= {high}")
        if self.years:
            spans = [
                f"({schema.DATE} >= {_epoch_start(date(y, 1, 1))} and {schema.DATE} <= {_epoch_end(date(y, 12, 31))})"
                for y in self.years
            ]
            clauses.append("(" + " or ".join(spans) + ")")
        for field, values in (
            (schema.SOURCE_KEY, self.source_keys),
            (schema.SOURCE, self.sources),
            (schema.DOC_ID, self.doc_ids),
        ):
            if values:
                clauses.append(f"{field} in [{', '.join(schema.quote(v) for v in values)}]")
        if self.sections:
            parts = [
                f"{schema.SOURCE_KEY} == {schema.quote(section.source_key)}"
                if section.heading is None
                else f"({schema.SOURCE_KEY} == {schema.quote(section.source_key)} and "
                f"{schema.HEADING} == {schema.quote(section.heading)})"
                for section in self.sections
            ]
            clauses.append("(" + " or ".join(parts) + ")")
        for key, value in sorted(self.metadata.items()):
            clauses.append(f'{schema.METADATA}["{key}"] == {_literal(value)}')
        if self.collections is not None:  # `in []` is valid and matches nothing: a user who may read nothing
            clauses.append(
                f"{schema.COLLECTION} in [{', '.join(schema.quote(v) for v in sorted(set(self.collections)))}]"
            )
        return " and ".join(clauses)


def _literal(value: MetadataValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return schema.quote(value)
    return repr(value)


def _as_datetime(value: datetime | date, *, end: bool) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    moment = datetime(value.year, value.month, value.day, tzinfo=UTC)
    return moment + timedelta(days=1, seconds=-1) if end else moment


def _epoch_start(value: datetime | date) -> int:
    return int(_as_datetime(value, end=False).timestamp())


def _epoch_end(value: datetime | date) -> int:
    return int(_as_datetime(value, end=True).timestamp())


# Date hints ------------------------------------------------------------------------------------------------------
_YEAR = r"((?:19|20)\d{2})"
_RANGE = re.compile(
    rf"\b(?:between|from)\s+{_YEAR}\s+(?:and|to|-|–|until)\s+{_YEAR}\b|\b{_YEAR}\s*(?:-|–|to)\s*{_YEAR}\b"
)
_SINCE = re.compile(rf"\b(?:since|after|from|starting(?:\s+in)?)\s+{_YEAR}\b")
_BEFORE = re.compile(rf"\b(before|until|up\s+to|prior\s+to|through)\s+{_YEAR}\b")
_IN_YEAR = re.compile(rf"\b(?:in|during|of|for|published\s+in)\s+(?:the\s+year\s+)?{_YEAR}\b")
_LAST_N = re.compile(r"\b(?:last|past|previous)\s+(\d{1,2}|two|three|four|five|ten)\s+years?\b")
_LAST_YEAR = re.compile(r"\blast\s+year\b|\bprevious\s+year\b")
_THIS_YEAR = re.compile(r"\bthis\s+year\b")
_RECENT = re.compile(r"\b(?:recent|recently|latest|newest|nowadays|lately)\b")
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "ten": 10}


class DateHint(Contract):
    """A period a query asks about, read from its wording."""

    date_from: date | None = Field(default=None, description="Start of the period (inclusive).")
    date_to: date | None = Field(default=None, description="End of the period (inclusive).")
    phrase: str = Field(description="The words the hint was read from.")

    def as_filters(self) -> SearchFilters:
        return SearchFilters(date_from=self.date_from, date_to=self.date_to)


def parse_date_hint(query: str, *, today: date | None = None) -> DateHint | None:
    """The period a query mentions, or None. Explicit years win over relative words like "recent"."""
    today = today or datetime.now(UTC).date()
    text = query.lower()
    if match := _RANGE.search(text):
        years = sorted(int(y) for y in match.groups() if y)
        return DateHint(date_from=date(years[0], 1, 1), date_to=date(years[-1], 12, 31), phrase=match.group(0))
    if match := _SINCE.search(text):
        year = int(match.group(1))
        start = year + 1 if match.group(0).startswith("after") else year
        return DateHint(date_from=date(start, 1, 1), date_to=None, phrase=match.group(0))
    if match := _BEFORE.search(text):
        year = int(match.group(2))
        end = year - 1 if match.group(1) in ("before", "prior to") else year
        return DateHint(date_from=None, date_to=date(end, 12, 31), phrase=match.group(0))
    if match := _IN_YEAR.search(text):
        year = int(match.group(1))
        return DateHint(date_from=date(year, 1, 1), date_to=date(year, 12, 31), phrase=match.group(0))
    if match := _LAST_N.search(text):
        raw = match.group(1)
        count = int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]
        return DateHint(date_from=_years_before(today, count), date_to=today, phrase=match.group(0))
    if match := _LAST_YEAR.search(text):
        return DateHint(
            date_from=date(today.year - 1, 1, 1), date_to=date(today.year - 1, 12, 31), phrase=match.group(0)
        )
    if match := _THIS_YEAR.search(text):
        return DateHint(date_from=date(today.year, 1, 1), date_to=today, phrase=match.group(0))
    if match := _RECENT.search(text):
        return DateHint(date_from=_years_before(today, RECENT_WINDOW_YEARS), date_to=today, phrase=match.group(0))
    return None


def _years_before(day: date, years: int) -> date:
    try:
        return day.replace(year=day.year - years)
    except ValueError:  # 29 February
        return day.replace(year=day.year - years, day=28)


def describe(filters: SearchFilters | None) -> dict[str, Any]:
    """A compact, JSON-able summary of filters for logs and diagnostics."""
    if filters is None:
        return {}
    return filters.model_dump(exclude_defaults=True, mode="json")
