"""Issue 19 item 2: jobs never pretend. A question whose knowledge base cannot be opened (the rag source
``unreachable``: a Milvus Lite file held by another process, a Milvus server down) is retried and, if it stays
closed, stored as failed with that reason — never as an "uncertain" answer of a run reported ``completed``, even
when another source answered something."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from researchcrew.jobs.api import Jobs
from researchcrew.runtime import open_runtime
from researchcrew.settings import SourceHealthSettings
from researchcrew.testing import FakeTool, fake_chunk
from tests.jobs.test_in_process import QUESTIONS, CountingTool, settings_for

HELD = (
    "the knowledge base /data/knowledge.db is held by a running `researchcrew serve` (process 4242); Milvus Lite lets "
    "one process open it at a time"
)


def _memory() -> FakeTool:
    """Another source that does answer (weakly): without the rule, the question would be stored "uncertain"."""
    chunk = fake_chunk("memory", 1, content="We talked about tests once.", semantic_relevance=0.2)
    return FakeTool("memory", name="memory_recall", chunks=[chunk])


async def _run(tmp_path: Path, *tools: FakeTool, **jobs: Any) -> tuple[Any, list[Any]]:
    settings = settings_for(tmp_path, attempts=3, **jobs)
    settings.health = SourceHealthSettings(enabled=False)  # each attempt calls the tool (backoff is tested apart)
    runtime = open_runtime(settings, tools=list(tools), remember=False)
    try:
        api = Jobs(runtime)
        await api.create("ada", name="kb", questions=QUESTIONS[:3])
        run = await api.run("ada", "kb")
        return run, await api.results("ada", run.id)
    finally:
        await runtime.aclose()


async def test_a_knowledge_base_that_cannot_be_opened_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    rag = FakeTool("rag", name="rag_search", fail_with=("unreachable", HELD))
    run, results = await _run(tmp_path, rag, _memory())
    assert run.status == "failed" and run.counts.failed == 3
    assert run.counts.uncertain == 0 and run.counts.answered == 0
    for result in results:
        assert result.status == "failed" and result.failure is not None
        assert result.failure.kind == "knowledge_base_unavailable"
        assert "held by a running `researchcrew serve` (process 4242)" in result.failure.message
    asked = Counter(query for query, _ in rag.calls if query in QUESTIONS)
    assert asked == dict.fromkeys(QUESTIONS[:3], 3)  # waited and retried: every attempt asked it again


async def test_a_knowledge_base_that_comes_back_is_used_on_the_retry(tmp_path: Path) -> None:
    rag = CountingTool("rag", name="rag_search", fail_first=1)  # unreachable once per question, then open
    run, results = await _run(tmp_path, rag, _memory())
    assert run.status == "completed" and run.counts.answered == 3
    assert all(any(c.source_type == "rag" for c in r.response.citations) for r in results if r.response)
    assert [rag.per_question[question] for question in QUESTIONS[:3]] == [2, 2, 2]


async def test_a_slow_knowledge_base_is_not_taken_for_a_closed_one(tmp_path: Path) -> None:
    """A timeout is a search that was slow this once; the other sources' answer stands as before."""
    rag = FakeTool("rag", name="rag_search", fail_with=("timeout", "no answer within 7 s"))
    web = FakeTool("web", name="web_search", chunks=[fake_chunk("web", 1, content="Flaky tests fail at random.")])
    run, results = await _run(tmp_path, rag, web)
    assert run.counts.failed == 0, [r.failure for r in results]
