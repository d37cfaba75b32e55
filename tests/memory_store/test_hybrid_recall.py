"""Issue 13, item 4: recall is hybrid (lexical + dense), so an exact token the user said is found, and a question
about the conversation recalls the conversation. On SQLite and PostgreSQL (the ``store`` fixture)."""

from __future__ import annotations

import numpy as np

from researchcrew.memory.recall import UserVectors, encode_vector, lexical_terms
from researchcrew.memory.store import MemoryStore
from researchcrew.tools.memory_recall import MemoryTool
from tests.memory_store.conftest import add

CODENAME_QUESTION = "My project codename is BLUEFALCON-7731, what is metamorphic testing?"
CODENAME_ANSWER = (
    "Metamorphic testing checks relations between the outputs of related inputs, which helps when there is no "
    "test oracle [1]. It has been applied to machine learning systems and to scientific software [2]."
)


async def test_an_exact_token_the_user_said_is_recalled(store: MemoryStore) -> None:
    said = await add(store, "ada", "s1", CODENAME_QUESTION, CODENAME_ANSWER)
    await add(store, "ada", "s1", "What is mutation testing?", "Mutation testing injects faults [1].", minutes=1)

    found = await store.recall(user_id="ada", query_text="What is my project codename?", min_relevance=0.35)
    by_token = await store.recall(user_id="ada", query_text="bluefalcon-7731", min_relevance=0.35)
    by_part = await store.recall(user_id="ada", query_text="Which project is 7731?", min_relevance=0.35)

    assert [r.response_id for r in found][:1] == [said]
    assert found[0].relevance >= 0.5
    assert [r.response_id for r in by_token] == [said]
    assert said in [r.response_id for r in by_part]


async def test_lexical_recall_never_demotes_a_dense_match(store: MemoryStore) -> None:
    await add(store, "ada", "s1", "What is SciFact?", "SciFact is a dataset of scientific claims [1].")
    dense_only = MemoryStore(store.engine, embedder=store._embedder, lexical_weight=0.0)
    query = "Which dataset collects scientific claims for verification?"

    hybrid = await store.recall(user_id="ada", query_text=query)
    dense = await dense_only.recall(user_id="ada", query_text=query)

    assert hybrid and dense
    assert hybrid[0].relevance >= dense[0].relevance


async def test_recall_stays_scoped_to_the_user(store: MemoryStore) -> None:
    await add(store, "bob", "s1", CODENAME_QUESTION, CODENAME_ANSWER)
    assert await store.recall(user_id="ada", query_text="What is my project codename?") == []


async def test_a_question_about_the_conversation_recalls_the_conversation(store: MemoryStore) -> None:
    first = await add(store, "ada", "s1", "How do bees communicate?", "Bees dance [1].")
    second = await add(store, "ada", "s1", "What is SciFact?", "SciFact is a dataset [1].", minutes=1)
    await add(store, "ada", "other", "What is BM25?", "A ranking function [1].", minutes=2)
    tool = MemoryTool(store)

    result = await tool.search("What did I ask before?", user_id="ada", session_id="s1", num_results=3)

    assert result.ok, result.failure
    ids = [chunk.source_id for chunk in result.chunks]
    assert ids[:2] == [second, first]  # this session's latest first
    assert all(chunk.metadata["recalled_as"] == "conversation" for chunk in result.chunks)
    assert all(chunk.semantic_relevance >= 0.9 for chunk in result.chunks[:2])


async def test_an_earlier_answer_kind_travels_with_the_recall(store: MemoryStore) -> None:
    await add(store, "ada", "s1", CODENAME_QUESTION, CODENAME_ANSWER)
    # A research question: a question about the user's own codename is answered by their statement instead
    # (tests/memory_logic/test_stated_facts.py).
    result = await MemoryTool(store).search("Which project is BLUEFALCON-7731?", user_id="ada")
    [chunk] = result.chunks
    assert chunk.metadata["question"] == CODENAME_QUESTION
    assert chunk.metadata["answer_kind"] == "generated"


def test_lexical_terms_keep_tokens_whole_and_by_parts() -> None:
    terms = lexical_terms("My project codename is BLUEFALCON-7731, version v2.1!")
    assert "bluefalcon-7731" in terms and "bluefalcon" in terms and "7731" in terms
    assert "is" not in terms and "my" not in terms


def test_rows_without_an_embedding_are_still_found_lexically() -> None:
    vectors = UserVectors(dimension=3)
    vectors.add_rows([(1, "s", None, "the launch code is ZEBRA-42"), (2, "s", encode_vector([1.0, 0, 0]), "other")])
    query = np.asarray([0.0, 1.0, 0.0], dtype=np.float32)
    hits = vectors.search(
        query, session_id=None, limit=2, min_relevance=0.3, query_text="zebra-42 code", lexical_weight=0.5
    )
    assert [row_id for row_id, _ in hits] == [1]
