"""Conversation history: the message pair, idempotency, order, and ownership."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from researchcrew.db.models import MessageRow
from researchcrew.errors import MemoryStoreError
from researchcrew.memory.store import MemoryStore, message_id
from tests.memory_store.conftest import add, exchange


async def test_add_exchange_stores_the_message_pair_with_sources_and_citations(store: MemoryStore) -> None:
    query, response = exchange("ada", "s1", "What is SciFact?", "SciFact is a claim verification dataset [1].", cited=2)

    record = await store.add_exchange(
        user_id="ada", session_id="s1", query=query, response=response, context={"client": "cli"}
    )

    assert record.created is True
    assert (record.question, record.answer) == ("What is SciFact?", "SciFact is a claim verification dataset [1].")
    assert record.response_id == response.response_id and record.query_id == query.query_id
    assert record.asked_at == query.asked_at and record.answered_at == response.created_at
    assert record.asked_at.tzinfo is not None and record.stored_at.tzinfo is not None
    assert record.sources_used == ["rag"]
    assert [r["status"] for r in record.source_reports] == ["success", "failed"]
    assert [c["chunk_id"] for c in record.citations] == ["rag:doc1", "rag:doc2"]
    assert record.context == {"client": "cli"}
    assert record.user_message_id == message_id(response.response_id, "user")
    assert record.assistant_message_id == message_id(response.response_id, "assistant") != record.user_message_id
    async with store._read() as session:
        roles = (await session.execute(select(MessageRow.role, MessageRow.content).order_by(MessageRow.id))).all()
    assert [tuple(r) for r in roles] == [("user", query.text), ("assistant", response.answer)]


async def test_add_exchange_is_idempotent_on_the_response_id(store: MemoryStore) -> None:
    query, response = exchange("ada", "s1", "What is SciFact?", "A dataset.")
    first = await store.add_exchange(user_id="ada", session_id="s1", query=query, response=response)
    again = await store.add_exchange(user_id="ada", session_id="s1", query=query, response=response)
    racing = await asyncio.gather(
        *(store.add_exchange(user_id="ada", session_id="s1", query=query, response=response) for _ in range(4))
    )

    assert first.created is True
    assert again.created is False and not any(r.created for r in racing)
    assert again.model_dump() == first.model_dump()
    assert len(await store.history(user_id="ada", session_id="s1")) == 1
    async with store._read() as session:
        assert (await session.execute(select(func.count()).select_from(MessageRow))).scalar_one() == 2


async def test_concurrent_first_writes_of_one_response_store_it_once(store: MemoryStore) -> None:
    query, response = exchange("ada", "s1", "What is FEVER?", "A fact extraction and verification dataset.")
    results = await asyncio.gather(
        *(store.add_exchange(user_id="ada", session_id="s1", query=query, response=response) for _ in range(3))
    )
    assert sum(r.created for r in results) == 1
    assert len(await store.history(user_id="ada", session_id="s1")) == 1


async def test_an_exchange_is_never_filed_under_another_user(store: MemoryStore) -> None:
    query, response = exchange("ada", "s1", "What is SciFact?", "A dataset.")
    with pytest.raises(ValueError, match="another conversation"):
        await store.add_exchange(user_id="bob", session_id="s1", query=query, response=response)

    await store.add_exchange(user_id="ada", session_id="s1", query=query, response=response)
    stolen_query = query.model_copy(update={"user_id": "bob"})
    stolen = response.model_copy(update={"query": stolen_query})
    with pytest.raises(MemoryStoreError, match="another user"):
        await store.add_exchange(user_id="bob", session_id="s1", query=stolen_query, response=stolen)
    assert await store.history(user_id="bob", session_id="s1") == []


async def test_history_is_the_latest_exchanges_oldest_first(store: MemoryStore) -> None:
    # Stored out of order: history follows when the questions were asked, not when they were stored.
    for minutes in (20, 0, 10, 30):
        await add(store, "ada", "s1", f"question at {minutes}", f"answer at {minutes}", minutes=minutes)
    await add(store, "ada", "s2", "other session", "other answer", minutes=5)
    await add(store, "bob", "s1", "bob's question", "bob's answer", minutes=15)

    everything = await store.history(user_id="ada", session_id="s1")
    latest_two = await store.history(user_id="ada", session_id="s1", limit=2)
    all_sessions = await store.history(user_id="ada", session_id=None)

    assert [e.question for e in everything] == [f"question at {m}" for m in (0, 10, 20, 30)]
    assert [e.question for e in latest_two] == ["question at 20", "question at 30"]
    assert [e.question for e in all_sessions] == [
        "question at 0",
        "other session",
        "question at 10",
        "question at 20",
        "question at 30",
    ]
    assert [e.question for e in await store.history(user_id="bob", session_id="s1")] == ["bob's question"]
