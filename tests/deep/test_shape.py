"""Report length and type (issue 21 item 5), with and without an LLM: brief, standard and detailed reports differ in
sub-questions, in how each is answered and in statements per section; a comparison asks one aspect per item naming
every subject and adds a table; a literature review orders statements by source and lists each theme's sources;
with an LLM the prompts say which length and type was asked for; the options are validated and stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from researchcrew.contracts import UserPreferences
from researchcrew.contracts.deep import DeepOptions, DeepReport, ReportLength, ReportType
from researchcrew.contracts.request import ResearchRequest
from researchcrew.deep._quality import sections_by_position
from researchcrew.deep._shape import ReportShape
from researchcrew.deep._shape_plan import comparison_subjects
from researchcrew.runtime import open_runtime
from researchcrew.settings import Settings
from researchcrew.testing import FakeLLM
from tests.deep.corpus import CorpusTool

QUESTION = "What is known about pooled testing?"
COMPARE = "Adaptive pooling vs Dorfman screening?"


@pytest.mark.parametrize(
    ("question", "subjects"),
    [
        ("Pooled testing vs individual testing for screening?", ("Pooled testing", "individual testing")),
        ("Compare Milvus, Qdrant and FAISS", ("Milvus", "Qdrant", "FAISS")),
        ("What are the differences between dense retrieval and BM25 in recall?", ("dense retrieval", "BM25")),
        ("How does pooled testing compare with individual testing?", ("pooled testing", "individual testing")),
        ("Is adaptive pooling or Dorfman screening cheaper?", ("adaptive pooling", "Dorfman screening")),
        ("Which is better, Rust or Go?", ("Rust", "Go")),
        ("How do LSTMs compare to transformers on long texts?", ("LSTMs", "transformers")),
        ("What is the difference between a process and a thread?", ("process", "thread")),
        ("What is known about pooled testing?", ()),
        ("Compare pooled testing", ()),
    ],
)
def test_the_subjects_of_a_comparison_come_from_the_question(question: str, subjects: tuple[str, ...]) -> None:
    assert comparison_subjects(question) == subjects


def test_length_sets_plan_size_and_how_sub_questions_are_answered() -> None:
    brief, standard, detailed = (ReportShape(length=length) for length in ("brief", "standard", "detailed"))
    assert (brief.plan_size(None, 8), standard.plan_size(None, 8), detailed.plan_size(None, 8)) == (3, 8, 10)
    assert brief.plan_size(5, 8) == 5 and detailed.plan_size(2, 8) == 2  # an explicit size wins
    preferences = UserPreferences(response_format="technical", max_response_length=500)
    assert brief.preferences(preferences).response_format == "concise"
    assert brief.preferences(preferences).max_response_length == 150
    assert standard.preferences(preferences) == preferences
    assert detailed.preferences(preferences).response_format == "technical"
    assert detailed.preferences(preferences).max_response_length == 900


def test_options_are_validated_and_accept_type_as_a_name() -> None:
    assert DeepOptions.model_validate({"type": "comparison"}).report_type == "comparison"
    assert DeepOptions(length="brief", report_type="literature_review").length == "brief"
    with pytest.raises(ValidationError, match="length"):
        DeepOptions.model_validate({"length": "huge"})
    with pytest.raises(ValidationError, match=r"report_type|type"):
        DeepOptions.model_validate({"report_type": "essay"})


async def _run(
    tmp_path: Path, question: str, llm: FakeLLM | None = None, *, plan_checks: int | None = None, **options: Any
) -> DeepReport:
    settings = Settings(data_dir=tmp_path)
    if plan_checks is not None:
        settings = settings.model_copy(update={"deep": settings.deep.model_copy(update={"plan_checks": plan_checks})})
    async with open_runtime(settings, tools=[CorpusTool()], llm=llm, remember=False) as runtime:
        deep = await runtime.deep_research()
        run = await deep.research(
            ResearchRequest(question=question, user_id="ada", session_id="s1"),
            DeepOptions(auto_approve=True, **options),
        )
        assert run.status == "completed" and run.report is not None, run.error
        stored = await deep.get_research_run(run.run_id, user_id="ada")
        assert stored.report is not None
        return stored.report


def _statements_per_position(report: DeepReport) -> dict[int, int]:
    grouped, _ = sections_by_position(report.response.sections)
    return {position: sum(len(s.claims) for s in sections) for position, sections in grouped.items()}


async def test_without_an_llm_brief_and_detailed_reports_differ(tmp_path: Path) -> None:
    # Six passages hold fewer facets whose searches read different passages than a detailed plan asks for (checked
    # against the source, the plan stops at those); the lengths are compared with the facets judged in the probe.
    brief = await _run(tmp_path / "b", QUESTION, length="brief", plan_checks=0)
    detailed = await _run(tmp_path / "d", QUESTION, length="detailed", plan_checks=0)
    assert brief.length == "brief" and detailed.length == "detailed"  # stored with the run
    assert len(brief.plan.items) <= 3 < len(detailed.plan.items)
    assert max(_statements_per_position(brief).values()) <= 2
    assert max(_statements_per_position(detailed).values()) > 2
    assert len(brief.response.citations) < len(detailed.response.citations)


async def test_without_an_llm_a_comparison_contrasts_aspects_and_tabulates_them(tmp_path: Path) -> None:
    report = await _run(tmp_path, COMPARE, report_type="comparison")
    assert report.report_type == "comparison"
    for item in report.plan.items:  # one aspect per item, naming both subjects
        assert "Adaptive pooling" in item.question and "Dorfman screening" in item.question
    table = report.comparison
    assert table is not None and table.subjects == ["Adaptive pooling", "Dorfman screening"]
    assert [row.aspect for row in table.rows] == [item.question for item in report.plan.items]
    cited = {n for citation in report.response.citations for n in [citation.number]}
    filled = [(cell, numbers) for row in table.rows for cell, numbers in zip(row.cells, row.citations, strict=True)]
    assert any(cell for cell, _ in filled)
    assert all(set(numbers) <= cited and bool(cell) == bool(numbers) for cell, numbers in filled)
    assert any("Adaptive" in cell for cell in (row.cells[0] for row in table.rows))
    assert any("Dorfman" in cell for cell in (row.cells[1] for row in table.rows))
    shape = ReportShape("standard", "comparison", ("Adaptive pooling", "Dorfman screening"))
    for section in report.response.sections:  # statements ordered subject by subject
        ranks = [shape.subject_of(claim.text) for claim in section.claims]
        known = [rank for rank in ranks if rank is not None]
        assert known == sorted(known)


async def test_without_an_llm_a_literature_review_lists_each_themes_sources(tmp_path: Path) -> None:
    report = await _run(tmp_path, QUESTION, report_type="literature_review")
    assert report.report_type == "literature_review" and report.comparison is None
    assert [theme.theme for theme in report.themes] == [item.question for item in report.plan.items]
    grouped, _ = sections_by_position(report.response.sections)
    for position, theme in enumerate(report.themes, start=1):
        sections = grouped.get(position, [])
        assert theme.sources == sorted({n for s in sections for c in s.claims for n in c.citations})
        assert len(sections) <= 1  # one section per theme
        firsts = [min(claim.citations) for s in sections for claim in s.claims]
        assert firsts == sorted(firsts)  # source by source
    assert any(len(theme.sources) > 1 for theme in report.themes)


def _scripted(messages: list[dict[str, Any]]) -> str:
    if "sub_questions" in messages[0]["content"]:
        questions = ("How do adaptive pooling and Dorfman screening differ in cost?", "What limits pooled testing?")
        return json.dumps({"sub_questions": [{"question": q} for q in questions]})
    return json.dumps(
        {"sections": [{"heading": "", "perspective": None, "claims": [{"text": "Pooling saves.", "citations": [1]}]}]}
    )


@pytest.mark.parametrize(("length", "report_type"), [("brief", "comparison"), ("detailed", "literature_review")])
async def test_with_an_llm_the_prompts_carry_the_length_and_type(
    tmp_path: Path, length: ReportLength, report_type: ReportType
) -> None:
    llm = FakeLLM([_scripted] * 20)
    report = await _run(tmp_path, COMPARE, llm, length=length, report_type=report_type)
    assert report.plan.written_by == "llm" and (report.length, report.report_type) == (length, report_type)
    prompts = ["\n".join(str(m.get("content")) for m in call.messages) for call in llm.calls]
    plan_prompt = next(p for p in prompts if "sub_questions" in p)
    assert f"Report type: {report_type}." in plan_prompt and f"Report length: {length}." in plan_prompt
    if report_type == "comparison":
        assert "comparison of Adaptive pooling versus Dorfman screening" in plan_prompt
    else:
        assert "literature review" in plan_prompt
    # the report's remediation retry (its statements off the sub-questions: issue 21) carries the report's guidance
    retries = [p for p in prompts if "<<<REVIEW>>>" in p]
    assert all(f"Report type: {report_type}." in p and f"Report length: {length}." in p for p in retries)
    answers = [p for p in prompts if "sub_questions" not in p and "<<<REVIEW>>>" not in p]
    assert answers
    style = "Style: concise." if length == "brief" else "Style: detailed."
    words = "and 150 words" if length == "brief" else "and 2000 words"
    assert all(style in p and words in p for p in answers), answers[0][-800:]


def _draft(*sections: tuple[str, list[tuple[str, list[int]]]]) -> list[Any]:
    from researchcrew.contracts.synthesizer import DraftClaim, DraftSection

    return [
        DraftSection(heading=heading, perspective=None, claims=[DraftClaim(text=t, citations=c) for t, c in claims])
        for heading, claims in sections
    ]


SECTIONS = (
    ("1. What is pooled testing?", [("Dorfman screening pools blood.", [3]), ("Adaptive pooling retests.", [1])]),
    ("1.2 Adaptive pooling", [("Adaptive pooling saves tests.", [2]), ("Dorfman screening is older.", [1])]),
    ("", [("An untitled continuation about adaptive pooling.", [4])]),
    ("2. What limits it?", [("Dilution limits pools.", [2])]),
)


def test_brief_keeps_two_statements_per_sub_question_across_its_sections() -> None:
    shaped = ReportShape("brief").sections(_draft(*SECTIONS))
    assert [(s.heading, [c.text for c in s.claims]) for s in shaped] == [
        ("1. What is pooled testing?", ["Dorfman screening pools blood.", "Adaptive pooling retests."]),
        ("2. What limits it?", ["Dilution limits pools."]),
    ]
    assert ReportShape("standard").sections(_draft(*SECTIONS)) == _draft(*SECTIONS)


def test_a_review_merges_a_themes_sections_source_by_source_and_a_comparison_subject_by_subject() -> None:
    review = ReportShape("standard", "literature_review").sections(_draft(*SECTIONS))
    assert [s.heading for s in review] == ["1. What is pooled testing?", "2. What limits it?"]
    assert [min(c.citations) for c in review[0].claims] == [1, 1, 2, 3, 4]
    compare = ReportShape("standard", "comparison", ("Adaptive pooling", "Dorfman screening")).sections(
        _draft(*SECTIONS)
    )
    texts = [c.text for c in compare[0].claims]
    assert texts == [
        "Adaptive pooling retests.",
        "Adaptive pooling saves tests.",
        "An untitled continuation about adaptive pooling.",
        "Dorfman screening pools blood.",
        "Dorfman screening is older.",
    ]


def test_a_comparison_without_named_subjects_compares_its_most_cited_sources() -> None:
    from researchcrew.contracts import FinalResponse, Query
    from researchcrew.contracts.deep import PlanItem, ResearchPlan
    from researchcrew.contracts.synthesizer import AnswerSection, Citation, Claim

    response = FinalResponse(
        query=Query(text="Q", user_id="u", session_id="s"),
        answer="",
        sections=[
            AnswerSection(
                heading="1. Methods?",
                claims=[Claim(text="A pools.", citations=[1]), Claim(text="B retests.", citations=[2])],
            ),
            AnswerSection(heading="2. Limits?", claims=[Claim(text="A dilutes.", citations=[1])]),
        ],
        citations=[
            Citation(number=1, chunk_id="a", source_type="rag", title="Source A"),
            Citation(number=2, chunk_id="b", source_type="rag", title="Source B"),
        ],
    )
    plan = ResearchPlan(
        question="Q", items=[PlanItem(id=1, question="Methods?"), PlanItem(id=2, question="Limits?")], max_items=5
    )
    table = ReportShape("standard", "comparison").table(response, plan)
    assert table is not None and table.subjects == ["[1] Source A", "[2] Source B"]
    assert [row.cells for row in table.rows] == [["A pools.", "B retests."], ["A dilutes.", ""]]
    assert [row.citations for row in table.rows] == [[[1], [2]], [[1], []]]
    assert ReportShape("standard", "report").table(response, plan) is None
