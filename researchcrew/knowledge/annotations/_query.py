"""A structured question, read by rules: intent, numeric comparisons with units, date ranges, item terms, aggregates.

"solar panels width ≤ 1.2 m" → enumeration, width in (-∞, 1.2] metres; "receipts containing tires under $50 in
2024" → items ["tires"], a USD bound, the year 2024; "average reagent cost per test across the papers" →
aggregate mean of "reagent cost per test". Labels are resolved later, against the labels the index holds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from researchcrew.contracts.tables import AggregateOperation, Intent
from researchcrew.knowledge.annotations._values import MEASURE_UNITS
from researchcrew.text.quantities import find_quantities
from researchcrew.text.terms import QUERY_STOP_WORDS, stem, term_words

_STRICT_LESS = r"<|under|below|less than|fewer than|lower than|smaller than|narrower than|lighter than|cheaper than"
_STRICT_MORE = r">|over|above|more than|greater than|larger than|higher than|wider than|heavier than|exceeding|exceeds"
_INCLUSIVE_LESS = r"≤|<=|=<|at most|no more than|not more than|up to|maximum of|max\.?"
_INCLUSIVE_MORE = r"≥|>=|=>|at least|no less than|not less than|minimum of|min\.?"
_NUMBER = (
    r"[$€£]?\s?\d[\d,]*(?:\.\d+)?"
    r"(?:\s?(?!(?:and|to|in|or|of|for|per|with|from|at|on|by)\b(?!\s*$))[A-Za-z%°\"]{1,12}\.?(?![A-Za-z]))?"
)
_COMPARISON = re.compile(
    rf"(?<![A-Za-z])(?P<op>{_INCLUSIVE_LESS}|{_INCLUSIVE_MORE}|{_STRICT_LESS}|{_STRICT_MORE}|between|from|=|equal to)"
    rf"\s*"
    rf"(?P<a>{_NUMBER})(?:\s*(?:and|to|-|–)\s*(?P<b>{_NUMBER}))?",
    re.IGNORECASE,
)
_YEAR_RANGE = re.compile(
    r"\b(?P<op>after|since|from|before|until|in|during)\s+(?P<date>(?:19|20)\d{2}(?:-\d{2}(?:-\d{2})?)?)"
    r"(?:\s*(?:to|and|-|–)\s*(?P<end>(?:19|20)\d{2}(?:-\d{2}(?:-\d{2})?)?))?\b",
    re.IGNORECASE,
)
_ITEM = re.compile(
    r"\b(?:contain|contains|containing|that contain|include|includes|including|mention|mentions|mentioning|"
    r"with items?|for items?|bought|purchased|selling|sold)\s+(?:an?\s+|the\s+|any\s+)?(?P<item>[a-z][a-z0-9 -]{1,40}?)"
    r"(?=\s*(?:\?|$|,|\.|\band\b|\bwith\b|\bunder\b|\bover\b|\babove\b|\bbelow\b|\bin\b|\bfrom\b|\bbetween\b|\bat\b))",
    re.IGNORECASE,
)
_AGGREGATES: list[tuple[re.Pattern[str], AggregateOperation]] = [
    (re.compile(r"\b(?:average|mean|avg)\b", re.I), "mean"),
    (
        re.compile(r"\b(?:sum|altogether|in total|total (?:of|spent|amount|cost|price|weight|power|value))\b", re.I),
        "sum",
    ),
    (re.compile(r"\b(?:how many|number of|count)\b", re.I), "count"),
    (re.compile(r"\b(?:maximum|max|highest|largest|biggest|most expensive|widest|longest|heaviest)\b", re.I), "max"),
    (
        re.compile(r"\b(?:minimum|min|lowest|smallest|least expensive|cheapest|narrowest|shortest|lightest)\b", re.I),
        "min",
    ),
]
_GROUP = re.compile(
    r"\b(?:grouped by|group by|broken down by|by|for each|per each|per)\s+(?P<group>[a-z][a-z -]{1,30}?)"
    r"(?=\s*(?:\?|$|,|\.|\band\b|\bin\b|\bacross\b|\bfor\b|\bfrom\b))",
    re.I,
)
_CONCEPTUAL = re.compile(
    r"^\s*(?:why|explain|describe|summari[sz]e|how (?:does|do|did|can|could|should|is|are)|what (?:causes|explains|"
    r"is the (?:idea|role|purpose|mechanism|difference)|are the (?:main|key) (?:ideas|findings|arguments|themes)))\b",
    re.IGNORECASE,
)
_LOOKUP = re.compile(
    r"^\s*(?:what(?:'s| is| was| are| were)? (?:the )?(?P<label>[a-z][a-z -]{1,40}?) (?:of|for|in|reported)|"
    r"how (?:wide|tall|long|heavy|high|big|large|much|expensive|deep))\b",
    re.IGNORECASE,
)
_ENUMERATION = re.compile(
    r"^\s*(?:which|list|show|find|give|name|all|every|enumerate|what (?:\w+ ){0,3}(?:have|has|had|report|reports))\b",
    re.IGNORECASE,
)
# A second part of the question that only passages answer: "... above 1,000 *and what did they find*?", "... and why".
# The table answers the first part; the question takes the hybrid route so that the text is searched too.
_TEXT_CLAUSE = re.compile(
    r"\b(?:and|but)\s+(?:why\b|how\s+(?:do|does|did|was|were|is|are|can|could)\b|what\s+(?:\w+\s+){0,3}?"
    r"(?:find|found|findings|conclude|concluded|conclusions?|show|showed|shown|observe|observed|learn|learned|"
    r"recommend|recommended|suggest|suggested|say|said|discover|discovered|results?|outcomes?)\b)[^?.;]*",
    re.IGNORECASE,
)
# Words that say how the question is asked or what kind of thing is counted, never a label or a subject to match.
GENERIC_WORDS = frozenset(
    stem(word)
    for word in """list show find give name all every which what report reports reported value values table rows
    row document documents file files item items entry entries record records average mean total sum count number
    maximum minimum highest lowest largest smallest many much across among each per grouped group broken down
    contain contains containing include includes including mention mentions mentioning any way there study studies
    paper papers article articles publication publications product products thing things anything""".split()  # noqa: SIM905 (a word list reads as text)
)


# Adjectives that name the field they compare ("narrower than 40 in" is about width).
IMPLIED_LABELS = {
    "narrow": "width",
    "narrower": "width",
    "wide": "width",
    "wider": "width",
    "widest": "width",
    "narrowest": "width",
    "tall": "height",
    "taller": "height",
    "tallest": "height",
    "heavy": "weight",
    "heavier": "weight",
    "heaviest": "weight",
    "light": "weight",
    "lighter": "weight",
    "lightest": "weight",
    "long": "length",
    "longer": "length",
    "longest": "length",
    "short": "length",
    "shorter": "length",
    "expensive": "price",
    "cheap": "price",
    "cheaper": "price",
    "cheapest": "price",
}


@dataclass(frozen=True)
class NumericFilter:
    """``low``..``high`` (in the base unit of ``dimension``), each end strict or not, as the question wrote it."""

    low: float
    high: float
    low_inclusive: bool
    high_inclusive: bool
    dimension: str
    text: str
    hint: str  # the words just before the comparison: where its label is named ("width ≤ 1.2 m")

    def admits(self, value: float) -> bool:
        above = value >= self.low if self.low_inclusive else value > self.low
        below = value <= self.high if self.high_inclusive else value < self.high
        return above and below


@dataclass(frozen=True)
class DateRange:
    start: str | None  # ISO day, inclusive
    end: str | None  # ISO day, inclusive
    text: str

    def admits(self, day: str) -> bool:
        return (self.start is None or day >= self.start) and (self.end is None or day <= self.end)


@dataclass
class ParsedQuestion:
    """What the rules read from a question (labels are resolved against the index later)."""

    text: str
    intent: Intent
    numeric: list[NumericFilter] = field(default_factory=list)
    dates: DateRange | None = None
    items: list[str] = field(default_factory=list)
    aggregate: AggregateOperation | None = None
    group_by: str | None = None
    lookup_label: str | None = None
    words: list[str] = field(default_factory=list)  # content words, in order (stemmed by callers as needed)
    text_part: str | None = None  # a part only passages answer ("and what did they find"): the hybrid route


def _quantity(text: str) -> tuple[float, str] | None:
    found = find_quantities(text.strip(), units=MEASURE_UNITS)
    if not found:
        return None
    return found[0].value, found[0].dimension


def _numeric(question: str) -> tuple[list[NumericFilter], list[tuple[int, int]]]:
    filters: list[NumericFilter] = []
    spans: list[tuple[int, int]] = []
    for match in _COMPARISON.finditer(question):
        op = match["op"].lower()
        first = _quantity(match["a"])
        if first is None:
            continue
        second = _quantity(match["b"]) if match["b"] else None
        value, dimension = first
        if re.fullmatch(r"(?:19|20)\d{2}", match["a"].strip()) and op in ("from", "between"):
            continue  # a year range: the date parser's
        if second is not None and op in ("between", "from"):
            other, other_dimension = second
            unit = re.search(r"[A-Za-z%°\"]+\.?$", match["b"])
            if dimension == "number" and other_dimension != "number" and unit:  # "1-2 m": the unit is both ends'
                value, dimension = _quantity(f"{match['a'].strip()} {unit.group()}") or (value, other_dimension)
            low, high = sorted((value, other))
            filter_ = NumericFilter(low, high, True, True, dimension, match.group(0).strip(), _hint(question, match))
        elif op in ("between", "from"):
            continue
        elif re.fullmatch(_INCLUSIVE_LESS, op, re.I):
            filter_ = NumericFilter(-math.inf, value, True, True, dimension, match.group(0), _hint(question, match))
        elif re.fullmatch(_INCLUSIVE_MORE, op, re.I):
            filter_ = NumericFilter(value, math.inf, True, True, dimension, match.group(0), _hint(question, match))
        elif re.fullmatch(_STRICT_LESS, op, re.I):
            filter_ = NumericFilter(-math.inf, value, True, False, dimension, match.group(0), _hint(question, match))
        elif re.fullmatch(_STRICT_MORE, op, re.I):
            filter_ = NumericFilter(value, math.inf, False, True, dimension, match.group(0), _hint(question, match))
        else:  # "=", "equal to"
            filter_ = NumericFilter(value, value, True, True, dimension, match.group(0), _hint(question, match))
        filters.append(filter_)
        spans.append(match.span())
    return filters, spans


def _hint(question: str, match: re.Match[str]) -> str:
    before = question[: match.start()].split()
    return " ".join(before[-4:])


def _day(text: str, *, end: bool) -> str:
    parts = text.split("-")
    year = parts[0]
    month = parts[1] if len(parts) > 1 else ("12" if end else "01")
    if len(parts) > 2:
        return f"{year}-{month}-{parts[2]}"
    if not end:
        return f"{year}-{month}-01"
    days = {"02": "29", "04": "30", "06": "30", "09": "30", "11": "30"}.get(month, "31")
    return f"{year}-{month}-{days}"


def _dates(question: str) -> tuple[DateRange | None, tuple[int, int] | None]:
    match = _YEAR_RANGE.search(question)
    if match is None:
        return None, None
    op, date, end = match["op"].lower(), match["date"], match["end"]
    if end:
        return DateRange(_day(date, end=False), _day(end, end=True), match.group(0)), match.span()
    if op in ("after",):
        return DateRange(_next_day(_day(date, end=True)), None, match.group(0)), match.span()
    if op in ("since", "from"):
        return DateRange(_day(date, end=False), None, match.group(0)), match.span()
    if op == "before":
        return DateRange(None, _previous_day(_day(date, end=False)), match.group(0)), match.span()
    if op == "until":
        return DateRange(None, _day(date, end=True), match.group(0)), match.span()
    return DateRange(_day(date, end=False), _day(date, end=True), match.group(0)), match.span()


def _next_day(day: str) -> str:
    from datetime import date, timedelta

    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def _previous_day(day: str) -> str:
    from datetime import date, timedelta

    return (date.fromisoformat(day) - timedelta(days=1)).isoformat()


def parse_question(question: str) -> ParsedQuestion:
    """The rules' reading of ``question`` (see the module docstring)."""
    numeric, spans = _numeric(question)
    dates, date_span = _dates(question)
    items = [match["item"].strip() for match in _ITEM.finditer(question)]
    aggregate = next((operation for pattern, operation in _AGGREGATES if pattern.search(question)), None)
    group = _GROUP.search(question) if aggregate else None
    lookup = _LOOKUP.match(question)
    if aggregate is not None:
        intent: Intent = "aggregate"
    elif _CONCEPTUAL.match(question) and not numeric:
        intent = "conceptual"
    elif numeric or items or dates or _ENUMERATION.match(question):
        intent = "enumeration"
    elif lookup is not None:
        intent = "numeric_lookup"
    else:
        intent = "conceptual"
    masked = question
    for start, end in [*spans, *([date_span] if date_span else [])]:
        masked = masked[:start] + " " * (end - start) + masked[end:]
    words = [word for word in term_words(masked) if word not in QUERY_STOP_WORDS and not word[0].isdigit()]
    words += [IMPLIED_LABELS[word] for word in term_words(question) if word in IMPLIED_LABELS]
    clause = _TEXT_CLAUSE.search(question)
    return ParsedQuestion(
        text=question,
        intent=intent,
        numeric=numeric,
        dates=dates,
        items=items,
        aggregate=aggregate,
        group_by=group["group"].strip() if group else None,
        lookup_label=lookup["label"].strip() if lookup and lookup["label"] else None,
        words=words,
        text_part=clause.group(0).strip() if clause and intent != "conceptual" else None,
    )
