"""The quality check scores what the code can check — citations, coverage of the plan, relevance, structure — and
says, as instructions, what pulled the score down."""

from __future__ import annotations

from researchcrew.contracts import CitationStats
from researchcrew.contracts.deep import PlanItem, ResearchPlan
from researchcrew.deep._quality import score_report, section_number, sections_by_position
from tests.deep.builders import answer, scored

METAMORPHIC = scored("rag-1", "Metamorphic testing checks relations between outputs of machine learning systems.")
MUTATION = scored("rag-2", "Mutation testing injects faults into machine learning programs.")
RELATIONS = scored("rag-4", "Metamorphic relations of machine learning systems hold across transformed inputs.")
MUTANTS = scored("rag-5", "Mutants of machine learning programs are killed when a test detects the fault.")
PLAN = ResearchPlan(
    question="What is known about testing machine learning systems?",
    items=[
        PlanItem(id=1, question="What is metamorphic testing of machine learning systems?"),
        PlanItem(id=2, question="What is mutation testing of machine learning programs?"),
    ],
    max_items=5,
)


def report(sections, **fields):  # type: ignore[no-untyped-def]
    return answer(PLAN.question, sections, **fields)


GOOD = [
    (
        "1. What is metamorphic testing of machine learning systems?",
        [
            ("Metamorphic testing checks relations between outputs of machine learning systems.", [METAMORPHIC.chunk]),
            ("Metamorphic relations of machine learning systems hold across transformed inputs.", [RELATIONS.chunk]),
        ],
    ),
    (
        "2. What is mutation testing of machine learning programs?",
        [
            ("Mutation testing injects faults into machine learning programs.", [MUTATION.chunk]),
            (
                "Mutants of machine learning programs are killed when a test detects the injected fault.",
                [MUTANTS.chunk],
            ),
        ],
    ),
]


def test_headings_map_sections_to_plan_positions() -> None:
    assert section_number("2. How is B done?") == 2
    assert section_number("2.3 Methods") == 2
    assert section_number("Across sub-questions: sources disagree") is None
    grouped, order = sections_by_position(report(GOOD).sections)
    assert order == [1, 2] and sorted(grouped) == [1, 2]


def test_a_good_report_passes() -> None:
    scores = score_report(report(GOOD), PLAN, PLAN.question, attempt=1, threshold=0.7)
    assert scores.citation_correctness == 1.0 and scores.plan_coverage == 1.0 and scores.structure == 1.0
    assert scores.query_relevance >= 0.9
    assert scores.passed and scores.issues == []


def test_an_unanswered_sub_question_and_removed_citations_fail_it_with_instructions() -> None:
    weak = report(GOOD[:1], citation_stats=CitationStats(valid=2, removed=1, claims_removed=1))
    scores = score_report(weak, PLAN, PLAN.question, attempt=1, threshold=0.7, extra_removed=2)
    assert scores.citation_correctness == 0.4  # 2 valid of 5 written
    assert scores.plan_coverage == 0.5
    assert not scores.passed
    assert any(issue.startswith("3 citation(s) pointed to evidence that was not given") for issue in scores.issues)
    assert any("sub-question 2 (“What is mutation testing" in issue for issue in scores.issues)


def test_sections_out_of_plan_order_or_untitled_lower_the_structure() -> None:
    swapped = report(list(reversed(GOOD)))
    scores = score_report(swapped, PLAN, PLAN.question, attempt=2, threshold=0.7)
    assert scores.structure < 1.0 and "put the sections in the order of the plan" in " ".join(scores.issues)
    untitled = report([("", GOOD[0][1]), ("", GOOD[1][1])])
    scores = score_report(untitled, PLAN, PLAN.question, attempt=1, threshold=0.7)
    assert scores.plan_coverage == 0.0 and scores.structure == 0.0


def test_statements_that_ignore_the_question_lower_relevance() -> None:
    off_topic = scored("web-3", "The weather in Lisbon is mild in spring.")
    sections = [
        (
            "1. What is metamorphic testing of machine learning systems?",
            [("The weather in Lisbon is mild in spring.", [off_topic.chunk])],
        ),
        GOOD[1],
    ]
    scores = score_report(report(sections), PLAN, PLAN.question, attempt=1, threshold=0.7)
    assert scores.query_relevance < 0.8
    assert any("section of sub-question 1 hardly addresses" in issue for issue in scores.issues)
