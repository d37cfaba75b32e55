"""Numbers with units in prose: "92%", "1.5 million", "20 ms", "$3B", "more than 50 GB", "10–20 s".

Shared by the evaluator (numeric contradictions) and the knowledge base's annotations (typed values of facts and
table cells, issue 22). Annotation values are short cells ("1.15 m", "45 in"), where a unit that would be ambiguous
in prose is not: they pass ``units=`` with more units (``Units.extended``) than the prose default.

The numeric contradiction check needs values it can compare, so every quantity is normalised to a dimension and
a base unit: 20 ms → (time, 0.02 s), 1.5M → (number, 1 500 000), 92 percent → (percent, 92), 3× → (ratio, 3).
Qualifiers become intervals: "more than 50" is [50, ∞), "about 50" is 50 ± 10 %, "10–20" is [10, 20].

What is *not* a quantity, because comparing it would only produce false alarms:
- years (a bare integer 1900–2100, also "1990s"), dates ("2020-05-01", "5 May", "10/2020"), times of day;
- citation and reference numbers (stripped "[12]", "Table 3", "Fig. 2", "Section 4.1", "Eq. 5", "v2", "arXiv:...");
- identifiers and ordinals ("GPT-4", "ResNet-50", "H100", "4th", "3D"), version strings ("1.2.3");
- enumerations ("1) ...", "(2)"), and changes ("improved by 5%": a delta, not a level).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

APPROX_SLACK = 0.1  # "about 50" covers 45..55

_CITATION = re.compile(r"\[\s*\d+(?:\s*[,;–-]\s*\d+)*\s*\]")
_NUMBER = re.compile(
    r"(?<![\w.,/:#])(?P<sign>[-+−])?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?P<exp>[eE][-+]?\d+)?(?!\d)"
)
_ATTACHED = re.compile(r"[A-Za-z%×µμ°]+")
_SPACED = re.compile(r"[ \t]{1,2}([A-Za-z%×µμ°]+)")
_RANGE_DASH = re.compile(r"\s?[-–—]\s?(?=[$€£¥]?\d)")
_RANGE_WORD = re.compile(r"\s+(?:to|and)\s+(?=[$€£¥]?\d)")
_RANGE_OPENER = re.compile(r"\b(?:from|between)\s*$")
_PER = re.compile(r"/([A-Za-z]{1,12})(?![\w/])")
_DENOMINATORS = {
    "liter": "l",
    "litre": "l",
    "day": "d",
    "second": "s",
    "sec": "s",
    "hour": "h",
    "hr": "h",
    "minute": "min",
    "year": "yr",
    "y": "yr",
}
_CURRENCY_PREFIX = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}

# Units matched case-sensitively (symbols) and case-insensitively (words): surface → (dimension, factor).
_SYMBOLS: dict[str, tuple[str, float]] = {
    "%": ("percent", 1.0),
    "pp": ("percent", 1.0),
    "pct": ("percent", 1.0),
    "ns": ("time", 1e-9),
    "µs": ("time", 1e-6),
    "μs": ("time", 1e-6),
    "us": ("time", 1e-6),
    "ms": ("time", 1e-3),
    "msec": ("time", 1e-3),
    "s": ("time", 1.0),
    "sec": ("time", 1.0),
    "secs": ("time", 1.0),
    "min": ("time", 60.0),
    "mins": ("time", 60.0),
    "h": ("time", 3600.0),
    "hr": ("time", 3600.0),
    "hrs": ("time", 3600.0),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "TB": ("bytes", 1e12),
    "PB": ("bytes", 1e15),
    "KiB": ("bytes", 1024.0),
    "MiB": ("bytes", 1024.0**2),
    "GiB": ("bytes", 1024.0**3),
    "TiB": ("bytes", 1024.0**4),
    "x": ("ratio", 1.0),
    "×": ("ratio", 1.0),
    "Hz": ("hertz", 1.0),
    "kHz": ("hertz", 1e3),
    "MHz": ("hertz", 1e6),
    "GHz": ("hertz", 1e9),
    "W": ("watt", 1.0),
    "kW": ("watt", 1e3),
    "MW": ("watt", 1e6),
    "GW": ("watt", 1e9),
    "Wh": ("energy", 3600.0),
    "kWh": ("energy", 3.6e6),
    "MWh": ("energy", 3.6e9),
    "GWh": ("energy", 3.6e12),
    "J": ("energy", 1.0),
    "kJ": ("energy", 1e3),
    "MJ": ("energy", 1e6),
    "nm": ("length", 1e-9),
    "mm": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "km": ("length", 1e3),
    "mg": ("mass", 1e-6),
    "kg": ("mass", 1.0),
    "°C": ("celsius", 1.0),
    "°F": ("fahrenheit", 1.0),
    "bp": ("base_pairs", 1.0),
    "kb": ("base_pairs", 1e3),
    "kbp": ("base_pairs", 1e3),
    "Mbp": ("base_pairs", 1e6),
    "Da": ("dalton", 1.0),
    "kDa": ("dalton", 1e3),
    "kD": ("dalton", 1e3),
    "kd": ("dalton", 1e3),
    "IU": ("iu", 1.0),
    "mL": ("litre", 1e-3),
    "ml": ("litre", 1e-3),
    "µL": ("litre", 1e-6),
    "μL": ("litre", 1e-6),
    "mol": ("mol", 1.0),
    "mmol": ("mol", 1e-3),
    "µmol": ("mol", 1e-6),
    "μmol": ("mol", 1e-6),
    "nmol": ("mol", 1e-9),
    "ng": ("mass", 1e-12),
    "µg": ("mass", 1e-9),
    "μg": ("mass", 1e-9),
    "USD": ("usd", 1.0),
    "EUR": ("eur", 1.0),
    "GBP": ("gbp", 1.0),
}
_WORDS: dict[str, tuple[str, float]] = {
    "percent": ("percent", 1.0),
    "percentage": ("percent", 1.0),
    "nanosecond": ("time", 1e-9),
    "microsecond": ("time", 1e-6),
    "millisecond": ("time", 1e-3),
    "second": ("time", 1.0),
    "minute": ("time", 60.0),
    "hour": ("time", 3600.0),
    "day": ("time", 86_400.0),
    "week": ("time", 604_800.0),
    "month": ("time", 2_629_800.0),
    "year": ("time", 31_557_600.0),
    "byte": ("bytes", 1.0),
    "kilobyte": ("bytes", 1e3),
    "megabyte": ("bytes", 1e6),
    "gigabyte": ("bytes", 1e9),
    "terabyte": ("bytes", 1e12),
    "time": ("ratio", 1.0),
    "fold": ("ratio", 1.0),
    "hertz": ("hertz", 1.0),
    "watt": ("watt", 1.0),
    "kilowatt": ("watt", 1e3),
    "joule": ("energy", 1.0),
    "meter": ("length", 1.0),
    "metre": ("length", 1.0),
    "kilometer": ("length", 1e3),
    "kilometre": ("length", 1e3),
    "gram": ("mass", 1e-3),
    "kilogram": ("mass", 1.0),
    "tonne": ("mass", 1e3),
    "dollar": ("usd", 1.0),
    "euro": ("eur", 1.0),
}
_SCALE_ATTACHED = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9, "mn": 1e6, "T": 1e12}
_SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9, "trillion": 1e12}
_TWO_WORD = {("per", "cent"): ("percent", 1.0), ("percentage", "point"): ("percent", 1.0)}


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_REFERENCE_WORDS = _wordset(
    "table tab tables figure fig figs figures section sec sect eq eqs equation equations chapter ch page pages p "
    "no nr number step version ver v appendix line lines item ref refs reference theorem lemma algorithm "
    "proposition corollary definition example exercise volume vol issue top rank"
)
_MONTHS = _wordset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_GREATER = re.compile(
    r"(?:more than|greater than|higher than|larger than|over|above|exceeding|exceeds|at least|"
    r">=|≥|>)\s*$"
)
_LESS = re.compile(r"(?:less than|fewer than|lower than|smaller than|under|below|at most|up to|<=|≤|<)\s*$")
_APPROX = re.compile(r"(?:about|around|approximately|approx\.?|roughly|nearly|almost|circa|ca\.|~|≈)\s*$")
_DELTA = re.compile(r"\bby\s*$")
_LAST_WORD = re.compile(r"([A-Za-z]+)\.?\s*$")


@dataclass(frozen=True)
class Quantity:
    """A number found in text, normalised: ``low``..``high`` in the base unit of ``dimension``."""

    value: float
    dimension: str
    low: float
    high: float
    start: int
    end: int
    text: str

    @property
    def exact(self) -> bool:
        return self.low == self.high


def _singular(word: str) -> str:
    lower = word.lower()
    return lower[:-1] if lower.endswith("s") and len(lower) > 3 and not lower.endswith("ss") else lower


@dataclass(frozen=True)
class Units:
    """The unit tables a parse uses: symbols matched case-sensitively, words case-insensitively (singular)."""

    symbols: Mapping[str, tuple[str, float]]
    words: Mapping[str, tuple[str, float]]

    def extended(
        self, symbols: Mapping[str, tuple[str, float]], words: Mapping[str, tuple[str, float]] | None = None
    ) -> Units:
        """These units and more (the new ones win on a clash)."""
        return Units({**self.symbols, **symbols}, {**self.words, **(words or {})})


PROSE_UNITS = Units(_SYMBOLS, _WORDS)
"""The units of prose: what the evaluator compares. ``m`` is not one ("5m" is as often five million)."""


def _unit(token: str, units: Units = PROSE_UNITS) -> tuple[str, float] | None:
    return units.symbols.get(token) or units.words.get(_singular(token)) or units.words.get(token.lower())


def _number_value(match: re.Match[str]) -> float | None:
    literal = (match["int"] or "").replace(",", "") + (match["frac"] or "") + (match["exp"] or "")
    try:
        value = float(literal)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return -value if match["sign"] in ("-", "−") else value


def _per(text: str, token: str, end: int, unit: tuple[str, float] | None) -> tuple[tuple[str, float], int] | None:
    """A rate unit "mg/d", "ng/L", "tokens/s": the numerator's dimension (or the word itself) per the denominator.
    Denominators are not converted; rates only compare with the same denominator."""
    per = _PER.match(text, end)
    if per is None:
        return None
    numerator, factor = unit if unit else (token.lower(), 1.0)
    denominator = per.group(1).lower()
    return (f"{numerator}/{_DENOMINATORS.get(denominator, denominator)}", factor), per.end()


def _read_suffix(text: str, pos: int, units: Units = PROSE_UNITS) -> tuple[float, tuple[str, float] | None, int] | None:
    """Scale and unit after a number: (scale, unit or None, end). None: the number is part of an identifier."""
    scale = 1.0
    attached = _ATTACHED.match(text, pos)
    if attached:
        token = attached.group()
        unit = _unit(token, units)
        if rate := _per(text, token, attached.end(), unit):
            return scale, rate[0], rate[1]
        if unit:
            return scale, unit, attached.end()
        if token in _SCALE_ATTACHED:
            scale, pos = _SCALE_ATTACHED[token], attached.end()
        elif token.lower() in _SCALE_WORDS:
            scale, pos = _SCALE_WORDS[token.lower()], attached.end()
        else:
            return None  # "4th", "3D", "5G": an ordinal or an identifier, not an amount
    spaced = _SPACED.match(text, pos)
    if spaced and scale == 1.0 and spaced.group(1).lower() in _SCALE_WORDS:
        scale, pos = _SCALE_WORDS[spaced.group(1).lower()], spaced.end()
        spaced = _SPACED.match(text, pos)
    if spaced:
        word = spaced.group(1)
        following = _SPACED.match(text, spaced.end())
        if following and (key := (word.lower(), _singular(following.group(1)))) in _TWO_WORD:
            return scale, _TWO_WORD[key], following.end()
        # A lone spaced "x" is usually multiplication ("3 x 3 kernel"), a spaced capital letter a label.
        unit = _unit(word, units) if word != "x" else None
        if rate := _per(text, word, spaced.end(), unit):
            return scale, rate[0], rate[1]
        if unit:
            return scale, unit, spaced.end()
    return scale, None, pos


def _excluded_context(text: str, start: int, end: int, value: float, match: re.Match[str]) -> bool:
    before = text[:start]
    if before.endswith(("-", "‐")) and len(before) >= 2 and before[-2].isalnum():
        return True  # GPT-4, ResNet-50, COVID-19
    if before.endswith("(") and text.startswith(")", end):
        return True  # (1)
    after = text[end : end + 3]
    if re.match(r"[./:]\d", after):
        return True  # 1.2.3, 10/2020, 10:30
    if not before.strip() and after[:1] in (".", ")"):
        return True  # "1. First point", "2) second"
    last = _LAST_WORD.search(before[-24:])
    if last and last.group(1).lower() in _REFERENCE_WORDS | _MONTHS:
        return True
    next_word = re.match(r"\s+([A-Za-z]+)", text[end : end + 16])
    if next_word and next_word.group(1).lower() in _MONTHS:
        return True
    is_integer = not match["frac"] and not match["exp"] and "," not in match["int"]
    return bool(is_integer and 1900 <= value <= 2100 and text.startswith("s", end))  # the 1990s


def _is_year(match: re.Match[str], value: float) -> bool:
    return not match["frac"] and not match["exp"] and "," not in match["int"] and 1900 <= value <= 2100


def _range_end(text: str, stop: int, qualifier: str) -> re.Match[str] | None:
    """The second number of "10–20", "from 10 to 20", "between 10 and 20", if one follows."""
    connector = _RANGE_DASH.match(text, stop)
    if connector is None and _RANGE_OPENER.search(qualifier):
        connector = _RANGE_WORD.match(text, stop)
    if connector is None:
        return None
    at = connector.end()
    if text[at : at + 1] in _CURRENCY_PREFIX:
        at += 1
    return _NUMBER.match(text, at)


def _interval(base: float, qualifier: str) -> tuple[float, float]:
    if _GREATER.search(qualifier):
        return base, math.inf
    if _LESS.search(qualifier):
        return -math.inf, base
    if _APPROX.search(qualifier):
        low, high = sorted((base * (1 - APPROX_SLACK), base * (1 + APPROX_SLACK)))
        return low, high
    return base, base


def find_quantities(text: str, *, units: Units = PROSE_UNITS) -> list[Quantity]:
    """All quantities in ``text`` (one sentence is the intended unit), in order of appearance."""
    text = _CITATION.sub(lambda m: " " * len(m.group()), text)  # keep offsets stable for callers
    found: list[Quantity] = []
    pos = 0
    while match := _NUMBER.search(text, pos):
        pos = match.end()
        start, end = match.start(), match.end()
        value = _number_value(match)
        if value is None or _excluded_context(text, start, end, value, match):
            continue
        currency = _CURRENCY_PREFIX.get(text[start - 1]) if start else None
        q_start = start - 1 if currency else start
        qualifier = text[max(0, q_start - 24) : q_start].lower()
        if _DELTA.search(qualifier):
            continue  # "improved by 5%" is a change, not a level
        suffix = _read_suffix(text, end, units)
        if suffix is None:
            continue
        scale, unit, stop = suffix
        low = high = value
        second = _range_end(text, stop, qualifier)
        if second and (second_value := _number_value(second)) is not None:
            pos = second.end()
            if _is_year(match, value) or re.match(r"[-/.]\d", text[second.end() : second.end() + 2]):
                continue  # 2019–2021, 2020-05-01, 10-12-2020: year spans and dates
            second_suffix = _read_suffix(text, second.end(), units)
            if second_suffix is not None:
                scale_b, unit_b, stop = second_suffix
                unit, scale = unit or unit_b, scale if scale != 1.0 else scale_b
                low, high = sorted((value, second_value))
        if currency and unit is None:
            unit = (currency, 1.0)
        if unit is None and scale == 1.0 and low == high and _is_year(match, value):
            continue
        dimension, factor = unit if unit else ("number", 1.0)
        base = value * scale * factor
        if low == high:
            low, high = _interval(base, qualifier)
        else:
            low, high = low * scale * factor, high * scale * factor
        found.append(Quantity(base, dimension, low, high, q_start, stop, text[q_start:stop]))
        pos = max(pos, stop)
    return found


def parse_quantity(text: str, *, units: Units = PROSE_UNITS) -> Quantity | None:
    """The first quantity in ``text``, or None."""
    quantities = find_quantities(text, units=units)
    return quantities[0] if quantities else None


def relative_gap(a: Quantity, b: Quantity) -> float:
    """How far apart two quantities of one dimension are, relative to their size; 0 when their intervals meet."""
    if a.high >= b.low and b.high >= a.low:
        return 0.0
    gap = b.low - a.high if a.high < b.low else a.low - b.high
    scale = max(abs(v) for v in (a.low, a.high, b.low, b.high) if math.isfinite(v))
    return math.inf if scale == 0 else gap / scale
