"""How `researchcrew ask` lists the sources of an answer in a terminal."""

from __future__ import annotations

from researchcrew.cli._ask import render_answer
from researchcrew.contracts import Query
from researchcrew.contracts.synthesizer import AnswerDraft, DraftClaim, DraftSection, FinalResponse
from researchcrew.pipeline.synthesize._citations import validate_draft
from tests.synthesizer.builders import evidence


def _sources_of(response: FinalResponse) -> list[str]:
    listing = render_answer(response).partition("\nSources:\n")[2]
    return [line.strip() for line in listing.split("\n\n")[0].splitlines()]


def test_sources_name_a_document_by_url_and_a_recalled_exchange_by_its_conversation() -> None:
    paper, recalled = evidence(2)
    paper.chunk.source_type, paper.chunk.title = "rag", "SciFact"
    paper.chunk.metadata.update({"heading": "Methods", "position": 1, "chunk_count": 3})
    recalled.chunk.source_type, recalled.chunk.url = "memory", None
    recalled.chunk.title, recalled.chunk.source_id = "Earlier question: What is SciFact?", "effad49f0c1e4b7a"
    recalled.chunk.metadata.update({"same_session": False, "session_id": "s0", "origin": "local"})
    claims = [DraftClaim(text="From the paper.", citations=[1]), DraftClaim(text="Said before.", citations=[2])]
    checked = validate_draft(AnswerDraft(sections=[DraftSection(heading="Answer", claims=claims)]), [paper, recalled])
    response = FinalResponse(
        query=Query(text="What is SciFact?", user_id="ada", session_id="s1"),
        answer="From the paper [1]. Said before [2].",
        sections=checked.sections,
        citations=checked.citations,
    )

    assert _sources_of(response) == [
        "[1] SciFact — https://example.org/doc/1, 2023-05-01, § Methods, passage 2 of 3 (rag)",
        # the stored answer's id (effad49f…) means nothing to a reader; the conversation does
        "[2] Earlier question: What is SciFact? — an earlier conversation (session s0), 2023-05-02 (memory)",
    ]


def test_clarifying_questions_are_shown_as_such() -> None:
    from researchcrew.pipeline.clarify import clarification_response, rule_clarification, summarize_evidence

    query = Query(text="What is a zorblax?", user_id="ada", session_id="s1")
    summary = summarize_evidence(query.text, [query.text], [], [])
    request = rule_clarification(summary, "no_evidence")
    text = render_answer(clarification_response(query, request, []))
    assert text.startswith("Before answering: clarifying questions (reply with `researchcrew ask` in the same session)")
    assert "Confidence" not in text and "1. Could you say it with other words" in text


def test_the_language_model_note_says_what_the_answer_cost_or_that_its_price_is_unknown() -> None:
    from researchcrew.contracts.follow_up import TokenCount, TokenUsage
    from researchcrew.llm.pricing import Pricing

    usage = TokenUsage(synthesis=TokenCount.of(1_000, 500))
    query = Query(text="What is SciFact?", user_id="ada", session_id="s1")
    priced = FinalResponse(query=query, answer="A.", token_usage=usage, cost=Pricing("gpt-4o-mini").cost(usage))
    unknown = FinalResponse(query=query, answer="A.", token_usage=usage, cost=Pricing("my-model").cost(usage))

    assert "1500 tokens (1000 prompt, 500 completion; synthesis 1500); cost: $0.000450 (gpt-4o-mini)" in (
        render_answer(priced)
    )
    assert "cost: price unknown (my-model)" in render_answer(unknown)
