"""Reports built by hand for the export tests, and readers of each exported format (PDF text through pypdfium2,
DOCX through python-docx, HTML through lxml) — what a person opening the file would see."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

from researchcrew.contracts import FinalResponse, Query
from researchcrew.contracts.deep import (
    BudgetReport,
    ComparisonRow,
    ComparisonTable,
    DeepReport,
    PlanItem,
    QualityScores,
    ResearchPlan,
)
from researchcrew.contracts.synthesizer import AnswerSection, Citation, CitedPassage, Claim

QUALITY = QualityScores(
    attempt=1,
    citation_correctness=1.0,
    plan_coverage=1.0,
    query_relevance=0.9,
    structure=1.0,
    overall=0.95,
    threshold=0.7,
    passed=True,
)


def citation(number: int, title: str, *, url: str | None = None, file_name: str | None = None) -> Citation:
    return Citation(
        number=number,
        chunk_id=f"c{number}",
        source_type="rag" if file_name else "web",
        title=title,
        url=url,
        file_name=file_name,
        location=f"§ Methods, passage {number} of 9",
        passages=[CitedPassage(chunk_id=f"c{number}", location=f"§ Methods, passage {number} of 9")],
    )


def make_report(
    question: str,
    sections: Sequence[tuple[str, Sequence[tuple[str, list[int]]]]],
    citations: Sequence[Citation],
    *,
    comparison: ComparisonTable | None = None,
    caveats: Sequence[str] = (),
) -> DeepReport:
    """A completed report: ``sections`` as (heading, [(statement, citation numbers), ...])."""
    answer_sections = [
        AnswerSection(heading=heading, claims=[Claim(text=text, citations=numbers) for text, numbers in claims])
        for heading, claims in sections
    ]
    items = [
        PlanItem(id=n, question=re.sub(r"^\d+\.\s+", "", heading) or f"Item {n}")
        for n, (heading, _) in enumerate(sections, start=1)
    ] or [PlanItem(id=1, question=question)]
    response = FinalResponse(
        query=Query(text=question, user_id="ada", session_id="s1"),
        answer="(see sections)",
        sections=answer_sections,
        citations=list(citations),
        answer_kind="extractive",
        caveats=list(caveats),
    )
    return DeepReport(
        run_id="run-0123456789",
        question=question,
        original_question=question,
        response=response,
        plan=ResearchPlan(question=question, items=items, max_items=20),
        sub_questions=[],
        quality=[QUALITY],
        budget=BudgetReport(deadline_s=60, elapsed_s=2.5),
        report_type="comparison" if comparison else "report",
        comparison=comparison,
    )


def comparison_table() -> ComparisonTable:
    return ComparisonTable(
        subjects=["Adaptive pooling", "Dorfman screening"],
        rows=[ComparisonRow(aspect="Cost", cells=["Saves reagents", ""], citations=[[1], []])],
    )


def pdf_text(content: bytes) -> str:
    import pypdfium2

    document = pypdfium2.PdfDocument(content)
    try:
        return "\n".join(document[index].get_textpage().get_text_range() for index in range(len(document)))
    finally:
        document.close()


def docx_text(content: bytes) -> str:
    from docx import Document

    document = Document(io.BytesIO(content))
    lines = [paragraph.text for paragraph in document.paragraphs]
    for table in document.tables:
        lines += [" | ".join(cell.text for cell in row.cells) for row in table.rows]
    return "\n".join(lines)


def markers(text: str) -> list[int]:
    """The citation numbers of the text's [n] markers, in order."""
    return [int(n) for n in re.findall(r"\[(\d+)\]", text)]
