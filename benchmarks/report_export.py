"""How long exporting a finished deep research report takes, per format, and how big the files are.

    .venv/bin/python benchmarks/report_export.py [--repeat 5]

Three reports built in process (no run, no model): ``short`` (4 sections of 3 statements, 6 sources), ``long``
(20 sections of 8 statements, 60 sources, a table of contents) and ``unicode`` (the long one's shape with Greek,
Cyrillic, Hebrew, Arabic and emoji text and 2,000-character URLs). Each is exported ``--repeat`` times in every
format (Markdown, HTML through markdown-it-py, PDF through fpdf2, DOCX through python-docx); the median wall time
and the file size are printed as JSON, with whether DejaVu Sans was found for the PDF.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from researchcrew.contracts import FinalResponse, Query
from researchcrew.contracts.deep import BudgetReport, DeepReport, PlanItem, QualityScores, ResearchPlan
from researchcrew.contracts.synthesizer import AnswerSection, Citation, Claim
from researchcrew.deep.export import FORMATS, export_report
from researchcrew.deep.export._pdf import font_files

LATIN = "Pooled testing screens many samples with few tests by mixing them before testing, as reported"
UNICODE = "Статистика σ² ≈ 0.5 — שלום עולם — مرحبا بالعالم 🔬 — Überprüfung"


def build(sections: int, statements: int, sources: int, *, text: str, url_chars: int) -> DeepReport:
    question = "What is known about pooled testing?"
    answer_sections = [
        AnswerSection(
            heading=f"{n}. Sub-question number {n} about pooled testing?",
            claims=[
                Claim(text=f"{text} ({n}.{k}).", citations=[(n * statements + k) % sources + 1])
                for k in range(statements)
            ],
        )
        for n in range(1, sections + 1)
    ]
    citations = [
        Citation(
            number=n,
            chunk_id=f"c{n}",
            source_type="web",
            title=f"Source {n}: {text[:40]}",
            url="https://example.org/" + "p" * url_chars + f"/{n}",
            location=f"§ Results, passage {n % 7 + 1} of 7",
        )
        for n in range(1, sources + 1)
    ]
    response = FinalResponse(
        query=Query(text=question, user_id="bench", session_id="bench"),
        answer="",
        sections=answer_sections,
        citations=citations,
        answer_kind="extractive",
    )
    scores = QualityScores(
        attempt=1,
        citation_correctness=1,
        plan_coverage=1,
        query_relevance=1,
        structure=1,
        overall=1,
        threshold=0.7,
        passed=True,
    )
    items = [PlanItem(id=n, question=f"Sub-question number {n} about pooled testing?") for n in range(1, sections + 1)]
    return DeepReport(
        run_id="bench",
        question=question,
        original_question=question,
        response=response,
        plan=ResearchPlan(question=question, items=items, max_items=20),
        sub_questions=[],
        quality=[scores],
        budget=BudgetReport(deadline_s=300, elapsed_s=10),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    reports = {
        "short": build(4, 3, 6, text=LATIN, url_chars=20),
        "long": build(20, 8, 60, text=LATIN, url_chars=40),
        "unicode": build(20, 8, 60, text=UNICODE, url_chars=2_000),
    }
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, report in reports.items():
        results[name] = {}
        for fmt in FORMATS:
            times, size = [], 0
            for _ in range(args.repeat):
                started = time.perf_counter()
                size = len(export_report(report, fmt).content)
                times.append((time.perf_counter() - started) * 1000)
            results[name][fmt] = {"median_ms": round(statistics.median(times), 1), "bytes": size}
    print(json.dumps({"repeat": args.repeat, "dejavu_font": font_files() is not None, "reports": results}, indent=2))


if __name__ == "__main__":
    main()
