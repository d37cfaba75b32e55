"""The Memory agent: five isolated steps over the real store; partial on one failure; never in the answer's way."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts.memory import MemoryInput
from researchcrew.embedding.embedder import Embedder
from researchcrew.errors import MemoryStoreError
from researchcrew.memory.outbox import OutboxWorker, RetryPolicy
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory, zep_session_id
from researchcrew.pipeline.remember._entities import RuleBasedExtractor, normalize
from researchcrew.pipeline.remember._preferences import RequestSignals
from researchcrew.pipeline.remember.writer import MemoryWriter
from researchcrew.testing.llm import FakeLLM
from tests.conftest import PROJECT_ROOT
from tests.loopback.server import LoopbackServer
from tests.loopback.zep import FakeZep
from tests.memory_logic import exchanges
from tests.memory_logic.conftest import turn, zep_settings
from tests.memory_store.conftest import Database


@pytest.fixture
async def store(database: Database, embedder: Embedder) -> AsyncIterator[MemoryStore]:
    memory = await MemoryStore.open(database.url, embedder=embedder)
    try:
        yield memory
    finally:
        await memory.close()


def _input(user: str, session: str, pair: tuple[str, str], minutes: int = 0, **context: Any) -> MemoryInput:
    query, response = turn(user, session, pair[0], pair[1], minutes=minutes)
    return MemoryInput(query=query, final_response=response, user_id=user, session_id=session, context=context or None)


class Breaking:
    """The real store with some methods replaced (to fail, hang or slow down)."""

    def __init__(self, inner: MemoryStore, **replacements: Callable[..., Awaitable[Any]]) -> None:
        self._inner, self._replacements = inner, replacements

    def __getattr__(self, name: str) -> Any:
        return self._replacements.get(name) or getattr(self._inner, name)


async def _raise(*args: Any, **kwargs: Any) -> Any:
    raise MemoryStoreError("database is locked")


async def _hang(*args: Any, **kwargs: Any) -> Any:
    await asyncio.sleep(60)


# ---- the whole run ----------------------------------------------------------------------------------------------


async def test_a_run_stores_history_entities_relationships_and_preferences(store: MemoryStore) -> None:
    agent = MemoryWriter(store)
    memory_input = _input("ada", "s1", exchanges.RAG, request={"response_format": "concise"})

    output = await agent.run(memory_input)

    expected = RuleBasedExtractor().extract_sync(list(exchanges.RAG))
    assert output.status == "success" and output.error_message is None
    assert output.conversation_entry_added
    assert (output.entities_added, output.entities_updated) == (len(expected.mentions), 0)
    assert output.relationships_added == len(expected.relations)
    assert output.preferences_updated is False  # one request is no pattern yet
    assert output.execution_time_ms > 0
    (stored,) = await store.history(user_id="ada", session_id="s1")
    assert stored.response_id == memory_input.final_response.response_id
    assert stored.context == {"request": {"response_format": "concise"}}
    names = {e.name for e in await store.entities(user_id="ada", limit=100)}
    assert {"Retrieval-Augmented Generation", "RAG", "DPR", "2005.11401"} <= names
    links = await store.relationships(user_id="ada", entity_name="RAG")
    assert any(r.relation == "abbreviation_of" and r.target == "Retrieval-Augmented Generation" for r in links)
    assert (await store.get_preferences(user_id="ada")).format_requests == {"concise": 1}


async def test_entity_and_relationship_counts_over_four_research_exchanges(store: MemoryStore) -> None:
    agent = MemoryWriter(store)
    outputs = [await agent.run(_input("ada", "s1", pair, minutes=i)) for i, pair in enumerate(exchanges.ALL.values())]

    assert [o.status for o in outputs] == ["success"] * 4
    per_exchange = [
        {normalize(m.name) for m in RuleBasedExtractor().extract_sync(list(p)).mentions} for p in exchanges.ALL.values()
    ]
    distinct = set().union(*per_exchange)
    assert sum(o.entities_added for o in outputs) == len(distinct) == 34
    assert sum(o.entities_updated for o in outputs) == sum(len(s) for s in per_exchange) - len(distinct) == 3
    entities = {e.name: e for e in await store.entities(user_id="ada", limit=100)}
    assert len(entities) == len(distinct)
    assert {n: entities[n].mention_count for n in ("BM25", "BEIR", "DPR", "SciFact")} == {
        "BM25": 2,
        "BEIR": 2,
        "DPR": 2,
        "SciFact": 1,
    }
    # No pair of entities shares a sentence in two of these exchanges, so every relation found is new.
    found = [len(RuleBasedExtractor().extract_sync(list(p)).relations) for p in exchanges.ALL.values()]
    assert [o.relationships_added for o in outputs] == found == [15, 15, 4, 14]
    bm25_links = await store.relationships(user_id="ada", entity_name="BM25")
    # BM25 shares sentences only in the dense-retrieval answer (in the SciFact one it has a bullet to itself).
    assert {r.target for r in bm25_links} == {"BEIR", "DPR", "2104.08663", "Thakur", "Reciprocal Rank Fusion", "RRF"}


async def test_running_the_same_exchange_again_adds_and_counts_nothing_twice(store: MemoryStore) -> None:
    agent = MemoryWriter(store)
    memory_input = _input("ada", "s1", exchanges.SCIFACT, request={"response_format": "technical"})
    first = await agent.run(memory_input)
    again = await agent.run(memory_input)

    assert first.entities_added == 6 and again.status == "success"
    assert (again.entities_added, again.entities_updated, again.relationships_added) == (0, 0, 0)
    assert len(await store.history(user_id="ada", session_id="s1")) == 1
    prefs = await store.get_preferences(user_id="ada")
    assert prefs.format_requests == {"technical": 1} and prefs.exchanges_seen == 1


async def test_preferences_change_after_consistent_requests(store: MemoryStore) -> None:
    agent = MemoryWriter(store)
    ask = {"request": RequestSignals(response_format="concise", exclude_sources=("web",)).as_context()["request"]}
    first = await agent.run(_input("ada", "s1", exchanges.RAG, minutes=0, **ask))
    second = await agent.run(_input("ada", "s2", exchanges.BERT, minutes=1, **ask))
    assert (first.preferences_updated, second.preferences_updated) == (False, True)
    prefs = (await store.get_preferences(user_id="ada")).preferences
    assert prefs.response_format == "concise" and prefs.excluded_sources == ["web"]


# ---- failures stay inside their step ----------------------------------------------------------------------------


async def test_one_failing_step_makes_the_run_partial_and_the_others_still_happen(store: MemoryStore) -> None:
    agent = MemoryWriter(Breaking(store, record_entities=_raise))  # type: ignore[arg-type]
    output = await agent.run(_input("ada", "s1", exchanges.DENSE, request={"response_format": "concise"}))

    assert output.status == "partial"
    assert output.error_message == "entities: database is locked" or (
        output.error_message is not None and output.error_message.startswith("entities: memory store")
    )
    assert output.conversation_entry_added and output.entities_added == 0
    assert output.relationships_added == 14  # relations name their entities; the store creates them
    assert len(await store.history(user_id="ada", session_id="s1")) == 1
    assert (await store.get_preferences(user_id="ada")).exchanges_seen == 1


async def test_a_bug_in_the_extractor_is_reported_not_raised(store: MemoryStore) -> None:
    class Broken:
        async def extract(self, texts: Any) -> Any:
            raise RuntimeError("regex exploded")

    output = await MemoryWriter(store, extractor=Broken()).run(_input("ada", "s1", exchanges.RAG))

    assert output.status == "partial" and output.conversation_entry_added
    assert output.error_message is not None
    assert "entities: internal error: RuntimeError: regex exploded" in output.error_message
    assert "relationships: skipped" in output.error_message


async def test_a_hung_step_is_cut_off_at_the_step_timeout(store: MemoryStore) -> None:
    # The budget applies to every step: it must leave the healthy ones (an embedding, a few writes) room on a loaded
    # machine, where 0.3 s and then 2 s (load average 20, the relationships step) were too little for them. The hung
    # step sleeps 60 s; returning well before is the cut.
    agent = MemoryWriter(Breaking(store, update_preferences=_hang), step_timeout_s=6)  # type: ignore[arg-type]
    started = time.monotonic()
    output = await agent.run(_input("ada", "s1", exchanges.BERT))
    assert time.monotonic() - started < 40
    assert output.status == "partial" and output.error_message == "preferences: did not finish within 6 s"
    assert output.entities_added == 12


async def test_when_everything_fails_the_status_is_failed_and_nothing_raises(store: MemoryStore) -> None:
    broken = Breaking(
        store,
        add_exchange=_raise,
        record_entities=_raise,
        record_relationships=_raise,
        history=_raise,
        update_preferences=_raise,
        update_session_summary=_raise,
    )
    output = await MemoryWriter(broken).run(_input("ada", "s1", exchanges.RAG))  # type: ignore[arg-type]
    assert output.status == "failed" and not output.conversation_entry_added
    assert not output.session_summary_updated
    assert output.error_message is not None and output.error_message.count("database is locked") == 5


# ---- Zep through the outbox and an LLM --------------------------------------------------------------------------


async def test_zep_mirror_writes_are_queued_then_delivered_with_role_types(store: MemoryStore) -> None:
    fake = FakeZep()
    with LoopbackServer(fake.route) as server:
        zep = ZepMemory(zep_settings(server.url))
        worker = OutboxWorker(store, zep, policy=RetryPolicy(base_delay_s=0.05, max_delay_s=0.2))
        try:
            fake.mode = "down"  # Zep being down changes nothing for the memory run
            output = await MemoryWriter(store, zep_outbox=worker).run(_input("ada", "s1", exchanges.RAG))
            assert output.status == "success"
            assert (await store.outbox_counts())["pending"] == 1 and server.requests == []
            fake.mode = "up"
            report = await worker.drain(10)
        finally:
            await zep.aclose()
    assert report.delivered == 1
    stored = fake.messages[zep_session_id("ada", "s1")]
    assert [(m["role_type"], m["content"]) for m in stored] == [
        ("user", exchanges.RAG[0]),
        ("assistant", exchanges.RAG[1]),
    ]


async def test_with_an_llm_typed_relations_are_recorded(store: MemoryStore) -> None:
    llm = FakeLLM(
        [
            '{"entities": [{"name": "VeriSci", "type": "model"}, {"name": "SciFact", "type": "dataset"}], '
            '"relations": [{"source": "VeriSci", "target": "SciFact", "relation": "evaluated_on"}]}'
        ]
    )
    output = await MemoryWriter(store, llm=llm).run(_input("ada", "s1", exchanges.SCIFACT))

    assert output.status == "success" and len(llm.calls) == 1
    links = await store.relationships(user_id="ada", entity_name="VeriSci")
    assert any(r.relation == "evaluated_on" and r.target == "SciFact" and not r.inverse for r in links)
    assert {e.name: e.type for e in await store.entities(user_id="ada", limit=50)}["VeriSci"] == "model"


# ---- in the background ------------------------------------------------------------------------------------------


async def test_remembering_in_the_background_returns_at_once_and_finishes_later(store: MemoryStore) -> None:
    async def slow_add_exchange(**kwargs: Any) -> Any:
        await asyncio.sleep(0.5)
        return await store.add_exchange(**kwargs)

    agent = MemoryWriter(Breaking(store, add_exchange=slow_add_exchange))  # type: ignore[arg-type]
    started = time.perf_counter()
    task = agent.remember_in_background(_input("ada", "s1", exchanges.BERT))
    returned_after = time.perf_counter() - started

    assert returned_after < 0.4  # the caller has its answer back before the 0.5 s write is done (margin for load)
    assert not task.done() and agent.pending == 1
    assert await agent.wait_idle(10)
    output = task.result()
    assert output.status == "success" and output.execution_time_ms >= 500
    assert agent.pending == 0


async def test_closing_flushes_then_cancels_what_hangs(store: MemoryStore) -> None:
    agent = MemoryWriter(Breaking(store, add_exchange=_hang), step_timeout_s=120)  # type: ignore[arg-type]
    task = agent.remember_in_background(_input("ada", "s1", exchanges.RAG))
    assert not await agent.wait_idle(0.1)

    await agent.aclose(timeout_s=0.2)

    assert task.cancelled() and agent.pending == 0


async def test_a_burst_of_answers_runs_a_few_at_a_time_so_each_keeps_its_step_budget(store: MemoryStore) -> None:
    running, peak = 0, 0

    async def tracked_add_exchange(**kwargs: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.05)
            return await store.add_exchange(**kwargs)
        finally:
            running -= 1

    agent = MemoryWriter(Breaking(store, add_exchange=tracked_add_exchange), max_background=2)  # type: ignore[arg-type]
    tasks = [agent.remember_in_background(_input("ada", "s1", exchanges.RAG, minutes=i)) for i in range(6)]
    assert await agent.wait_idle(30)
    assert peak == 2 and all(t.result().status == "success" for t in tasks)


_IMPORT_PROBE = """
import asyncio, json, sys
from researchcrew.pipeline.remember.writer import MemoryWriter
from researchcrew.memory.store import MemoryStore

async def main():
    store = await MemoryStore.open(sys.argv[1])
    agent = MemoryWriter(store)
    await agent.aclose()
    await store.close()
    return agent.zep_outbox

assert asyncio.run(main()) is None
if sys.argv[2] == "zep":
    import researchcrew.memory.outbox  # what the Zep backend builds
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"zep_python", "aiohttp", "firecrawl"})))
"""


def _heavy_modules_loaded(tmp_path: Path, backend: str) -> list[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
    child = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, url, backend],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    loaded: list[str] = json.loads(child.stdout)
    return loaded


def test_a_memory_agent_on_the_built_in_store_does_not_load_the_zep_client(tmp_path: Path) -> None:
    """zep-python (and aiohttp under it) cost start-up time; only the Zep backend needs them."""
    assert _heavy_modules_loaded(tmp_path, "local") == []
    assert "zep_python" in _heavy_modules_loaded(tmp_path, "zep")  # the probe sees them when they are loaded
