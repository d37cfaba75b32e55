"""The SDK surface end to end: progress events then the answer, the sync entry point, option errors, memory in
the background, and crewAI kept quiet (no panels, no LanceDB memory, no telemetry, nothing sent off the machine)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import FinalResponse, ProgressEvent
from researchcrew.embedding.embedder import Embedder
from researchcrew.errors import ConfigurationError, ResearchCrewError
from researchcrew.memory.records import ExchangeRecord
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import LLMSettings
from tests.conftest import _is_local
from tests.e2e.support import SpyTool, offline_settings
from tests.e2e.test_llm_answers import CHUNKS, QUESTION, draft
from tests.loopback.openai import openai_server

ANSWER_STAGES = [
    "guard",
    "rewrite",
    "retrieve",
    "evaluate",
    "confidence",
    "clarify",  # considered, not asked: the evidence answers the question
    "synthesize",
    "validate",
    "remember",
    "respond",
]


async def test_stream_yields_progress_per_stage_then_the_answer(tmp_path: Path) -> None:
    async with ResearchAssistant(offline_settings(tmp_path), tools=[SpyTool(CHUNKS)], remember=False) as assistant:
        items = [item async for item in assistant.stream(QUESTION)]

    *events, answer = items
    assert isinstance(answer, FinalResponse) and answer.answer_kind == "extractive"
    assert all(isinstance(event, ProgressEvent) for event in events)
    assert [e.stage for e in events if e.status == "started"] == ANSWER_STAGES
    assert [e.stage for e in events if e.status == "finished"] == ANSWER_STAGES
    stages = [e for e in events if e.kind == "stage"]
    for stage in ANSWER_STAGES:  # each stage starts, then finishes, before the next one starts
        started, finished = (e for e in stages if e.stage == stage)
        assert (started.status, finished.status) == ("started", "finished")
        assert stages.index(finished) == stages.index(started) + 1
        assert started.duration_ms is None and finished.duration_ms is not None and finished.duration_ms >= 0
        inside = events[events.index(started) + 1 : events.index(finished)]
        assert all(e.stage == stage and e.kind != "stage" for e in inside)  # a source or text event of this stage
    assert [e.source.source_type for e in events if e.source is not None] == ["rag"]  # the source, as it answered
    assert "".join(e.text or "" for e in events if e.kind == "text") == answer.answer  # the text, section by section
    assert len({event.run_id for event in events}) == 1
    elapsed = [event.elapsed_ms for event in events]
    assert elapsed == sorted(elapsed)
    finished = {e.stage: e.detail for e in events if e.status == "finished"}
    assert finished["retrieve"]["chunks"] == 3 and finished["retrieve"]["sources_used"] == ["rag"]
    assert finished["evaluate"]["kept"] == 3 and finished["evaluate"]["contradictions"] == 0
    assert finished["confidence"]["level"] == "high" and finished["confidence"]["decision"] == "sufficient"
    assert finished["validate"]["valid"] == answer.citation_stats.valid > 0
    assert finished["respond"]["answer_kind"] == "extractive"
    assert finished["remember"]["scheduled"] is False  # remember=False


def test_ask_sync_works_twice_in_a_row_and_close_flushes_memory(tmp_path: Path, embedder: Embedder) -> None:
    assistant = ResearchAssistant(offline_settings(tmp_path), tools=[SpyTool(CHUNKS)])
    first = assistant.ask_sync(QUESTION, user_id="ada", session_id="s1")
    second = assistant.ask_sync(
        "Which software has metamorphic testing been applied to?",
        user_id="ada",
        session_id="s1",
        response_format="concise",
    )
    assistant.close()

    assert first.answer_kind == second.answer_kind == "extractive"
    assert first.response_id != second.response_id

    async def stored() -> list[ExchangeRecord]:
        store = await MemoryStore.open(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}", embedder=embedder)
        try:
            return await store.history(user_id="ada", session_id="s1")
        finally:
            await store.close()

    assert [record.response_id for record in asyncio.run(stored())] == [first.response_id, second.response_id]


async def test_ask_sync_inside_a_running_loop_says_to_await_ask(tmp_path: Path) -> None:
    assistant = ResearchAssistant(offline_settings(tmp_path), tools=[SpyTool(CHUNKS)], remember=False)
    with pytest.raises(ResearchCrewError, match="await ask"):
        assistant.ask_sync(QUESTION)


async def test_unknown_or_invalid_ask_options_fail_fast_with_the_valid_names(tmp_path: Path) -> None:
    tool = SpyTool(CHUNKS)
    async with ResearchAssistant(offline_settings(tmp_path), tools=[tool], remember=False) as assistant:
        with pytest.raises(ConfigurationError, match=r"unknown option\(s\) \['colour'\]") as unknown:
            await assistant.ask(QUESTION, colour="blue")
        with pytest.raises(ConfigurationError, match="response_format"):
            await assistant.ask(QUESTION, response_format="poem")
    assert "response_format" in str(unknown.value) and "deadline_s" in str(unknown.value)
    assert tool.queries == []  # nothing was searched for a request that was not valid


class GatedStore(MemoryStore):
    """The real store, whose history write waits for a gate: shows that the answer does not wait for memory."""

    gate: asyncio.Event

    async def add_exchange(self, **kwargs: Any) -> ExchangeRecord:  # type: ignore[override]
        await self.gate.wait()
        return await super().add_exchange(**kwargs)


async def test_memory_is_written_in_the_background_after_the_answer(tmp_path: Path, embedder: Embedder) -> None:
    store = await GatedStore.open(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}", embedder=embedder)
    store.gate = asyncio.Event()
    try:
        async with ResearchAssistant(
            offline_settings(tmp_path), tools=[SpyTool(CHUNKS)], memory_store=store
        ) as assistant:
            events: list[ProgressEvent] = []
            async with asyncio.timeout(10):  # an answer that waited for memory would never arrive: fail, not hang
                async for item in assistant.stream(QUESTION, user_id="ada", session_id="s1"):
                    if isinstance(item, FinalResponse):
                        response = item
                    else:
                        events.append(item)
            # The answer is here while its memory write is still held at the gate.
            assert [e.detail.get("scheduled") for e in events if e.stage == "remember" and e.status == "finished"] == [
                True
            ]
            assert not await assistant.flush_memory(timeout_s=0.2)
            assert await store.history(user_id="ada", session_id="s1") == []
            store.gate.set()
            assert await assistant.flush_memory(timeout_s=10)
            (record,) = await store.history(user_id="ada", session_id="s1")
    finally:
        await store.close()
    assert record.response_id == response.response_id
    assert record.question == QUESTION and record.answer == response.answer
    assert record.answer_kind == "extractive" and record.sources_used == ["rag"]


async def test_crewai_prints_nothing_builds_no_memory_and_sends_no_telemetry(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from crewai.memory.unified_memory import Memory
    from crewai.telemetry import Telemetry

    for name in ("CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED", "CREWAI_TRACING_ENABLED"):
        monkeypatch.delenv(name, raising=False)  # the assistant must switch them off itself
    lancedb_before = "lancedb" in sys.modules
    memories: list[object] = []
    original_init = Memory.__init__

    def record_memory(self: Memory, *args: Any, **kwargs: Any) -> None:
        memories.append(self)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(Memory, "__init__", record_memory)
    attempted: list[Any] = []
    connect = socket.socket.connect

    def audited_connect(self: socket.socket, address: Any) -> None:
        attempted.append(address)
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", audited_connect)
    capfd.readouterr()

    with openai_server([draft(("Metamorphic testing checks relations between outputs.", [1]))]) as (server, _):
        llm = LLMSettings(model="openai/test-model", base_url=f"{server.url}/v1", api_key="sk-test", timeout_s=10)
        async with ResearchAssistant(
            offline_settings(tmp_path, llm=llm), tools=[SpyTool(CHUNKS)], remember=False
        ) as assistant:
            response = await assistant.ask(QUESTION)

    out, err = capfd.readouterr()
    assert response.answer_kind == "generated"  # crewAI's Agent, Task and Crew really ran
    assert out == ""
    assert not any(box in err for box in "╭╰│"), err
    assert memories == []
    assert lancedb_before or "lancedb" not in sys.modules
    assert os.environ["CREWAI_DISABLE_TELEMETRY"] == "true" and os.environ["OTEL_SDK_DISABLED"] == "true"
    assert os.environ["CREWAI_TRACING_ENABLED"] == "false"
    assert Telemetry._is_telemetry_disabled()
    assert attempted and all(_is_local(address) for address in attempted)


async def test_an_unreachable_memory_store_degrades_like_an_unreachable_source(tmp_path: Path, demo_kb: Any) -> None:
    """Issue 13, item 11: memory down must not sink the answer. It comes back, memory is reported as a failed source
    (unreachable, with the reason), and the answer says the exchange was not remembered. With --exclude memory the
    answer is the same, minus the memory report."""
    from researchcrew.settings import MemorySettings
    from tests.loopback.server import closed_port

    unreachable = f"postgresql+asyncpg://researchcrew:s3cret@127.0.0.1:{closed_port()}/memory"
    settings = offline_settings(tmp_path, memory=MemorySettings(database_url=unreachable))
    async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
        response = await assistant.ask("What is metamorphic testing?")
        excluded = await assistant.ask("What is metamorphic testing?", exclude_sources=["memory"])

    assert response.answer_kind == "extractive" and response.citations
    memory = next(r for r in response.source_reports if r.source_type == "memory")
    assert memory.status == "failed" and memory.failure is not None and memory.failure.kind == "unreachable"
    assert "cannot open the memory store" in memory.failure.message
    assert "s3cret" not in response.model_dump_json()  # the password is masked everywhere
    assert response.memory_status == "unavailable"
    assert any(caveat.startswith("This exchange was not remembered:") for caveat in response.caveats)
    assert response.retrieval_status == "partial"
    assert excluded.answer_kind == "extractive" and excluded.memory_status == "unavailable"
    assert next(r for r in excluded.source_reports if r.source_type == "memory").status == "skipped"
