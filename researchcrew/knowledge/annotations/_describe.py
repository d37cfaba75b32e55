"""What a structured answer says about its rows, in words: the filters applied, the values converted to another
unit, and whether each row's values are in its passage exactly as written (the evidence a table answer's confidence
rests on, instead of how similar a passage is to the question)."""

from __future__ import annotations

import re

from researchcrew.knowledge.annotations._query import ParsedQuestion
from researchcrew.knowledge.annotations._search import SearchResult
from researchcrew.knowledge.annotations._values import TypedValue

MAX_CONVERSIONS = 5
_FIRST_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _label_names(result: SearchResult) -> dict[str, str]:
    names: dict[str, str] = {}
    for item in result.matches:
        for value in item.annotation.values:
            names.setdefault(value.key, value.label)
    return names


def describe_filters(question: ParsedQuestion, result: SearchResult) -> list[str]:
    """The conditions the rows were selected by: "Width at most 1.2 m", "contains 'tires'", "dated 2024"."""
    names = _label_names(result)
    fields = " or ".join(names.get(key, key) for key in result.labels) or "value"
    found = [f"{fields} {numeric.text.strip()}" for numeric in question.numeric]
    found += [f"contains '{item}'" for item in question.items]
    dates = question.dates
    if dates is not None:
        if dates.start and dates.end:
            found.append(f"dated {dates.start} to {dates.end}")
        elif dates.start:
            found.append(f"dated from {dates.start}")
        elif dates.end:
            found.append(f"dated until {dates.end}")
    if not found and result.labels:
        found.append(f"has a {fields}")
    return found[:20]


def _converted(value: TypedValue) -> bool:
    """Whether the value is shown in another unit than written ("110 cm" shown as 1.1 m)."""
    if value.kind != "number" or value.number is None:
        return False
    written = _FIRST_NUMBER.search(value.text)
    if written is None:
        return False
    try:
        as_written = float(written.group(0).replace(",", ""))
    except ValueError:
        return False
    return abs(as_written - value.number) > 1e-9 * max(1.0, abs(value.number))


def conversions(result: SearchResult) -> tuple[int, list[str]]:
    """How many values of the matches were converted to their base unit, and the first few as "110 cm → 1.1 m"."""
    count = 0
    shown: list[str] = []
    for item in result.matches:
        first = item.annotation.values[0]
        for value in item.annotation.values:
            if not _converted(value):
                continue
            count += 1
            if len(shown) < MAX_CONVERSIONS:
                number = f"{value.number:.10g}"
                of = f" ({first.text})" if first is not value and first.kind == "text" else ""
                shown.append(f"{value.text} → {number} {value.unit or ''}".rstrip() + of)
    return count, shown


def verified(result: SearchResult) -> int:
    """How many matches have every value verbatim in the passage they cite (read back from the chunks)."""
    count = 0
    for item in result.matches:
        passage = result.passages.get((item.collection, item.annotation.chunk_id))
        text = str(passage.get("text") or "") if passage else ""
        if text and all(value.text in text for value in item.annotation.values):
            count += 1
    return count


def doubts(result: SearchResult) -> list[str]:
    """What makes the match less than exact."""
    found = []
    if result.matched_by == "embedding":
        found.append("the fields were matched by meaning, not by name")
    if result.relaxed:
        found.append("a condition of the question was relaxed")
    return found


__all__ = ["conversions", "describe_filters", "doubts", "verified"]
