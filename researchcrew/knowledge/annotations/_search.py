"""The seed's tools over annotations: ``annotations_search``, ``annotations_aggregate``, ``export_annotations_csv``.

Search: labels are matched lexically (stemmed words of a label all in the question) or, failing that, by embedding
(the question's phrases against the labels the index holds, so "qty" finds "quantity"); typed filters then apply —
numeric ranges after unit conversion (a value in a unit that cannot be converted to the question's is left out and
*named* in the notes), date ranges (a row without a date of its own takes its document's date fact), item terms
(a row's text holds the item), and the question's remaining words as a soft subject filter (relaxed, with a note,
when nothing would pass it). The filters run in Milvus' expression (``_filters``: labels, normalised numbers and
their dimension, days, item and subject words, collection scope), so a query reads the rows that pass them, not every
annotation; the rules Milvus cannot say exactly (an item's words inside one value, rows rather than facts when items
are asked) are applied to those rows in Python. Every result's passage is read back from the chunks, under the same
collection scope: an annotation of a removed document is never returned.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.tables import AggregateOperation, AggregateResult, TableColumn, TableRow
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.annotations._extract import Annotation
from researchcrew.knowledge.annotations._filters import (
    all_terms_clause,
    any_terms_clause,
    date_clause,
    labels_clause,
    numeric_clause,
    other_dimension_clause,
    stems,
    subject_parts,
)
from researchcrew.knowledge.annotations._index import AnnotationIndex, StoredAnnotation
from researchcrew.knowledge.annotations._query import GENERIC_WORDS, ParsedQuestion
from researchcrew.knowledge.annotations._values import TypedValue, unit_of
from researchcrew.text.spreadsheet import csv_table
from researchcrew.text.terms import QUERY_STOP_WORDS, stem, term_words

# Abbreviations labels use, and the word a question uses for them ("qty" is what a receipt's column says for the
# "quantity" a question asks about); the small embedding model does not bring these two together by itself.
ABBREVIATIONS = {
    "qty": "quantity",
    "amt": "amount",
    "wt": "weight",
    "no": "number",
    "num": "number",
    "dim": "dimension",
    "temp": "temperatur",
    "desc": "description",
    "yr": "year",
    "pct": "percent",
    "approx": "approximat",
    "avg": "averag",
    "ht": "height",
    "len": "length",
    "w": "width",
    "h": "height",
}
LABEL_SIMILARITY = 0.6  # cosine of a question phrase and a label to count as the same field ("qty" ~ "quantity")
MAX_COLUMNS = 12
_NOTE_ROWS = 200  # rows read to name the units that could not be converted


@dataclass
class SearchResult:
    """Annotations that answer a question, with the labels used and what the reader should know."""

    matches: list[StoredAnnotation] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # resolved label keys (the fields asked about)
    ambiguous: list[str] = field(default_factory=list)  # candidate labels when the question's field is unclear
    notes: list[str] = field(default_factory=list)
    passages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    relaxed: bool = False
    matched_by: str = ""  # how the labels were matched: "lexical", "embedding" or "" (no field named)


def _stems(text: str) -> set[str]:
    return {stem(word) for word in term_words(text) if word not in QUERY_STOP_WORDS}


def needs_field(question: ParsedQuestion) -> bool:
    """Whether the question asks about a field's values (a comparison, an aggregate of a field, a lookup)."""
    return bool(question.numeric or question.aggregate not in (None, "count") or question.intent == "numeric_lookup")


def resolve_labels(
    question: ParsedQuestion, known: Sequence[str], index: AnnotationIndex | None
) -> tuple[list[str], str]:
    """The known labels the question names, and how ("lexical", "embedding" or ""). Matching by meaning is tried
    only for a question that needs a field (pass ``index=None`` to match by words only)."""
    words = {stem(word) for word in question.words}
    words |= {short for short, full in ABBREVIATIONS.items() if full in words}
    lexical = [key for key in known if (key_stems := _stems(key)) and key_stems <= words]
    maximal = [key for key in lexical if not any(_stems(key) < _stems(other) for other in lexical)]
    # A label made only of words any question uses ("item", "number") is the field only when no other label is,
    # by words or by meaning.
    specific = [key for key in maximal if not _stems(key) <= GENERIC_WORDS]
    if specific:
        return sorted(specific), "lexical"
    by_meaning = _by_meaning(question, known, index) if index is not None and needs_field(question) else []
    if by_meaning:
        return by_meaning, "embedding"
    return sorted(maximal), "lexical" if maximal else ""


