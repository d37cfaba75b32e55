"""PDF files → one ``Document`` per page with text (pypdfium2, the PDFium engine Chrome uses).

One document per page, keyed ``path#page=N`` with ``page``/``pages`` in the metadata, so that every chunk can be
cited with its page. A PDF without extractable text (a scan) is reported as such: OCR is out of scope.

Tables (ruled, unruled, continued over pages) are found with pdfplumber (``_pdf_tables.py``) and stand in the page's
text as Markdown pipe tables, so their rows become annotations with their page; what their caps cut is in
``metadata["table_notes"]``. A page without tables keeps PDFium's text as it is.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders._base import LoaderError, LoadResult, file_key, read_bytes, title_from_path
from researchcrew.knowledge.loaders._markdown import authors_from
from researchcrew.knowledge.loaders._pdf_tables import PageTable, page_tables, render
from researchcrew.knowledge.loaders.dates import parse_date

logger = logging.getLogger(__name__)

_HYPHENATED = re.compile(r"(\w)-\n(?=[a-z])")  # "exam-\nple" → "example"
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_RUNS = re.compile(r"\n\s*\n\s*\n+")


def load_pdf(path: Path) -> LoadResult:
    import pypdfium2 as pdfium

    data = read_bytes(path)
    if not data.lstrip().startswith(b"%PDF-"):
        raise LoaderError("not a PDF (no %PDF- header)")
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        raise LoaderError(f"not a readable PDF ({error})") from error
    try:
        meta = pdf.get_metadata_dict(skip_empty=True)
        found = _tables(data, len(pdf), pdf)
        pages = [_page_text(pdf, index, found[index][0]) for index in range(len(pdf))]
    except pdfium.PdfiumError as error:
        raise LoaderError(f"PDF text extraction failed ({error})") from error
    finally:
        pdf.close()
    title = (meta.get("Title") or "").strip() or title_from_path(path)
    authors = authors_from(meta["Author"]) if meta.get("Author") else []
    source_date = parse_date(meta.get("CreationDate"))
    key = file_key(path)
    documents = [
        Document(
            source_key=f"{key}#page={number}",
            text=text,
            title=title,
            source_date=source_date,
            authors=authors,
            metadata=_metadata(path, number, len(pages), found[number - 1]),
        )
        for number, text in enumerate(pages, start=1)
        if text
    ]
    if not documents:
        raise LoaderError(f"no extractable text in {len(pages)} page(s) (a scanned PDF? run OCR first)")
    return LoadResult(documents)


def _metadata(path: Path, number: int, pages: int, found: tuple[list[PageTable], list[str]]) -> dict[str, object]:
    fields: dict[str, object] = {"format": "pdf", "path": str(path), "page": number, "pages": pages}
    tables, notes = found
    if tables:
        fields["tables"] = len(tables)
    if notes:
        fields["table_notes"] = notes
    return fields


def _tables(data: bytes, count: int, pdf: object) -> list[tuple[list[PageTable], list[str]]]:
    """Each page's tables and the notes on them (none for a PDF pdfplumber cannot read: its text still loads)."""
    import pdfplumber
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfminer.psparser import PSException

    found: list[tuple[list[PageTable], list[str]]] = [([], []) for _ in range(count)]
    carry = None
    try:
        with pdfplumber.open(io.BytesIO(data)) as document:
            for index, page in enumerate(document.pages[:count]):
                height = float(page.height)

                def above(top: float, index: int = index, height: float = height) -> str:
                    return _bounded(pdf, index, height - top, height)

                tables, carry = page_tables(page, index + 1, above, carry)
                found[index] = (tables.tables, tables.notes)
                page.close()
    except (PDFSyntaxError, PSException, ValueError, KeyError, TypeError) as error:
        logger.warning("PDF tables not read (%s: %s); the text is loaded without them", type(error).__name__, error)
    return found


def _bounded(pdf: object, index: int, bottom: float, top: float) -> str:
    """PDFium's text of the horizontal band between ``bottom`` and ``top`` (PDF points, origin at the bottom)."""
    page = pdf[index]  # type: ignore[index]
    textpage = page.get_textpage()
    try:
        return str(textpage.get_text_bounded(left=0, bottom=max(bottom, 0.0), right=page.get_width(), top=top))
    finally:
        textpage.close()
        page.close()


def _page_text(pdf: object, index: int, tables: list[PageTable]) -> str:
    if tables:
        raw = _text_around(pdf, index, tables)
    else:
        page = pdf[index]  # type: ignore[index]
        textpage = page.get_textpage()
        try:
            raw = str(textpage.get_text_range())
        finally:
            textpage.close()
            page.close()
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _HYPHENATED.sub(r"\1", text)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _text_around(pdf: object, index: int, tables: list[PageTable]) -> str:
    """The page's text with each table as a pipe table in its place (the bands between tables are PDFium's text)."""
    page = pdf[index]  # type: ignore[index]
    height = float(page.get_height())
    page.close()
    parts: list[str] = []
    cursor = 0.0  # pdfplumber's coordinates: from the top of the page down
    for table in tables:
        if table.top > cursor:
            parts.append(_bounded(pdf, index, height - table.top + 0.5, height - cursor))
        parts.append("\n\n" + render(table) + "\n\n")
        cursor = max(cursor, table.bottom + 0.5)
    if cursor < height:
        parts.append(_bounded(pdf, index, 0.0, height - cursor))
    return "\n".join(parts)
