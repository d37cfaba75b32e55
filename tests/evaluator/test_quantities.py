"""The number/unit parser: normalisation, exclusions, and property tests."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from researchcrew.text.quantities import Quantity, find_quantities, parse_quantity, relative_gap
from researchcrew.text.sentences import split_sentences


@pytest.mark.parametrize(
    ("text", "dimension", "value"),
    [
        ("92%", "percent", 92.0),
        ("92 percent", "percent", 92.0),
        ("3 per cent", "percent", 3.0),
        ("5 percentage points", "percent", 5.0),
        ("20 ms", "time", 0.02),
        ("20ms", "time", 0.02),
        ("1.5 seconds", "time", 1.5),
        ("2 hours", "time", 7200.0),
        ("300 µs", "time", 3e-4),
        ("10K", "number", 1e4),
        ("1.5 million", "number", 1.5e6),
        ("7B", "number", 7e9),
        ("2 trillion", "number", 2e12),
        ("1,234,567", "number", 1234567.0),
        ("$3B", "usd", 3e9),
        ("€12 million", "eur", 1.2e7),
        ("16 GB", "bytes", 1.6e10),
        ("3x", "ratio", 3.0),
        ("10-fold", None, None),  # hyphenated modifier: not read as an amount
        ("2.4 GHz", "hertz", 2.4e9),
        ("1e-3 s", "time", 1e-3),
        ("-5%", "percent", -5.0),
        ("14 ng/L", "mass/l", 1.4e-11),
        ("75 nmol/liter", "mol/l", 7.5e-8),
        ("500 tokens/s", "tokens/s", 500.0),
        ("800 mg/d", "mass/d", 8e-4),
        ("7489 bp", "base_pairs", 7489.0),
    ],
)
def test_units_are_normalised(text: str, dimension: str | None, value: float | None) -> None:
    quantity = parse_quantity(text)
    if dimension is None:
        assert quantity is None or quantity.dimension == "number"
        return
    assert quantity is not None
    assert quantity.dimension == dimension
    assert quantity.value == pytest.approx(value)


@pytest.mark.parametrize(
    "text",
    [
        "in 2020",
        "the 1990s",
        "published 2019–2021",
        "on 2020-05-01",
        "on 5 May",
        "May 5",
        "see [12]",
        "[3, 4]",
        "Table 3",
        "Fig. 2",
        "Section 4",
        "Eq. 5",
        "v2",
        "version 1.2.3",
        "GPT-4",
        "ResNet-50",
        "H100",
        "the 4th",
        "3D",
        "(1)",
        "1) first",
        "at 10:30",
        "arXiv:2101.12345",
        "improved by 5%",
    ],
)
def test_years_references_identifiers_and_deltas_are_not_quantities(text: str) -> None:
    assert find_quantities(text) == []


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("more than 50%", 50.0, math.inf),
        ("at least 50%", 50.0, math.inf),
        ("less than 50%", -math.inf, 50.0),
        ("up to 50%", -math.inf, 50.0),
        ("about 50%", 45.0, 55.0),
        ("10-20 ms", 0.01, 0.02),
        ("between 10 and 20 ms", 0.01, 0.02),
        ("from 75% to 92%", 75.0, 92.0),
    ],
)
def test_qualifiers_and_ranges_become_intervals(text: str, low: float, high: float) -> None:
    (quantity,) = find_quantities(text)
    assert quantity.low == pytest.approx(low) and quantity.high == pytest.approx(high)


def test_offsets_point_at_the_quantity_even_after_citations() -> None:
    text = "As shown in [12], latency is 20 ms."
    (quantity,) = find_quantities(text)
    assert text[quantity.start : quantity.end] == "20 ms" == quantity.text


def test_relative_gap() -> None:
    a, b = parse_quantity("90%"), parse_quantity("60%")
    assert a is not None and b is not None
    assert relative_gap(a, b) == pytest.approx(1 / 3)
    bound = parse_quantity("more than 80%")
    assert bound is not None and relative_gap(a, bound) == 0.0
    zero = Quantity(0.0, "number", 0.0, 0.0, 0, 1, "0")
    assert relative_gap(zero, zero) == 0.0


@given(st.text(max_size=300))
def test_parser_never_crashes(text: str) -> None:
    for quantity in find_quantities(text):
        assert quantity.low <= quantity.high
        assert 0 <= quantity.start < quantity.end <= len(text)
        assert not math.isnan(quantity.value)
    split_sentences(text)


_UNITS = [
    ("%", "percent", 1.0),
    ("ms", "time", 1e-3),
    ("seconds", "time", 1.0),
    ("million", "number", 1e6),
    ("K", "number", 1e3),
    ("GB", "bytes", 1e9),
    ("percent", "percent", 1.0),
    ("", "number", 1.0),
]


@given(
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    st.sampled_from(_UNITS),
    st.booleans(),
)
@example(Decimal("2000"), ("", "number", 1.0), False)
@example(Decimal("2000.000"), ("", "number", 1.0), False)
@example(Decimal("2020"), ("ms", "time", 1e-3), True)
def test_simple_quantities_round_trip(number: object, unit: tuple[str, str, float], spaced: bool) -> None:
    surface, dimension, factor = unit
    literal = f"{number:f}"
    if surface in ("K",) or not surface:
        spaced = False  # a scale letter is written attached; a bare number has no unit at all
    text = f"The measured value was {literal}{' ' if spaced else ''}{surface} overall."
    quantity = parse_quantity(text)
    is_year = not surface and literal.isdigit() and 1900 <= int(literal) <= 2100
    if is_year:
        assert quantity is None  # bare integers 1900–2100 are read as years, by design
        return
    assert quantity is not None
    assert quantity.dimension == dimension
    assert quantity.value == pytest.approx(float(literal) * factor)
