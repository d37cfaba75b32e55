"""The LLM path through crewAI with the shared FakeLLM: structured output, validation, repair, fallbacks."""

from __future__ import annotations

import time

import pytest

from researchcrew.pipeline.synthesize._llm_writer import Synthesizer, parse_draft
from researchcrew.testing.llm import FakeLLM
from tests.synthesizer.builders import GOOD_REPLY, contradiction, draft_json, evidence, request, section


def claims_of(response):  # type: ignore[no-untyped-def]
    return [(claim.text, claim.citations) for s in response.sections for claim in s.claims]


async def test_structured_reply_becomes_sections_claims_and_citations() -> None:
    llm = FakeLLM([GOOD_REPLY])
    output = await Synthesizer(llm).run(request(evidence(3)))
    response = output.final_response

    assert llm.remaining == 0 and len(llm.calls) == 1
    assert response.answer_kind == "generated" and output.generation_method == "standard"
    assert [s.heading for s in response.sections] == ["Boiling point at sea level", "Altitude"]
    # prompt block numbers 1, 2, 3 → renumbered by first use: chunk-1 → 1, chunk-2 → 2, chunk-3 → 3
    assert claims_of(response)[3] == ("In Denver water boils at roughly 95 degrees Celsius.", [1, 3])
    assert [c.chunk_id for c in response.citations] == ["chunk-1", "chunk-2", "chunk-3"]
    assert response.citation_stats.valid == 5 and response.citation_stats.removed == 0
    assert response.answer.startswith(
        "## Boiling point at sea level\n\nWater boils at 100 degrees Celsius at sea level [1]."
    )
    assert 0 < response.confidence <= 1 and response.confidence_level in ("high", "medium")
    assert all(claim.confidence is not None for s in response.sections for claim in s.claims)
    assert output.coverage_metrics.source_diversity == 1.0


async def test_a_citation_to_chunk_9_of_3_is_removed_counted_and_its_claim_dropped() -> None:
    reply = draft_json(
        section("Answer", ("Water boils at 100 degrees Celsius at sea level.", [1]), ("Water freezes at 50 °C.", [9]))
    )
    output = await Synthesizer(FakeLLM([reply])).run(request(evidence(3)))
    response = output.final_response
    assert claims_of(response) == [("Water boils at 100 degrees Celsius at sea level.", [1])]
    assert response.citation_stats.removed == 1 and response.citation_stats.claims_removed == 1
    assert "freezes" not in response.answer and "[9]" not in response.answer
    assert any("dropped" in caveat for caveat in response.caveats)


async def test_json_inside_prose_and_code_fences_is_read() -> None:
    reply = f"Thought: I now know the answer.\nFinal Answer: Here it is:\n```json\n{GOOD_REPLY}\n```\nHope this helps!"
    output = await Synthesizer(FakeLLM([reply])).run(request())
    assert output.final_response.answer_kind == "generated"
    assert len(claims_of(output.final_response)) == 4


def test_parse_draft_accepts_bare_lists_and_rejects_empty_answers() -> None:
    draft = parse_draft('[{"heading": "h", "claims": [{"text": "t", "citations": ["[2]"]}]}]')
    assert draft.sections[0].claims[0].citations == [2]
    with pytest.raises(Exception, match="no statements"):
        parse_draft('{"sections": []}')


async def test_one_repair_call_fixes_an_unreadable_reply() -> None:
    llm = FakeLLM(["The answer is that water boils at 100 °C [1].", GOOD_REPLY])
    output = await Synthesizer(llm).run(request())
    assert output.final_response.answer_kind == "generated"
    assert len(llm.calls) == 2
    repair = llm.calls[1]
    assert repair.response_model is not None and repair.response_model.__name__ == "AnswerDraft"
    user = repair.messages[-1]["content"]
    assert "<<<PREVIOUS REPLY>>>\nThe answer is that water boils at 100 °C (note 1)." not in user  # quoted as given
    assert "The answer is that water boils at 100 °C [1]." in user and "block numbers 1 to 3" in user


async def test_a_second_unreadable_reply_falls_back_to_an_extractive_answer_with_a_caveat() -> None:
    llm = FakeLLM(["no json here", "still { not json"])
    output = await Synthesizer(llm).run(request())
    response = output.final_response
    assert len(llm.calls) == 2, "at most one repair call"
    assert response.answer_kind == "extractive"
    assert any("not in the required format" in caveat for caveat in response.caveats)


