"""Answer tables (issue 22) as text: the Markdown an answer shows and the CSV an export gives.

One rendering for every door — the quick pipeline's answer text, "show the rest" in a session, the OpenAI-compatible
route, the CLI, the HTTP CSV export and the batch jobs' exports — so a table reads the same wherever it is shown.
Cells are text, not Markdown: whitespace is collapsed to one line and ``|``, backslash and the characters that would
start a link, an HTML tag or a code span are escaped. CSV goes through ``text.spreadsheet`` (formula-injection guard).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from researchcrew.contracts.tables import AnswerTable, CellValue, TableColumn, TableRow
from researchcrew.text.spreadsheet import csv_table

_MARKDOWN_SPECIAL = re.compile(r"([\\`\[\]<>|*_])")
SOURCE_HEADER = "Source"
CSV_EXTRA_COLUMNS = ("document", "location", "citation")


def header_label(column: TableColumn) -> str:
    """The column's label with its unit: "Width (m)"."""
    return f"{column.name} ({column.unit})" if column.unit else column.name


def cell_text(value: CellValue) -> str:
    """A cell as plain text: numbers without a trailing ".0", None as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}" if value != int(value) or abs(value) >= 1e15 else str(int(value))
    return str(value)


def _markdown_cell(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def row_source(row: TableRow) -> str:
    """Where a row comes from, in words: "report.pdf, p. 3"."""
    return ", ".join(part for part in (row.document, row.location) if part)


def markdown_table(columns: Sequence[TableColumn], rows: Sequence[TableRow]) -> str:
    """The rows as a Markdown table, with a last column citing each row's passage ([n]) when any row is cited, else
    naming each row's document (and page or section) when any row has one."""
    cited = any(row.citation is not None for row in rows)
    named = not cited and any(row_source(row) for row in rows)
    source = cited or named
    header = [_markdown_cell(header_label(column)) for column in columns] + ([SOURCE_HEADER] if source else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for row in rows:
        cells = [_markdown_cell(cell_text(value)) for value in row.values]
        if cited:
            cells.append(f"[{row.citation}]" if row.citation is not None else "")
        elif named:
            cells.append(_markdown_cell(row_source(row)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def more_rows_line(more: int) -> str:
    """What the answer says after the rows shown when more exist."""
    rows = "row" if more == 1 else "rows"
    return f"{more} more {rows} — say 'show the rest' or 'export that table'."


def table_markdown(table: AnswerTable) -> str:
    """The table as an answer shows it: its title, its rows, its notes and how many more rows exist."""
    parts = [f"**{_markdown_cell(table.title)}**"] if table.title else []
    if table.rows:
        parts.append(markdown_table(table.columns, table.rows))
    else:
        parts.append("No rows.")
    for aggregate in table.aggregates:
        value = "no usable value" if aggregate.value is None else cell_text(aggregate.value)
        unit = f" {aggregate.unit}" if aggregate.unit and aggregate.value is not None else ""
        of = f" of {aggregate.field}" if aggregate.field else ""
        group = f" ({aggregate.group})" if aggregate.group else ""
        skipped = f", {aggregate.rows_skipped} rows skipped" if aggregate.rows_skipped else ""
        parts.append(f"{aggregate.operation}{of}{group}: {value}{unit} ({aggregate.rows_used} rows{skipped})")
    parts.extend(_markdown_cell(note) for note in table.notes)
    if table.more_rows:
        parts.append(more_rows_line(table.more_rows))
    return "\n\n".join(parts)


def table_csv(columns: Sequence[TableColumn], rows: Sequence[TableRow]) -> str:
    """Every row as CSV: the columns (with units), then each row's document, location and citation number. Guarded
    against formula injection (``text.spreadsheet``)."""
    header = [header_label(column) for column in columns] + list(CSV_EXTRA_COLUMNS)
    body: list[list[object]] = [
        [*(cell_text(value) for value in row.values), row.document or "", row.location or "", row.citation or ""]
        for row in rows
    ]
    return csv_table(header, body)


__all__ = [
    "CSV_EXTRA_COLUMNS",
    "cell_text",
    "header_label",
    "markdown_table",
    "more_rows_line",
    "row_source",
    "table_csv",
    "table_markdown",
]
