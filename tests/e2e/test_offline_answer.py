"""The main job, offline: a question over a real knowledge base (Milvus Lite + the packaged embedding model), the
default sources, the real agents, no LLM — an extractive answer in which every sentence is cited — and memory that
recalls the first exchange when the second question is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import MilvusSettings, Settings
from tests.e2e.support import assert_every_claim_cited, offline_settings, without_markers

pytestmark = pytest.mark.slow  # loads the embedding model and starts Milvus Lite (once per session)


def settings_over(kb_settings: Settings, data_dir: Path) -> Settings:
    """This test's own data directory (memory), reading the shared knowledge base."""
    return offline_settings(data_dir, milvus=MilvusSettings(uri=kb_settings.milvus_uri))


async def test_extractive_answer_cites_given_chunks_and_reports_every_source(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    question = "What is metamorphic testing?"
    async with ResearchAssistant(settings_over(demo_kb_settings, tmp_path), knowledge_base=demo_kb) as assistant:
        response = await assistant.ask(question, user_id="ada", session_id="s1")

    assert response.answer_kind == "extractive"
    assert response.confidence_level in ("high", "medium")
    assert_every_claim_cited(response)
    assert response.citation_stats.removed == 0
    # Every citation points to a chunk the knowledge base returned for this question, and every statement is a
    # sentence quoted from the chunk it cites (extractive: nothing is paraphrased, nothing invented).
    hits = {hit.chunk_id: hit for hit in demo_kb.search(question, top_k=20)}
    by_number = {citation.number: citation for citation in response.citations}
    for citation in response.citations:
        assert citation.chunk_id in hits, f"[{citation.number}] cites {citation.chunk_id}, not a retrieved chunk"
        assert citation.source_type == "rag"
        assert citation.title == hits[citation.chunk_id].title and citation.url
        assert citation.source_date is not None
    for section in response.sections:
        for claim in section.claims:
            quoted = without_markers(claim.text).rstrip(".?!")
            passages = [hits[i].text for n in claim.citations for i in by_number[n].chunk_ids if i in hits]
            assert any(quoted in text for text in passages), claim.text
    assert any("metamorphic" in claim.text.lower() for section in response.sections for claim in section.claims)

    reports = {report.source_type: report for report in response.source_reports}
    assert set(reports) == {"rag", "web", "arxiv", "memory"}
    assert reports["rag"].status == "success" and reports["rag"].chunk_count > 0
    assert reports["web"].status == "failed" and reports["web"].failure is not None
    assert reports["web"].failure.kind == "not_configured"
    assert reports["arxiv"].status == "failed" and reports["arxiv"].failure is not None
    assert reports["arxiv"].failure.kind == "unreachable"
    assert reports["memory"].status == "empty"  # nothing asked before
    assert any(caveat.startswith("web (") for caveat in response.caveats)
    assert any(caveat.startswith("arxiv (") for caveat in response.caveats)


async def test_a_repeated_question_is_answered_from_the_papers_again_not_from_the_first_answer(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    async with ResearchAssistant(settings_over(demo_kb_settings, tmp_path), knowledge_base=demo_kb) as assistant:
        first = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
        assert await assistant.flush_memory(timeout_s=60)
        again = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")

    memory = next(report for report in again.source_reports if report.source_type == "memory")
    assert memory.status == "success" and memory.chunk_count >= 1  # the first exchange was recalled ...
    assert {citation.source_type for citation in again.citations} == {"rag"}  # ... but the papers are quoted
    assert [c.chunk_id for c in again.citations] == [c.chunk_id for c in first.citations]


async def test_second_question_recalls_the_first_exchange(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    async with ResearchAssistant(settings_over(demo_kb_settings, tmp_path), knowledge_base=demo_kb) as assistant:
        first = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
        assert await assistant.flush_memory(timeout_s=60)  # the first exchange is stored (in the background)
        second = await assistant.ask("What did I ask about metamorphic testing before?", user_id="ada", session_id="s1")
        other_user = await assistant.ask(
            "What did I ask about metamorphic testing before?", user_id="bob", session_id="s9"
        )

    memory = next(report for report in second.source_reports if report.source_type == "memory")
    assert memory.status == "success" and memory.chunk_count >= 1
    recalled = [citation for citation in second.citations if citation.source_type == "memory"]
    assert [citation.chunk_id for citation in recalled] == [f"memory:{first.response_id}"]
    assert recalled[0].number == 1, "for a question about the conversation, the conversation is quoted first"
    assert recalled[0].snippet is not None and "What is metamorphic testing?" in recalled[0].snippet
    assert_every_claim_cited(second)
    # Recall is per user: another user's question finds nothing of Ada's.
    assert not [citation for citation in other_user.citations if citation.source_type == "memory"]
    assert next(r for r in other_user.source_reports if r.source_type == "memory").status == "empty"
