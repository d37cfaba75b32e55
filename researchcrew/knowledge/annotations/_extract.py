"""Rule-based annotation extraction: key-value facts and table rows from a document's text, offline.

* **Facts**: ``Label: value`` lines and sentences ("Sample size: 1,204", "**Width:** 1.15 m", "- Vendor: Tire World"),
  several on one line when sentences each start with a label ("Vendor: Tire World. Date: 2024-03-02.").
* **Rows**: Markdown pipe tables. They are also what the HTML loader makes of ``<table>`` (trafilatura renders tables
  as pipe tables), what the CSV loader writes and what the PDF loader puts where a PDF page has a table (pdfplumber,
  ``loaders/_pdf_tables.py``), so one reader serves Markdown, HTML, CSV and PDF; a PDF row carries its page.

Every annotation is tied to the chunk whose text holds the line it came from (its *passage*), and each value must
occur verbatim in that passage: a value that does not (a line the chunker cut in two) is dropped, never stored
unverified. Caps on rows per table, columns and cell size keep a huge or malformed table from flooding the index;
what they cut is said in ``Extraction.notes``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.knowledge.annotations._values import TypedValue, typed_value
from researchcrew.knowledge.documents import Chunk, Document

AnnotationKind = Literal["fact", "row"]

MAX_TABLE_ROWS = 5_000
MAX_COLUMNS = 40
MAX_CELL_CHARS = 500
MAX_LABEL_WORDS = 6
MAX_FACT_VALUE_WORDS = 12
MAX_ANNOTATIONS_PER_DOCUMENT = 20_000

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_SEPARATOR_CELL = re.compile(r"^\s*:?-{2,}:?\s*$")
_FACT = re.compile(
    r"^\s*(?:[-*•+]\s+)?(?:\*\*|__)?(?P<label>[A-Za-z][\w .()/%#&'+-]{0,60}?)(?:\*\*|__)?\s*:(?:\*\*|__)?\s+"
    r"(?P<value>\S.*?)\s*$"
)
_SENTENCE_BEFORE_LABEL = re.compile(r"(?<=[.;])\s+(?=(?:\*\*)?[A-Z][\w ()/%#&'+-]{0,60}?(?:\*\*)?:\s)")
_SENTENCE_END = re.compile(r"(?<=[^\s.][.!?])\s+(?=[A-Z])")
_NOT_LABELS = frozenset({"http", "https", "ftp", "mailto", "note", "notes", "see", "source", "e.g", "i.e", "warning"})


class Annotation(Contract):
    """A fact (one property) or a table row (one property per column), with where it was found."""

    kind: AnnotationKind = Field(description="fact: one key-value pair; row: one row of a table.")
    values: list[TypedValue] = Field(min_length=1, description="The properties, in the table's column order.")
    table: str | None = Field(default=None, max_length=500, description="The table's caption or section, for rows.")
    row: int | None = Field(default=None, ge=0, description="The row's index within its table.")
    section: str | None = Field(default=None, max_length=500, description="The section heading it sits under.")
    page: int | None = Field(default=None, ge=1, description="The page, for PDFs.")
    chunk_id: str = Field(description="The passage (chunk) the values were found in.")
    doc_id: str = Field(description="The document.")
    source_key: str = Field(description="The document's source key.")
    title: str | None = Field(default=None, max_length=2_000, description="The document's title.")
    file: str | None = Field(default=None, max_length=4_000, description="The file it was loaded from.")
    extracted_by: Literal["rules", "llm"] = Field(default="rules", description="Who extracted it.")

    def serialised(self) -> str:
        """``label: value; label: value`` — the annotation as text (its row's text field)."""
        body = "; ".join(f"{value.label}: {value.text}" for value in self.values)
        where = self.table or self.section
        return f"{where} — {body}" if where else body


@dataclass
class Extraction:
    """What one document gave, and what was left out."""

    annotations: list[Annotation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: int = 0  # values that could not be tied to a passage that holds them


@dataclass
class _Candidate:
    kind: AnnotationKind
    anchor: str  # the text the values were read from (a line or a sentence)
    pairs: list[tuple[str, str]]
    section: str | None
    table: str | None = None
    row: int | None = None


def split_row(line: str) -> list[str]:
    """The cells of a pipe-table line (outer pipes optional; ``\\|`` is a literal pipe)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [cell.strip().replace("\\|", "|") for cell in cells]


def _is_table_line(line: str) -> bool:
    return line.count("|") >= 2 or (line.strip().startswith("|") and line.count("|") >= 1)


def _is_separator(line: str) -> bool:
    cells = split_row(line)
    return bool(cells) and all(_SEPARATOR_CELL.match(cell) for cell in cells if cell) and any(cells)


def _facts_of_line(line: str) -> list[tuple[str, str, str]]:
    """(label, value, anchor) of each ``Label: value`` in a line."""
    found: list[tuple[str, str, str]] = []
    for part in _SENTENCE_BEFORE_LABEL.split(line):
        match = _FACT.match(part)
        if match is None:
            continue
        label, value = match["label"].strip(), match["value"].strip()
        value = re.sub(r"(?:\*\*|__)$", "", value).strip()
        value = _SENTENCE_END.split(value, maxsplit=1)[0]  # "2024-03-02. Parts for the truck." → the date
        if value.endswith(".") and not re.search(r"\b[A-Z]\.$|\bin\.$", value):
            value = value[:-1].rstrip()
        words = label.split()
        if (
            not value
            or len(words) > MAX_LABEL_WORDS
            or label.lower() in _NOT_LABELS
            or value.startswith("//")
            or len(value.split()) > MAX_FACT_VALUE_WORDS
            or len(value) > MAX_CELL_CHARS
        ):
            continue
        found.append((label, value, part.strip()))
    return found


def _candidates(text: str, notes: list[str]) -> list[_Candidate]:
    lines = text.split("\n")
    found: list[_Candidate] = []
    section: str | None = None
    previous_text: str | None = None  # the last non-table line: a table's caption when it ends with ":" or names it
    index = 0
    tables = 0
    while index < len(lines):
        line = lines[index]
        heading = _HEADING.match(line)
        if heading:
            section = heading.group(2).strip()
            previous_text = None
            index += 1
            continue
        if _is_table_line(line) and index + 1 < len(lines) and _is_separator(lines[index + 1]):
            tables += 1
            header = split_row(line)
            caption = _caption(previous_text) or section or f"table {tables}"
            index += 2
            columns = header[:MAX_COLUMNS]
            if len(header) > MAX_COLUMNS:
                notes.append(f"{caption}: kept the first {MAX_COLUMNS} of {len(header)} columns")
            row_number = 0
            skipped = 0
            while index < len(lines) and _is_table_line(lines[index]):
                cells = split_row(lines[index])
                if row_number >= MAX_TABLE_ROWS:
                    skipped += 1
                    index += 1
                    continue
                pairs: list[tuple[str, str]] = []
                for position, name in enumerate(columns):
                    cell = cells[position] if position < len(cells) else ""
                    if cell and name and len(cell) <= MAX_CELL_CHARS:
                        pairs.append((name, cell))
                    elif len(cell) > MAX_CELL_CHARS:
                        notes.append(f"{caption}, row {row_number + 1}: a cell of {len(cell)} characters left out")
                if pairs:
                    anchor = lines[index].strip()
                    found.append(_Candidate("row", anchor, pairs, section, table=caption, row=row_number))
                row_number += 1
                index += 1
            if skipped:
                notes.append(f"{caption}: kept the first {MAX_TABLE_ROWS} of {MAX_TABLE_ROWS + skipped} rows")
            previous_text = None
            continue
        for label, value, anchor in _facts_of_line(line):
            found.append(_Candidate("fact", anchor, [(label, value)], section))
        if line.strip():
            previous_text = line.strip()
        index += 1
    return found


def _caption(text: str | None) -> str | None:
    if not text:
        return None
    stripped = text.strip().strip("*_").strip()
    if stripped.endswith(":") or re.match(r"^(?:table|tab\.)\s*\d+", stripped, re.IGNORECASE):
        return stripped.rstrip(":").strip()[:500] or None
    return None


def _passage_of(anchor: str, values: Sequence[str], chunks: Sequence[Chunk]) -> Chunk | None:
    """The chunk holding the whole anchor, else the one holding every value (a line the chunker re-wrapped)."""
    for chunk in chunks:
        if anchor in chunk.text:
            return chunk
    for chunk in chunks:
        if all(value in chunk.text for value in values):
            return chunk
    return None


def extract(document: Document, chunks: Sequence[Chunk]) -> Extraction:
    """The annotations of ``document``, each tied to one of its ``chunks`` (see the module docstring)."""
    result = Extraction()
    page = document.metadata.get("page")
    file = document.metadata.get("path")
    for candidate in _candidates(document.text, result.notes):
        if len(result.annotations) >= MAX_ANNOTATIONS_PER_DOCUMENT:
            result.notes.append(f"kept the first {MAX_ANNOTATIONS_PER_DOCUMENT} annotations of the document")
            break
        passage = _passage_of(candidate.anchor, [value for _, value in candidate.pairs], chunks)
        if passage is None:
            result.dropped += len(candidate.pairs)
            continue
        kept = [(label, value) for label, value in candidate.pairs if value in passage.text]
        result.dropped += len(candidate.pairs) - len(kept)
        if not kept:
            continue
        result.annotations.append(
            Annotation(
                kind=candidate.kind,
                values=[typed_value(label, value) for label, value in kept],
                table=_clip(candidate.table, 500),
                row=candidate.row,
                section=_clip(candidate.section or passage.heading, 500),
                page=page if isinstance(page, int) and page >= 1 else None,
                chunk_id=passage.chunk_id,
                doc_id=passage.doc_id,
                source_key=document.source_key,
                title=_clip(document.title, 2_000),
                file=_clip(str(file), 4_000) if file else None,
            )
        )
    return result


def _clip(text: str | None, limit: int) -> str | None:
    """A heading, caption or title cut to what an annotation holds (a hostile file's 10,000-character heading)."""
    return text if text is None or len(text) <= limit else text[: limit - 1] + "…"
