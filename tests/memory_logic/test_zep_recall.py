"""Recall from Zep (the MemoryRecall protocol): session search and memory, strictly scoped to the user."""

from __future__ import annotations

import pytest

from researchcrew.memory.outbox import turn_write
from researchcrew.memory.recall import MemoryRecall
from researchcrew.memory.zep import ZepError, ZepMemory, ZepMessage, zep_session_id
from tests.loopback.server import LoopbackServer, Reply, Request
from tests.loopback.zep import FakeZep
from tests.memory_logic.conftest import turn

EXCHANGES = [
    ("ada", "s1", "What is the SciFact dataset?", "SciFact is a dataset of 1.4K expert-written scientific claims."),
    ("ada", "s2", "How does BM25 rank documents?", "BM25 scores documents by term frequency and length."),
    ("bob", "s1", "What is the SciFact dataset about?", "SciFact pairs claims with evidence abstracts (Bob's)."),
]


async def _mirror(zep: ZepMemory, user_id: str, session_id: str, question: str, answer: str) -> str:
    query, response = turn(user_id, session_id, question, answer)
    write = turn_write(user_id=user_id, session_id=session_id, query=query, response=response)
    assert write is not None
    await zep.deliver_turn(
        user_id=user_id,
        session_id=session_id,
        messages=[ZepMessage.model_validate(m) for m in write.payload["messages"]],
    )
    return response.response_id


@pytest.fixture
async def mirrored(zep: ZepMemory) -> dict[tuple[str, str], str]:
    return {(u, q): await _mirror(zep, u, s, q, a) for u, s, q, a in EXCHANGES}


def test_zep_memory_implements_the_recall_protocol(zep: ZepMemory) -> None:
    recall: MemoryRecall = zep  # a type check as much as a runtime one
    assert callable(recall.recall)


async def test_recall_returns_the_users_exchanges_question_and_answer_merged(
    zep: ZepMemory, zep_server: LoopbackServer, mirrored: dict[tuple[str, str], str]
) -> None:
    found = await zep.recall(user_id="ada", query_text="SciFact dataset claims", limit=3)

    assert found, "the SciFact exchange should be recalled"
    best = found[0]
    assert best.response_id == mirrored[("ada", "What is the SciFact dataset?")]
    assert (best.user_id, best.session_id, best.origin) == ("ada", "s1", "zep")
    assert best.question == "What is the SciFact dataset?" and best.answer.startswith("SciFact is a dataset")
    assert 0 < best.relevance <= 1 and best.citations and best.sources_used == ["rag"]
    assert all(r.user_id == "ada" and "Bob" not in r.answer for r in found)
    search = zep_server.requests_to("/api/v2/sessions/search")[-1]
    assert search.json() == {
        "text": "SciFact dataset claims",
        "user_id": "ada",
        "search_scope": "messages",
        "search_type": "similarity",
    }
    assert search.query["limit"] == ["6"]


async def test_recall_in_a_session_searches_only_that_session(
    zep: ZepMemory, zep_server: LoopbackServer, mirrored: dict[tuple[str, str], str]
) -> None:
    found = await zep.recall(user_id="ada", query_text="BM25 documents SciFact", session_id="s2", limit=5)
    assert [r.session_id for r in found] == ["s2"]
    assert zep_server.requests_to("/api/v2/sessions/search")[-1].json()["session_ids"] == [zep_session_id("ada", "s2")]


async def test_hits_from_another_user_are_dropped_even_when_the_server_returns_them(
    zep: ZepMemory, fake_zep: FakeZep, mirrored: dict[tuple[str, str], str]
) -> None:
    bob_session = zep_session_id("bob", "s1")
    ada_session = zep_session_id("ada", "s1")
    fake_zep.sessions["foreign-ada"] = {"session_id": "foreign-ada", "user_id": "ada"}
    fake_zep.sessions["foreign-bob"] = {"session_id": "foreign-bob", "user_id": "bob"}

    def leaky_search(request: Request) -> Reply | None:
        if request.path != "/api/v2/sessions/search":
            return None
        everything = [
            {"message": m, "score": 0.9, "session_id": sid}
            for sid in (bob_session, ada_session)
            for m in fake_zep.messages.get(sid, [])
        ]
        written_elsewhere = {"uuid": "c0ffee00-0000-0000-0000-000000000000", "role_type": "user", "content": "x"}
        everything.append(
            {"message": {**written_elsewhere, "content": "Ada's own note"}, "score": 0.5, "session_id": "foreign-ada"}
        )
        everything.append(
            {
                "message": {
                    **written_elsewhere,
                    "uuid": "c0ffee00-0000-0000-0000-000000000001",
                    "content": "Bob's own note",
                },
                "score": 0.95,
                "session_id": "foreign-bob",
            }
        )
        return Reply.json({"results": everything})

    fake_zep.fault = leaky_search
    found = await zep.recall(user_id="ada", query_text="SciFact", limit=10)

    assert {r.user_id for r in found} == {"ada"}
    texts = " ".join(r.question + r.answer for r in found)
    assert "Bob" not in texts and "Ada's own note" in texts


async def test_ce_facts_are_recalled_with_word_overlap_relevance(zep: ZepMemory, fake_zep: FakeZep) -> None:
    fake_zep.search_returns = "facts"
    fake_zep.add_fact("ada", "Ada is evaluating retrievers on the SciFact dataset")
    fake_zep.add_fact("ada", "Ada prefers concise answers")
    fake_zep.add_fact("bob", "Bob studies SciFact too")

    found = await zep.recall(user_id="ada", query_text="SciFact dataset", limit=5, min_relevance=0.5)

    assert [r.answer for r in found] == ["Ada is evaluating retrievers on the SciFact dataset"]
    assert found[0].relevance == 1.0 and found[0].response_id.startswith("zep-fact:")


async def test_session_recall_adds_the_facts_of_the_sessions_memory(
    zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep, mirrored: dict[tuple[str, str], str]
) -> None:
    fake_zep.add_fact("ada", "Ada compares BM25 with dense retrieval")
    found = await zep.recall(user_id="ada", query_text="BM25 retrieval", session_id="s2", limit=5)

    assert any(r.answer == "Ada compares BM25 with dense retrieval" for r in found)
    memory_get = zep_server.requests_to(f"/api/v2/sessions/{zep_session_id('ada', 's2')}/memory")[-1]
    assert memory_get.method == "GET" and memory_get.query["lastn"] == ["10"]


async def test_a_session_without_messages_has_no_memory_and_that_is_not_an_error(zep: ZepMemory) -> None:
    assert await zep.recall(user_id="ada", query_text="anything at all", session_id="new") == []


@pytest.mark.parametrize("limit", [0, -1])
async def test_nothing_asked_nothing_sent(zep: ZepMemory, zep_server: LoopbackServer, limit: int) -> None:
    assert await zep.recall(user_id="ada", query_text="SciFact", limit=limit) == []
    assert await zep.recall(user_id="ada", query_text="   ") == []
    assert zep_server.requests == []


async def test_recall_failures_are_tool_errors_with_a_kind(zep: ZepMemory, fake_zep: FakeZep) -> None:
    fake_zep.mode = "down"
    with pytest.raises(ZepError) as caught:
        await zep.recall(user_id="ada", query_text="SciFact")
    assert (caught.value.kind, caught.value.status_code) == ("http_error", 503)
