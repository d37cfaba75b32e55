"""Typed values of annotations: a cell's text → text, a number normalised to its dimension's base unit, or a date.

Numbers are read by the evaluator's quantity parser (``text.quantities``) with the units of measurement that a
short cell makes unambiguous ("1.15 m", "45 in", "12 lb"): a length is stored in metres, a mass in kilograms, money
per currency (currencies are not converted: no exchange rate is known offline), so "width ≤ 1.2 m" compares a
"45 in" panel correctly and a "$ vs €" mix is named instead of summed. Dates are ISO days. A value is typed only when
the number or date *is* the cell (``1,204 participants`` is a number; ``tested 4 models in 2 labs`` is text).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.knowledge.loaders.dates import parse_date
from researchcrew.text.quantities import PROSE_UNITS, Quantity, Units, find_quantities

ValueKind = Literal["text", "number", "date"]

_LENGTH = "length"
_MASS = "mass"
MEASURE_UNITS: Units = PROSE_UNITS.extended(
    {
        "m": (_LENGTH, 1.0),
        "in": (_LENGTH, 0.0254),
        "in.": (_LENGTH, 0.0254),
        '"': (_LENGTH, 0.0254),
        "ft": (_LENGTH, 0.3048),
        "yd": (_LENGTH, 0.9144),
        "mi": (_LENGTH, 1609.344),
        "g": (_MASS, 1e-3),
        "t": (_MASS, 1e3),
        "lb": (_MASS, 0.45359237),
        "lbs": (_MASS, 0.45359237),
        "oz": (_MASS, 0.028349523125),
        "L": ("litre", 1.0),
        "l": ("litre", 1.0),
        "V": ("volt", 1.0),
        "kV": ("volt", 1e3),
        "mV": ("volt", 1e-3),
        "A": ("ampere", 1.0),
        "mA": ("ampere", 1e-3),
        "Ah": ("charge", 1.0),
        "mAh": ("charge", 1e-3),
    },
    {
        "inch": (_LENGTH, 0.0254),
        "inches": (_LENGTH, 0.0254),
        "foot": (_LENGTH, 0.3048),
        "feet": (_LENGTH, 0.3048),
        "centimeter": (_LENGTH, 1e-2),
        "centimetre": (_LENGTH, 1e-2),
        "millimeter": (_LENGTH, 1e-3),
        "millimetre": (_LENGTH, 1e-3),
        "mile": (_LENGTH, 1609.344),
        "pound": (_MASS, 0.45359237),
        "ounce": (_MASS, 0.028349523125),
        "liter": ("litre", 1.0),
        "litre": ("litre", 1.0),
        "volt": ("volt", 1.0),
        "participant": ("number", 1.0),
        "patient": ("number", 1.0),
        "subject": ("number", 1.0),
    },
)

BASE_UNITS: dict[str, str] = {
    "length": "m",
    "mass": "kg",
    "time": "s",
    "bytes": "B",
    "percent": "%",
    "usd": "USD",
    "eur": "EUR",
    "gbp": "GBP",
    "jpy": "JPY",
    "watt": "W",
    "energy": "J",
    "hertz": "Hz",
    "litre": "L",
    "volt": "V",
    "ampere": "A",
    "charge": "Ah",
    "celsius": "°C",
    "fahrenheit": "°F",
    "ratio": "×",
}

_DATE_LIKE = re.compile(
    r"^(?:\d{4}-\d{1,2}-\d{1,2}(?:[T ][\d:.]+Z?)?|\d{1,2}/\d{1,2}/\d{4}|"
    r"(?:\d{1,2}\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+(?:\d{1,2},?\s+)?\d{4})$",
    re.IGNORECASE,
)
_PLAIN_YEAR = re.compile(r"^(?:19|20)\d{2}$")
_WORD = re.compile(r"[A-Za-z]+")
_QUALIFIER_WORDS = frozenset({"about", "around", "approx", "approximately", "roughly", "circa", "ca", "n", "total"})
MAX_LABEL_CHARS = 200
MAX_VALUE_CHARS = 2_000
MAX_RESIDUAL_WORDS = 2  # words besides the number a cell may have and still be that number ("1,204 participants")


class TypedValue(Contract):
    """One property of an annotation: its label and value, as written and typed."""

    label: str = Field(min_length=1, max_length=200, description="The label as written (a key or a column name).")
    key: str = Field(min_length=1, max_length=200, description="The label normalised: lower case, single spaces.")
    text: str = Field(max_length=2_000, description="The value exactly as written in the passage.")
    kind: ValueKind = Field(default="text", description="text, number or date.")
    number: float | None = Field(default=None, description="A number, in the base unit of its dimension.")
    dimension: str | None = Field(default=None, max_length=40, description="length, mass, usd, number, ...")
    unit: str | None = Field(default=None, max_length=40, description="The base unit the number is in (m, kg, USD).")
    date: str | None = Field(default=None, max_length=10, description="An ISO day, for dates.")

    def display(self) -> str | float | None:
        """The cell shown in a table: the normalised number, the ISO date, or the text."""
        if self.kind == "number":
            return self.number
        if self.kind == "date":
            return self.date
        return self.text


def normalise_label(label: str) -> str:
    """``**Sample Size**`` → ``sample size``: what labels are compared by."""
    cleaned = re.sub(r"[*_`#]+", " ", label).strip().strip(":").strip()
    return " ".join(cleaned.lower().split())


def unit_of(dimension: str | None) -> str | None:
    """The base unit a dimension's numbers are stored in (None for a plain count)."""
    if dimension is None or dimension == "number":
        return None
    return BASE_UNITS.get(dimension, dimension)


def parse_number(text: str) -> Quantity | None:
    """The quantity a cell is, or None when the cell is more than a number (see the module docstring)."""
    stripped = text.strip()
    if _PLAIN_YEAR.match(stripped):
        value = float(stripped)
        return Quantity(value, "number", value, value, 0, len(stripped), stripped)
    found = find_quantities(stripped, units=MEASURE_UNITS)
    if len(found) != 1:
        return None
    quantity = found[0]
    residual = stripped[: quantity.start] + " " + stripped[quantity.end :]
    words = [word for word in _WORD.findall(residual) if word.lower() not in _QUALIFIER_WORDS]
    if len(words) > MAX_RESIDUAL_WORDS or quantity.start > 12:
        return None
    return quantity


def typed_value(label: str, text: str) -> TypedValue:
    """``label`` and the value ``text`` as a typed property."""
    value = text.strip()[:MAX_VALUE_CHARS]
    label = label.strip()[:MAX_LABEL_CHARS] or "value"
    key = (normalise_label(label) or label.lower())[:MAX_LABEL_CHARS]
    if _DATE_LIKE.match(value):
        parsed = parse_date(value)
        if parsed is not None:
            return TypedValue(label=label.strip(), key=key, text=value, kind="date", date=parsed.date().isoformat())
    quantity = parse_number(value)
    if quantity is not None:
        number = quantity.value
        return TypedValue(
            label=label.strip(),
            key=key,
            text=value,
            kind="number",
            number=round(number, 12),
            dimension=quantity.dimension,
            unit=unit_of(quantity.dimension),
        )
    return TypedValue(label=label.strip(), key=key, text=value)
