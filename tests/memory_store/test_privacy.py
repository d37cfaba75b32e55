"""Export and forget: everything of one user, nothing of anyone else."""

from __future__ import annotations

import json

from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.follow_up import TokenCount
from researchcrew.memory.records import (
    EntityMention,
    EntityRelation,
    OutboxWrite,
    SessionSummary,
    SessionTurn,
    StoredPreferences,
)
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.usage_ledger import UsageLedger
from tests.memory_store.conftest import add


async def _remember(store: MemoryStore, user_id: str) -> str:
    """One user's full memory: an exchange, its session's summary, entities, a relation, preferences and a queued
    Zep write."""
    question = f"What is SciFact, asks {user_id}?"
    response_id = await add(store, user_id, "s1", question, "A claim verification dataset.")
    mentions = [
        EntityMention(name="SciFact", type="dataset"),
        EntityMention(name=f"{user_id} lab", type="organization"),
    ]
    await store.record_entities(user_id=user_id, response_id=response_id, mentions=mentions)
    await store.record_relationships(
        user_id=user_id, relations=[EntityRelation(source="SciFact", target=f"{user_id} lab")], response_id=response_id
    )
    await store.save_preferences(user_id=user_id, preferences=StoredPreferences(format_requests={"concise": 1}))
    turn = SessionTurn(question=question, standalone=question, subjects=["SciFact"])
    await store.update_session_summary(
        user_id=user_id,
        session_id="s1",
        update=lambda _: SessionSummary(user_id=user_id, session_id="s1", turns=1, recent=[turn], topics=["SciFact"]),
    )
    await store.enqueue_outbox(
        user_id=user_id, kind="zep.add_messages", payload={"session_id": "s1"}, idempotency_key=f"{response_id}:zep"
    )
    await UsageLedger(store.engine).record(
        user_id=user_id,
        kind="answer",
        response_id=response_id,
        tokens=TokenCount.of(100, 20),
        cost=AnswerCost(model="gpt-4o-mini", usd=0.0001, stages={"synthesis": 0.0001}),
    )
    return response_id


async def test_export_holds_everything_of_the_user_and_nothing_of_others(store: MemoryStore) -> None:
    ada_response = await _remember(store, "ada")
    await _remember(store, "bob")

    exported = await store.export_user(user_id="ada")

    assert json.loads(json.dumps(exported)) == exported  # JSON as it is
    assert exported["user_id"] == "ada"
    [exchange] = exported["exchanges"]
    assert exchange["response_id"] == ada_response and exchange["question"] == "What is SciFact, asks ada?"
    assert "created" not in exchange and "embedding" not in exchange
    assert {e["name"] for e in exported["entities"]} == {"SciFact", "ada lab"}
    assert {m["response_id"] for m in exported["entity_mentions"]} == {ada_response}
    assert [(r["source"], r["target"]) for r in exported["relationships"]] == [("SciFact", "ada lab")]
    assert exported["preferences"]["format_requests"] == {"concise": 1}
    [summary] = exported["session_summaries"]
    assert (summary["session_id"], summary["turns"], summary["topics"]) == ("s1", 1, ["SciFact"])
    assert [i["idempotency_key"] for i in exported["outbox"]] == [f"{ada_response}:zep"]
    assert [(u["response_id"], u["cost_usd"]) for u in exported["usage"]] == [(ada_response, 0.0001)]
    assert "bob" not in json.dumps(exported)

    nobody = await store.export_user(user_id="carol")
    assert nobody["exchanges"] == nobody["entities"] == nobody["outbox"] == [] and nobody["preferences"] is None


async def test_forget_removes_everything_of_the_user_and_nothing_of_others(store: MemoryStore) -> None:
    await _remember(store, "ada")
    await _remember(store, "bob")
    bob_before = await store.export_user(user_id="bob")
    assert await store.recall(user_id="ada", query_text="SciFact")  # ada's vectors are cached now

    counts = await store.forget_user(
        user_id="ada",
        then_enqueue=[OutboxWrite(kind="zep.delete_user", payload={"user_id": "ada"}, idempotency_key="forget:ada")],
    )

    assert counts == {
        "entity_mentions": 2,
        "relationships": 2,
        "entities": 2,
        "messages": 2,
        "exchanges": 1,
        "preferences": 1,
        "session_summaries": 1,
        "outbox": 1,
        "jobs": 0,
        "deep_runs": 0,
        "sessions": 0,  # the chat service's session rows (none here; tests/service covers them)
        "usage": 1,  # what ada's answer spent
        "answer_tables": 0,  # structured answers' result sets (tests/tables covers them)
    }
    after = await store.export_user(user_id="ada")
    assert after["exchanges"] == after["entities"] == after["relationships"] == after["entity_mentions"] == []
    assert after["preferences"] is None and after["session_summaries"] == [] and after["usage"] == []
    assert await store.session_summary(user_id="ada", session_id="s1") is None
    assert [i["kind"] for i in after["outbox"]] == ["zep.delete_user"]  # only the follow-up write
    assert await store.recall(user_id="ada", query_text="SciFact") == []
    assert await store.history(user_id="ada", session_id=None) == []

    bob_after = await store.export_user(user_id="bob")
    assert {k: v for k, v in bob_after.items() if k != "exported_at"} == {
        k: v for k, v in bob_before.items() if k != "exported_at"
    }
    assert [r.user_id for r in await store.recall(user_id="bob", query_text="SciFact")] == ["bob"]
    again = await store.forget_user(user_id="ada")  # only the queued Zep delete was left
    assert again == dict.fromkeys(counts, 0) | {"outbox": 1}
