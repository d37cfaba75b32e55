"""The annotation search as it was before its filters ran in Milvus: every annotation of the collections read, every
filter applied in Python. The reference the pushed-down search must agree with (tests/structured/test_filters.py);
kept verbatim from researchcrew/knowledge/annotations/_search.py at commit 99576c8 but for reading the document
labels from the rows (the index now reads them from its markers)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from researchcrew.knowledge.annotations import AnnotationIndex, NumericFilter, ParsedQuestion, SearchResult
from researchcrew.knowledge.annotations._index import StoredAnnotation
from researchcrew.knowledge.annotations._query import GENERIC_WORDS
from researchcrew.knowledge.annotations._search import (
    _contains_item,
    _document_facts,
    _subject_matches,
    _value,
    needs_field,
    resolve_labels,
)
from researchcrew.knowledge.annotations._values import TypedValue, unit_of
from researchcrew.text.terms import stem, term_words


def _numeric_ok(
    annotation: StoredAnnotation, filter_: NumericFilter, labels: list[str], mismatched: dict[str, set[str]]
) -> bool:
    for key in labels:
        value = _value(annotation, key)
        if value is None:
            continue
        if value.number is None:
            continue
        if value.dimension != filter_.dimension:
            mismatched[value.label].add(value.unit or "no unit")
            continue
        if filter_.admits(value.number):
            return True
    return False


def _date_of(item: StoredAnnotation, facts: dict[tuple[str, str], dict[str, TypedValue]]) -> str | None:
    own = next((value.date for value in item.annotation.values if value.kind == "date"), None)
    if own:
        return own
    return next(
        (v.date for v in facts.get((item.collection, item.annotation.source_key), {}).values() if v.kind == "date"),
        None,
    )


def search_in_python(index: AnnotationIndex, question: ParsedQuestion, collections: Sequence[str]) -> SearchResult:
    """The annotations in ``collections`` that answer ``question``, every filter in Python."""
    result = SearchResult()
    known: dict[str, int] = {}
    for stored in index.read(collections):
        for key in {value.key for value in stored.annotation.values}:
            known[key] = known.get(key, 0) + 1
    labels, how = resolve_labels(question, sorted(known), index)
    if how == "embedding":
        result.notes.append(f"fields matched by meaning: {', '.join(labels)}")
    # Numeric filters without a named field: the fields whose numbers are in the filter's unit.
    needs_label = needs_field(question)
    everything = index.read(collections)
    facts = _document_facts(everything)
    if needs_label and not labels and question.numeric:
        dimension = question.numeric[0].dimension
        by_unit = sorted({v.key for item in everything for v in item.annotation.values if v.dimension == dimension})
        if len(by_unit) == 1:
            labels = by_unit
        elif len(by_unit) > 1:
            result.ambiguous = by_unit
            return result
    if needs_label and not labels:
        return result
    result.labels = labels
    candidates = [item for item in everything if not labels or any(_value(item, key) for key in labels)]
    mismatched: dict[str, set[str]] = defaultdict(set)
    for filter_ in question.numeric:
        candidates = [item for item in candidates if _numeric_ok(item, filter_, labels, mismatched)]
    for label, units in sorted(mismatched.items()):
        wanted = unit_of(question.numeric[0].dimension) or "plain numbers"
        result.notes.append(
            f"{label}: values in {', '.join(sorted(units))} cannot be converted to {wanted} and were left out"
        )
    for item_term in question.items:
        candidates = [item for item in candidates if _contains_item(item, item_term)]
    if question.items and any(item.annotation.kind == "row" for item in candidates):
        candidates = [item for item in candidates if item.annotation.kind == "row"]  # items are what rows list
    if question.dates is not None:
        dates = question.dates
        candidates = [item for item in candidates if (day := _date_of(item, facts)) is not None and dates.admits(day)]
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
    if subject and candidates:
        if any(_subject_matches(subject, item) for item in everything):
            candidates = [item for item in candidates if _subject_matches(subject, item)]
        elif not constrained:
            return result  # the only condition names nothing the annotations know: no rows, not every row
        else:
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
