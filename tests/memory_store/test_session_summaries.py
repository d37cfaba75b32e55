"""Session summaries in the store: one per (user, session), updated atomically, never crossing users; the user's
last session is the session of their latest exchange."""

from __future__ import annotations

import asyncio

from researchcrew.memory.records import SessionSummary, SessionTurn
from researchcrew.memory.store import MemoryStore
from tests.memory_store.conftest import add


def _one_more(question: str, user_id: str = "ada", session_id: str = "s1"):  # type: ignore[no-untyped-def]
    def update(previous: SessionSummary | None) -> SessionSummary:
        base = previous or SessionSummary(user_id=user_id, session_id=session_id)
        turn = SessionTurn(question=question, standalone=question)
        return base.model_copy(update={"turns": base.turns + 1, "recent": [*base.recent, turn]})

    return update


async def test_a_summary_is_stored_read_back_and_updated(store: MemoryStore) -> None:
    assert await store.session_summary(user_id="ada", session_id="s1") is None
    first = await store.update_session_summary(user_id="ada", session_id="s1", update=_one_more("What is BM25?"))
    assert first.turns == 1 and first.updated_at is not None
    second = await store.update_session_summary(user_id="ada", session_id="s1", update=_one_more("How does it work?"))
    stored = await store.session_summary(user_id="ada", session_id="s1")
    assert stored is not None and stored.turns == second.turns == 2
    assert [turn.question for turn in stored.recent] == ["What is BM25?", "How does it work?"]
    assert stored.updated_at is not None and first.updated_at is not None and stored.updated_at >= first.updated_at


async def test_summaries_belong_to_one_user_and_one_session(store: MemoryStore) -> None:
    await store.update_session_summary(user_id="ada", session_id="s1", update=_one_more("ada's question"))
    await store.update_session_summary(
        user_id="bob", session_id="s1", update=_one_more("bob's question", user_id="bob")
    )
    assert await store.session_summary(user_id="ada", session_id="s2") is None
    ada = await store.session_summary(user_id="ada", session_id="s1")
    bob = await store.session_summary(user_id="bob", session_id="s1")
    assert ada is not None and bob is not None
    assert [t.question for t in ada.recent] == ["ada's question"] and [t.question for t in bob.recent] == [
        "bob's question"
    ]


async def test_concurrent_updates_of_one_session_all_land(store: MemoryStore) -> None:
    await asyncio.gather(
        *(
            store.update_session_summary(user_id="ada", session_id="s1", update=_one_more(f"question {n}"))
            for n in range(8)
        )
    )
    stored = await store.session_summary(user_id="ada", session_id="s1")
    assert stored is not None and stored.turns == 8
    assert sorted(turn.question for turn in stored.recent) == sorted(f"question {n}" for n in range(8))


async def test_a_summary_filed_under_another_session_is_refused(store: MemoryStore) -> None:
    def wrong(_: SessionSummary | None) -> SessionSummary:
        return SessionSummary(user_id="bob", session_id="s1")

    try:
        await store.update_session_summary(user_id="ada", session_id="s1", update=wrong)
    except ValueError as error:
        assert "cannot be stored" in str(error)
    else:
        raise AssertionError("a summary of another user was stored")
    assert await store.session_summary(user_id="ada", session_id="s1") is None  # rolled back


async def test_the_last_session_is_the_one_of_the_latest_exchange(store: MemoryStore) -> None:
    assert await store.last_session(user_id="ada") is None
    await add(store, "ada", "s1", "What is BM25?", "A ranking function.", minutes=0)
    await add(store, "ada", "s2", "What is SciFact?", "A dataset.", minutes=1)
    await add(store, "bob", "s9", "What is FEVER?", "A dataset.", minutes=2)
    assert await store.last_session(user_id="ada") == "s2"
    await add(store, "ada", "s1", "And its variants?", "BM25F and BM25+.", minutes=3)
    assert await store.last_session(user_id="ada") == "s1"
    # Stored late (memory is written in the background) but asked before: it does not make s3 the last session.
    await add(store, "ada", "s3", "What is ColBERT?", "A late-interaction retriever.", minutes=2)
    assert await store.last_session(user_id="ada") == "s1"
    assert await store.last_session(user_id="bob") == "s9"
