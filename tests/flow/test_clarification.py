"""The quick Flow's clarify stage: nothing found (while a source answered) or far too many matches → clarifying
questions instead of an answer; otherwise, or when the run answers a clarification, an answer as before."""

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


async def test_nothing_found_asks_instead_of_explaining_uncertainty() -> None:
    remembered: list[object] = []
    events: list[ProgressEvent] = []
    stages = scripted_stages(ScriptedRetriever([]), clarify=CLARIFY, remember=recording_memory(remembered))
    response = await run_question(stages, question("What is a zorblax?"), on_event=events.append)

    assert response.answer_kind == "clarification"
    assert response.clarification is not None and response.clarification.reason == "no_evidence"
    assert response.citations == [] and response.sections == []
    assert response.answer == response.clarification.message
    assert "“What is a zorblax?”" in response.answer
    assert len(remembered) == 1  # the exchange is remembered: the next message in the session is the reply
    finished = [e for e in events if e.stage == "clarify" and e.status == "finished"]
    assert finished[0].detail == {"asked": True, "reason": "no_evidence", "matches": 0}
    assert not [e for e in events if e.stage == "synthesize"]


async def test_too_many_matches_with_middling_relevance_asks() -> None:
    stages = scripted_stages(ScriptedRetriever(broad(0.5)), clarify=CLARIFY)  # type: ignore[arg-type]
    response = await run_question(stages, question())
    assert response.answer_kind == "clarification"
    assert response.clarification is not None and response.clarification.reason == "too_many_matches"
    assert response.clarification.total_matches == 240
    assert response.clarification.questions[0].options[0] == "metamorphic testing"


async def test_too_many_matches_with_highly_relevant_evidence_is_answered() -> None:
    stages = scripted_stages(ScriptedRetriever(broad(0.9)), clarify=CLARIFY)  # type: ignore[arg-type]
    response = await run_question(stages, question())
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
