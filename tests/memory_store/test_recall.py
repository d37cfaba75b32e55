"""Semantic recall in the built-in store: relevance, user and session scope, and a cache that stays correct."""

from __future__ import annotations

import asyncio

import numpy as np
from sqlalchemy import text

from researchcrew.embedding.embedder import Embedder
from researchcrew.memory.recall import MemoryRecall, UserVectors, encode_vector
from researchcrew.memory.store import MemoryStore
from tests.memory_store.conftest import Database, add

RESEARCH_HISTORY = [
    (
        "What is SciFact?",
        "SciFact is a dataset of 1.4K expert-written scientific claims paired with evidence "
        "abstracts, used to train and evaluate claim verification systems.",
    ),
    (
        "How does multi-head attention work in the Transformer?",
        "Each head projects queries, keys and values and "
        "computes scaled dot-product attention; the heads are concatenated and projected again.",
    ),
    (
        "Which methods predict protein structure?",
        "AlphaFold2 predicts 3D protein structures from amino-acid "
        "sequences using an Evoformer and a structure module.",
    ),
    ("What is the capital of Australia?", "Canberra is the capital of Australia."),
]


async def _seed(store: MemoryStore, user_id: str, session_id: str = "s1") -> dict[str, str]:
    ids = {}
    for minute, (question, answer) in enumerate(RESEARCH_HISTORY):
        ids[question] = await add(store, user_id, session_id, question, answer, minutes=minute)
    return ids


def test_the_store_is_a_memory_recall(store: MemoryStore) -> None:
    assert isinstance(store, MemoryRecall)


async def test_recall_finds_the_semantically_related_earlier_exchange(store: MemoryStore) -> None:
    ids = await _seed(store, "ada")

    recalled = await store.recall(user_id="ada", query_text="datasets for verifying scientific claims", limit=4)

    assert recalled[0].response_id == ids["What is SciFact?"]
    assert recalled[0].question == "What is SciFact?" and "claim verification" in recalled[0].answer
    relevances = [r.relevance for r in recalled]
    assert relevances == sorted(relevances, reverse=True)
    assert all(0.0 <= r <= 1.0 for r in relevances)
    assert relevances[0] > 0.5 and relevances[0] - relevances[1] > 0.15
    assert recalled[0].citations[0]["chunk_id"] == "rag:doc1" and recalled[0].sources_used == ["rag"]
    assert recalled[0].origin == "local" and recalled[0].asked_at is not None

    attention = await store.recall(user_id="ada", query_text="self-attention heads in transformers", limit=1)
    assert [r.response_id for r in attention] == [ids["How does multi-head attention work in the Transformer?"]]


async def test_recall_never_returns_another_users_memory(store: MemoryStore) -> None:
    ada = await _seed(store, "ada")
    # Bob asked (almost) the same things: his exchanges are as relevant as Ada's, and must still never show up.
    bob = await _seed(store, "bob")
    await add(store, "bob", "s9", "Is SciFact a claim verification dataset?", "Yes, SciFact verifies claims.")

    for user, own, others in (("ada", ada, bob), ("bob", bob, ada)):
        recalled = await store.recall(user_id=user, query_text="scientific claim verification data", limit=10)
        assert recalled and all(r.user_id == user for r in recalled)
        assert not set(others.values()) & {r.response_id for r in recalled}
        assert set(own.values()) <= {r.response_id for r in recalled}
    assert len(await store.recall(user_id="ada", query_text="SciFact", limit=10)) == len(ada)
    assert await store.recall(user_id="carol", query_text="SciFact", limit=10) == []


async def test_session_scope_limits_recall_to_that_session(store: MemoryStore) -> None:
    first = await add(store, "ada", "s1", "What is SciFact?", RESEARCH_HISTORY[0][1])
    second = await add(store, "ada", "s2", "Tell me about SciFact claims", RESEARCH_HISTORY[0][1], minutes=5)

    everywhere = await store.recall(user_id="ada", query_text="SciFact", limit=5)
    in_s2 = await store.recall(user_id="ada", query_text="SciFact", session_id="s2", limit=5)

    assert {r.response_id for r in everywhere} == {first, second}
    assert [r.response_id for r in in_s2] == [second]
    assert await store.recall(user_id="ada", query_text="SciFact", session_id="nope", limit=5) == []


async def test_limit_and_min_relevance(store: MemoryStore) -> None:
    await _seed(store, "ada")
    assert len(await store.recall(user_id="ada", query_text="science", limit=2)) == 2
    strict = await store.recall(user_id="ada", query_text="datasets for verifying scientific claims", min_relevance=0.5)
    assert [r.question for r in strict] == ["What is SciFact?"]
    assert await store.recall(user_id="ada", query_text="   ") == []
    assert await store.recall(user_id="ada", query_text="SciFact", limit=0) == []


