"""CSV (and TSV) files → one ``Document`` whose text is the table as a Markdown pipe table.

A pipe table is what the chunker splits cleanly (one row per line; a long table is cut between rows) and what the
annotation extractor reads rows from (``knowledge/annotations``), the same as a Markdown or HTML table. The
delimiter is sniffed (comma, semicolon, tab, pipe); the first row is the header. Caps keep an enormous or malformed
file from flooding the index — at most ``MAX_ROWS`` rows, ``MAX_COLUMNS`` columns and ``MAX_CELL_CHARS`` characters a
cell — and what they cut is *reported as data*: in the document's ``metadata["table_notes"]`` and the log, never as a
crash. A file with no table in it (binary, one column of prose, nothing after the header) is refused with the reason.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from researchcrew.knowledge.loaders._base import LoaderError, LoadResult, decode_text, read_bytes, title_from_path
from researchcrew.knowledge.loaders._markdown import document_from

logger = logging.getLogger(__name__)

MAX_ROWS = 5_000
MAX_COLUMNS = 40
MAX_CELL_CHARS = 500
_DELIMITERS = ",;\t|"
_SNIFF_CHARS = 16_384


def _cell(value: str) -> str:
    text = " ".join(value.split())
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1].rstrip() + "…"
    return text.replace("|", "\\|")


def _dialect(text: str, path: Path) -> type[csv.Dialect] | csv.Dialect:
    if path.suffix.lower() == ".tsv":
        return csv.excel_tab
    try:
        return csv.Sniffer().sniff(text[:_SNIFF_CHARS], delimiters=_DELIMITERS)
    except csv.Error:
        return csv.excel


def load_csv(path: Path) -> LoadResult:
    text = decode_text(read_bytes(path), kind="CSV")
    csv.field_size_limit(1_000_000)  # a cell larger than this is not a table cell; csv raises, reported below
    try:
        rows = [row for row in csv.reader(text.splitlines(), _dialect(text, path)) if any(cell.strip() for cell in row)]
    except csv.Error as error:
        raise LoaderError(f"not a readable CSV table ({error})") from error
    if len(rows) < 2:
        raise LoaderError("no table: a CSV file needs a header row and at least one data row")
    header = rows[0]
    width = max(len(row) for row in rows)
    if width < 2:
        raise LoaderError("no table: every row has a single column (is it really CSV?)")
    notes: list[str] = []
    if width > MAX_COLUMNS:
        notes.append(f"kept the first {MAX_COLUMNS} of {width} columns")
    data = rows[1:]
    if len(data) > MAX_ROWS:
        notes.append(f"kept the first {MAX_ROWS} of {len(data)} rows")
        data = data[:MAX_ROWS]
    long_cells = sum(1 for row in rows for cell in row[:MAX_COLUMNS] if len(cell) > MAX_CELL_CHARS)
    if long_cells:
        notes.append(f"cut {long_cells} cell(s) longer than {MAX_CELL_CHARS} characters")
    columns = min(width, MAX_COLUMNS)
    names = [_cell(header[i]) if i < len(header) and header[i].strip() else f"column {i + 1}" for i in range(columns)]
    title = title_from_path(path)
    lines = [f"# {title}", "", "| " + " | ".join(names) + " |", "|" + "---|" * columns]
    for row in data:
        cells = [_cell(row[i]) if i < len(row) else "" for i in range(columns)]
        lines.append("| " + " | ".join(cells) + " |")
    for note in notes:
        logger.warning("%s: %s", path, note)
    fields: dict[str, object] = {"rows": len(data), "columns": columns}
    if notes:
        fields["table_notes"] = notes
    return LoadResult([document_from(path, "\n".join(lines), title=title, fields=fields, file_format="csv")])
