"""PDF files → one ``Document`` per page with text (pypdfium2, the PDFium engine Chrome uses).

One document per page, keyed ``path#page=N`` with ``page``/``pages`` in the metadata, so that every chunk can be
cited with its page. A PDF without extractable text (a scan) is reported as such: OCR is out of scope.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders._base import LoaderError, LoadResult, file_key, read_bytes, title_from_path
from researchcrew.knowledge.loaders._markdown import authors_from
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
        pages = [_page_text(pdf, index) for index in range(len(pdf))]
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
            metadata={"format": "pdf", "path": str(path), "page": number, "pages": len(pages)},
        )
        for number, text in enumerate(pages, start=1)
        if text
    ]
    if not documents:
        raise LoaderError(f"no extractable text in {len(pages)} page(s) (a scanned PDF? run OCR first)")
    return LoadResult(documents)


def _page_text(pdf: object, index: int) -> str:
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
