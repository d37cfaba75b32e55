"""Dates as loaders meet them (ISO 8601, `2023`, `2023-05`, epoch seconds, PDF `D:20230102...`, prose dates) →
timezone-aware datetimes. A date without a zone is taken as UTC; what cannot be read is ``None`` (never a crash)."""

from __future__ import annotations

import logging
import math
import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

logger = logging.getLogger(__name__)

_YEAR = re.compile(r"^\d{4}$")
_YEAR_MONTH = re.compile(r"^(\d{4})-(\d{1,2})$")
_PDF_DATE = re.compile(r"^D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(?:(Z)|([+-])(\d{2})'?(?:(\d{2})'?)?)?")
_MIN_YEAR, _MAX_YEAR = 1000, 2999
_EPOCH_MIN = 10**8  # numbers at least this big are epoch seconds (1973 on); smaller ones may be years


def parse_date(value: Any) -> datetime | None:
    """An aware datetime for ``value``, or ``None`` when it is empty or not a date."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_number(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if _YEAR.match(text):
            return _year(int(text))
        if match := _YEAR_MONTH.match(text):
            return datetime(int(match[1]), int(match[2]), 1, tzinfo=UTC)
        if match := _PDF_DATE.match(text):
            year, month, day, hour, minute, second = (
                int(part) if part else default
                for part, default in zip(match.groups()[:6], (0, 1, 1, 0, 0, 0), strict=True)
            )
            zone = UTC
            if match[8]:  # D:20230102101500+01'00' — the offset PDF writers usually add
                offset = timedelta(hours=int(match[9]), minutes=int(match[10] or 0))
                zone = timezone(offset if match[8] == "+" else -offset)
            return datetime(year, month, day, hour, minute, second, tzinfo=zone)
        try:
            return parse_date(datetime.fromisoformat(text))
        except ValueError:
            pass
        from dateutil import parser

        # A fixed default, so that a missing day or month does not silently become today's.
        parsed = parser.parse(text, default=datetime(2000, 1, 1))
        return parse_date(parsed)
    except (ValueError, OverflowError, TypeError) as error:
        logger.debug("not a date: %r (%s)", value, error)
        return None


def _year(year: int) -> datetime | None:
    return datetime(year, 1, 1, tzinfo=UTC) if _MIN_YEAR <= year <= _MAX_YEAR else None


def _from_number(number: float) -> datetime | None:
    if not math.isfinite(number):  # inf/nan: int() would raise
        return None
    if number >= _EPOCH_MIN:
        if number > 10**11:  # milliseconds
            number /= 1000
        try:
            return datetime.fromtimestamp(number, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return _year(int(number)) if number == int(number) else None
