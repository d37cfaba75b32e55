"""Answer tables as text (``text.answer_tables``): cells are text, not Markdown; aggregates, notes (caps applied,
units that could not be converted) and the count of further rows are said; CSV cells never run as formulas."""

from __future__ import annotations

import csv
import io

from researchcrew.contracts.tables import AggregateResult, AnswerTable, TableColumn, TableRow
from researchcrew.text.answer_tables import markdown_table, table_csv, table_markdown

COLUMNS = [TableColumn(name="Item"), TableColumn(name="Cost", kind="number", unit="USD")]


def test_cells_cannot_break_the_table_or_open_a_link() -> None:
    rows = [TableRow(values=["a | b\nc [x](javascript:alert(1)) <b>", 12.0], citation=1)]
    text = markdown_table(COLUMNS, rows)
    lines = text.splitlines()
    assert len(lines) == 3 and lines[0] == "| Item | Cost (USD) | Source |"
    assert lines[2] == r"| a \| b c \[x\](javascript:alert(1)) \<b\> | 12 | [1] |"


def test_aggregates_notes_and_further_rows_are_said() -> None:
    table = AnswerTable(
        title="Reagent cost per test",
        columns=COLUMNS,
        rows=[TableRow(values=["swab", 1.5]), TableRow(values=["buffer", None])],
        total_rows=40,
        aggregates=[
            AggregateResult(operation="mean", field="Cost", value=1.25, unit="USD", rows_used=38, rows_skipped=2)
        ],
        notes=["2 rows give the cost in 'per batch', which cannot be converted to USD per test; left out."],
    )
    text = table_markdown(table)
    assert text.startswith("**Reagent cost per test**")
    assert "| buffer |  |" in text  # a missing value is an empty cell
    assert "mean of Cost: 1.25 USD (38 rows, 2 rows skipped)" in text
    assert "cannot be converted" in text
    assert text.endswith("38 more rows — say 'show the rest' or 'export that table'.")


def test_csv_reads_back_as_the_cells_with_formulas_neutralised() -> None:
    rows = [TableRow(values=["=1+2", -3.0], document="+SUM(A1)", location="p. 2", citation=4)]
    text = table_csv(COLUMNS, rows)
    assert list(csv.reader(io.StringIO(text))) == [
        ["Item", "Cost (USD)", "document", "location", "citation"],
        ["'=1+2", "-3", "'+SUM(A1)", "p. 2", "4"],
    ]
