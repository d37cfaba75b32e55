"""DOCX export with python-docx (pure Python, the library Word documents are usually written with): the title,
what the report is, a contents list for long reports, Word's own heading styles (so Word's navigation pane and its
own table of contents pick them up), statements with their [n] markers, a comparison table, caveats and the
numbered reference list."""

from __future__ import annotations

import io

from researchcrew.deep.export._document import ReportDocument, Statement, marker


def _line(statement: Statement) -> str:
    cited = marker(statement.citations)
    return f"{statement.text} {cited}".rstrip()


def to_docx(document: ReportDocument) -> bytes:
    """The report as a Word document."""
    from docx import Document

    doc = Document()
    doc.core_properties.title = document.title[:255]
    doc.core_properties.author = "researchcrew"
    doc.add_heading(document.title, level=0)
    for line in document.about:
        for run in doc.add_paragraph(line).runs:
            run.italic = True
    if document.toc:
        doc.add_heading("Contents", level=1)
        for section in document.sections:
            style = "List Bullet" if section.level == 2 else "List Bullet 2"
            doc.add_paragraph(section.heading, style=style)
    for section in document.sections:
        doc.add_heading(section.heading, level=section.level - 1)
        for statement in section.statements:
            doc.add_paragraph(_line(statement))
        if section.sources:
            doc.add_paragraph(section.sources_line())
        if section.table is not None:
            table = doc.add_table(rows=1, cols=len(section.table.header))
            table.style = "Table Grid"
            for cell, text in zip(table.rows[0].cells, section.table.header, strict=True):
                cell.text = text
                for run in cell.paragraphs[0].runs:
                    run.bold = True
            for row in section.table.rows:
                for cell, statement in zip(table.add_row().cells, row, strict=True):
                    cell.text = _line(statement)
    if document.caveats:
        doc.add_heading("Caveats", level=1)
        for caveat in document.caveats:
            doc.add_paragraph(caveat, style="List Bullet")
    doc.add_heading("References", level=1)
    if not document.references:
        doc.add_paragraph("No sources were cited.")
    for reference in document.references:
        entry = reference.text()
        doc.add_paragraph(entry)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()
