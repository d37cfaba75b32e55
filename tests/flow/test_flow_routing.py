"""ResearchFlow routes as seed 000 says: guard, confidence bands, at most two reformulations, deadline."""

from __future__ import annotations

from researchcrew.contracts import ProgressEvent
from researchcrew.contracts.request import ResearchRequest, ResponseOptions
from researchcrew.pipeline.flow import run_question
from researchcrew.testing.stages import (
    CitingSynthesizer,
    PassThroughEvaluator,
    ScriptedRetriever,
    recording_memory,
)
from researchcrew.testing.stages import relevant_chunk as chunk
from researchcrew.testing.stages import scripted_stages as make_stages


def question(text: str, **options: object) -> ResearchRequest:
    return ResearchRequest(question=text, user_id="u1", session_id="s1", **options)  # type: ignore[arg-type]


async def test_confident_evidence_is_answered_and_remembered() -> None:
    retriever = ScriptedRetriever([chunk("a", 0.8), chunk("b", 0.7)])
    remembered: list[object] = []
    events: list[ProgressEvent] = []
    response = await run_question(
        make_stages(retriever, remember=recording_memory(remembered)),
        question("What is attention?"),
        on_event=events.append,
    )
    assert response.answer_kind == "generated"
    assert len(retriever.requests) == 1
    assert len(remembered) == 1
    stages = [(e.stage, e.status) for e in events]
    assert stages[0] == ("guard", "started")
    assert ("remember", "finished") in stages
    assert stages[-1] == ("respond", "finished")


async def test_incoherent_input_is_refused_without_any_tool_call() -> None:
    retriever = ScriptedRetriever([chunk("a", 0.9)])
    remembered: list[object] = []
    response = await run_question(
        make_stages(retriever, remember=recording_memory(remembered)), question("sdfghjkl qwrtzpsd ;;;; ###")
    )
    assert response.answer_kind == "refusal"
    assert retriever.requests == []
    assert remembered == []


async def test_low_confidence_reformulates_at_most_twice_then_explains_uncertainty() -> None:
    retriever = ScriptedRetriever([chunk("weak", 0.3, "Transformers are models used in language processing.")])
    response = await run_question(make_stages(retriever), question("How do transformers use attention heads?"))
    assert len(retriever.requests) == 3  # the question and two reformulations
    searched = [r.query_text for r in retriever.requests]
    assert len(set(searched)) == 3
    assert response.answer_kind == "uncertainty"
    assert response.reformulations == searched[1:]
    assert "Searched:" in response.answer and "[1]" in response.answer


async def test_reformulation_that_finds_good_evidence_is_answered() -> None:
    retriever = ScriptedRetriever([chunk("weak", 0.3)], [chunk("good", 0.9)])
    response = await run_question(make_stages(retriever), question("How do transformers use attention heads?"))
    assert len(retriever.requests) == 2
    assert response.answer_kind == "generated"


async def test_a_miss_is_searched_again_reworded_and_widened_before_the_uncertainty_answer() -> None:
    retriever = ScriptedRetriever([])
    asked = question("What is the airspeed of an unladen swallow?", tool_options={"rag": {"filters": {"year": 2020}}})
    response = await run_question(make_stages(retriever), asked)
    first, second = retriever.requests  # the keyword form; the expanded form adds nothing without evidence
    assert (first.relaxed, second.relaxed) == (False, True)
    assert second.query_text == "airspeed unladen swallow"
    assert first.tool_options == {"rag": {"filters": {"year": 2020}}} and second.tool_options == {"rag": {}}
    assert response.answer_kind == "uncertainty"
    assert response.confidence_level == "insufficient"
    assert any("widened" in caveat for caveat in response.caveats)


async def test_a_miss_without_another_wording_is_still_searched_widened() -> None:
    retriever = ScriptedRetriever([], [chunk("found", 0.9, "QuickCheck was written by Koen Claessen and John Hughes.")])
    response = await run_question(make_stages(retriever), question("QuickCheck authors"))
    assert [r.relaxed for r in retriever.requests] == [False, True]
    assert response.answer_kind == "generated"


async def test_deadline_during_synthesis_gives_partial_extractive_answer() -> None:
    retriever = ScriptedRetriever([chunk("a", 0.8)])
    stages = make_stages(retriever, synthesizer=CitingSynthesizer(delay_s=5), synthesis_reserve_s=0.1)
    response = await run_question(stages, question("What is attention?", deadline_s=0.5))
    assert response.partial
    assert response.answer_kind == "extractive"
    assert response.execution_time_ms < 2000
    assert any("time limit" in caveat for caveat in response.caveats)


async def test_slow_evaluation_is_cut_at_the_deadline_and_answered_with_the_fallback() -> None:
    retriever = ScriptedRetriever([chunk("a", 0.8)])
    # The evaluation is cut 1 s before the deadline; that reserve is the synthesis' (0.1 s was too little for even
    # the scripted synthesizer at load average 20, which then fell back to extractive).
    stages = make_stages(retriever, evaluator=PassThroughEvaluator(delay_s=30), synthesis_reserve_s=1.0)
    response = await run_question(stages, question("What is attention?", deadline_s=2.0))
    assert response.answer_kind == "generated"
    assert response.partial
    assert any("cross-checking" in caveat for caveat in response.caveats)
    assert response.execution_time_ms < 2000


async def test_memory_receives_what_the_user_asked_for_explicitly() -> None:
    retriever = ScriptedRetriever([chunk("a", 0.8)])
    remembered: list[object] = []
    await run_question(
        make_stages(retriever, remember=recording_memory(remembered)),
        question("What is attention?", response=ResponseOptions(response_format="concise"), exclude_sources=["web"]),
    )
    (memory_input,) = remembered
    assert memory_input.context == {"request": {"response_format": "concise", "exclude_sources": ["web"]}}  # type: ignore[attr-defined]