async def test_recall_sees_writes_and_deletes_made_through_another_store(
    database: Database, store: MemoryStore, embedder: Embedder
) -> None:
    """Another API process shares the database: the cache must notice its additions and its forget."""
    await add(store, "ada", "s1", "What is the capital of Australia?", "Canberra.")
    assert len(await store.recall(user_id="ada", query_text="SciFact", limit=5)) == 1  # cache now loaded

    other = await MemoryStore.open(database.url, embedder=embedder)
    try:
        added = await add(other, "ada", "s1", "What is SciFact?", RESEARCH_HISTORY[0][1], minutes=1)
        recalled = await store.recall(user_id="ada", query_text="claim verification dataset", limit=1)
        assert [r.response_id for r in recalled] == [added]

        await other.forget_user(user_id="ada")
        assert await store.recall(user_id="ada", query_text="claim verification dataset", limit=5) == []
        replaced = await add(other, "ada", "s1", "Which methods predict protein structure?", "AlphaFold2.")
        assert [r.response_id for r in await store.recall(user_id="ada", query_text="protein", limit=5)] == [replaced]
    finally:
        await other.close()


async def test_recall_without_a_version_row_falls_back_to_counting(
    database: Database, store: MemoryStore, embedder: Embedder
) -> None:
    """Exchanges written without the user's version row (by hand, by older code) are still recalled, and
    changes to them are still seen."""
    first = await add(store, "ada", "s1", "What is SciFact?", RESEARCH_HISTORY[0][1])
    async with store.engine.begin() as connection:
        await connection.execute(text("DELETE FROM memory_users"))
    assert [r.response_id for r in await store.recall(user_id="ada", query_text="claim verification")] == [first]

    other = await MemoryStore.open(database.url, embedder=embedder)
    try:
        second = await add(other, "ada", "s1", "Which methods predict protein structure?", RESEARCH_HISTORY[2][1])
        async with other.engine.begin() as connection:
            await connection.execute(text("DELETE FROM memory_users"))
        assert [r.response_id for r in await store.recall(user_id="ada", query_text="protein folding", limit=1)] == [
            second
        ]
    finally:
        await other.close()


def test_user_vectors_search_orders_filters_and_skips_foreign_dimensions() -> None:
    vectors = UserVectors(dimension=3)
    rows = [
        (1, "s1", encode_vector([1.0, 0.0, 0.0])),
        (2, "s2", encode_vector([0.0, 1.0, 0.0])),
        (3, "s1", encode_vector([0.6, 0.8, 0.0])),
        (4, "s1", None),  # stored without an embedding
        (5, "s1", encode_vector([1.0, 0.0, 0.0, 0.0])),  # embedded by a model of another dimension
        (6, "s2", encode_vector([-1.0, 0.0, 0.0])),
    ]
    vectors.add_rows(rows)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)

    assert (vectors.size, vectors.rows_seen, vectors.max_id) == (4, 6, 6)

    def search(session_id: str | None, limit: int, min_relevance: float) -> list[tuple[int, float]]:
        found = vectors.search(query, session_id=session_id, limit=limit, min_relevance=min_relevance)
        return [(row_id, round(score, 5)) for row_id, score in found]

    # Orthogonal (2) and opposite (6) both clip to relevance 0, but orthogonal is the closer one.
    assert search(None, 10, 0.0) == [(1, 1.0), (3, 0.6), (2, 0.0), (6, 0.0)]
    assert search("s2", 1, 0.0) == [(2, 0.0)]
    assert search(None, 10, 0.5) == [(1, 1.0), (3, 0.6)]
    assert search(None, 2, 0.0) == [(1, 1.0), (3, 0.6)]
    vectors.add_rows([(7 + n, "s3", encode_vector([0.0, 0.0, 1.0])) for n in range(100)])  # grows past capacity
    assert vectors.size == 104 and vectors.max_id == 106
    assert [row_id for row_id, _ in search("s3", 3, 0.0)] == [106, 105, 104]  # exact ties: newest first


async def test_concurrent_recalls_and_writes_of_one_user_stay_consistent(store: MemoryStore) -> None:
    """Recalls run in worker threads (SQLite) or interleave on the loop (PostgreSQL) while exchanges are added:
    every recall answers from a consistent index, and once the writes are done all of them are found."""
    await _seed(store, "ada")

    async def write(n: int) -> str:
        return await add(
            store,
            "ada",
            f"s{n % 3}",
            f"Question {n} about graph neural networks?",
            f"Answer {n}: message passing over graph structure.",
            minutes=10 + n,
        )

    async def read() -> list[str]:
        return [r.user_id for r in await store.recall(user_id="ada", query_text="graph neural networks", limit=5)]

    results = await asyncio.gather(*(write(n) if n % 2 else read() for n in range(24)))

    added = {r for r in results if isinstance(r, str)}
    assert all(users == ["ada"] * len(users) for users in results if isinstance(users, list))
    recalled = await store.recall(user_id="ada", query_text="graph neural networks message passing", limit=50)
    assert added <= {r.response_id for r in recalled}
    assert len(recalled) == len(RESEARCH_HISTORY) + len(added)
