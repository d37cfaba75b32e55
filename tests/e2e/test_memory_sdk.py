"""The SDK equivalents of `researchcrew memory export|forget`: per user, never crossing users, and with the Zep
backend the deletion reaches Zep through the outbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import MemorySettings, MilvusSettings, Settings, ZepSettings
from tests.e2e.support import offline_settings
from tests.loopback.server import LoopbackServer
from tests.loopback.zep import FakeZep

pytestmark = pytest.mark.slow  # loads the embedding model and starts Milvus Lite (once per session)


async def test_export_and_forget_are_scoped_to_one_user(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    settings = offline_settings(tmp_path, milvus=MilvusSettings(uri=demo_kb_settings.milvus_uri))
    async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
        ada = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
        bob = await assistant.ask("How are flaky tests detected?", user_id="bob", session_id="s2")
        assert await assistant.flush_memory(timeout_s=60)

        exported = await assistant.export_memory("ada")
        assert [e["response_id"] for e in exported["exchanges"]] == [ada.response_id]
        assert bob.response_id not in str(exported)

        counts = await assistant.forget_memory("ada")
        assert sum(counts.values()) >= 1
        assert (await assistant.export_memory("ada"))["exchanges"] == []
        kept = await assistant.export_memory("bob")
        assert [e["response_id"] for e in kept["exchanges"]] == [bob.response_id]


async def test_forget_with_the_zep_backend_deletes_the_user_in_zep(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    zep = FakeZep(api_key="test-key")
    with LoopbackServer(zep.route) as server:
        settings = offline_settings(
            tmp_path,
            milvus=MilvusSettings(uri=demo_kb_settings.milvus_uri),
            memory=MemorySettings(backend="zep"),
            zep=ZepSettings(api_url=server.url, api_key="test-key", timeout_s=30),  # loopback: only a hang may stop it
        )
        async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
            await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
            assert await assistant.flush_memory(timeout_s=60)
            for _ in range(200):  # the mirror write reaches Zep in the background
                if zep.users:
                    break
                await asyncio.sleep(0.05)
            assert "ada" in zep.users
            await assistant.forget_memory("ada")
            for _ in range(200):
                if "ada" not in zep.users:
                    break
                await asyncio.sleep(0.05)
    assert "ada" not in zep.users
    assert any(r.method == "DELETE" and r.path.endswith("/users/ada") for r in server.requests)
