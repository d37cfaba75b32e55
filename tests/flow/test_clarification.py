"""The quick Flow's clarify stage (issue 20): a question too vague or too broad to answer well → clarifying questions
instead of an answer; a clear question is never asked about, however little or much the search found (a miss is
reworded and widened first, then explained); a run answering a clarification never asks again."""

from __future__ import annotations

from researchcrew.contracts import ProgressEvent, SourceReport
from researchcrew.contracts.request import ResearchRequest
from researchcrew.pipeline.clarify import evidence_clarifier
from researchcrew.pipeline.flow import run_question
from researchcrew.settings import ClarificationSettings
from researchcrew.testing import fake_chunk
from researchcrew.testing.stages import ScriptedRetriever, recording_memory, scripted_stages

CLARIFY = evidence_clarifier(ClarificationSettings(overload_matches=100))


def question(text: str = "What is known about testing?") -> ResearchRequest:
    return ResearchRequest(question=text, user_id="u1", session_id="s1")


def broad(relevance: float) -> list[object]:
    return [
        fake_chunk("rag", n, title=title, source_id=f"d{n}", semantic_relevance=relevance, metadata={"matches": 240})
        for n, title in enumerate(
            ["Metamorphic Testing of Forecasters", "Metamorphic Testing of LLMs", "Mutation Testing in Python"], 1
        )
    ]


async def test_a_vague_question_asks_even_when_nothing_was_found() -> None:
    remembered: list[object] = []
    events: list[ProgressEvent] = []
    stages = scripted_stages(ScriptedRetriever([]), clarify=CLARIFY, remember=recording_memory(remembered))
    response = await run_question(stages, question("What are its limitations?"), on_event=events.append)

    assert response.answer_kind == "clarification"
    assert response.clarification is not None and response.clarification.reason == "too_vague"
    assert response.citations == [] and response.sections == []
    assert response.answer == response.clarification.message
    assert "“What are its limitations?”" in response.answer
    assert len(remembered) == 1  # the exchange is remembered: the next message in the session is the reply
    finished = [e for e in events if e.stage == "clarify" and e.status == "finished"]
    assert finished[0].detail == {"asked": True, "reason": "too_vague", "matches": 0}
    assert not [e for e in events if e.stage in ("synthesize", "reformulate")]  # asked at once, not searched again


async def test_a_miss_on_a_clear_question_is_reworded_and_widened_not_clarified() -> None:
    retriever = ScriptedRetriever([])
    events: list[ProgressEvent] = []
    stages = scripted_stages(retriever, clarify=CLARIFY)
    response = await run_question(stages, question("Who wrote QuickCheck?"), on_event=events.append)
    assert response.answer_kind == "uncertainty" and response.clarification is None
    assert len(retriever.requests) >= 2 and retriever.requests[-1].relaxed
    clarify = [e for e in events if e.stage == "clarify" and e.status == "finished"]
    assert [e.detail["asked"] for e in clarify] == [False]  # considered once, on the first evidence


async def test_a_miss_that_the_widened_search_finds_is_answered() -> None:
    found = fake_chunk(
        "rag",
        1,
        content="QuickCheck, released in 1999 for Haskell by Koen Claessen and John Hughes.",
        semantic_relevance=0.9,
    )
    retriever = ScriptedRetriever([], [found])
    response = await run_question(scripted_stages(retriever, clarify=CLARIFY), question("Who wrote QuickCheck?"))
    assert response.answer_kind == "generated" and [r.relaxed for r in retriever.requests] == [False, True]


async def test_a_broad_question_asks_with_the_sub_topics_found() -> None:
    stages = scripted_stages(ScriptedRetriever(broad(0.5)), clarify=CLARIFY)  # type: ignore[arg-type]
    response = await run_question(stages, question())
    assert response.answer_kind == "clarification"
    assert response.clarification is not None and response.clarification.reason == "too_broad"
    assert response.clarification.total_matches == 240
    assert response.clarification.questions[0].options[0] == "metamorphic testing"


async def test_a_broad_question_asks_even_with_highly_relevant_evidence() -> None:
    stages = scripted_stages(ScriptedRetriever(broad(0.9)), clarify=CLARIFY)  # type: ignore[arg-type]
    response = await run_question(stages, question("testing"))
    assert response.answer_kind == "clarification"


async def test_a_clear_question_with_many_matches_is_answered() -> None:
    stages = scripted_stages(ScriptedRetriever(broad(0.5)), clarify=CLARIFY)  # type: ignore[arg-type]
    response = await run_question(stages, question("What is metamorphic testing?"))
    assert response.answer_kind == "generated"


async def test_a_run_answering_a_clarification_never_asks_again() -> None:
    stages = scripted_stages(ScriptedRetriever(broad(0.5)), clarify=CLARIFY)  # type: ignore[arg-type]
    response = await run_question(stages, question(), allow_clarification=False)
    assert response.answer_kind == "generated"


async def test_when_every_source_failed_the_uncertainty_response_says_so() -> None:
    class FailingRetriever(ScriptedRetriever):
        async def run(self, request):  # type: ignore[no-untyped-def]
            output = await super().run(request)
            failed = SourceReport(source_type="rag", tool_name="rag_search", status="failed")
            context = output.aggregated_context.model_copy(update={"source_reports": [failed]})
            return output.model_copy(update={"aggregated_context": context})

    stages = scripted_stages(FailingRetriever([]), clarify=CLARIFY)
    response = await run_question(stages, question("What is a zorblax?"))
    assert response.answer_kind == "uncertainty"


async def test_the_default_stage_never_asks() -> None:
    response = await run_question(scripted_stages(ScriptedRetriever([])), question("What is a zorblax?"))
    assert response.answer_kind == "uncertainty"
