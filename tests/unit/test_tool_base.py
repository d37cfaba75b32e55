"""The Tool base class: failures as data with their kind, timeouts, invalid requests, bugs, and the seed's execute()."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.errors import ToolError
from researchcrew.testing import FakeTool
from researchcrew.testing import fake_chunk as make_chunk
from researchcrew.tools.base import Tool, ToolResult, validate_chunks
from tests.unit.fake_tools import BuggyTool, FailingTool, HangingTool


async def test_success_returns_chunks_stamped_with_the_tool_and_the_latency() -> None:
    tool = FakeTool("web", name="web_search", delay_s=0.05)
    result = await tool.search("q", num_results=2)

    assert result.ok
    assert (result.tool_name, result.source_type, result.failure) == ("web_search", "web", None)
    assert [c.chunk_id for c in result.chunks] == ["web-0", "web-1"]
    assert {c.tool_name for c in result.chunks} == {"web_search"}
    assert result.latency_ms >= 45
    assert ToolResult.model_validate_json(result.model_dump_json()) == result


async def test_a_tool_error_becomes_a_failure_with_its_kind_message_and_status() -> None:
    class RateLimited(FakeTool):
        async def _behave(self) -> None:
            raise ToolError("http_error", "Firecrawl answered 429: slow down", status_code=429)

    result = await RateLimited("web").search("q")

    assert not result.ok
    assert result.chunks == []
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message, result.failure.status_code) == (
        "http_error",
        "Firecrawl answered 429: slow down",
        429,
    )


@pytest.mark.parametrize("kind", ["not_configured", "unreachable", "bad_response", "timeout"])
async def test_every_failure_kind_is_reported_as_is(kind: Any) -> None:
    result = await FailingTool("web", kind, f"reason for {kind}").search("q")
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message) == (kind, f"reason for {kind}")


async def test_a_hanging_tool_fails_with_timeout_near_the_timeout() -> None:
    tool = HangingTool("arxiv", name="academic_search")
    result = await tool.search("q", timeout=0.2)

    assert result.failure is not None
    assert result.failure.kind == "timeout"
    assert result.failure.message == "academic_search did not answer within 0.2 s"
    assert 190 <= result.latency_ms < 1500  # generous margin: a functional bound, not a benchmark
    assert tool.cancelled


async def test_no_timeout_means_the_call_is_not_bounded_by_the_base() -> None:
    result = await FakeTool("rag", delay_s=0.05).search("q", timeout=None)
    assert result.ok


async def test_an_option_the_tool_does_not_take_is_an_invalid_request_and_the_tool_is_not_run() -> None:
    class NoOptions(FakeTool):
        async def _search(self, query: str, *, num_results: int = 5) -> list[ContextChunk]:  # type: ignore[override]
            self.started += 1
            return list(self.chunks)

    tool = NoOptions("web", name="web_search")
    result = await tool.search("q", domains=["example.org"])

    assert result.failure is not None
    assert result.failure.kind == "invalid_request"
    assert result.failure.message.startswith("web_search does not take these arguments:")
    assert "domains" in result.failure.message
    assert tool.started == 0


async def test_a_bug_is_internal_error_with_the_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="researchcrew.tools.base")
    result = await BuggyTool("rag", name="rag_search").search("q")

    assert result.failure is not None
    assert result.failure.kind == "internal_error"
    # The exception's text may quote anything (a URL with a password, a row of data): it stays in the log.
    assert result.failure.message == "rag_search failed unexpectedly (KeyError); the details are in the log"
    records = [r for r in caplog.records if r.getMessage() == "rag_search raised unexpectedly"]
    assert len(records) == 1
    assert records[0].exc_info is not None
    assert records[0].exc_info[0] is KeyError


async def test_execute_is_the_seeds_interface_chunks_or_an_empty_list() -> None:
    assert [c.chunk_id for c in await FakeTool("web").execute("q")] == ["web-0", "web-1"]
    assert await FailingTool("web", "unreachable", "connection refused").execute("q") == []
    assert await BuggyTool("rag").execute("q") == []
    assert await HangingTool("rag").execute("q", timeout=0.05) == []


async def test_cancellation_is_not_swallowed() -> None:
    tool = HangingTool("rag")
    task = asyncio.create_task(tool.search("q", timeout=30))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tool.cancelled


# validate_chunks --------------------------------------------------------------------------------------------


def test_validate_chunks_accepts_lists_and_tuples_and_keeps_a_set_tool_name() -> None:
    tool = FakeTool("web", name="web_search")
    own = make_chunk("web", 1, tool_name="upstream_crawler")
    chunks = validate_chunks((make_chunk("web", 0), own), tool)
    assert [c.tool_name for c in chunks] == ["web_search", "upstream_crawler"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("text", "returned str, not a list of chunks"),
        ({"chunk_id": "x"}, "returned dict, not a list of chunks"),
        (None, "returned NoneType, not a list of chunks"),
        ([make_chunk("web", 0), "oops"], "returned a str at position 1"),
        (
            [ContextChunk.model_construct(chunk_id="x", source_type="web", content="", semantic_relevance=0.5)],
            "returned an invalid chunk",
        ),
    ],
)
def test_validate_chunks_rejects_garbage_as_bad_response(raw: object, message: str) -> None:
    with pytest.raises(ToolError) as caught:
        validate_chunks(raw, FakeTool("web"))
    assert caught.value.kind == "bad_response"
    assert message in caught.value.message


def test_a_subclass_must_implement_search() -> None:
    class Incomplete(Tool):
        name = "incomplete"
        description = "no _search"
        source_type = "rag"

    with pytest.raises(TypeError, match="_search"):
        Incomplete()  # type: ignore[abstract]
    assert repr(FakeTool("web", name="web_search")) == "FakeTool(name='web_search', source_type='web')"
