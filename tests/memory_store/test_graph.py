"""Entity graph and preferences: upserts that update instead of duplicating, on both backends."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from researchcrew.contracts.query import UserPreferences
from researchcrew.db.models import EntityRow, MentionRow, RelationshipRow
from researchcrew.memory.records import EntityMention, EntityRelation, StoredPreferences
from researchcrew.memory.store import MemoryStore


async def _count(store: MemoryStore, table: type) -> int:
    async with store._read() as session:
        return int((await session.execute(select(func.count()).select_from(table))).scalar_one())


async def test_repeated_mentions_update_the_entity_and_every_mention_is_recorded(store: MemoryStore) -> None:
    first = [
        EntityMention(name="SciFact", type="dataset", confidence=0.6, context="SciFact is a dataset."),
        EntityMention(name="BERT", type="other", confidence=0.5),
        EntityMention(name="scifact", type="dataset", confidence=0.4),  # same entity twice in one answer
    ]
    assert await store.record_entities(user_id="ada", response_id="r1", mentions=first) == (2, 0)
    assert await store.record_entities(user_id="ada", response_id="r1", mentions=first) == (0, 0)  # a retry
    second = [
        EntityMention(name="  SciFact ", type="dataset", confidence=0.6),
        EntityMention(name="Bert", type="model"),
    ]
    assert await store.record_entities(user_id="ada", response_id="r2", mentions=second) == (0, 2)
    assert await store.record_entities(user_id="bob", response_id="r3", mentions=second) == (2, 0)

    entities = {e.name: e for e in await store.entities(user_id="ada")}
    assert set(entities) == {"SciFact", "BERT"}
    assert entities["SciFact"].mention_count == 2
    assert entities["SciFact"].confidence == pytest.approx(1 - 0.4 * 0.4)  # noisy-OR of 0.6 and 0.6
    assert entities["SciFact"].last_seen >= entities["SciFact"].first_seen
    assert entities["BERT"].type == "model"  # a specific type replaces the generic one
    assert await _count(store, EntityRow) == 4 and await _count(store, MentionRow) == 6
    assert [e.name for e in await store.entities(user_id="bob")] == ["SciFact", "Bert"]


async def test_concurrent_memory_runs_never_duplicate_an_entity(store: MemoryStore) -> None:
    mention = [EntityMention(name="AlphaFold2", type="model", confidence=0.5)]
    results = await asyncio.gather(
        *(store.record_entities(user_id="ada", response_id=f"r{n}", mentions=mention) for n in range(5))
    )
    assert sorted(results) == [(0, 1)] * 4 + [(1, 0)]
    [entity] = await store.entities(user_id="ada")
    assert entity.mention_count == 5


async def test_entities_related_to_a_query(store: MemoryStore) -> None:
    mentions = [
        EntityMention(name="SciFact", type="dataset"),
        EntityMention(name="FEVER", type="dataset"),
        EntityMention(name="protein structure prediction", type="method"),
    ]
    await store.record_entities(user_id="ada", response_id="r1", mentions=mentions)
    await store.record_entities(user_id="ada", response_id="r2", mentions=mentions[1:2])

    assert [e.name for e in await store.entities(user_id="ada", query_text="Compare SciFact and FEVER")] == [
        "FEVER",
        "SciFact",  # both named: most mentioned first
    ]
    assert [e.name for e in await store.entities(user_id="ada", query_text="structure of proteins?")] == [
        "protein structure prediction"  # shares a word
    ]
    assert await store.entities(user_id="ada", query_text="weather in Paris") == []
    assert [e.name for e in await store.entities(user_id="ada", limit=1)] == ["FEVER"]


async def test_relationships_are_bidirectional_and_repeats_update(store: MemoryStore) -> None:
    await store.record_entities(user_id="ada", response_id="r1", mentions=[EntityMention(name="SciFact")])
    evaluated = EntityRelation(source="VeriSci", target="SciFact", relation="evaluated_on", confidence=0.5)
    cooccur = EntityRelation(source="SciFact", target="FEVER", symmetric=True, confidence=0.4)

    assert await store.record_relationships(user_id="ada", relations=[evaluated, cooccur], response_id="r1") == 2
    assert await store.record_relationships(user_id="ada", relations=[evaluated], response_id="r1") == 0  # retry
    # Another answer: the same links, the undirected one written the other way round.
    flipped = EntityRelation(source="FEVER", target="SciFact", symmetric=True, confidence=0.4)
    assert await store.record_relationships(user_id="ada", relations=[evaluated, flipped], response_id="r2") == 0
    # Self-relations are not relations.
    assert await store.record_relationships(user_id="ada", relations=[EntityRelation(source="X", target="x")]) == 0

    recorded = {(r.source, r.target, r.relation): r for r in await store.relationships(user_id="ada")}
    assert set(recorded) == {("VeriSci", "SciFact", "evaluated_on"), ("FEVER", "SciFact", "co_occurs_with")}
    assert recorded[("VeriSci", "SciFact", "evaluated_on")].count == 2
    assert recorded[("VeriSci", "SciFact", "evaluated_on")].confidence == pytest.approx(0.75)
    links = await store.relationships(user_id="ada", entity_name="scifact")
    from_scifact = {(r.target, r.relation, r.inverse) for r in links}
    assert from_scifact == {("VeriSci", "evaluated_on", True), ("FEVER", "co_occurs_with", True)}
    assert {(r.target, r.inverse) for r in await store.relationships(user_id="ada", entity_name="VeriSci")} == {
        ("SciFact", False)
    }
    assert all(r.count == 2 for r in await store.relationships(user_id="ada", entity_name="SciFact"))
    assert await _count(store, RelationshipRow) == 4  # two relations, each stored in both directions
    # Entities named only by relations exist now (no mentions yet); SciFact was not duplicated.
    assert {e.name: e.mention_count for e in await store.entities(user_id="ada")} == {
        "SciFact": 1,
        "VeriSci": 0,
        "FEVER": 0,
    }
    assert await store.relationships(user_id="bob") == []


async def test_a_directed_relation_and_its_reverse_are_different_facts(store: MemoryStore) -> None:
    cites = EntityRelation(source="Paper A", target="Paper B", relation="cites")
    cited_back = EntityRelation(source="Paper B", target="Paper A", relation="cites")
    assert await store.record_relationships(user_id="ada", relations=[cites]) == 1
    assert await store.record_relationships(user_id="ada", relations=[cited_back]) == 1
    assert {(r.source, r.target) for r in await store.relationships(user_id="ada")} == {
        ("Paper A", "Paper B"),
        ("Paper B", "Paper A"),
    }


async def test_preferences_save_reports_changes(store: MemoryStore) -> None:
    assert await store.get_preferences(user_id="ada") == StoredPreferences()
    assert await store.save_preferences(user_id="ada", preferences=StoredPreferences()) is False  # the defaults

    concise = StoredPreferences(
        preferences=UserPreferences(response_format="concise", excluded_sources=["web"]),
        format_requests={"concise": 3},
        source_exclusions={"web": 2},
        exchanges_seen=5,
    )
    assert await store.save_preferences(user_id="ada", preferences=concise) is True
    stored = await store.get_preferences(user_id="ada")
    assert stored.same_as(concise) and stored.updated_at is not None
    assert await store.save_preferences(user_id="ada", preferences=stored) is False
    more = stored.model_copy(update={"format_requests": {"concise": 4}})
    assert await store.save_preferences(user_id="ada", preferences=more) is True
    assert (await store.get_preferences(user_id="ada")).format_requests == {"concise": 4}
    assert await store.get_preferences(user_id="bob") == StoredPreferences()


async def test_update_preferences_accumulates_atomically(store: MemoryStore) -> None:
    def ask_for_arxiv(current: StoredPreferences) -> StoredPreferences:
        current.source_requests["arxiv"] = current.source_requests.get("arxiv", 0) + 1
        current.exchanges_seen += 1
        return current

    results = await asyncio.gather(*(store.update_preferences(user_id="ada", update=ask_for_arxiv) for _ in range(8)))

    assert all(changed for _, changed in results)
    stored = await store.get_preferences(user_id="ada")
    assert stored.source_requests == {"arxiv": 8} and stored.exchanges_seen == 8
    unchanged, changed = await store.update_preferences(user_id="ada", update=lambda p: p)
    assert changed is False and unchanged.same_as(stored)