def _by_meaning(question: ParsedQuestion, known: Sequence[str], index: AnnotationIndex) -> list[str]:
    """The known labels nearest the question's phrases by embedding, at least ``LABEL_SIMILARITY`` (ties kept)."""
    if not known:
        return []
    phrases = _phrases([word for word in question.words if stem(word) not in GENERIC_WORDS])
    if not phrases:
        return []
    vectors = index.label_vectors([*phrases, *known])
    similarities = vectors[: len(phrases)] @ vectors[len(phrases) :].T
    best: dict[str, float] = {}
    for column, key in enumerate(known):
        similarity = float(np.max(similarities[:, column]))
        if similarity >= LABEL_SIMILARITY:
            best[key] = similarity
    if not best:
        return []
    top = max(best.values())
    return sorted(key for key, score in best.items() if score >= top - 0.02)


def _phrases(words: list[str]) -> list[str]:
    found = list(dict.fromkeys(words))
    found += [" ".join(words[i : i + 2]) for i in range(len(words) - 1)]
    return found[:40]


def _value(annotation: StoredAnnotation, key: str) -> TypedValue | None:
    return next((value for value in annotation.annotation.values if value.key == key), None)


def _contains_item(annotation: StoredAnnotation, item: str) -> bool:
    wanted = _stems(item)
    if not wanted:
        return True
    for value in annotation.annotation.values:
        if value.kind == "text" and wanted <= {stem(word) for word in term_words(value.text)}:
            return True
    return False


def _document_facts(stored: list[StoredAnnotation]) -> dict[tuple[str, str], dict[str, TypedValue]]:
    facts: dict[tuple[str, str], dict[str, TypedValue]] = defaultdict(dict)
    for item in stored:
        if item.annotation.kind == "fact":
            for value in item.annotation.values:
                facts[(item.collection, item.annotation.source_key)].setdefault(value.key, value)
    return facts


def _subject_text(item: StoredAnnotation) -> set[str]:
    return stems(subject_parts(item.annotation))


def annotations_search(index: AnnotationIndex, question: ParsedQuestion, collections: Sequence[str]) -> SearchResult:
    """The annotations in ``collections`` that answer ``question`` (see the module docstring). The typed filters
    run in Milvus (``_filters``): only rows that pass them are read; the exact rules Milvus cannot express (an
    item's words in one value, rows over facts when items are asked) are applied to those rows here."""
    result = SearchResult()
    if not index.count(collections):
        return result  # none to search (the count is cached until a write: no round trip)
    known = index.labels(collections)
    labels, how = resolve_labels(question, sorted(known), index)
    result.matched_by = how
    if how == "embedding":
        result.notes.append(f"fields matched by meaning: {', '.join(labels)}")
    # Numeric filters without a named field: the fields whose numbers are in the filter's unit.
    needs_label = needs_field(question)
    dimensions = index.dimensions(collections) if question.numeric else {}
    if needs_label and not labels and question.numeric:
        dimension = question.numeric[0].dimension
        by_unit = sorted(key for key, found in dimensions.items() if dimension in found)
        if len(by_unit) == 1:
            labels = by_unit
        elif len(by_unit) > 1:
            result.ambiguous = by_unit
            return result
    if needs_label and not labels:
        return result
    result.labels = labels
    clauses: list[str] = [labels_clause(labels)] if labels else []
    clauses += [numeric_clause(filter_, labels) for filter_ in question.numeric]
    if question.numeric:
        result.notes += _unconvertible(index, question, labels, dimensions, clauses[:1], collections)
    items = [words for item_term in question.items if (words := _stems(item_term))]
    clauses += [all_terms_clause(words) for words in items]
    if question.dates is not None:
        clauses.append(date_clause(question.dates))
    used = {stem(word) for label in labels for word in term_words(label)}
    used |= {stem(word) for item_term in question.items for word in term_words(item_term)}
    if question.group_by:
        used |= {stem(word) for word in term_words(question.group_by)}
    subject = {stem(word) for word in question.words} - used - GENERIC_WORDS
    # The question's other words narrow the rows to what they name ("solar panels", "receipts"), unless nothing in
    # the index mentions them at all: then they are not a subject the annotations know, and the condition is relaxed.
    constrained = bool(labels or question.items or question.numeric or question.dates)
    if not constrained and not subject:
        return result  # nothing in the question picks any annotation out
    narrowed = False
    if subject:
        # Named by a title, section, table or file (the markers know those) or else by some value (a scan).
        named = subject & index.subject_words(collections)
        if named or index.any_where(collections, [any_terms_clause(subject, cut_rows=False)]):
            clauses.append(any_terms_clause(subject))
            narrowed = True
        elif not constrained:
            return result  # the only condition names nothing the annotations know: no rows, not every row
    candidates = index.where(collections, clauses)
    for item_term in question.items:
        candidates = [item for item in candidates if _contains_item(item, item_term)]
    if question.items and any(item.annotation.kind == "row" for item in candidates):
        candidates = [item for item in candidates if item.annotation.kind == "row"]  # items are what rows list
    if narrowed:
        candidates = [item for item in candidates if _subject_matches(subject, item)]
    elif subject and candidates:
        result.relaxed = True
        result.notes.append(f"no row mentions {', '.join(sorted(subject))}; that condition was relaxed")
    passages = index.passages([item.annotation.chunk_id for item in candidates], collections)
    result.passages = passages
    result.matches = [item for item in candidates if (item.collection, item.annotation.chunk_id) in passages]
    result.matches.sort(
        key=lambda item: (
            item.annotation.title or "",
            item.annotation.source_key,
            item.annotation.row if item.annotation.row is not None else -1,
        )
    )
    return result


