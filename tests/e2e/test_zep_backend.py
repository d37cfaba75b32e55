"""With ``memory.backend = "zep"`` the assistant mirrors each exchange to Zep through the persisted outbox (the
answer never waits for Zep) and recalls through Zep — the real zep-python client against the loopback Zep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.errors import ConfigurationError
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import MemorySettings, MilvusSettings, Settings, ZepSettings
from tests.e2e.support import offline_settings
from tests.loopback.server import LoopbackServer
from tests.loopback.zep import FakeZep

pytestmark = pytest.mark.slow  # loads the embedding model and starts Milvus Lite (once per session)


async def eventually(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll without blocking the event loop (the outbox worker delivers on this loop)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def zep_settings(kb_settings: Settings, data_dir: Path, zep_url: str) -> Settings:
    return offline_settings(
        data_dir,
        milvus=MilvusSettings(uri=kb_settings.milvus_uri),
        memory=MemorySettings(backend="zep"),
        zep=ZepSettings(api_url=zep_url, api_key="test-key", timeout_s=30),  # loopback: only a hang may stop it
    )


async def test_exchanges_are_mirrored_to_zep_and_recalled_from_it(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    zep = FakeZep(api_key="test-key")
    with LoopbackServer(zep.route) as server:
        settings = zep_settings(demo_kb_settings, tmp_path, server.url)
        async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
            first = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
            assert await assistant.flush_memory(timeout_s=60)
            assert await eventually(lambda: len(zep.all_messages()) >= 2, timeout_s=10)
            # A question about the conversation: without an LLM, memory is quoted for those (synthesize/extractive.py).
            second = await assistant.ask("What did I ask about metamorphic testing?", user_id="ada", session_id="s1")

    roles = [message["role_type"] for message in zep.all_messages()[:2]]
    assert roles == ["user", "assistant"]
    assert zep.all_messages()[0]["content"] == "What is metamorphic testing?"
    assert not zep.duplicates()
    assert all(request.headers["authorization"] == "Api-Key test-key" for request in server.requests)
    memory = next(report for report in second.source_reports if report.source_type == "memory")
    assert memory.tool_name == "memory_recall" and memory.status == "success"
    recalled = {citation.source_id for citation in second.citations if citation.source_type == "memory"}
    assert first.response_id in recalled


async def test_zep_down_loses_nothing_and_does_not_delay_the_answer(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    zep = FakeZep(api_key="test-key", mode="down")
    with LoopbackServer(zep.route) as server:
        settings = zep_settings(demo_kb_settings, tmp_path, server.url)
        async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
            response = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
            assert response.answer_kind == "extractive"
            assert await assistant.flush_memory(timeout_s=60)
            assert zep.all_messages() == []
            zep.mode = "up"  # Zep comes back: the outbox delivers what waited
            assert await eventually(lambda: len(zep.all_messages()) == 2, timeout_s=15)
    assert not zep.duplicates()


async def test_zep_backend_without_url_is_a_configuration_error(tmp_path: Path) -> None:
    settings = offline_settings(tmp_path, memory=MemorySettings(backend="zep"))
    with pytest.raises(ConfigurationError, match="ZEP_API_URL"):
        async with ResearchAssistant(settings, tools=[]):
            pass
