"""The scalar fields the typed filters read in Milvus, and the filter expressions over them.

Each annotation row carries, beside its JSON ``properties``:

* ``labels`` — its normalised labels (an ARRAY): the label filter, ``array_contains_any``;
* ``numbers`` — JSON ``{n<label hash>: number in the base unit, d<label hash>: dimension}`` for the first numeric
  value of each label: numeric ranges are compared in Milvus on the normalised value (unit conversion happened at
  ingest, and for the question's bound when it was parsed), the dimension must match;
* ``day`` — the row's own date, else its document's first date fact: date ranges, as ISO days compared as text;
* ``terms`` — the stemmed words of its values, title, section, table and file: item terms (``array_contains_all``)
  and the question's subject words (``array_contains_any``). These are supersets of the exact rules (an item's words
  must all be in *one* text value), which the search still applies in Python to the rows Milvus returns.

A document's marker row keeps a summary (labels with counts, the dimensions of each label's numbers, the words of its
titles, sections and tables), so resolving a question's fields reads one row per document, not every annotation.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from researchcrew.knowledge import _schema as schema
from researchcrew.text.terms import stem, term_words

if TYPE_CHECKING:
    from researchcrew.knowledge.annotations._extract import Annotation
    from researchcrew.knowledge.annotations._query import DateRange, NumericFilter

LABELS = "labels"
NUMBERS = "numbers"
DAY = "day"
TERMS = "terms"
MAX_LABELS = 64
MAX_TERMS = 4096
TERMS_CUT = "*"  # in ``terms`` when a row's words did not all fit: such a row passes the term filters
LABEL_BYTES = 200
TERM_BYTES = 64


def clip_label(key: str) -> str:
    return key.encode()[:LABEL_BYTES].decode(errors="ignore")


def _hash(key: str) -> str:
    return hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:12]


def number_key(label: str) -> str:
    """The ``numbers`` key of a label's value (a hash: labels hold any character, JSON paths in a filter do not)."""
    return "n" + _hash(label)


def dimension_key(label: str) -> str:
    return "d" + _hash(label)


def stems(parts: Iterable[str]) -> set[str]:
    return {stem(word) for part in parts for word in term_words(part)}


def subject_parts(annotation: Annotation) -> list[str]:
    """What a question's subject words are matched against: title, section, table, file and every value."""
    parts = [annotation.title or "", annotation.section or "", annotation.table or "", annotation.file or ""]
    return parts + [value.text for value in annotation.values]


def _terms(annotation: Annotation) -> list[str]:
    words = sorted(stems(subject_parts(annotation)))
    fits = [word for word in words if len(word.encode()) <= TERM_BYTES]
    if len(fits) < len(words) or len(fits) > MAX_TERMS:
        return [TERMS_CUT, *fits[: MAX_TERMS - 1]]
    return fits


def document_day(annotations: Sequence[Annotation]) -> str:
    """The first date fact of a document (what its rows without a date of their own are dated by)."""
    for annotation in annotations:
        if annotation.kind == "fact":
            for value in annotation.values:
                if value.kind == "date" and value.date:
                    return value.date
    return ""


def filter_fields(annotation: Annotation, document_day: str) -> dict[str, Any]:
    """The scalar fields of one annotation row (see the module docstring)."""
    numbers: dict[str, Any] = {}
    for value in annotation.values:
        key = clip_label(value.key)
        if number_key(key) in numbers or dimension_key(key) in numbers:
            continue
        numbers[dimension_key(key)] = value.dimension or ""  # the first value of a label decides, as in Python
        if value.number is not None and math.isfinite(value.number):
            numbers[number_key(key)] = value.number
    own = next((value.date for value in annotation.values if value.kind == "date" and value.date), None)
    return {
        LABELS: sorted({clip_label(value.key) for value in annotation.values})[:MAX_LABELS],
        NUMBERS: numbers,
        DAY: own or document_day,
        TERMS: _terms(annotation),
    }


def document_summary(annotations: Sequence[Annotation]) -> dict[str, Any]:
    """A marker row's summary of its document's annotations: label counts, the dimensions of each label's numbers,
    the words of its titles, sections, tables and files."""
    labels: dict[str, int] = {}
    dimensions: dict[str, set[str]] = {}
    subject: set[str] = set()
    for annotation in annotations:
        for key in {clip_label(value.key) for value in annotation.values}:
            labels[key] = labels.get(key, 0) + 1
        for value in annotation.values:
            if value.dimension is not None:
                dimensions.setdefault(value.key, set()).add(value.dimension)
        subject |= stems([annotation.title or "", annotation.section or "", annotation.table or ""])
        subject |= stems([annotation.file or ""])
    return {
        "labels": labels,
        "dimensions": {key: sorted(found) for key, found in dimensions.items()},
        "subject": sorted(subject),
    }


def _number(value: float) -> str:
    text = repr(float(value))
    return text if "e" not in text else f"{value:.20f}".rstrip("0").rstrip(".")


def numeric_clause(filter_: NumericFilter, labels: Sequence[str]) -> str:
    """Rows where one of ``labels`` has a number in ``filter_``'s dimension and range."""
    alternatives = []
    for label in labels:
        field = f'{NUMBERS}["{number_key(label)}"]'
        parts = [f'{NUMBERS}["{dimension_key(label)}"] == {schema.quote(filter_.dimension)}']
        if math.isfinite(filter_.low):
            parts.append(f"{field} {'>=' if filter_.low_inclusive else '>'} {_number(filter_.low)}")
        if math.isfinite(filter_.high):
            parts.append(f"{field} {'<=' if filter_.high_inclusive else '<'} {_number(filter_.high)}")
        if len(parts) == 1:
            parts.append(f"{field} >= {_number(-1e300)}")  # any number at all
        alternatives.append("(" + " and ".join(parts) + ")")
    return "(" + " or ".join(alternatives) + ")" if alternatives else "false"


def other_dimension_clause(labels: Sequence[str], dimensions: Sequence[str]) -> str:
    """Rows where one of ``labels`` has a number in one of ``dimensions``."""
    alternatives = [
        f'{NUMBERS}["{dimension_key(label)}"] == {schema.quote(dimension)}'
        for label in labels
        for dimension in dimensions
    ]
    return "(" + " or ".join(alternatives) + ")" if alternatives else "false"


def labels_clause(labels: Sequence[str]) -> str:
    return f"array_contains_any({LABELS}, [{', '.join(schema.quote(clip_label(label)) for label in labels)}])"


def date_clause(dates: DateRange) -> str:
    parts = [f'{DAY} != ""']
    if dates.start is not None:
        parts.append(f"{DAY} >= {schema.quote(dates.start)}")
    if dates.end is not None:
        parts.append(f"{DAY} <= {schema.quote(dates.end)}")
    return "(" + " and ".join(parts) + ")"


def all_terms_clause(words: Iterable[str]) -> str:
    quoted = ", ".join(schema.quote(word) for word in sorted(set(words)))
    return f"(array_contains_all({TERMS}, [{quoted}]) or array_contains({TERMS}, {schema.quote(TERMS_CUT)}))"


def any_terms_clause(words: Iterable[str], *, cut_rows: bool = True) -> str:
    quoted = ", ".join(schema.quote(word) for word in sorted(set(words)))
    clause = f"array_contains_any({TERMS}, [{quoted}])"
    return f"({clause} or array_contains({TERMS}, {schema.quote(TERMS_CUT)}))" if cut_rows else clause
