"""The conversation layer (``pipeline/conversation.py``): what a session's next message is — the reply to a quick
answer's clarifying questions (known in this process, or read from the conversation history), the answer to a paused
deep run's clarifying questions (read from the deep-run store, the real in-process one here), or a new question."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from researchcrew.contracts import FinalResponse, Query
from researchcrew.contracts.request import ResearchRequest
from researchcrew.deep.persistence import InProcessDeepRuns
from researchcrew.errors import MemoryStoreError
from researchcrew.memory.records import ExchangeRecord
from researchcrew.pipeline.conversation import (
    CLARIFICATION_REPLY_WINDOW,
    ClarificationReply,
    Conversation,
    NewQuestion,
    ResearchReply,
    RunsOfUser,
)

VAGUE = "What is known about the screening method?"
UNRELATED = "How do flaky tests affect continuous integration?"


def message(text: str, session_id: str = "s1", user_id: str = "ada") -> ResearchRequest:
    return ResearchRequest(question=text, user_id=user_id, session_id=session_id)


def answer(request: ResearchRequest, kind: str) -> FinalResponse:
    query = Query(text=request.question, user_id=request.user_id, session_id=request.session_id)
    return FinalResponse(query=query, answer="…", answer_kind=kind, confidence=0.0)


def exchange(question: str, kind: str, *, answered_at: datetime, session_id: str = "s1") -> ExchangeRecord:
    now = datetime.now(UTC)
    return ExchangeRecord(
        response_id=uuid.uuid4().hex,
        user_id="ada",
        session_id=session_id,
        query_id=uuid.uuid4().hex,
        question=question,
        answer="…",
        asked_at=answered_at,
        answered_at=answered_at,
        stored_at=now,
        user_message_id="u",
        assistant_message_id="a",
        answer_kind=kind,
    )


class History:
    """The conversation history as the memory store gives it (latest exchange last), or its failure."""

    def __init__(self, *exchanges: ExchangeRecord, failing: bool = False) -> None:
        self.exchanges = list(exchanges)
        self.failing = failing

    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]:
        if self.failing:
            raise MemoryStoreError("the memory store is not reachable")
        mine = [e for e in self.exchanges if e.user_id == user_id and e.session_id == session_id]
        return mine[-limit:]


async def paused_run(
    runs: InProcessDeepRuns, *, session_id: str = "s1", awaiting: str = "clarification", expires_in_s: float = 3600
) -> str:
    run_id = uuid.uuid4().hex
    now = datetime.now(UTC)
    await runs.create(run_id=run_id, user_id="ada", session_id=session_id, question=VAGUE, lease_until=now)
    await runs.pause(run_id, state={}, pending={}, awaiting=awaiting, expires_at=now + timedelta(seconds=expires_in_s))
    return run_id


def conversation(history: History | None = None, runs: RunsOfUser | None = None) -> Conversation:
    async def research_runs() -> RunsOfUser | None:
        return runs

    return Conversation(history=lambda: history, research_runs=research_runs)


async def test_a_first_message_is_a_new_question_that_may_ask_back_unless_told_not_to() -> None:
    talk = conversation()
    assert await talk.turn(message(VAGUE)) == NewQuestion(message(VAGUE), allow_clarification=True)
    assert await talk.turn(message(VAGUE), clarify=False) == NewQuestion(message(VAGUE), allow_clarification=False)


async def test_the_message_after_a_clarification_narrows_the_question_and_may_not_ask_again() -> None:
    talk = conversation()
    talk.answered(message(VAGUE), answer(message(VAGUE), "clarification"))

    turn = await talk.turn(message("pooled testing of samples"))
    assert isinstance(turn, ClarificationReply) and turn.asked == VAGUE and not turn.allow_clarification
    assert turn.request.question == f"{VAGUE} (pooled testing of samples)"
    assert turn.request.user_id == "ada" and turn.request.session_id == "s1"

    for as_asked in ("just answer", VAGUE.upper()):  # declining, or insisting on the same question
        turn = await talk.turn(message(as_asked))
        assert isinstance(turn, ClarificationReply) and turn.request.question == VAGUE
    assert await talk.turn(message(UNRELATED)) == NewQuestion(message(UNRELATED))  # a question of its own
    assert isinstance(await talk.turn(message("pooled testing", session_id="s2")), NewQuestion)  # another session
    assert isinstance(await talk.turn(message("pooled testing", user_id="bob")), NewQuestion)  # another user

    talk.answered(message(f"{VAGUE} (pooled)"), answer(message(VAGUE), "extractive"))  # the reply was answered
    assert isinstance(await talk.turn(message("pooled testing of samples")), NewQuestion)


async def test_another_process_clarification_is_read_from_the_history_within_its_window() -> None:
    now = datetime.now(UTC)
    recent = History(exchange(VAGUE, "clarification", answered_at=now - timedelta(minutes=5)))
    turn = await conversation(recent).turn(message("pooled testing of samples"))
    assert isinstance(turn, ClarificationReply) and turn.asked == VAGUE

    stale = History(exchange(VAGUE, "clarification", answered_at=now - CLARIFICATION_REPLY_WINDOW - timedelta(1)))
    answered = History(
        exchange(VAGUE, "clarification", answered_at=now - timedelta(minutes=5)),
        exchange("What is pooled testing?", "extractive", answered_at=now),
    )
    for history in (stale, answered, History(failing=True)):
        assert isinstance(await conversation(history).turn(message("pooled testing of samples")), NewQuestion)

    # What this process knows wins over the history: it answered the clarification here.
    talk = conversation(recent)
    talk.answered(message("x"), answer(message("x"), "extractive"))
    assert isinstance(await talk.turn(message("pooled testing of samples")), NewQuestion)


async def test_a_paused_deep_run_takes_the_sessions_next_message_as_its_answer() -> None:
    runs = InProcessDeepRuns()
    run_id = await paused_run(runs)
    talk = conversation(runs=runs)
    talk.answered(message(VAGUE), answer(message(VAGUE), "clarification"))  # a quick clarification waits too

    turn = await talk.turn(message("pooled testing of samples"))
    assert turn == ResearchReply(run_id=run_id, question=VAGUE, answer="pooled testing of samples")  # the run first
    quick = await talk.turn(message("pooled testing of samples"), deep=False)  # a door that answers only quickly
    assert isinstance(quick, ClarificationReply)
    assert await talk.quick_turn(message("pooled testing of samples")) == quick
    assert isinstance(await talk.turn(message(UNRELATED)), NewQuestion)  # a question of its own is new
    assert isinstance(await talk.turn(message("pooled testing", session_id="s2")), NewQuestion)  # not its session
    assert isinstance(await talk.turn(message("pooled testing", user_id="bob")), NewQuestion)  # not bob's run

    await runs.submit_feedback(run_id, user_id="ada", awaiting="clarification", feedback="{}")  # answered already
    assert not isinstance(await talk.turn(message("pooled testing")), ResearchReply)


async def test_a_deep_run_waiting_for_its_plan_or_expired_or_cancelled_takes_no_message() -> None:
    runs = InProcessDeepRuns()
    await paused_run(runs, awaiting="plan_approval")  # a plan is decided with decide_plan, never by free text
    await paused_run(runs, expires_in_s=-1)
    cancelled = await paused_run(runs)
    await runs.cancel(cancelled, user_id="ada")
    assert isinstance(await conversation(runs=runs).turn(message("pooled testing of samples")), NewQuestion)


async def test_a_deep_run_store_that_cannot_answer_counts_as_no_waiting_run() -> None:
    class Failing:
        async def of_user(self, user_id: str, *, limit: int = 50) -> list[object]:
            raise MemoryStoreError("the memory store is not reachable")

    talk = conversation(runs=Failing())  # type: ignore[arg-type]
    assert isinstance(await talk.turn(message("pooled testing of samples")), NewQuestion)
    assert isinstance(await Conversation(history=lambda: None).turn(message("pooled testing")), NewQuestion)
