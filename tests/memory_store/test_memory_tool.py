"""MemoryTool over the real store: chunks, scope, and failures reported as data."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from researchcrew.errors import ToolError
from researchcrew.memory.records import EntityMention, EntityRelation, RecalledExchange
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import EmbeddingSettings, MemorySettings
from researchcrew.tools.memory_recall import MemoryTool, compact
from tests.memory_store.conftest import Database, add, exchange

SCIFACT = "SciFact is a dataset of 1.4K scientific claims [1] with evidence abstracts [2, 3] for claim verification."


async def test_recalled_exchanges_become_cited_memory_chunks(store: MemoryStore) -> None:
    query, response = exchange("ada", "s1", "What is SciFact?", SCIFACT, cited=3)
    await store.add_exchange(user_id="ada", session_id="s1", query=query, response=response)
    await add(store, "ada", "s2", "What is the capital of Australia?", "Canberra.", minutes=1)
    tool = MemoryTool(store, MemorySettings(recall_min_relevance=0.3))

    result = await tool.search("datasets for scientific claim verification", user_id="ada", session_id="s2")

    assert result.ok, result.failure
    [chunk] = result.chunks  # the capital of Australia is below the relevance floor
    assert chunk.chunk_id == f"memory:{response.response_id}" and chunk.source_id == response.response_id
    assert chunk.source_type == "memory" and chunk.tool_name == "memory_recall"
    # The user's words only: the assistant's earlier answer is never evidence (issue 20).
    assert "What is SciFact?" in chunk.content and "1.4K scientific claims" not in chunk.content
    assert chunk.metadata["speaker"] == "user" and chunk.metadata["recalled_as"] == "earlier_question"
    assert "[1]" not in chunk.content and "in an earlier conversation (2025-03-01)" in chunk.content
    assert 0.3 <= chunk.semantic_relevance <= 1.0
    assert chunk.source_date == response.created_at
    assert chunk.metadata["session_id"] == "s1" and chunk.metadata["same_session"] is False
    assert [c["number"] for c in chunk.metadata["earlier_citations"]] == [1, 2, 3]
    assert chunk.metadata["earlier_citations"][0] == {
        "number": 1,
        "source_type": "rag",
        "title": "Doc 1",
        "source_id": "doc1",
    }
    assert chunk.metadata["sources_used"] == ["rag"]

    in_session = await tool.search("SciFact", user_id="ada", session_id="s2", scope="session", min_relevance=0.0)
    assert [c.metadata["session_id"] for c in in_session.chunks] == ["s2"]
    assert "earlier in this conversation" in in_session.chunks[0].content
    assert (await tool.search("SciFact", user_id="bob", session_id="s1")).chunks == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs a user_id"),
        ({"user_id": "  "}, "needs a user_id"),
        ({"user_id": "ada", "scope": "session"}, "needs a session_id"),
        ({"user_id": "ada", "scope": "everyone"}, "scope must be"),
        ({"user_id": "ada", "num_results": 0}, "num_results"),
        ({"user_id": "ada", "min_relevance": 1.5}, "min_relevance"),
        ({"user_id": "ada", "top_k": 3}, "does not take"),
    ],
)
async def test_invalid_requests_fail_as_data(store: MemoryStore, options: dict[str, object], message: str) -> None:
    await add(store, "ada", "s1", "What is SciFact?", SCIFACT)
    tool = MemoryTool(store)

    result = await tool.search("SciFact", **options)

    assert result.failure is not None and result.failure.kind == "invalid_request"
    assert message in result.failure.message and result.chunks == []
    assert await tool.execute("SciFact", **options) == []


async def test_a_store_that_went_away_is_reported_unreachable(database: Database, store: MemoryStore) -> None:
    await add(store, "ada", "s1", "What is SciFact?", SCIFACT)
    tool = MemoryTool(store)
    assert (await tool.search("SciFact", user_id="ada")).ok
    await store.dispose_connections()  # as a restarted server or a lost file would
    await database.make_unreachable()

    result = await tool.search("SciFact", user_id="ada", timeout=10)

    assert result.failure is not None and result.failure.kind == "unreachable", result.failure
    assert "memory store" in result.failure.message and result.chunks == []


class _Backend:
    """A MemoryRecall double for behaviours the real store never shows."""

    def __init__(self, outcome: list[RecalledExchange] | Exception) -> None:
        self.outcome = outcome
        self.calls: list[dict[str, object]] = []

    async def recall(self, **kwargs: object) -> list[RecalledExchange]:
        self.calls.append(kwargs)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def test_a_backend_that_knows_its_failure_keeps_its_kind() -> None:
    backend = _Backend(ToolError("http_error", "Zep answered 503", status_code=503))
    result = await MemoryTool(backend).search("SciFact", user_id="ada", session_id="s1", num_results=4)
    assert result.failure is not None and (result.failure.kind, result.failure.status_code) == ("http_error", 503)
    assert backend.calls == [
        {"user_id": "ada", "query_text": "SciFact", "session_id": None, "limit": 4, "min_relevance": 0.35}
    ]


async def test_another_users_items_from_a_faulty_backend_are_dropped() -> None:
    when = datetime(2025, 1, 1, tzinfo=UTC)
    items = [
        RecalledExchange(
            response_id="z1",
            user_id="ada",
            session_id="s1",
            question="Q",
            answer="A",
            relevance=0.9,
            asked_at=when,
            origin="zep",
        ),
        RecalledExchange(response_id="z2", user_id="bob", session_id="s1", question="Q", answer="A", relevance=0.9),
    ]
    result = await MemoryTool(_Backend(items)).search("Q", user_id="ada")
    assert [c.chunk_id for c in result.chunks] == ["memory:z1"] and result.chunks[0].metadata["origin"] == "zep"


def test_compact_strips_markers_and_cuts_at_a_word() -> None:
    assert compact("A  claim [1] and\n evidence [2, 3] [4–6].", 100) == "A claim and evidence."
    assert compact("one two three four", 9) == "one two …"


async def test_without_an_embedding_model_history_is_kept_and_recall_is_not_configured(
    database: Database, tmp_path: Path
) -> None:
    missing = EmbeddingSettings(model=str(tmp_path / "no-such-model"))
    async with await MemoryStore.open(database.url, embedding_settings=missing) as store:
        stored = await add(store, "ada", "s1", "What is SciFact?", SCIFACT)  # stored, without an embedding
        assert [e.response_id for e in await store.history(user_id="ada", session_id="s1")] == [stored]

        result = await MemoryTool(store).search("SciFact", user_id="ada")

    assert result.failure is not None and result.failure.kind == "not_configured", result.failure
    assert "embedding model" in result.failure.message


async def test_include_entities_adds_what_the_graph_knows_about_the_named_entities(store: MemoryStore) -> None:
    response_id = await add(store, "ada", "s1", "What is SciFact?", SCIFACT)
    await store.record_entities(
        user_id="ada",
        response_id=response_id,
        mentions=[EntityMention(name="SciFact", type="dataset"), EntityMention(name="VeriSci", type="model")],
    )
    await store.record_relationships(
        user_id="ada", relations=[EntityRelation(source="VeriSci", target="SciFact", relation="evaluated_on")]
    )
    tool = MemoryTool(store)

    with_graph = await tool.search("How well do models do on SciFact?", user_id="ada", include_entities=True)
    without = await tool.search("How well do models do on SciFact?", user_id="ada")
    unrelated = await tool.search("weather in Paris", user_id="ada", include_entities=True, min_relevance=0.0)

    *exchanges, entities = with_graph.chunks
    assert [c.chunk_id for c in exchanges] == [c.chunk_id for c in without.chunks] == [f"memory:{response_id}"]
    assert entities.chunk_id.startswith("memory:entities:") and entities.semantic_relevance == 0.7
    assert "- SciFact (dataset; mentioned in 1 earlier answers; related to VeriSci (evaluated on))" in entities.content
    assert entities.metadata == {"entities": ["SciFact"], "origin": "entity_graph", "speaker": "assistant"}
    assert not any(c.chunk_id.startswith("memory:entities:") for c in unrelated.chunks)
    assert (await tool.search("SciFact", user_id="bob", include_entities=True)).chunks == []
