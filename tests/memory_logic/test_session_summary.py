"""The rolling session summary: bounded however long the session, maintained by the Memory stage after each
exchange, and waited for (briefly) by the next question of the session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.contracts.follow_up import QuestionRewrite
from researchcrew.contracts.memory import MemoryInput
from researchcrew.embedding.embedder import Embedder
from researchcrew.memory.store import MemoryStore
from researchcrew.pipeline.follow_up._session import (
    MAX_GIST_CHARS,
    MAX_QUESTION_CHARS,
    MAX_SUMMARY_CHARS,
    MAX_TOPICS,
    RECENT_TURNS,
    render_summary,
    summary_after,
    summary_from_history,
    turn_of,
)
from researchcrew.pipeline.remember.writer import MemoryWriter
from tests.memory_logic.conftest import turn
from tests.memory_store.conftest import Database


@pytest.fixture
async def store(database: Database, embedder: Embedder) -> AsyncIterator[MemoryStore]:
    memory = await MemoryStore.open(database.url, embedder=embedder)
    try:
        yield memory
    finally:
        await memory.close()


def _input(question: str, answer: str, *, standalone: str | None = None, kind: str = "generated") -> MemoryInput:
    query, response = turn("ada", "s1", question, answer)
    update: dict[str, Any] = {"answer_kind": kind}
    if standalone is not None:
        update["rewrite"] = QuestionRewrite(original=question, standalone=standalone, method="rule")
    response = response.model_copy(update=update)
    return MemoryInput(query=query, final_response=response, user_id="ada", session_id="s1")


_TEXT = st.text(min_size=0, max_size=2_000)


@settings(max_examples=100, deadline=None)
@given(turns=st.lists(st.tuples(_TEXT, _TEXT, _TEXT), min_size=1, max_size=40))
def test_property_the_summary_stays_bounded_however_long_the_session(turns: list[tuple[str, str, str]]) -> None:
    summary = None
    for question, standalone, gist in turns:
        step = turn_of(question, standalone or question, gist[:MAX_GIST_CHARS], answered=True, asked_at=None)
        summary = summary_after(summary, step, user_id="ada", session_id="s1")
    assert summary is not None
    assert summary.turns == len(turns)
    assert len(summary.recent) == min(RECENT_TURNS, len(turns))
    assert len(summary.topics) <= MAX_TOPICS
    assert all(
        len(t.question) <= MAX_QUESTION_CHARS and len(t.standalone) <= MAX_QUESTION_CHARS for t in summary.recent
    )
    assert len(render_summary(summary)) <= MAX_SUMMARY_CHARS


def test_topics_keep_the_most_recent_subjects_first_seen_once() -> None:
    summary = None
    for question in (
        "What is BM25?",
        "What is SciFact?",
        "What is bm25?",  # seen before: moves to the end, once
        *(f"What is topic{n}?" for n in range(MAX_TOPICS)),
    ):
        summary = summary_after(
            summary, turn_of(question, question, "", answered=True, asked_at=None), user_id="a", session_id="s"
        )
    assert summary is not None
    assert len(summary.topics) == MAX_TOPICS and summary.topics[-1] == f"topic{MAX_TOPICS - 1}"
    assert "SciFact" not in summary.topics  # the oldest dropped off
    text = render_summary(summary)
    assert text.startswith("Earlier topics: ") and "User asked: What is topic9?" in text


async def test_the_memory_stage_keeps_the_summary_with_the_researched_question(store: MemoryStore) -> None:
    agent = MemoryWriter(store)
    first = await agent.run(_input("What is metamorphic testing?", "Metamorphic testing checks relations [1]."))
    second = await agent.run(
        _input(
            "What are its limitations?",
            "It needs good relations [1].",
            standalone="What are the limitations of metamorphic testing?",
        )
    )
    assert first.session_summary_updated and second.session_summary_updated and second.status == "success"
    summary = await store.session_summary(user_id="ada", session_id="s1")
    assert summary is not None and summary.turns == 2
    last = summary.recent[-1]
    assert last.question == "What are its limitations?"  # the user's wording
    assert last.standalone == "What are the limitations of metamorphic testing?"
    assert last.subjects == ["metamorphic testing"] and last.answer_gist == "It needs good relations."
    assert summary.topics == ["metamorphic testing"]
    # The history keeps the wording as asked too.
    history = await store.history(user_id="ada", session_id="s1")
    assert [record.question for record in history] == ["What is metamorphic testing?", "What are its limitations?"]


async def test_a_refusal_and_a_retried_exchange_do_not_enter_the_summary(store: MemoryStore) -> None:
    agent = MemoryWriter(store)
    remembered = _input("What is BM25?", "A ranking function [1].")
    await agent.run(remembered)
    await agent.run(remembered)  # a retry of the same answer
    refused = await agent.run(_input("sdfghjkl", "I could not make out a question.", kind="refusal"))
    assert not refused.session_summary_updated
    summary = await store.session_summary(user_id="ada", session_id="s1")
    assert summary is not None and summary.turns == 1


async def test_the_next_question_waits_until_the_exchange_is_summarised(store: MemoryStore) -> None:
    class SlowSummaries:
        def __init__(self, inner: MemoryStore) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        async def update_session_summary(self, **kwargs: Any) -> Any:
            await asyncio.sleep(0.3)
            return await self.inner.update_session_summary(**kwargs)

    agent = MemoryWriter(SlowSummaries(store))  # type: ignore[arg-type]
    assert await agent.session_settled("ada", "s1", timeout_s=0.01)  # nothing pending
    agent.remember_in_background(_input("What is BM25?", "A ranking function [1]."))
    assert not await agent.session_settled("ada", "s1", timeout_s=0.05)  # still being written
    assert await agent.session_settled("ada", "s2", timeout_s=0.01)  # another session does not wait
    assert await agent.session_settled("ada", "s1", timeout_s=5)
    assert (await store.session_summary(user_id="ada", session_id="s1")) is not None
    await agent.aclose()


async def test_a_session_without_a_summary_is_summarised_from_its_history(store: MemoryStore) -> None:
    for minutes, (question, answer) in enumerate(
        [("What is BM25?", "A ranking function [1]."), ("What is SciFact?", "A claim verification dataset [2].")]
    ):
        query, response = turn("ada", "s1", question, answer, minutes=minutes)
        await store.add_exchange(user_id="ada", session_id="s1", query=query, response=response)
    history = await store.history(user_id="ada", session_id="s1", limit=RECENT_TURNS)
    summary = summary_from_history(history, user_id="ada", session_id="s1")
    assert summary is not None and summary.turns == 2
    assert (
        summary.recent[-1].subjects == ["SciFact"] and summary.recent[-1].answer_gist == "A claim verification dataset."
    )
    assert summary_from_history([], user_id="ada", session_id="s1") is None


def test_turns_remembered_out_of_order_are_kept_in_the_order_asked() -> None:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    later = turn_of(
        "What are its limitations?", "What are its limitations?", "", answered=True, asked_at=t0 + timedelta(minutes=1)
    )
    earlier = turn_of("What is BM25?", "What is BM25?", "", answered=True, asked_at=t0)
    summary = summary_after(
        summary_after(None, later, user_id="a", session_id="s"), earlier, user_id="a", session_id="s"
    )
    assert [t.question for t in summary.recent] == ["What is BM25?", "What are its limitations?"]
    assert summary.last_turn is not None and summary.last_turn.question == "What are its limitations?"