def _unconvertible(
    index: AnnotationIndex,
    question: ParsedQuestion,
    labels: list[str],
    dimensions: dict[str, set[str]],
    scope: list[str],
    collections: Sequence[str],
) -> list[str]:
    """Notes naming the fields whose values are in a unit the question's cannot be converted to (left out), read
    from the rows that have such a value (none are read when the markers say no label has another dimension)."""
    wanted_dimension = question.numeric[0].dimension
    others = sorted({found for key in labels for found in dimensions.get(key, set())} - {wanted_dimension})
    if not others:
        return []
    mismatched: dict[str, set[str]] = defaultdict(set)
    for item in index.where(collections, [*scope, other_dimension_clause(labels, others)], limit=_NOTE_ROWS):
        for key in labels:
            value = _value(item, key)
            if value is not None and value.number is not None and value.dimension != wanted_dimension:
                mismatched[value.label].add(value.unit or "no unit")
    wanted = unit_of(wanted_dimension) or "plain numbers"
    return [
        f"{label}: values in {', '.join(sorted(units))} cannot be converted to {wanted} and were left out"
        for label, units in sorted(mismatched.items())
    ]


def _subject_matches(subject: set[str], item: StoredAnnotation) -> bool:
    text = _subject_text(item)
    return any(word in text for word in subject)


def table_of(result: SearchResult) -> tuple[list[TableColumn], list[TableRow], list[str]]:
    """Columns and rows for the matches: a document column, then the fields (asked-about fields first)."""
    order: list[str] = list(result.labels)
    names: dict[str, str] = {}
    for item in result.matches:
        for value in item.annotation.values:
            names.setdefault(value.key, value.label)
            if value.key not in order:
                order.append(value.key)
    notes: list[str] = []
    if len(order) > MAX_COLUMNS:
        notes.append(f"showing {MAX_COLUMNS} of {len(order)} fields")
        order = order[:MAX_COLUMNS]
    columns = [TableColumn(name="document")]
    for key in order:
        values = [v for item in result.matches if (v := _value(item, key)) is not None]
        kinds = {v.kind for v in values}
        units = {v.unit for v in values if v.kind == "number"}
        if kinds == {"number"} and len(units) == 1:
            columns.append(TableColumn(name=names.get(key, key)[:200], kind="number", unit=next(iter(units))))
        elif kinds == {"date"}:
            columns.append(TableColumn(name=names.get(key, key)[:200], kind="date"))
        else:
            columns.append(TableColumn(name=names.get(key, key)[:200]))
    rows: list[TableRow] = []
    for item in result.matches:
        annotation = item.annotation
        cells: list[str | float | int | None] = [annotation.title or annotation.file or annotation.source_key]
        for key, column in zip(order, columns[1:], strict=True):
            cell = _value(item, key)
            cells.append(None if cell is None else (cell.display() if column.kind != "text" else cell.text))
        location = _location(annotation)
        rows.append(
            TableRow(
                values=cells,
                chunk_id=annotation.chunk_id,
                document=(annotation.title or annotation.file or annotation.source_key)[:2_000],
                location=location,
            )
        )
    return columns, rows, notes


