"""The report: the sub-question answers as one document with global citation numbers, checked by the same
citation check; repeats dropped; disagreements across sub-questions shown side by side; and the remediation
retry, with and without an LLM."""

from __future__ import annotations

import json

import pytest

from researchcrew.contracts import Query
from researchcrew.deep._report import assemble_report, extractive_retry, llm_retry
from researchcrew.settings import EvaluationSettings
from researchcrew.testing import FakeLLM
from tests.deep.builders import plan_of, result, scored
from tests.e2e.support import assert_every_claim_cited

QUERY = Query(text="What is known about pooled testing?", user_id="u", session_id="s")
SETTINGS = EvaluationSettings()
A = scored("rag-1", "Pooled testing screens many samples with few tests. Pooling saves reagents.", title="Pooling A")
B = scored("web-2", "The pooled test reaches a sensitivity of 95% on the screening cohort.", title="Study B")
C = scored("arxiv-3", "On the screening cohort, the pooled test's sensitivity is only 70%.", title="Study C")
D = scored("rag-4", "Group testing was proposed by Dorfman in 1943 for syphilis screening.", title="History D")


def test_sections_follow_the_plan_with_global_numbers_and_valid_citations() -> None:
    first = result(1, "What is pooled testing?", [A, B], [("Pooled testing screens many samples with few tests.", [0])])
    second = result(
        2, "How sensitive is the pooled test?", [B, A], [("The pooled test reaches a sensitivity of 95%.", [0])]
    )
    draft = assemble_report(QUERY, plan_of(first, second), [first, second], SETTINGS)
    response = draft.response
    assert [section.heading for section in response.sections] == [
        "1. What is pooled testing?",
        "2. How sensitive is the pooled test?",
    ]
    assert [citation.chunk_id for citation in response.citations] == ["rag-1", "web-2"]
    assert_every_claim_cited(response)
    assert response.answer_kind == "extractive" and response.citation_stats.removed == 0
    assert [scored.chunk.chunk_id for scored in draft.evidence] == ["rag-1", "web-2"]


def test_a_statement_made_earlier_is_not_repeated() -> None:
    same = "Pooled testing screens many samples with few tests."
    first = result(1, "What is pooled testing?", [A], [(same, [0])])
    second = result(2, "Why pool samples?", [A], [(same, [0]), ("Pooling saves reagents.", [0])])
    third = result(3, "What does pooling do?", [A], [(same, [0])])
    response = assemble_report(QUERY, plan_of(first, second, third), [first, second, third], SETTINGS).response
    texts = {section.heading: [claim.text for claim in section.claims] for section in response.sections}
    assert texts["2. Why pool samples?"] == ["Pooling saves reagents."]
    assert texts["3. What does pooling do?"] == [same]  # all it has: kept once, so the sub-question is answered


def test_disagreements_across_sub_questions_are_shown_side_by_side() -> None:
    first = result(
        1,
        "How sensitive is the pooled test in study B?",
        [B],
        [("The pooled test reaches a sensitivity of 95% on the screening cohort.", [0])],
    )
    second = result(
        2,
        "How sensitive is the pooled test in study C?",
        [C],
        [("On the screening cohort, the pooled test's sensitivity is only 70%.", [0])],
    )
    draft = assemble_report(QUERY, plan_of(first, second), [first, second], SETTINGS)
    assert [(r.chunk_id_a, r.chunk_id_b, r.kind) for r in draft.contradictions] == [("web-2", "arxiv-3", "numeric")]
    across = [s for s in draft.response.sections if s.perspective]
    assert len(across) == 2 and across[0].heading.startswith("Across sub-questions: sources disagree")
    assert any("Sources disagree" in caveat for caveat in draft.response.caveats)
    assert_every_claim_cited(draft.response)


def test_unanswered_sub_questions_are_named_in_the_caveats() -> None:
    first = result(1, "What is pooled testing?", [A], [("Pooled testing screens many samples with few tests.", [0])])
    second = result(2, "Who invented it?", [], weak=[D])
    response = assemble_report(QUERY, plan_of(first, second), [first, second], SETTINGS).response
    assert "Sub-question 2 (“Who invented it?”) could not be answered from the evidence found." in response.caveats


def test_the_extractive_retry_answers_a_weak_sub_question_from_its_weak_evidence() -> None:
    first = result(1, "What is pooled testing?", [A], [("Pooled testing screens many samples with few tests.", [0])])
    second = result(2, "Who proposed group testing for screening?", [], weak=[D])
    retry = extractive_retry(QUERY, plan_of(first, second), [first, second], SETTINGS)
    headings = [section.heading for section in retry.response.sections]
    assert headings == ["1. What is pooled testing?", "2. Who proposed group testing for screening?"]
    assert "Dorfman" in retry.response.answer
    assert retry.notes == ["Sub-question 2 is answered from weak evidence (below the usual quality threshold)."]
    assert retry.notes[0] in retry.response.caveats
    assert_every_claim_cited(retry.response)


async def test_the_llm_retry_rewrites_the_report_with_the_issues_and_the_citation_check_still_applies() -> None:
    first = result(1, "What is pooled testing?", [A], [("Pooled testing screens many samples with few tests.", [0])])
    second = result(2, "Who proposed group testing?", [], weak=[D])
    draft = {
        "sections": [
            {
                "heading": "1. What is pooled testing?",
                "perspective": None,
                "claims": [{"text": "Pooling screens many samples with few tests.", "citations": [1]}],
            },
            {
                "heading": "2. Who proposed group testing?",
                "perspective": None,
                "claims": [
                    {"text": "Dorfman proposed it in 1943.", "citations": [2]},
                    {"text": "It was invented on the moon.", "citations": [7]},
                ],
            },
        ]
    }
    llm = FakeLLM([json.dumps(draft)])
    issues = ["sub-question 2 (“Who proposed group testing?”) has no cited statement"]
    retry = await llm_retry(llm, QUERY, plan_of(first, second), [first, second], issues, SETTINGS, timeout_s=5)
    prompt = llm.calls[0].messages[1]["content"]
    assert "<<<REVIEW>>>" in prompt and "has no cited statement" in prompt and "<<<PLAN>>>" in prompt
    assert "<<<EVIDENCE 2>>>" in prompt and "Dorfman" in prompt  # the weak sub-question's best evidence is offered
    response = retry.response
    assert response.answer_kind == "generated"
    assert [claim.text for s in response.sections for claim in s.claims] == [
        "Pooling screens many samples with few tests.",
        "Dorfman proposed it in 1943.",
    ]
    assert response.citation_stats.removed == 1 and response.citation_stats.claims_removed == 1
    assert_every_claim_cited(response)


async def test_the_llm_retry_raises_when_the_model_fails() -> None:
    first = result(1, "What is pooled testing?", [A], [("Pooled testing screens many samples with few tests.", [0])])
    with pytest.raises(RuntimeError):
        await llm_retry(FakeLLM([RuntimeError("down")]), QUERY, plan_of(first), [first], [], SETTINGS, timeout_s=5)
