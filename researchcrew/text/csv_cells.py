"""CSV that a spreadsheet opens as exactly its cells and runs none of them (OWASP, "CSV Injection").

Every cell is quoted (a quoted cell can hold ``\\r``, ``\\n``, quotes and commas and stays one cell), and a cell that
starts, after any leading blanks and invisible characters, with ``=``, ``+``, ``-``, ``@``, tab or carriage return —
judged on its NFKC form, so full-width ``＝＋－＠`` and the other look-alikes that spreadsheets fold count too — gets a
leading apostrophe. A plain decimal number (``-3``, ``-0.25``) is left as it is: it is no formula, and stays a number.
Used by the batch jobs' CSV export and the answer tables' (issue 22).
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Iterable, Sequence

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet may read as the start of a formula (OWASP's list)."""
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def csv_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """A CSV text that a spreadsheet opens as exactly these cells and runs none of them: every cell quoted, every
    cell (header too) passed through ``safe_cell``; lines end with ``\\n``."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow([safe_cell(value) for value in header])
    writer.writerows([safe_cell(value) for value in row] for row in rows)
    return out.getvalue()


def safe_cell(value: object) -> str:
    """The cell's text, with an apostrophe in front when a spreadsheet could read it as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if starts_like_formula(text) else text


def starts_like_formula(text: str) -> bool:
    """Whether ``text`` starts with tab or CR, or, once NFKC-folded and past leading whitespace and invisible
    (control and format) characters, with ``= + - @``. A plain decimal number is not a formula."""
    if text.startswith(("\t", "\r")):
        return True
    if _PLAIN_NUMBER.fullmatch(text):
        return False
    folded = unicodedata.normalize("NFKC", text)
    start = next((char for char in folded if not is_blank(char)), "")
    return start in FORMULA_START


def is_blank(char: str) -> bool:
    """Whitespace, or an invisible (control or format) character."""
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")


__all__ = ["FORMULA_START", "csv_table", "is_blank", "safe_cell", "starts_like_formula"]
