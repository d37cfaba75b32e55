"""Clarifying questions come from the evidence: what was searched, what was found (counts), and concrete ways to
narrow — by rule without a model, worded by the model with one; and the user's reply is read for "just answer"."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from researchcrew.contracts import SourceFailure, SourceReport
from researchcrew.contracts.clarification import ClarificationAnswer, is_just_answer
from researchcrew.pipeline.clarify import (
    clarification_reason,
    count_matches,
    llm_clarification,
    looks_like_new_question,
    merge_reply,
    rule_clarification,
    summarize_evidence,
)
from researchcrew.testing import FakeLLM, fake_chunk

REPORTS = [
    SourceReport(source_type="rag", tool_name="rag_search", status="success", chunk_count=3),
    SourceReport(
        source_type="web",
        tool_name="web_search",
        status="failed",
        failure=SourceFailure(kind="not_configured", message="no Firecrawl API key"),
    ),
]


def chunks() -> list[object]:
    titles = [
        ("Metamorphic Testing of Deep Learning Forecasters", 2019),
        ("Metamorphic Testing for Pose Estimation Systems", 2025),
        ("Mutation Testing of Deep Reinforcement Learning", 2023),
        ("Property-Based Mutation Testing", 2023),
        ("A Survey on Metamorphic Testing", 2016),
    ]
    return [
        fake_chunk(
            "rag",
            n,
            title=title,
            source_id=f"doc{n}",
            source_date=datetime(year, 1, 1, tzinfo=UTC),
            metadata={"matches": 180},
            semantic_relevance=0.5,
        )
        for n, (title, year) in enumerate(titles, start=1)
    ] + [fake_chunk("arxiv", 9, title="Testing ML", semantic_relevance=0.4)]


def test_matches_count_the_knowledge_base_passages_above_its_floor() -> None:
    found = count_matches(chunks())  # type: ignore[arg-type]
    assert found == {"rag": 180, "arxiv": 1}


def test_too_many_matches_asks_about_sub_topics_period_and_sources() -> None:
    summary = summarize_evidence("What is known about testing ML systems?", ["q1", "q2"], chunks(), REPORTS)  # type: ignore[arg-type]
    assert summary.total_matches == 181 and summary.answered == ("rag",)
    assert clarification_reason(summary, "medium", overload_matches=100) == "too_many_matches"
    assert clarification_reason(summary, "high", overload_matches=100) is None  # precise enough to answer
    assert clarification_reason(summary, "medium", overload_matches=500) is None

    request = rule_clarification(summary, "too_many_matches")
    facets = [question.facet for question in request.questions]
    assert facets == ["sub_topic", "time_range", "source_kind"]
    assert request.questions[0].options[:2] == ["metamorphic testing", "mutation testing"]
    assert request.questions[1].options[-1] == "any year"
    assert "181 passages" in request.message and "your knowledge base 180" in request.message
    assert "“q1”; “q2”" in request.message and "just answer" in request.message
    assert "the web: not_configured — no Firecrawl API key" in request.message
    assert request.found == {"rag": 180, "arxiv": 1} and request.written_by == "rules"


def test_nothing_found_asks_for_other_words_a_period_and_sources_but_only_if_a_source_answered() -> None:
    summary = summarize_evidence("What is a zorblax?", ["What is a zorblax?"], [], REPORTS)
    assert clarification_reason(summary, "insufficient", overload_matches=100) == "no_evidence"
    request = rule_clarification(summary, "no_evidence", max_questions=2)
    assert [q.facet for q in request.questions] == ["terms", "time_range"]
    assert request.message.startswith("I found nothing on this question in your knowledge base.")

    all_failed = summarize_evidence("q", ["q"], [], REPORTS[1:])
    assert clarification_reason(all_failed, "insufficient", overload_matches=100) is None  # our fault, not theirs


async def test_the_model_words_the_questions_from_the_facts_and_the_rules_are_the_fallback() -> None:
    summary = summarize_evidence("What is known about testing ML systems?", ["q"], chunks(), REPORTS)  # type: ignore[arg-type]
    worded = json.dumps(
        {
            "questions": [
                {
                    "facet": "sub_topic",
                    "question": "Metamorphic or mutation testing?",
                    "options": ["metamorphic"],
                    "x": 1,
                },
                {"facet": "weird", "question": "Since when?"},
            ]
        }
    )
    llm = FakeLLM([worded, "I cannot help", TimeoutError("slow")])
    request = await llm_clarification(llm, summary, "too_many_matches")
    assert request.written_by == "llm"
    assert [(q.facet, q.question) for q in request.questions] == [
        ("sub_topic", "Metamorphic or mutation testing?"),
        ("sub_topic", "Since when?"),
    ]
    prompt = llm.calls[0].messages[1]["content"]
    assert "<<<FACTS>>>" in prompt and "metamorphic testing" in prompt and "181" in prompt
    for _ in range(2):
        assert (await llm_clarification(llm, summary, "too_many_matches")).written_by == "rules"


@pytest.mark.parametrize(
    "reply", ["just answer", "Just answer.", "answer anyway", "ok, go ahead", "no preference", "  skip it ", "whatever"]
)
def test_replies_that_decline_to_narrow(reply: str) -> None:
    assert is_just_answer(reply)
    assert ClarificationAnswer(answer=reply).declines


@pytest.mark.parametrize("reply", ["metamorphic testing, since 2019", "only arXiv papers", "answer sets in ASP"])
def test_replies_that_narrow(reply: str) -> None:
    assert not is_just_answer(reply)
    assert not ClarificationAnswer(answer=reply).declines
    assert ClarificationAnswer(answer="", just_answer=False).declines  # an empty reply answers as asked


def test_a_reply_narrows_the_question_and_a_new_question_is_recognised() -> None:
    assert merge_reply("What is known about testing ML?", " metamorphic testing, since 2019. ") == (
        "What is known about testing ML? (metamorphic testing, since 2019)"
    )
    assert looks_like_new_question("What is the capital of Peru?", "What is known about testing ML?")
    assert not looks_like_new_question("Which testing methods for ML?", "What is known about testing ML?")
    assert not looks_like_new_question("since 2019", "What is known about testing ML?")
