"""A researchcrew Tool used through crewAI's BaseTool interface: run/arun directly, no LLM needed."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime
from typing import Any

import pytest
from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure

from researchcrew.testing import FakeTool
from researchcrew.testing import fake_chunk as make_chunk
from researchcrew.tools.crewai_adapter import CrewAIToolAdapter, ToolSearchArgs, to_crewai_tools
from tests.unit.fake_tools import BuggyTool, FailingTool, HangingTool


class WhereTool(FakeTool):
    """Records the event loop and thread each search ran on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ran_on: list[tuple[asyncio.AbstractEventLoop, int]] = []

    async def _behave(self) -> None:
        self.ran_on.append((asyncio.get_running_loop(), threading.get_ident()))


def paper_chunks() -> list[Any]:
    return [
        make_chunk(
            "arxiv",
            1,
            chunk_id="arxiv:1706.03762",
            title="Attention Is All You Need",
            url="https://arxiv.org/abs/1706.03762",
            source_date=datetime(2017, 6, 12),
            content="The dominant sequence transduction models are based on   complex recurrent\nnetworks.",
        ),
        make_chunk("arxiv", 2, chunk_id="arxiv:1810.04805", title="BERT", semantic_relevance=0.75),
    ]


def test_the_adapter_is_a_crewai_tool_named_and_described_by_the_tool() -> None:
    adapter = CrewAIToolAdapter(FakeTool("arxiv", name="academic_search"))
    assert isinstance(adapter, BaseTool)
    assert adapter.name == "academic_search"
    assert adapter.description == "A scripted fake source."
    assert adapter.args_schema is ToolSearchArgs
    assert set(ToolSearchArgs.model_fields) == {"query", "num_results"}
    assert "academic_search" in adapter.formatted_description


def test_run_without_a_loop_lists_chunks_with_what_is_needed_to_cite_them() -> None:
    tool = WhereTool("arxiv", name="academic_search", chunks=paper_chunks())
    adapter = CrewAIToolAdapter(tool, timeout_s=3, user_id="u1", session_id="s1", options={"sort_by": "date"})

    text = adapter.run(query="transformers", num_results=2)

    assert text == (
        'academic_search: 2 result(s) for "transformers".\n'
        "[1] chunk_id=arxiv:1706.03762 | source=arxiv | title=Attention Is All You Need | "
        "url=https://arxiv.org/abs/1706.03762 | date=2017-06-12 | relevance=0.50\n"
        "    The dominant sequence transduction models are based on complex recurrent networks.\n"
        "[2] chunk_id=arxiv:1810.04805 | source=arxiv | title=BERT | relevance=0.75\n"
        "    evidence 2 from arxiv"
    )
    assert tool.calls == [("transformers", {"num_results": 2, "user_id": "u1", "session_id": "s1", "sort_by": "date"})]
    assert adapter.current_usage_count == 1


async def test_arun_awaits_the_tool_on_the_callers_event_loop() -> None:
    tool = WhereTool("web", name="web_search")
    adapter = CrewAIToolAdapter(tool)
    text = await adapter.arun(query="rag", num_results=1)
    assert text.startswith('web_search: 2 result(s) for "rag".')
    # The real async path: same loop, same thread — no thread hop, no nested event loop.
    assert tool.ran_on == [(asyncio.get_running_loop(), threading.get_ident())]
    assert tool.calls[0][1]["num_results"] == 1


async def test_run_from_inside_a_running_loop_uses_a_private_loop_instead_of_failing() -> None:
    tool = WhereTool("web")
    adapter = CrewAIToolAdapter(tool)
    text = adapter.run(query="sync call from async code")  # blocks this loop briefly, by design of a sync API
    assert "chunk_id=web-0" in text
    loop, thread = tool.ran_on[0]
    assert loop is not asyncio.get_running_loop()
    assert thread != threading.get_ident()


async def test_crewai_structured_tool_paths_work() -> None:
    # What crewAI's agent executor calls: to_structured_tool() then ainvoke (in an executor) or invoke.
    structured = CrewAIToolAdapter(FakeTool("memory", name="memory_recall")).to_structured_tool()
    assert "chunk_id=memory-1" in await structured.ainvoke({"query": "what did I ask before?"})
    assert "chunk_id=memory-0" in await asyncio.to_thread(structured.invoke, {"query": "again"})


