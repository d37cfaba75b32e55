"""Tables on PDF pages (pdfplumber), rendered as Markdown pipe tables for the page's text.

PDFium's text (``_pdf.py``) has no column boundaries, so a table reads as a run of words. pdfplumber (pure Python
over pdfminer.six) gives every word with its box, and the ruling lines of the page:

* **ruled tables** — pdfplumber's lines strategy (cells bounded by drawn lines);
* **unruled tables** — rebuilt here from the words outside ruled tables: a line is split into cells where the gap
  between two words is wider than ``GAP_EMS`` of the font size, and a run of at least two consecutive lines with the
  same number (≥ 2) of short cells whose columns line up is a table (its first line the header);
* **tables over several pages** — a page whose first table sits at the top, with the previous page's last table's
  column count, continues it: a repeated header is read as the header, a missing one is taken from the previous
  page, and the caption says "(continued)".

The page's text is then PDFium's text of the bands between tables, with each table as a pipe table where it stands
(a page without tables keeps PDFium's text exactly), so the annotation extractor reads its rows like any Markdown
table, each tied to the page. Caps keep a malformed or enormous table from flooding the index — ``MAX_COLUMNS``
columns, ``MAX_CELL_CHARS`` characters a cell, ragged rows padded — and what they did is returned as notes for the
document's ``metadata["table_notes"]`` (reported with the ingest and beside answer tables), never as a crash.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

MAX_COLUMNS = 40
MAX_CELL_CHARS = 500
MAX_TABLES_PER_PAGE = 50
GAP_EMS = 0.9  # a gap wider than this many font sizes separates two cells (a word space is ~0.25 em)
MAX_CELL_WORDS = 8  # an unruled "table" whose cells are longer is two-column prose, not a table
_LINE_TOLERANCE = 2.0  # points: words whose tops differ by less are on one line
_TOP_MARGIN_LINES = 1  # text lines (a running header) allowed above a table that continues the previous page's
_CAPTION = re.compile(r"^\s*(?:table|tab\.)\s*\d+", re.IGNORECASE)


@dataclass
class PageTable:
    """One table found on a page: its box (pdfplumber's coordinates, top-down), header and rows, as text."""

    top: float
    bottom: float
    header: list[str]
    rows: list[list[str]]
    ruled: bool
    continued: bool = False
    caption: str | None = None


@dataclass
class PageTables:
    """A page's tables and what was noted about them."""

    tables: list[PageTable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Carry:
    """The previous page's last table, for a table that continues on the next page."""

    columns: int
    header: list[str]
    caption: str | None
    reached_bottom: bool


def _cell(value: object) -> str:
    text = " ".join(str(value or "").split())
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1].rstrip() + "…"
    return text


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def render(table: PageTable) -> str:
    """A table as Markdown: its caption line (when continued), the header, the separator, the rows."""
    width = len(table.header)
    lines: list[str] = []
    if table.continued and table.caption:
        lines.append(f"{table.caption} (continued):")
    lines.append("| " + " | ".join(_escape(cell) or f"column {i + 1}" for i, cell in enumerate(table.header)) + " |")
    lines.append("|" + "---|" * width)
    lines += ["| " + " | ".join(_escape(cell) for cell in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _words(page: Any) -> list[dict[str, Any]]:
    return list(page.extract_words(x_tolerance=1.5, y_tolerance=2, keep_blank_chars=False, extra_attrs=["size"]))


def _lines(words: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Words grouped into lines (by their tops), each line left to right, lines top to bottom."""
    lines: list[list[dict[str, Any]]] = []
    for word in sorted(words, key=lambda w: (round(float(w["top"]), 1), float(w["x0"]))):
        if lines and abs(float(lines[-1][0]["top"]) - float(word["top"])) < _LINE_TOLERANCE:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: float(w["x0"])) for line in lines]


@dataclass
class _Cells:
    top: float
    bottom: float
    cells: list[tuple[float, float, str]]  # x0, x1, text


def _cells_of(line: list[dict[str, Any]]) -> _Cells:
    cells: list[tuple[float, float, str]] = []
    for word in line:
        size = float(word.get("size") or 10.0)
        x0, x1, text = float(word["x0"]), float(word["x1"]), str(word["text"])
        if cells and x0 - cells[-1][1] <= GAP_EMS * size:
            start, _, joined = cells[-1]
            cells[-1] = (start, x1, f"{joined} {text}")
        else:
            cells.append((x0, x1, text))
    return _Cells(min(float(w["top"]) for w in line), max(float(w["bottom"]) for w in line), cells)


def _aligned(rows: Sequence[_Cells], candidate: _Cells) -> bool:
    """Whether ``candidate``'s cells fall in the columns of ``rows`` (each overlaps its column and no other)."""
    columns = [(min(r.cells[i][0] for r in rows), max(r.cells[i][1] for r in rows)) for i in range(len(rows[0].cells))]
    for index, (x0, x1, _) in enumerate(candidate.cells):
        for other, (c0, c1) in enumerate(columns):
            overlaps = x0 <= c1 and x1 >= c0
            if overlaps != (other == index):
                return False
    return True


def _unruled(words: Sequence[dict[str, Any]]) -> list[PageTable]:
    """Tables rebuilt from word gaps (see the module docstring)."""
    found: list[PageTable] = []
    run: list[_Cells] = []

    def close() -> None:
        if len(run) >= 2:
            cells = [[_cell(text) for _, _, text in row.cells] for row in run]
            words_per_cell = [len(cell.split()) for row in cells for cell in row]
            if max(words_per_cell) <= MAX_CELL_WORDS:
                found.append(PageTable(run[0].top, run[-1].bottom, cells[0], cells[1:], ruled=False))
        run.clear()

    for line in _lines(words):
        cells = _cells_of(line)
        if len(cells.cells) < 2:
            close()
            continue
        if run and (len(cells.cells) != len(run[0].cells) or not _aligned(run, cells)):
            close()
        run.append(cells)
    close()
    return found


def _ruled(page: Any) -> list[PageTable]:
    found: list[PageTable] = []
    for table in page.find_tables():
        rows = [[_cell(cell) for cell in row] for row in table.extract()]
        rows = [row for row in rows if any(row)]
        if len(rows) < 2 or max(len(row) for row in rows) < 2:
            continue  # a frame or a box around a paragraph, not a table
        _, top, _, bottom = table.bbox
        found.append(PageTable(float(top), float(bottom), rows[0], rows[1:], ruled=True))
    return found


def _inside(word: dict[str, Any], tables: Sequence[PageTable]) -> bool:
    middle = (float(word["top"]) + float(word["bottom"])) / 2
    return any(table.top - 1 <= middle <= table.bottom + 1 for table in tables)


def _shape(table: PageTable, number: int, notes: list[str]) -> None:
    """Caps and padding, in place; what they did goes to ``notes``."""
    width = max(len(table.header), *(len(row) for row in table.rows))
    where = f"page {number}, {'ruled' if table.ruled else 'unruled'} table at {table.top:.0f} pt"
    if width > MAX_COLUMNS:
        notes.append(f"{where}: kept the first {MAX_COLUMNS} of {width} columns")
        width = MAX_COLUMNS
    ragged = sum(1 for row in table.rows if len(row) != len(table.header))
    if ragged:
        notes.append(f"{where}: {ragged} row(s) with a different number of cells than the header, padded or cut")
    empty = sum(1 for row in table.rows for cell in row if not cell)
    if empty and table.ruled:
        notes.append(f"{where}: {empty} empty or merged cell(s)")
    cut = sum(1 for row in [table.header, *table.rows] for cell in row if cell.endswith("…"))
    if cut:
        notes.append(f"{where}: cut {cut} cell(s) longer than {MAX_CELL_CHARS} characters")
    table.header = (table.header + [""] * width)[:width]
    table.rows = [(row + [""] * width)[:width] for row in table.rows]


def page_tables(page: Any, number: int, text_above: Any, carry: _Carry | None) -> tuple[PageTables, _Carry | None]:
    """The tables of one pdfplumber ``page`` (``number`` from 1). ``text_above(bottom)`` gives the page's text above
    a point (for captions and to tell a continued table); ``carry`` is the previous page's last table."""
    result = PageTables()
    ruled = _ruled(page)
    words = _words(page)
    loose = [word for word in words if not _inside(word, ruled)]
    tables = sorted([*ruled, *_unruled(loose)], key=lambda table: table.top)
    if len(tables) > MAX_TABLES_PER_PAGE:
        result.notes.append(f"page {number}: kept the first {MAX_TABLES_PER_PAGE} of {len(tables)} tables")
        tables = tables[:MAX_TABLES_PER_PAGE]
    for position, table in enumerate(tables):
        _shape(table, number, result.notes)
        above = [line for line in str(text_above(table.top)).split("\n") if line.strip()]
        caption = next((line.strip().rstrip(":") for line in reversed(above) if _CAPTION.match(line)), None)
        table.caption = caption
        first_at_top = position == 0 and len(above) <= _TOP_MARGIN_LINES
        if carry is not None and carry.reached_bottom and first_at_top and len(table.header) == carry.columns:
            table.continued = True
            table.caption = carry.caption
            if [cell.lower() for cell in table.header] != [cell.lower() for cell in carry.header]:
                table.rows = [table.header, *table.rows]  # no repeated header: every line is a row
                table.header = list(carry.header)
    result.tables = tables
    next_carry = None
    if tables:
        last = tables[-1]
        words_below = [w for w in words if float(w["top"]) > last.bottom + 1]
        next_carry = _Carry(len(last.header), last.header, last.caption, reached_bottom=len(_lines(words_below)) <= 1)
    return result, next_carry


__all__ = ["MAX_CELL_CHARS", "MAX_COLUMNS", "PageTable", "PageTables", "page_tables", "render"]
