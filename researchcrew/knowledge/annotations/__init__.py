"""Annotations (seed 004, issue 22): key-value facts and table rows extracted at ingest, typed, with provenance.

* ``extract`` — the rules: ``Label: value`` facts and pipe-table rows (Markdown, HTML and CSV documents), each tied to
  the chunk that holds it; ``LLMExtractor`` adds facts a model finds, kept only when the passage holds them.
* ``AnnotationIndex`` — their Milvus collection beside the chunks, with the chunks' collection scope.
* ``parse_question``, ``annotations_search``, ``annotations_aggregate``, ``export_annotations_csv`` — the query side.
"""

from __future__ import annotations

from researchcrew.knowledge.annotations._describe import conversions, describe_filters, doubts, verified
from researchcrew.knowledge.annotations._extract import Annotation, Extraction, extract
from researchcrew.knowledge.annotations._index import AnnotationIndex, AnnotationReport, StoredAnnotation, index_for
from researchcrew.knowledge.annotations._llm import LLMExtractor
from researchcrew.knowledge.annotations._query import (
    GENERIC_WORDS,
    IMPLIED_LABELS,
    DateRange,
    NumericFilter,
    ParsedQuestion,
    parse_question,
)
from researchcrew.knowledge.annotations._search import (
    SearchResult,
    annotations_aggregate,
    annotations_search,
    export_annotations_csv,
    passage_evidence,
    resolve_labels,
    table_of,
)
from researchcrew.knowledge.annotations._values import TypedValue, typed_value

__all__ = [
    "GENERIC_WORDS",
    "IMPLIED_LABELS",
    "Annotation",
    "AnnotationIndex",
    "AnnotationReport",
    "DateRange",
    "Extraction",
    "LLMExtractor",
    "NumericFilter",
    "ParsedQuestion",
    "SearchResult",
    "StoredAnnotation",
    "TypedValue",
    "annotations_aggregate",
    "annotations_search",
    "conversions",
    "describe_filters",
    "doubts",
    "export_annotations_csv",
    "extract",
    "index_for",
    "parse_question",
    "passage_evidence",
    "resolve_labels",
    "table_of",
    "typed_value",
    "verified",
]