def test_a_failed_source_is_a_tool_failure_with_a_clear_line() -> None:
    adapter = CrewAIToolAdapter(
        FailingTool("web", "not_configured", "no API key: set FIRECRAWL_API_KEY", name="web_search")
    )
    result = adapter.run(query="anything")

    assert isinstance(result, ToolFailure)
    assert result.code == "not_configured"
    assert result.retryable is False
    assert result.details == {"source_type": "web", "status_code": None}
    assert adapter.format_output_for_agent(result) == (
        "web_search failed: no API key: set FIRECRAWL_API_KEY. No results from this source; do not cite it. "
        "(code: not_configured)"
    )


def test_a_hanging_source_times_out_into_a_retryable_failure() -> None:
    adapter = CrewAIToolAdapter(HangingTool("arxiv", name="academic_search"), timeout_s=0.2)
    started = time.perf_counter()
    result = adapter.run(query="slow")
    assert time.perf_counter() - started < 4.0  # cut near its 0.2 s; the tool hangs forever (load margin)
    assert isinstance(result, ToolFailure)
    assert (result.code, result.retryable) == ("timeout", True)
    assert "did not answer within 0.2 s" in result.message


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (503, True), (401, False), (None, True)])
async def test_http_errors_are_retryable_only_when_asking_later_may_help(status: int | None, retryable: bool) -> None:
    class HttpFailing(FakeTool):
        async def _behave(self) -> None:
            from researchcrew.errors import ToolError

            raise ToolError("http_error", f"HTTP {status}", status_code=status)

    result = await CrewAIToolAdapter(HttpFailing("web")).arun(query="q")
    assert isinstance(result, ToolFailure)
    assert result.retryable is retryable
    assert result.details["status_code"] == status


async def test_a_buggy_tool_is_reported_not_raised() -> None:
    result = await CrewAIToolAdapter(BuggyTool("rag")).arun(query="q")
    assert isinstance(result, ToolFailure)
    assert result.code == "internal_error"
    assert "KeyError" in result.message


async def test_no_results_say_so() -> None:
    text = await CrewAIToolAdapter(FakeTool("rag", name="rag_search", count=0)).arun(query="nothing here")
    assert text == 'rag_search found no results for "nothing here".'


async def test_output_is_bounded_per_chunk_and_in_total() -> None:
    chunks = [make_chunk("web", n, content="word " * 2_000) for n in range(30)]
    adapter = CrewAIToolAdapter(FakeTool("web", chunks=chunks), excerpt_chars=100, max_output_chars=1_000)
    text = await adapter.arun(query="long")

    assert len(text) <= 1_000 + 80  # the budget plus the one "omitted" line
    excerpts = [line for line in text.splitlines() if line.startswith("    ")]
    assert excerpts
    assert all(len(line) <= 4 + 100 for line in excerpts)
    assert excerpts[0].endswith("…")
    assert text.splitlines()[-1].endswith("more result(s) omitted to stay within length]")


def test_invalid_arguments_are_rejected_by_crewai_before_the_tool_runs() -> None:
    tool = FakeTool("web")
    adapter = CrewAIToolAdapter(tool)
    with pytest.raises(ValueError, match="arguments validation failed"):
        adapter.run(query="")
    with pytest.raises(ValueError, match="arguments validation failed"):
        adapter.run(query="ok", num_results=0)
    assert tool.calls == []


def test_construction_checks_its_inputs_and_wraps_many_tools() -> None:
    with pytest.raises(TypeError, match="expected a researchcrew Tool"):
        CrewAIToolAdapter("web_search")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s"):
        CrewAIToolAdapter(FakeTool("web"), timeout_s=0)
    adapters = to_crewai_tools([FakeTool("web"), FakeTool("rag")], timeout_s=2, user_id="u")
    assert [a.name for a in adapters] == ["web_fake", "rag_fake"]
    assert [a.tool.source_type for a in adapters] == ["web", "rag"]
