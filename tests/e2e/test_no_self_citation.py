"""The assistant never cites itself (issue 20, item 2): its earlier answers are never evidence, never compared for
agreement or contradictions, never cited. Memory evidence is what the user said.

Real pipeline, embedded defaults (SQLite memory with the packaged embedding model, extractive answers): a first
question is answered from one source; a related question in the same session finds a source that disagrees with
that first answer. Before the fix the memory chunk carrying the first answer was compared with the new source and
the answer grew a "Sources disagree" section built from the assistant's own earlier answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.memory.store import MemoryStore
from researchcrew.tools.memory_recall import MemoryTool
from tests.e2e.support import SpyTool, evidence, offline_settings

pytestmark = pytest.mark.slow  # the embedding model

TRIAL = "In a randomised trial of 4,000 adults, daily aspirin reduced the risk of heart attack by 30% over five years."
OTHER_TRIAL = (
    "In a randomised trial of 4,000 adults, daily aspirin reduced the risk of heart attack by 5% over five years."
)


def _memory_in(response: FinalResponse) -> list[str]:
    """Everything in the answer that came from conversation memory: citations and contradiction sides."""
    cited = [c.chunk_id for c in response.citations if c.source_type == MEMORY_SOURCE_TYPE]
    compared = [
        side
        for record in response.contradictions
        for side in (record.chunk_id_a, record.chunk_id_b)
        if side.startswith("memory:")
    ]
    return cited + compared


async def test_a_related_question_neither_cites_nor_compares_the_earlier_answer(
    tmp_path: Path, memory_store: MemoryStore
) -> None:
    first_source = SpyTool([evidence("trial-30", TRIAL, source_type="rag")], source_type="rag")
    settings = offline_settings(tmp_path)
    tools = [first_source, MemoryTool(memory_store, settings.memory)]
    async with ResearchAssistant(settings, tools=tools, memory_store=memory_store) as assistant:
        first = await assistant.ask(
            "By how much does daily aspirin reduce heart attacks?", user_id="ada", session_id="s"
        )
        assert "30%" in first.answer and first.citations
        assert await assistant.flush_memory(timeout_s=60)

        first_source.chunks = [evidence("trial-5", OTHER_TRIAL, source_type="rag")]
        second = await assistant.ask(
            "How much does aspirin lower the risk of heart attack?", user_id="ada", session_id="s"
        )

    memory = next(report for report in second.source_reports if report.source_type == MEMORY_SOURCE_TYPE)
    assert memory.status == "success" and memory.chunk_count >= 1, "the earlier exchange was recalled"
    assert _memory_in(second) == [], second.contradictions
    assert "30%" not in second.answer, "the first answer's figure is not quoted back"
    assert not any(caveat.startswith("Sources disagree") for caveat in second.caveats), second.caveats
    assert [c.chunk_id for c in second.citations] == ["trial-5"]


async def test_a_related_question_the_sources_cannot_answer_is_not_answered_from_the_earlier_answer(
    tmp_path: Path, memory_store: MemoryStore
) -> None:
    """Before the fix the earlier exchange (question and answer) supported the related question and was cited:
    "[1] Earlier question: ... (memory)". Now the sources' silence is an uncertainty answer."""
    source = SpyTool([evidence("trial-30", TRIAL, source_type="rag")], source_type="rag")
    settings = offline_settings(tmp_path)
    tools = [source, MemoryTool(memory_store, settings.memory)]
    async with ResearchAssistant(settings, tools=tools, memory_store=memory_store) as assistant:
        await assistant.ask("By how much does daily aspirin reduce heart attacks?", user_id="ada", session_id="s")
        assert await assistant.flush_memory(timeout_s=60)
        source.chunks = [evidence("volcano", "Explosive eruptions eject ash columns into the stratosphere.")]
        second = await assistant.ask(
            "How much does aspirin lower the risk of heart attack?", user_id="ada", session_id="s"
        )

    assert _memory_in(second) == [], [c.title for c in second.citations]
    assert "30%" not in second.answer


async def test_recalled_memory_holds_only_what_the_user_said(tmp_path: Path, memory_store: MemoryStore) -> None:
    source = SpyTool([evidence("trial-30", TRIAL, source_type="rag")], source_type="rag")
    settings = offline_settings(tmp_path)
    recall = MemoryTool(memory_store, settings.memory)
    async with ResearchAssistant(settings, tools=[source, recall], memory_store=memory_store) as assistant:
        await assistant.ask("By how much does daily aspirin reduce heart attacks?", user_id="ada", session_id="s")
        assert await assistant.flush_memory(timeout_s=60)
    result = await recall.search("aspirin and heart attacks", user_id="ada", session_id="s", min_relevance=0.0)
    assert result.ok and result.chunks
    for chunk in result.chunks:
        assert chunk.metadata["speaker"] == "user"
        assert "30%" not in chunk.content and "randomised" not in chunk.content  # the answer is not in it
    asked = await recall.search("what did I ask before?", user_id="ada", session_id="s", min_relevance=0.0)
    assert any("aspirin" in chunk.content for chunk in asked.chunks)  # the user's own question may be quoted
    assert all(chunk.metadata["recalled_as"] == "conversation" for chunk in asked.chunks)
