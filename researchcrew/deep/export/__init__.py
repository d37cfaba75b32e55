"""Exports of a finished deep research report (issue 21 item 4): Markdown, HTML, PDF and DOCX, each with numbered
citations, the reference list (title, URL or file name, where the passage sits) and, for long reports, a table of
contents. ``export_report(report, "pdf")`` gives the bytes, the media type and a safe file name; every door (SDK
``export_report``, CLI ``research -o report.pdf``, ``GET /v1/deep-runs/{id}/report?format=pdf``, the page's download
button) calls it.

Libraries: markdown-it-py renders the HTML (already installed with rich; raw HTML off), fpdf2 writes the PDF and
python-docx the DOCX — all pure-Python wheels; see ``pdf`` for the font.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from researchcrew.contracts.deep import DeepReport, ExportFormat
from researchcrew.deep.export._document import ReportDocument, report_document
from researchcrew.errors import ConfigurationError

__all__ = ["FORMATS", "MEDIA_TYPES", "ExportedReport", "export_report", "file_name", "format_for", "report_document"]

FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
MEDIA_TYPES: dict[ExportFormat, str] = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
_EXTENSIONS: dict[str, ExportFormat] = {
    "md": "md",
    "markdown": "md",
    "html": "html",
    "htm": "html",
    "pdf": "pdf",
    "docx": "docx",
}


@dataclass(frozen=True)
class ExportedReport:
    """One export: its bytes, what they are, and a file name safe on every system and in a header."""

    format: ExportFormat
    content: bytes
    media_type: str
    file_name: str

    def write(self, path: str | Path) -> Path:
        """Write the export to ``path`` (parents created) and return it."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.content)
        return target


def format_for(path: str | Path | None, explicit: str | None = None) -> ExportFormat:
    """The export format: ``explicit`` when given, else the file's extension. A mistake raises
    ``ConfigurationError`` saying which formats there are."""
    choices = ", ".join(FORMATS)
    if explicit is not None:
        chosen = _EXTENSIONS.get(explicit.lower().lstrip("."))
        if chosen is None:
            raise ConfigurationError(f"unknown report format {explicit!r}: choose one of {choices}")
        return chosen
    suffix = Path(path).suffix.lower().lstrip(".") if path is not None else ""
    chosen = _EXTENSIONS.get(suffix)
    if chosen is None:
        raise ConfigurationError(
            f"cannot tell the report format from {str(path)!r}: name the file .md, .html, .pdf or .docx, "
            f"or give the format ({choices})"
        )
    return chosen


def file_name(report: DeepReport, fmt: ExportFormat) -> str:
    """``report-<question words>-<run id start>.<ext>``: ASCII letters, digits and hyphens only."""
    ascii_text = unicodedata.normalize("NFKD", report.question).encode("ascii", "ignore").decode("ascii")
    words = re.sub(r"[^A-Za-z0-9]+", "-", ascii_text).strip("-").lower()[:60].strip("-")
    run = re.sub(r"[^A-Za-z0-9]", "", report.run_id)[:8]
    return "-".join(part for part in ("report", words, run) if part) + f".{fmt}"


def render(document: ReportDocument, fmt: ExportFormat) -> bytes:
    """``document`` in ``fmt``."""
    if fmt == "md":
        from researchcrew.deep.export._markdown import to_markdown

        return to_markdown(document).encode("utf-8")
    if fmt == "html":
        from researchcrew.deep.export._markdown import to_html

        return to_html(document).encode("utf-8")
    if fmt == "pdf":
        from researchcrew.deep.export._pdf import to_pdf

        return to_pdf(document)
    from researchcrew.deep.export._docx import to_docx

    return to_docx(document)


def export_report(report: DeepReport, fmt: ExportFormat | str) -> ExportedReport:
    """The report in ``fmt`` (md, html, pdf or docx)."""
    chosen = format_for(None, fmt)
    return ExportedReport(
        chosen, render(report_document(report), chosen), MEDIA_TYPES[chosen], file_name(report, chosen)
    )