def _location(annotation: Annotation) -> str | None:
    """Where in its document a row or fact is: "page 3, Table 1: Panel widths, row 12" (each part when known), so a
    row cited by no number (past the answer's first page, in "show the rest" and the CSV) can still be found."""
    parts = [f"page {annotation.page}" if annotation.page else None, annotation.table or annotation.section]
    parts.append(f"row {annotation.row + 1}" if annotation.kind == "row" and annotation.row is not None else None)
    found = ", ".join(part for part in parts if part)
    return found[:1_000] or None


def annotations_aggregate(
    result: SearchResult, operation: AggregateOperation, *, label: str | None = None, group_by: str | None = None
) -> list[AggregateResult]:
    """``operation`` over ``label``'s numbers in the matches (per value of ``group_by`` when given). Values in a
    unit other than the first one's are skipped and counted; count counts distinct documents when no label."""
    groups: dict[str | None, list[StoredAnnotation]] = defaultdict(list)
    facts = _document_facts(result.matches)
    for item in result.matches:
        key: str | None = None
        if group_by is not None:
            value = _value(item, group_by) or facts.get((item.collection, item.annotation.source_key), {}).get(group_by)
            key = value.text if value is not None else "(none)"
        groups[key].append(item)
    found: list[AggregateResult] = []
    for group, items in sorted(groups.items(), key=lambda pair: str(pair[0])):
        if operation == "count" and label is None:
            documents = {(item.collection, item.annotation.source_key) for item in items}
            found.append(AggregateResult(operation="count", value=len(documents), group=group, rows_used=len(items)))
            continue
        numbers: list[float] = []
        dimension: str | None = None
        skipped = 0
        for item in items:
            value = _value(item, label) if label else None
            if value is None or value.number is None:
                skipped += 1
                continue
            if dimension is None:
                dimension = value.dimension
            if value.dimension != dimension:
                skipped += 1
                continue
            numbers.append(value.number)
        found.append(
            AggregateResult(
                operation=operation,
                field=label,
                value=_compute(operation, numbers),
                unit=unit_of(dimension),
                group=group,
                rows_used=len(numbers),
                rows_skipped=skipped,
            )
        )
    return found


def _compute(operation: AggregateOperation, numbers: list[float]) -> float | None:
    if operation == "count":
        return float(len(numbers))
    if not numbers:
        return None
    if operation == "sum":
        return round(math.fsum(numbers), 9)
    if operation == "mean":
        return round(math.fsum(numbers) / len(numbers), 9)
    return max(numbers) if operation == "max" else min(numbers)


def export_annotations_csv(columns: Sequence[TableColumn], rows: Sequence[TableRow]) -> str:
    """The table as CSV (every cell quoted, formula-like cells defused: ``text.spreadsheet``), with the source."""
    header = [column.name if not column.unit else f"{column.name} ({column.unit})" for column in columns]
    header += ["source document", "location", "passage"]
    body = [[*row.values, row.document, row.location, row.chunk_id] for row in rows]
    return csv_table(header, body)


def passage_evidence(row: dict[str, Any], collection: str) -> ContextChunk:
    """The passage (a chunk row read back by ``AnnotationIndex.passages``) as evidence the answer cites."""
    metadata = row.get(schema.METADATA) or {}
    return ContextChunk(
        chunk_id=str(row[schema.CHUNK_ID]),
        source_type="rag",
        content=str(row[schema.TEXT]) or "(empty passage)",
        semantic_relevance=1.0,
        title=row.get(schema.TITLE) or None,
        url=row.get(schema.URL) or None,
        source_id=str(row.get(schema.DOC_ID) or "") or None,
        source_date=schema.from_epoch(row.get(schema.DATE)),
        metadata={
            "source_key": row.get(schema.SOURCE_KEY),
            "heading": row.get(schema.HEADING),
            "collection": collection,
            "page": metadata.get("page") if isinstance(metadata, dict) else None,
            "structured": True,
        },
        tool_name="annotations_search",
    )
