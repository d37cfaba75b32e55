"""Issue 13, items 7 and 11 at the runtime level: memory that comes back is used again, and the one-line refusal
names a running server when it holds the knowledge base."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew import runtime as runtime_module
from researchcrew.contracts.request import ResearchRequest
from researchcrew.knowledge.lite_lock import LockHolder, lite_lock_holder, locked_message
from researchcrew.runtime import open_runtime
from researchcrew.settings import MemorySettings
from researchcrew.testing import FakeTool, fake_chunk
from tests.e2e.support import offline_settings


async def test_memory_down_then_back_is_used_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the memory folder should be")
    url = f"sqlite+aiosqlite:///{blocker / 'memory.db'}"
    settings = offline_settings(tmp_path / "data", memory=MemorySettings(database_url=url))
    monkeypatch.setattr(runtime_module, "MEMORY_RETRY_S", 0.0)
    tool = FakeTool("rag", chunks=[fake_chunk("rag", 1, content="Metamorphic testing relates outputs.")])
    request = ResearchRequest(question="What is metamorphic testing?", user_id="ada")

    async with open_runtime(settings, tools=[tool]) as runtime:
        down = await runtime.ask(request)
        blocker.unlink()
        blocker.mkdir()  # the folder is there now: the next question opens the store
        back = await runtime.ask(request)
        assert await runtime.flush_memory(timeout_s=60)
        exported = await runtime.export_user("ada")

    assert down.memory_status == "unavailable"
    assert any(c.startswith("This exchange was not remembered: cannot open the memory store") for c in down.caveats)
    assert back.memory_status == "scheduled"
    assert [e["response_id"] for e in exported["exchanges"]] == [back.response_id]


def test_a_running_server_is_named_with_what_to_do() -> None:
    server = LockHolder(4242, "researchcrew serve --port 8080")
    other = LockHolder(77, "researchcrew ingest notes/")
    assert server.is_server and not other.is_server
    assert "held by a running `researchcrew serve` (process 4242 (researchcrew serve --port 8080))" in locked_message(
        "/data/knowledge.db", server
    )
    assert "stop the server" in locked_message("/data/knowledge.db", server)
    assert "in use by process 77 (researchcrew ingest notes/)" in locked_message("/data/knowledge.db", other)
    assert "another process" in locked_message("/x", LockHolder(None))


def test_a_free_or_missing_lock_has_no_holder(tmp_path: Path) -> None:
    assert lite_lock_holder(tmp_path / "never-opened.db") is None
    (tmp_path / "free.db").mkdir()
    (tmp_path / "free.db" / "LOCK").write_text("")
    assert lite_lock_holder(tmp_path / "free.db") is None