@pytest.mark.parametrize("failure", [TimeoutError("model timed out"), ConnectionError("connection refused")])
async def test_an_llm_failure_falls_back_to_an_extractive_answer(failure: Exception) -> None:
    output = await Synthesizer(FakeLLM([failure])).run(request())
    response = output.final_response
    assert response.answer_kind == "extractive"
    assert any(str(failure) in caveat for caveat in response.caveats)


async def test_a_hung_llm_is_cut_off_at_the_timeout() -> None:
    llm = FakeLLM([GOOD_REPLY], delay_s=4)  # crewAI calls the model in a worker thread, which runs on to 4 s
    started = time.monotonic()
    output = await Synthesizer(llm, timeout_s=0.3).run(request())
    assert time.monotonic() - started < 3  # cut near 0.3 s, not after the model's 4 s (a margin for load)
    assert output.final_response.answer_kind == "extractive"
    assert any("did not answer within 0.3 s" in caveat for caveat in output.final_response.caveats)


async def test_when_every_claim_is_fabricated_the_answer_is_extractive_and_the_fabrication_is_counted() -> None:
    reply = draft_json(section("Answer", ("Invented one.", [7]), ("Invented two.", [8, 0])))
    output = await Synthesizer(FakeLLM([reply])).run(request(evidence(3)))
    response = output.final_response
    assert response.answer_kind == "extractive"
    assert response.citation_stats.removed == 3 and response.citation_stats.claims_removed == 2
    assert "Invented" not in response.answer


async def test_contradictions_give_a_multi_perspective_answer_citing_both_sides() -> None:
    reply = draft_json(
        section("Boiling point", ("Water boils at 100 degrees Celsius at sea level.", [1])),
        section("Sources disagree", ("In Denver water boils at about 95 °C.", [1]), perspective="Physics Notes"),
        section("", ("A pressure cooker reaches about 120 °C.", [3]), perspective="Kitchen handbook"),
    )
    llm = FakeLLM([reply])
    output = await Synthesizer(llm).run(request(evidence(3), contradictions=[contradiction()]))
    response = output.final_response
    assert output.generation_method == "multi_perspective"
    perspectives = [s for s in response.sections if s.perspective]
    assert [s.perspective for s in perspectives] == ["Physics Notes", "Kitchen handbook"]
    cited = {response.citations[n - 1].chunk_id for s in perspectives for c in s.claims for n in c.citations}
    assert cited == {"chunk-1", "chunk-3"}
    prompt = llm.calls[0].messages[-1]["content"]
    assert "<<<DISAGREEMENT 1>>>" in prompt and "Present the views side by side" in prompt


async def test_a_disagreement_the_model_ignored_is_still_shown_side_by_side() -> None:
    output = await Synthesizer(FakeLLM([GOOD_REPLY])).run(request(evidence(3), contradictions=[contradiction()]))
    response = output.final_response
    assert response.answer_kind == "generated" and response.generation_method == "multi_perspective"
    quoted = [c.text for s in response.sections if s.perspective for c in s.claims]
    assert quoted == [contradiction().claim_a, contradiction().claim_b]


@pytest.mark.parametrize(
    ("response_format", "phrase"),
    [("concise", "Style: concise"), ("detailed", "Style: detailed"), ("technical", "Style: technical")],
)
async def test_response_format_and_length_are_instructed(response_format: str, phrase: str) -> None:
    llm = FakeLLM([GOOD_REPLY])
    await Synthesizer(llm).run(request(response_format=response_format, min_words=20, max_words=400))  # type: ignore[arg-type]
    prompt = llm.calls[0].messages[-1]["content"]
    assert phrase in prompt
    high = 150 if response_format == "concise" else 400
    assert f"Length: between 20 and {high} words" in prompt


async def test_an_over_long_answer_is_trimmed_at_claim_boundaries() -> None:
    long_claims = [(f"Statement {i} about boiling water at altitude and pressure.", [1 + i % 3]) for i in range(30)]
    output = await Synthesizer(FakeLLM([draft_json(section("All", *long_claims))])).run(request(max_words=60))
    response = output.final_response
    texts = [text for text, _ in claims_of(response)]
    assert texts == [text for text, _ in long_claims[: len(texts)]], "whole claims, in order"
    assert sum(len(text.split()) for text in texts) <= 60
    assert any("shortened" in caveat for caveat in response.caveats)


async def test_no_evidence_means_no_llm_call() -> None:
    llm = FakeLLM([])
    output = await Synthesizer(llm).run(request([]))
    assert llm.calls == [] and output.final_response.answer_kind == "uncertainty"


async def test_crewai_prints_no_console_panels(capsys: pytest.CaptureFixture[str]) -> None:
    await Synthesizer(FakeLLM([GOOD_REPLY])).run(request())
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
