"""Offline, the second question pays nothing for arXiv (issue 20 item 6): the real stack, arXiv pointed at a closed
loopback port. The first question finds it unreachable; the second does not call it at all and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import MilvusSettings, Settings
from researchcrew.tools.arxiv import spacer_for
from tests.e2e.support import offline_settings

pytestmark = pytest.mark.slow  # loads the embedding model and starts Milvus Lite (once per session)


async def test_offline_the_second_question_does_not_call_arxiv(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    settings = offline_settings(tmp_path, milvus=MilvusSettings(uri=demo_kb_settings.milvus_uri))
    requests = spacer_for(settings.arxiv.api_url, settings.arxiv.min_interval_s).request_starts  # every HTTP try
    async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
        first = await assistant.ask("What is metamorphic testing?", user_id="ada", session_id="s1")
        tried = len(requests)
        second = await assistant.ask("What is mutation testing?", user_id="ada", session_id="s1")

    assert tried >= 1
    assert len(requests) == tried  # the second question did not call arXiv at all
    arxiv_first = next(r for r in first.source_reports if r.source_type == "arxiv")
    assert arxiv_first.failure is not None and arxiv_first.failure.kind == "unreachable"
    arxiv = next(r for r in second.source_reports if r.source_type == "arxiv")
    assert arxiv.status == "skipped" and arxiv.failure is not None and arxiv.failure.kind == "unreachable"
    assert arxiv.failure.message.startswith("skipped: unreachable ") and "; next try in " in arxiv.failure.message
    assert any(c.startswith("arxiv (academic_search) was not searched: skipped:") for c in second.caveats)
    assert second.answer_kind == "extractive" and second.citations  # the knowledge base still answers
