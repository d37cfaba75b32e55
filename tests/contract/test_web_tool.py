"""WebSearchTool through the real firecrawl-py async client against a loopback Firecrawl replaying real results."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.errors import ToolError
from researchcrew.settings import FirecrawlSettings, Settings
from researchcrew.tools.web import WebSearchTool, cut_text, normalise_domains
from tests.helpers.event_loop import LoopGatedReplies
from tests.loopback.firecrawl import FirecrawlFake, error_reply
from tests.loopback.server import LoopbackServer, Reply, Request, closed_port

KEY = "fc-test-key"


@pytest.fixture
def firecrawl_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "firecrawl"


@pytest.fixture
def fake(firecrawl_dir: Path) -> FirecrawlFake:
    return FirecrawlFake(firecrawl_dir, api_key=KEY)


@pytest.fixture
def server(fake: FirecrawlFake) -> Iterator[LoopbackServer]:
    with LoopbackServer(fake) as running:
        yield running


def web_tool(url: str, **settings: Any) -> WebSearchTool:
    return WebSearchTool(FirecrawlSettings(api_key=KEY, api_url=url, **settings))


# Results -------------------------------------------------------------------------------------------------------
async def test_search_results_become_chunks_with_snippets(server: LoopbackServer, fake: FirecrawlFake) -> None:
    query = fake.recorded_query("search_8_web_results")
    recorded = fake.recorded_results("search_8_web_results")
    tool = web_tool(server.url, scrape_content=False)

    result = await tool.search(query, num_results=8)

    assert result.ok, result.failure
    assert [c.url for c in result.chunks] == [r["url"] for r in recorded]
    assert [c.title for c in result.chunks] == [r["title"] for r in recorded]
    assert [c.content for c in result.chunks] == [r["description"] for r in recorded]
    assert all(c.source_type == "web" and c.tool_name == "web_search" for c in result.chunks)
    assert [c.metadata["position"] for c in result.chunks] == list(range(1, 9))
    assert result.chunks[5].metadata["category"] == "github"
    assert result.chunks[5].metadata["domain"] == "github.com"
    assert all(c.metadata["content_from"] == "description" for c in result.chunks)
    scores = [c.semantic_relevance for c in result.chunks]
    assert all(0 <= s <= 1 for s in scores) and scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    assert len({c.chunk_id for c in result.chunks}) == 8

    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v2/search")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json()
    assert body["query"] == query and body["limit"] == 8
    assert body["sources"] == [{"type": "web"}]
    assert body["timeout"] == 7000  # our request budget, so Firecrawl stops when we stop waiting
    assert "scrapeOptions" not in body and "includeDomains" not in body
    assert body["origin"].startswith("python-sdk@")


async def test_search_with_scrape_uses_page_markdown_cut_at_a_boundary(
    server: LoopbackServer, fake: FirecrawlFake, firecrawl_dir: Path
) -> None:
    page = json.loads((firecrawl_dir / "real_mcp_captures/scrape_markdown_exa_blog.data.json").read_text())
    tool = web_tool(server.url, max_content_chars=2000)

    (chunk,) = await tool.execute(fake.recorded_query("search_1_web_result"), num_results=3)

    assert chunk.url == "https://exa.ai/blog/evals-at-exa"
    assert chunk.title == page["metadata"]["title"]
    assert chunk.metadata["content_from"] == "markdown" and chunk.metadata["truncated"] is True
    assert chunk.metadata["status_code"] == 200
    assert 1000 <= len(chunk.content) <= 2000
    assert page["markdown"].strip().startswith(chunk.content)
    assert chunk.content.endswith((".", "!", "?")) or page["markdown"].strip()[len(chunk.content) :].startswith("\n")
    body = server.requests[0].json()
    assert body["limit"] == 3
    assert body["scrapeOptions"]["formats"] == ["markdown"] and body["scrapeOptions"]["onlyMainContent"] is True


async def test_domains_become_include_domains(server: LoopbackServer, fake: FirecrawlFake) -> None:
    tool = web_tool(server.url, scrape_content=False)

    chunks = await tool.execute(
        fake.recorded_query("search_8_web_results"), num_results=8, domains=["https://github.com/x", "www.exa.ai"]
    )

    assert server.requests[0].json()["includeDomains"] == ["github.com", "exa.ai"]
    assert [c.url for c in chunks] == [
        "https://exa.ai/blog/people-search-benchmark",
        "https://github.com/exa-labs/benchmarks",
    ]
    assert [c.metadata["position"] for c in chunks] == [3, 6]  # Firecrawl's own positions are kept


async def test_non_ascii_titles_and_zero_results(server: LoopbackServer, fake: FirecrawlFake) -> None:
    tool = web_tool(server.url, scrape_content=False)
    multilingual = await tool.search(fake.recorded_query("search_5_web_results_multilingual"))
    empty = await tool.search(fake.recorded_query("search_zero_results"))

    assert [c.title for c in multilingual.chunks][1:4] == [
        "Search（搜索） - Firecrawl Docs",
        "Recherche - Firecrawl Docs",
        "検索 - Firecrawl Docs",
    ]
    assert empty.ok and empty.chunks == []  # no results is not a failure


async def test_self_hosted_without_key_sends_no_authorization(
    firecrawl_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LoopbackServer(FirecrawlFake(firecrawl_dir, api_key=None)) as server:
        monkeypatch.setenv("FIRECRAWL_API_URL", server.url)
        tool = WebSearchTool(Settings().firecrawl)
        result = await tool.search("anything at all")
    assert result.ok and result.chunks == []
    assert "authorization" not in server.requests[0].headers


async def test_key_from_firecrawl_api_key_variable(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIRECRAWL_API_KEY", KEY)
    monkeypatch.setenv("FIRECRAWL_API_URL", server.url)
    result = await WebSearchTool(Settings().firecrawl).search("anything")
    assert result.ok
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


# Not configured, bad arguments ---------------------------------------------------------------------------------
async def test_not_configured_fails_at_once_without_a_request() -> None:
    tool = WebSearchTool(FirecrawlSettings())
    started = time.perf_counter()
    result = await tool.search("retrieval augmented generation", timeout=7.0)
    elapsed = time.perf_counter() - started

    assert not tool.configured
    assert result.failure is not None and result.failure.kind == "not_configured"
    assert "FIRECRAWL_API_KEY" in result.failure.message
    assert elapsed < 3.5  # well within the 7 s it was allowed: it did not wait (a margin for a loaded machine)
    assert await tool.execute("retrieval augmented generation") == []


@pytest.mark.parametrize(
    ("kwargs", "needle"), [({"num_results": 0}, "num_results"), ({"domains": ["localhost"]}, "domain")]
)
async def test_bad_arguments_are_invalid_requests(server: LoopbackServer, kwargs: dict[str, Any], needle: str) -> None:
    result = await web_tool(server.url).search("query", **kwargs)
    assert result.failure is not None and result.failure.kind == "invalid_request"
    assert needle in result.failure.message
    assert server.requests == []


# Faults --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (error_reply(429, "Rate limit exceeded. Consumed (req/min): 6, Remaining (req/min): 0."), "http_error", 429),
        (Reply.text("upstream exploded", status=500), "http_error", 500),
        (error_reply(402, "Insufficient credits to perform this request."), "http_error", 402),
        (Reply.text("<html>Bad gateway</html>", status=502, content_type="text/html"), "http_error", 502),
        (error_reply(408, "Request timed out"), "timeout", 408),
        (Reply.text("{'success': tru", content_type="application/json"), "bad_response", None),
        (Reply.json({"success": False, "error": "search failed"}), "bad_response", None),
        (Reply.json({"success": True, "data": {"web": [{"title": "a result without a url"}]}}), "bad_response", None),
        (Reply(drop_connection=True), "bad_response", None),
    ],
    ids=["429", "500-text", "402", "502", "408", "malformed-json", "success-false", "invalid-result", "dropped"],
)
async def test_faults_are_reported_with_their_kind(reply: Reply, kind: str, status: int | None) -> None:
    with LoopbackServer(lambda _: reply) as server:
        result = await web_tool(server.url).search("query", timeout=5.0)
    assert result.failure is not None, result.chunks
    assert (result.failure.kind, result.failure.status_code) == (kind, status)
    assert len(server.requests) == 1  # no SDK retries inside our budget


async def test_wrong_key_is_http_401(server: LoopbackServer) -> None:
    tool = WebSearchTool(FirecrawlSettings(api_key="fc-wrong", api_url=server.url))
    result = await tool.search("query")
    assert result.failure is not None and (result.failure.kind, result.failure.status_code) == ("http_error", 401)
    assert "Unauthorized" in result.failure.message


async def test_hang_is_cut_at_the_tool_timeout() -> None:
    with LoopbackServer(lambda _: Reply.json({}, delay_s=30)) as server:
        started = time.perf_counter()
        result = await web_tool(server.url).search("query", timeout=0.5)
        elapsed = time.perf_counter() - started
    assert result.failure is not None and result.failure.kind == "timeout"
    assert 0.45 <= elapsed < 5.0  # cut near its 0.5 s, not by the 7 s default nor the 30 s hang (load margin)


async def test_hang_is_cut_by_the_request_timeout_from_settings() -> None:
    with LoopbackServer(lambda _: Reply.json({}, delay_s=30)) as server:
        started = time.perf_counter()
        result = await web_tool(server.url, timeout_s=0.3).search("query")  # no Tool timeout at all
        elapsed = time.perf_counter() - started
    assert result.failure is not None and result.failure.kind == "timeout"
    assert elapsed < 5.0  # cut near the 0.3 s set, not by the 7 s default nor the 30 s hang (load margin)
    assert len(server.requests) == 1
    assert server.requests[0].json()["timeout"] == 300


async def test_connection_refused_is_unreachable() -> None:
    started = time.perf_counter()
    result = await web_tool(f"http://127.0.0.1:{closed_port()}").search("query", timeout=5.0)
    assert result.failure is not None and result.failure.kind == "unreachable"
    assert time.perf_counter() - started < 3.0  # at once, not after the 5 s timeout (load margin)


async def test_event_loop_keeps_running_during_a_search(fake: FirecrawlFake) -> None:
    # The server answers only once the client's loop has run while the request was in flight (a gap bound on a
    # ticker failed CI at load 30): a search that blocked the loop would wait out the gate's 20 s and fail here.
    query = fake.recorded_query("search_1_web_result")
    gate = LoopGatedReplies()
    with LoopbackServer(gate.holding(fake)) as server:
        tool = web_tool(server.url)
        async with gate:
            result = await tool.search(query, timeout=30.0)
    assert result.ok and len(result.chunks) == 1
    assert gate.every_reply_waited_for_the_loop


async def test_injected_client_is_used(server: LoopbackServer, fake: FirecrawlFake) -> None:
    from firecrawl import AsyncFirecrawl

    client = AsyncFirecrawl(api_key=KEY, api_url=server.url, timeout=2.0, max_retries=1)
    tool = WebSearchTool(FirecrawlSettings(scrape_content=False), client=client)
    chunks = await tool.execute(fake.recorded_query("search_1_web_result"))
    assert tool.configured and [c.url for c in chunks] == ["https://exa.ai/blog/evals-at-exa"]


async def test_injected_client_returning_garbage_is_bad_response() -> None:
    class Garbage:
        async def search(self, query: str, **kwargs: object) -> object:
            return ["not", "search", "data"]

    result = await WebSearchTool(FirecrawlSettings(), client=Garbage()).search("query")
    assert result.failure is not None and result.failure.kind == "bad_response"


# Helpers -------------------------------------------------------------------------------------------------------
def test_cut_text_prefers_paragraph_then_sentence_boundaries() -> None:
    text = "First paragraph is here.\n\nSecond paragraph has two sentences. It goes on and on and on."
    assert cut_text(text, 200) == (text, False)
    assert cut_text(text, 40) == ("First paragraph is here.", True)
    assert cut_text(text, 75) == ("First paragraph is here.\n\nSecond paragraph has two sentences.", True)
    assert cut_text("a" * 50, 20) == ("a" * 20, True)


@given(st.text(min_size=1, max_size=3000), st.integers(min_value=200, max_value=2000))
def test_cut_text_is_a_bounded_prefix(text: str, limit: int) -> None:
    cut, truncated = cut_text(text, limit)
    assert len(cut) <= limit
    assert text.strip().startswith(cut)
    assert truncated == (len(text.strip()) > limit)


def test_normalise_domains() -> None:
    assert normalise_domains(None) == []
    assert normalise_domains(["https://www.Example.org/a?b", "example.org", "*.arxiv.org", " "]) == [
        "example.org",
        "arxiv.org",
    ]
    with pytest.raises(ToolError):
        normalise_domains(["not a domain"])


def test_fake_rejects_a_body_without_query(server: LoopbackServer) -> None:
    # The fake rejects what the real server rejects, so a tool that sent no query could not pass the tests above.
    import httpx

    response = httpx.post(f"{server.url}/v2/search", json={"limit": 1}, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400 and response.json()["success"] is False
    assert isinstance(server.requests[0], Request)


# Start-up cost ---------------------------------------------------------------------------------------------------
_IMPORT_PROBE = """
import asyncio, json, sys
from pydantic import SecretStr
from researchcrew.settings import FirecrawlSettings
from researchcrew.tools.web import WebSearchTool
key = sys.argv[1] or None
tool = WebSearchTool(FirecrawlSettings(api_key=SecretStr(key) if key else None, api_url=None))
failure = None if key else asyncio.run(tool.search("metamorphic testing")).failure.kind
print(json.dumps({"configured": tool.configured, "failure": failure,
                  "firecrawl": sorted(m for m in sys.modules if m.split(".")[0] == "firecrawl")[:3]}))
"""


def _probe_imports(key: str) -> dict[str, Any]:
    import os
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FIRECRAWL_", "RESEARCHCREW_FIRECRAWL"))}
    child = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, key],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    result: dict[str, Any] = json.loads(child.stdout)
    return result


def test_an_unconfigured_web_tool_never_imports_firecrawl() -> None:
    """firecrawl-py costs ~0.45 s of CPU to import: a process without Firecrawl settings must not pay it."""
    assert _probe_imports("") == {"configured": False, "failure": "not_configured", "firecrawl": []}
    # The probe does see the SDK when a client is built (so the empty list above means something).
    configured = _probe_imports(KEY)
    assert configured["configured"] is True and configured["firecrawl"]
