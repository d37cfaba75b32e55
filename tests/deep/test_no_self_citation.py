"""A deep-research run after an earlier answer in the session (issue 20, item 2): the earlier answer is recalled
but never cited, never one side of a disagreement ("Across sub-questions: sources disagree" built from the
assistant's previous extractive answer was the measured failure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.embedding.embedder import get_embedder
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import EmbeddingSettings, Settings
from researchcrew.tools.memory_recall import MemoryTool
from tests.deep.corpus import PASSAGES, CorpusTool
from tests.e2e.support import MODEL_CACHE_DIR


@pytest.mark.usefixtures("embedder_available")
async def test_a_deep_run_neither_cites_nor_compares_an_earlier_answer(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedding=EmbeddingSettings(cache_dir=MODEL_CACHE_DIR))
    store = await MemoryStore.open(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}", embedder=get_embedder(settings))
    corpus = CorpusTool()
    try:
        tools = [corpus, MemoryTool(store, settings.memory)]
        async with ResearchAssistant(settings, tools=tools, memory_store=store) as assistant:
            first = await assistant.ask("When did Dorfman propose group testing?", user_id="ada", session_id="s")
            assert "1943" in first.answer
            assert await assistant.flush_memory(timeout_s=60)
            # The source has since been corrected: an earlier answer must not be set against it.
            corpus.passages = {
                **PASSAGES,
                "pool-3": ("Dorfman screening", PASSAGES["pool-3"][1].replace("1943", "1941")),
            }
            run = await assistant.research(
                "What is known about pooled testing and Dorfman screening?",
                user_id="ada",
                session_id="s",
                approve=True,
                max_subquestions=3,
                clarify=False,
                follow_references=False,
            )
    finally:
        await store.close()
    assert run.status == "completed" and run.report is not None
    response = run.report.response
    assert not [c.chunk_id for c in response.citations if c.source_type == "memory"]
    sides = {side for record in response.contradictions for side in (record.chunk_id_a, record.chunk_id_b)}
    assert not any(side.startswith("memory:") for side in sides), response.contradictions
    assert "1943" not in response.answer
