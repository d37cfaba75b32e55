"""The follow-up stage in the Flow: the stand-alone question is researched, the question as asked is answered and
remembered, the stream shows the rewrite, and nothing about the session can sink the question."""

from __future__ import annotations

import asyncio

from researchcrew.contracts import MemoryInput, ProgressEvent
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import MemoryStoreError
from researchcrew.memory.records import SessionSummary, SessionTurn
from researchcrew.pipeline.flow import run_question
from researchcrew.pipeline.follow_up._base import Rewrite
from researchcrew.testing.stages import ScriptedRetriever, recording_memory, relevant_chunk, scripted_stages

MT = "What is metamorphic testing?"
FOLLOW_UP = "What are its limitations?"
STANDALONE = "What are the limitations of metamorphic testing?"


def request(text: str = FOLLOW_UP) -> ResearchRequest:
    return ResearchRequest(question=text, user_id="ada", session_id="s1")


async def mt_session(user_id: str, session_id: str) -> SessionSummary:
    assert (user_id, session_id) == ("ada", "s1")  # the stage reads this question's own session
    turn = SessionTurn(question=MT, standalone=MT)
    return SessionSummary(user_id=user_id, session_id=session_id, turns=1, recent=[turn])


async def test_a_follow_up_is_researched_stand_alone_and_answered_as_asked() -> None:
    retriever = ScriptedRetriever([relevant_chunk("a", 0.8)])
    remembered: list[MemoryInput] = []
    events: list[ProgressEvent] = []
    stages = scripted_stages(retriever, session_context=mt_session, remember=recording_memory(remembered))  # type: ignore[arg-type]

    response = await run_question(stages, request(), on_event=events.append)

    assert [r.query_text for r in retriever.requests] == [STANDALONE]
    assert response.query.text == FOLLOW_UP  # the answer is to the question as asked
    assert response.rewrite is not None
    assert (response.rewrite.original, response.rewrite.standalone, response.rewrite.method) == (
        FOLLOW_UP,
        STANDALONE,
        "rule",
    )
    # Memory keeps the user's wording; the stand-alone form goes along as context.
    [memory] = remembered
    assert memory.query.text == FOLLOW_UP and memory.final_response.query.text == FOLLOW_UP
    assert memory.context == {"standalone_question": STANDALONE}
    # The stream says so, between the guard and retrieval.
    order = [(e.stage, e.status) for e in events]
    assert order[:5] == [
        ("guard", "started"),
        ("guard", "finished"),
        ("rewrite", "started"),
        ("rewrite", "finished"),
        ("retrieve", "started"),
    ]
    finished = next(e for e in events if e.stage == "rewrite" and e.status == "finished")
    assert finished.detail["rewritten"] is True and finished.detail["standalone"] == STANDALONE
    assert finished.detail["original"] == FOLLOW_UP and finished.detail["method"] == "rule"


async def test_the_uncertainty_answer_says_what_was_searched() -> None:
    retriever = ScriptedRetriever([])
    response = await run_question(scripted_stages(retriever, session_context=mt_session), request())
    assert response.answer_kind == "uncertainty"
    assert f"“{STANDALONE}”" in response.answer and response.query.text == FOLLOW_UP


async def test_a_stand_alone_question_and_a_new_session_are_researched_as_asked() -> None:
    async def new_session(user_id: str, session_id: str) -> SessionSummary | None:
        return None

    for loader, text in ((mt_session, "What is property-based testing?"), (new_session, FOLLOW_UP)):
        retriever = ScriptedRetriever([relevant_chunk("a", 0.8)])
        events: list[ProgressEvent] = []
        response = await run_question(
            scripted_stages(retriever, session_context=loader), request(text), on_event=events.append
        )
        assert retriever.requests[0].query_text == text and response.rewrite is None
        finished = next(e for e in events if e.stage == "rewrite" and e.status == "finished")
        assert finished.detail["rewritten"] is False and finished.detail["standalone"] is None


async def test_a_summary_that_cannot_be_read_or_hangs_does_not_sink_the_question() -> None:
    async def broken(user_id: str, session_id: str) -> SessionSummary | None:
        raise MemoryStoreError("memory store session_summary failed: database is locked")

    async def hung(user_id: str, session_id: str) -> SessionSummary | None:
        await asyncio.sleep(60)
        return None

    async def buggy(user_id: str, session_id: str) -> SessionSummary | None:
        raise KeyError("a bug in a custom loader")

    for loader in (broken, hung, buggy):
        retriever = ScriptedRetriever([relevant_chunk("a", 0.8)])
        stages = scripted_stages(retriever, session_context=loader, follow_up_budget_s=0.3)
        response = await run_question(stages, request())
        assert retriever.requests[0].query_text == FOLLOW_UP
        assert response.answer_kind == "generated" and response.rewrite is None


async def test_a_rewriter_that_fails_or_hangs_is_replaced_by_the_rule() -> None:
    async def raising(question: str, summary: SessionSummary) -> Rewrite:
        raise RuntimeError("a bug in a custom rewriter")

    async def hanging(question: str, summary: SessionSummary) -> Rewrite:
        await asyncio.sleep(60)
        raise AssertionError("unreachable")

    for rewriter in (raising, hanging):
        retriever = ScriptedRetriever([relevant_chunk("a", 0.8)])
        stages = scripted_stages(retriever, session_context=mt_session, follow_up=rewriter, follow_up_budget_s=0.3)
        response = await run_question(stages, request())
        assert retriever.requests[0].query_text == STANDALONE
        assert response.rewrite is not None and response.rewrite.method == "rule"


async def test_a_refused_question_is_not_rewritten() -> None:
    calls: list[str] = []

    async def loader(user_id: str, session_id: str) -> SessionSummary:
        calls.append(session_id)
        return await mt_session(user_id, session_id)

    retriever = ScriptedRetriever([relevant_chunk("a", 0.8)])
    response = await run_question(
        scripted_stages(retriever, session_context=loader), request("sdfghjkl qwrtzpsd ;;;; ###")
    )
    assert response.answer_kind == "refusal" and calls == [] and retriever.requests == []
