"""The Retriever's fan-out: concurrency, per-source timeouts, failure isolation, ordering and status rules."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from researchcrew.blocking import ABANDONED
from researchcrew.contracts import ContextChunk, RetrieverInput, RetrieverOutput
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.settings import RetrievalSettings
from researchcrew.testing import FakeTool
from researchcrew.testing import fake_chunk as make_chunk
from researchcrew.tools.base import ToolResult
from tests.unit.fake_tools import (
    BarrierTool,
    BuggyTool,
    FailingTool,
    GarbageTool,
    HangingTool,
    IgnoresTimeoutTool,
    RaisingSearchTool,
    SelfCancellingTool,
    StrictTool,
    StubbornTool,
)


def request(**fields: Any) -> RetrieverInput:
    values: dict[str, Any] = {
        "query_text": "what is retrieval-augmented generation?",
        "user_id": "u1",
        "session_id": "s1",
        **fields,
    }
    return RetrieverInput(**values)


def report(output: RetrieverOutput, tool_name: str) -> Any:
    return next(r for r in output.aggregated_context.source_reports if r.tool_name == tool_name)


# Status rules ----------------------------------------------------------------------------------------------


async def test_every_source_answers_success_with_attribution_and_arguments() -> None:
    tools = [FakeTool("rag"), FakeTool("web"), FakeTool("arxiv"), FakeTool("memory")]
    output = await Retriever(tools).run(
        request(num_results=3, tool_options={"web": {"domains": ["arxiv.org"]}, "memory": {"num_results": 1}})
    )

    assert output.retrieval_status == "success"
    assert output.sources_used == ["rag", "web", "arxiv", "memory"]
    assert output.sources_failed == []
    assert output.error_message is None
    assert len(output.aggregated_context.chunks) == 8
    for chunk in output.aggregated_context.chunks:
        assert chunk.tool_name == f"{chunk.source_type}_fake"
    assert [r.status for r in output.aggregated_context.source_reports] == ["success"] * 4
    assert [r.chunk_count for r in output.aggregated_context.source_reports] == [2] * 4
    assert output.aggregated_context.query_text == "what is retrieval-augmented generation?"
    # Every tool got the same query and the per-request arguments; tool_options only reach their source type.
    assert tools[0].calls == [
        ("what is retrieval-augmented generation?", {"num_results": 3, "user_id": "u1", "session_id": "s1"})
    ]
    assert tools[1].calls[0][1]["domains"] == ["arxiv.org"]
    assert "domains" not in tools[2].calls[0][1]
    assert tools[3].calls[0][1]["num_results"] == 1  # a per-source option overrides the request's num_results
    # The output is a valid contract that survives JSON.
    assert RetrieverOutput.model_validate_json(output.model_dump_json()) == output


async def test_a_source_with_no_results_has_answered() -> None:
    output = await Retriever([FakeTool("rag", count=0), FakeTool("web")]).run(request())
    assert output.retrieval_status == "success"
    assert output.sources_used == ["rag", "web"]
    assert report(output, "rag_fake").status == "empty"
    assert report(output, "rag_fake").chunk_count == 0


async def test_some_sources_fail_partial_with_reasons() -> None:
    tools = [
        FakeTool("rag"),
        FailingTool("web", "not_configured", "no API key: set FIRECRAWL_API_KEY"),
        FailingTool("arxiv", "http_error", "arXiv answered 503"),
    ]
    output = await Retriever(tools).run(request())

    assert output.retrieval_status == "partial"
    assert output.sources_used == ["rag"]
    assert output.sources_failed == ["web", "arxiv"]
    assert [c.source_type for c in output.aggregated_context.chunks] == ["rag", "rag"]
    web = report(output, "web_fake")
    assert (web.status, web.error_kind, web.error_message) == (
        "failed",
        "not_configured",
        "no API key: set FIRECRAWL_API_KEY",
    )
    assert output.error_message == (
        "web: not_configured (no API key: set FIRECRAWL_API_KEY); arxiv: http_error (arXiv answered 503)"
    )


async def test_no_source_answers_failed() -> None:
    tools = [FailingTool("web", "unreachable", "connection refused"), BuggyTool("rag")]
    output = await Retriever(tools).run(request())
    assert output.retrieval_status == "failed"
    assert output.sources_used == []
    assert output.sources_failed == ["web", "rag"]
    assert output.aggregated_context.chunks == []
    assert report(output, "rag_fake").error_kind == "internal_error"
    assert "KeyError" in (output.error_message or "")


async def test_no_tools_is_failed_with_a_clear_message() -> None:
    output = await Retriever([]).run(request())
    assert output.retrieval_status == "failed"
    assert output.error_message == "no source was selected: the Retriever has no tools"
    assert output.aggregated_context.source_reports == []


async def test_every_source_excluded_is_failed_and_nothing_is_called() -> None:
    tools = [FakeTool("rag"), FakeTool("web")]
    output = await Retriever(tools).run(request(exclude_sources=["web", "rag"]))
    assert output.retrieval_status == "failed"
    assert output.error_message is not None
    assert "excluded" in output.error_message
    assert "['rag', 'web']" in output.error_message
    assert [t.started for t in tools] == [0, 0]
    assert [r.status for r in output.aggregated_context.source_reports] == ["skipped", "skipped"]


async def test_excluded_sources_are_never_called_and_status_counts_only_the_selected() -> None:
    tools = [FakeTool("rag"), HangingTool("web"), FakeTool("arxiv"), FakeTool("memory")]
    output = await Retriever(tools).run(request(exclude_sources=["web", "memory"], timeout_per_source=5))

    assert [t.started for t in tools] == [1, 0, 1, 0]
    assert output.retrieval_status == "success"  # both selected sources answered
    assert output.sources_used == ["rag", "arxiv"]
    assert output.sources_failed == []
    statuses = {r.tool_name: r.status for r in output.aggregated_context.source_reports}
    assert statuses == {"rag_fake": "success", "web_fake": "skipped", "arxiv_fake": "success", "memory_fake": "skipped"}
    assert {c.source_type for c in output.aggregated_context.chunks} == {"rag", "arxiv"}
    assert output.execution_time_ms < 2000  # the hanging web tool was never waited for


# Ordering and attribution ----------------------------------------------------------------------------------


async def test_preferred_sources_come_first_in_preference_order_then_tool_order() -> None:
    tools = [
        FakeTool("rag", count=2),
        FakeTool("web", count=3),
        FakeTool("arxiv", count=2),
        FakeTool("memory", count=1),
    ]
    # Finishing order must not matter: the preferred memory tool is the slowest.
    tools[3].delay_s = 0.05
    output = await Retriever(tools).run(request(preferred_sources=["memory", "arxiv"]))

    ids = [c.chunk_id for c in output.aggregated_context.chunks]
    assert ids == ["memory-0", "arxiv-0", "arxiv-1", "rag-0", "rag-1", "web-0", "web-1", "web-2"]
    # Reports stay in the order the tools were given.
    assert [r.source_type for r in output.aggregated_context.source_reports] == ["rag", "web", "arxiv", "memory"]


async def test_without_preferences_chunks_follow_tool_order_and_each_tools_own_order() -> None:
    web_chunks = [make_chunk("web", n, semantic_relevance=r) for n, r in ((7, 0.2), (3, 0.9), (5, 0.5))]
    tools = [FakeTool("web", chunks=web_chunks, delay_s=0.03), FakeTool("rag")]
    output = await Retriever(tools).run(request())
    assert [c.chunk_id for c in output.aggregated_context.chunks] == ["web-7", "web-3", "web-5", "rag-0", "rag-1"]


async def test_two_tools_of_one_source_type_are_both_reported() -> None:
    kb_a = FakeTool("rag", name="kb_papers", chunks=[make_chunk("rag", 1, chunk_id="p-1")])
    kb_b = FailingTool("rag", "unreachable", "Milvus is down", name="kb_notes")
    output = await Retriever([kb_a, kb_b]).run(request())

    assert [r.tool_name for r in output.aggregated_context.source_reports] == ["kb_papers", "kb_notes"]
    assert output.retrieval_status == "partial"
    assert output.sources_used == ["rag"]
    assert output.sources_failed == ["rag"]  # one rag tool answered, the other did not
    assert output.aggregated_context.chunks[0].tool_name == "kb_papers"


async def test_chunk_ids_stay_unique_across_tools() -> None:
    same = make_chunk("rag", 1, chunk_id="doc-1", content="identical text")
    different = make_chunk("rag", 2, chunk_id="doc-1", content="another passage")
    tools = [
        FakeTool("rag", name="kb_a", chunks=[same]),
        FakeTool("rag", name="kb_b", chunks=[same]),
        FakeTool("rag", name="kb_c", chunks=[different]),
    ]
    output = await Retriever(tools).run(request())
    chunks = output.aggregated_context.chunks
    assert [(c.chunk_id, c.content) for c in chunks] == [("doc-1", "identical text"), ("doc-1@kb_c", "another passage")]


async def test_chunks_without_tool_name_are_stamped_with_the_producing_tool() -> None:
    output = await Retriever([FakeTool("web", name="web_search")]).run(request())
    assert {c.tool_name for c in output.aggregated_context.chunks} == {"web_search"}


# Faults -----------------------------------------------------------------------------------------------------


async def test_all_selected_tools_run_concurrently() -> None:
    barrier = asyncio.Barrier(4)
    tools = [BarrierTool(source, barrier) for source in ("rag", "web", "arxiv", "memory")]
    # Run one at a time, no tool could pass the barrier and all four would time out.
    output = await Retriever(tools).run(request(timeout_per_source=5))
    assert output.retrieval_status == "success"


async def test_a_hung_tool_is_cut_off_near_its_timeout_and_the_others_are_kept() -> None:
    tools = [FakeTool("rag"), HangingTool("web"), FakeTool("arxiv", delay_s=0.1)]
    started = time.perf_counter()
    output = await Retriever(tools).run(request(timeout_per_source=1.0))
    wall = time.perf_counter() - started

    assert wall < 2.0  # functional bound with a generous margin; the benchmark measures the real number
    assert output.retrieval_status == "partial"
    assert output.sources_failed == ["web"]
    web = report(output, "web_fake")
    assert web.error_kind == "timeout"
    assert web.error_message == "web_fake did not answer within 1 s"
    assert 900 <= web.latency_ms < 2000
    assert tools[1].cancelled  # the hung call was cancelled, not left running
    assert [c.source_type for c in output.aggregated_context.chunks] == ["rag", "rag", "arxiv", "arxiv"]
    assert abs(output.execution_time_ms - wall * 1000) < 100  # execution_time_ms is the real wall time


async def test_a_tool_that_ignores_timeout_is_cut_off_by_the_retriever() -> None:
    tools = [IgnoresTimeoutTool("web"), FakeTool("rag")]
    started = time.perf_counter()
    output = await Retriever(tools).run(request(timeout_per_source=0.3))
    assert time.perf_counter() - started < 4.0  # cut near its 0.3 s; the tool never ends (load margin)
    assert report(output, "web_fake").error_kind == "timeout"
    assert tools[0].cancelled
    assert output.retrieval_status == "partial"


async def test_a_tool_that_swallows_cancellation_is_abandoned_not_awaited(caplog: pytest.LogCaptureFixture) -> None:
    stubborn = StubbornTool("web", linger_s=3)
    abandoned_before = ABANDONED.count
    started = time.perf_counter()
    with caplog.at_level(logging.DEBUG):
        output = await Retriever([stubborn, FakeTool("rag")]).run(request(timeout_per_source=0.2))
    elapsed = time.perf_counter() - started

    assert elapsed < 2.0  # it did not wait out the 3 s linger after the 0.2 s budget (a margin for a loaded machine)
    web = report(output, "web_fake")
    assert web.error_kind == "timeout"
    assert web.error_message == "web_fake did not answer within 0.2 s"
    assert stubborn.cancelled
    assert ABANDONED.count == abandoned_before + 1 and ABANDONED  # counted, and held so it is not collected
    # Expected under load: told at INFO with a counter, never as an ERROR a user must read.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("did not stop when cancelled" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    await asyncio.wait_for(stubborn.finished.wait(), timeout=30)
    await asyncio.sleep(0)  # let the done-callback run
    assert not ABANDONED


async def test_a_tool_raising_out_of_search_is_internal_error_with_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="researchcrew.pipeline.retrieve")
    output = await Retriever([RaisingSearchTool("arxiv"), FakeTool("rag")]).run(request())

    arxiv = report(output, "arxiv_fake")
    assert arxiv.error_kind == "internal_error"
    # The user sees the kind and the exception's type; its text ("search exploded") stays in the log.
    assert arxiv.error_message == "arxiv_fake failed unexpectedly (RuntimeError); the details are in the log"
    assert output.retrieval_status == "partial"
    assert len(output.aggregated_context.chunks) == 2
    logged = [r for r in caplog.records if "raised out of search()" in r.getMessage()]
    assert logged
    assert logged[0].exc_info is not None


async def test_a_tool_cancelling_itself_is_reported_and_does_not_cancel_the_run() -> None:
    output = await Retriever([SelfCancellingTool("memory"), FakeTool("rag")]).run(request())
    memory = report(output, "memory_fake")
    assert memory.error_kind == "internal_error"
    assert memory.error_message == "memory_fake was cancelled before it answered"
    assert output.retrieval_status == "partial"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("some text", "returned str, not a ToolResult"),
        (None, "returned NoneType, not a ToolResult"),
        ([make_chunk("web", 1)], "returned list, not a ToolResult"),
        # A ToolResult built without validation, carrying a chunk whose content is blank and relevance is 3.
        (
            ToolResult.model_construct(
                tool_name="web_fake",
                source_type="web",
                failure=None,
                latency_ms=1.0,
                chunks=[
                    ContextChunk.model_construct(chunk_id="x", source_type="web", content=" ", semantic_relevance=3.0)
                ],
            ),
            "returned an invalid chunk",
        ),
        (
            ToolResult.model_construct(
                tool_name="web_fake", source_type="web", failure=None, latency_ms=1.0, chunks=[{"chunk_id": "x"}]
            ),  # type: ignore[list-item]
            "returned a dict at position 0",
        ),
    ],
)
async def test_garbage_from_a_tool_is_bad_response(payload: Any, expected: str) -> None:
    output = await Retriever([GarbageTool("web", payload), FakeTool("rag")]).run(request())
    web = report(output, "web_fake")
    assert web.error_kind == "bad_response"
    assert expected in (web.error_message or "")
    assert output.retrieval_status == "partial"
    assert [c.source_type for c in output.aggregated_context.chunks] == ["rag", "rag"]


async def test_garbage_chunks_from_search_are_bad_response_via_the_base_class() -> None:
    class DictTool(FakeTool):
        async def _behave(self) -> None:
            self.chunks = [{"content": "not a chunk"}]  # type: ignore[list-item]

    output = await Retriever([DictTool("arxiv")]).run(request())
    assert report(output, "arxiv_fake").error_kind == "bad_response"
    assert output.retrieval_status == "failed"


async def test_a_reported_failure_inside_a_tool_result_is_honoured() -> None:
    from researchcrew.contracts import SourceFailure

    result = ToolResult(
        tool_name="web_fake",
        source_type="web",
        chunks=[make_chunk("web", 1)],
        failure=SourceFailure(kind="http_error", message="429 Too Many Requests", status_code=429),
    )
    output = await Retriever([GarbageTool("web", result)]).run(request())
    web = report(output, "web_fake")
    assert (web.status, web.error_kind, web.chunk_count) == ("failed", "http_error", 0)
    assert web.failure is not None
    assert web.failure.status_code == 429
    assert output.aggregated_context.chunks == []


async def test_an_option_the_tool_does_not_take_is_invalid_request_for_that_tool_only() -> None:
    tools = [StrictTool("web"), FakeTool("arxiv")]
    output = await Retriever(tools).run(
        request(tool_options={"web": {"domains": ["example.org"]}, "arxiv": {"sort_by": "date"}})
    )
    web = report(output, "web_fake")
    assert web.error_kind == "invalid_request"
    assert "domains" in (web.error_message or "")
    assert tools[0].calls == []  # rejected before the tool ran
    assert tools[1].calls[0][1]["sort_by"] == "date"
    assert output.retrieval_status == "partial"


async def test_tool_options_may_not_override_the_timeout() -> None:
    tool = FakeTool("web")
    output = await Retriever([tool]).run(request(tool_options={"web": {"timeout": 100}}))
    assert report(output, "web_fake").error_kind == "invalid_request"
    assert tool.started == 0


# Cancellation and settings ----------------------------------------------------------------------------------


async def test_cancelling_the_run_cancels_every_tool_task() -> None:
    tools = [HangingTool("rag"), HangingTool("web"), FakeTool("arxiv", delay_s=30)]
    before = asyncio.all_tasks()
    run = asyncio.create_task(Retriever(tools).run(request(timeout_per_source=60)))
    await asyncio.sleep(0.05)
    assert all(t.started == 1 for t in tools)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert all(t.cancelled for t in tools)
    assert asyncio.all_tasks() - before == set()  # no orphaned tool tasks


async def test_an_outer_deadline_cancels_the_fan_out_cleanly() -> None:
    tools = [HangingTool("rag"), HangingTool("web")]
    before = asyncio.all_tasks()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await Retriever(tools).run(request(timeout_per_source=60))
    assert all(t.cancelled for t in tools)
    assert asyncio.all_tasks() - before == set()


async def test_settings_give_the_defaults_and_an_explicit_request_wins() -> None:
    settings = RetrievalSettings(timeout_per_source_s=0.2, num_results=9)
    hanging = HangingTool("web")
    fake = FakeTool("rag")
    started = time.perf_counter()
    output = await Retriever([hanging, fake], settings=settings).run(request())
    assert time.perf_counter() - started < 4.0  # the settings' 0.2 s, not the input's default 7 s (load margin)
    assert report(output, "web_fake").error_message == "web_fake did not answer within 0.2 s"
    assert fake.calls[0][1]["num_results"] == 9

    output = await Retriever([hanging, fake], settings=settings).run(request(timeout_per_source=0.1, num_results=2))
    assert report(output, "web_fake").error_message == "web_fake did not answer within 0.1 s"
    assert fake.calls[1][1]["num_results"] == 2


async def test_each_source_has_one_timeout_its_own_else_the_default_and_the_run_caps_it() -> None:
    settings = RetrievalSettings(timeout_per_source_s=0.3)
    own = HangingTool("web")
    own.timeout_s = 0.1  # e.g. firecrawl.timeout_s
    shared = HangingTool("arxiv")  # no timeout of its own: retrieval.timeout_per_source_s
    retriever = Retriever([own, shared], settings=settings)

    output = await retriever.run(request())
    assert report(output, "web_fake").error_message == "web_fake did not answer within 0.1 s"
    assert report(output, "arxiv_fake").error_message == "arxiv_fake did not answer within 0.3 s"

    # What the run has left caps every source; it never lengthens one.
    output = await retriever.run(request(time_limit_s=0.05))
    assert report(output, "web_fake").error_message == "web_fake did not answer within 0.05 s"
    assert report(output, "arxiv_fake").error_message == "arxiv_fake did not answer within 0.05 s"
    output = await retriever.run(request(time_limit_s=5))
    assert report(output, "web_fake").error_message == "web_fake did not answer within 0.1 s"

    # An explicit per-request timeout replaces both.
    output = await retriever.run(request(timeout_per_source=0.2))
    assert report(output, "web_fake").error_message == "web_fake did not answer within 0.2 s"
    assert report(output, "arxiv_fake").error_message == "arxiv_fake did not answer within 0.2 s"


async def test_chunks_are_validated_once_on_their_way_out_of_a_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    validations: list[str] = []
    original = ContextChunk.model_validate

    def counting(value: Any, *args: Any, **kwargs: Any) -> ContextChunk:
        validations.append(value["chunk_id"])
        return original(value, *args, **kwargs)

    monkeypatch.setattr(ContextChunk, "model_validate", counting)
    output = await Retriever([FakeTool("rag", count=3)]).run(request())
    assert len(output.aggregated_context.chunks) == 3
    assert len(validations) == 3  # by Tool.search, once each; the Retriever trusts what Tool.search checked

    # A tool that overrides search() skipped that check, so the Retriever makes it.
    class OwnSearch(FakeTool):
        async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> ToolResult:  # noqa: ASYNC109
            chunks = [make_chunk("web", 1, chunk_id="own-1")]
            return ToolResult(tool_name=self.name, source_type=self.source_type, chunks=chunks)

    validations.clear()
    output = await Retriever([OwnSearch("web")]).run(request())
    assert validations == ["own-1"]


def test_constructor_rejects_what_is_not_a_usable_tool() -> None:
    with pytest.raises(TypeError, match=r"tools\[1\] is a str"):
        Retriever([FakeTool("rag"), "web"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="lower-case `source_type`"):
        Retriever([FakeTool("Web Search", count=0)])
