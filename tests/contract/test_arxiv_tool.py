"""ArxivTool through the real ``arxiv`` package against a loopback arXiv replaying real recorded Atom feeds."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.settings import ArxivSettings
from researchcrew.tools.arxiv import ArxivTool, RequestSpacer, spacer_for
from tests.helpers.event_loop import LoopGatedReplies
from tests.loopback.arxiv import ATOM, ArxivFake
from tests.loopback.server import LoopbackServer, Reply, Request, closed_port

NS = {"a": "http://www.w3.org/2005/Atom", "arxiv": "http://arxiv.org/schemas/atom"}


@pytest.fixture
def arxiv_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "arxiv"


@pytest.fixture
def fake(arxiv_dir: Path) -> ArxivFake:
    return ArxivFake(arxiv_dir)


@pytest.fixture
def server(fake: ArxivFake) -> Iterator[LoopbackServer]:
    with LoopbackServer(fake) as running:
        yield running


@pytest.fixture
def make_tool() -> Iterator[Callable[..., ArxivTool]]:
    """Tools with their own spacer (interval 0 unless given), closed after the test."""
    made: list[ArxivTool] = []
    spacers: list[RequestSpacer] = []

    def make(
        url: str, *, spacer: RequestSpacer | None = None, clock: Callable[[], float] = time.monotonic, **settings: Any
    ) -> ArxivTool:
        if spacer is None:
            spacer = RequestSpacer(float(settings.get("min_interval_s", 0.0)))
            spacers.append(spacer)
        options: dict[str, Any] = {"api_url": f"{url}/api/query", "min_interval_s": 0.0, "num_retries": 0}
        tool = ArxivTool(ArxivSettings(**{**options, **settings}), spacer=spacer, clock=clock)
        made.append(tool)
        return tool

    yield make
    for tool in made:
        tool.close()
    for spacer in spacers:
        spacer.close()


def assert_each_request_arrived_after_its_turn(starts: list[float], arrivals: list[float]) -> None:
    """The server saw the k-th request no earlier than the spacer let the k-th request start.

    Both clocks are this process's ``time.monotonic()``. Before ``starts[k]`` only k requests had been let go,
    so at most k can have arrived: this holds under any load. The gaps *between* arrivals do not: a request
    sent on time can reach a loaded server late and the next one on time, so an arrival gap can be shorter
    than the spacing (0.146 s against 0.2 s in a CI run). The spacing itself is checked on ``starts``.
    """
    assert len(arrivals) == len(starts), (starts, arrivals)
    assert all(arrived >= started for started, arrived in zip(starts, sorted(arrivals), strict=True)), (
        starts,
        arrivals,
    )


def recorded_entries(path: Path) -> list[ET.Element]:
    return ET.parse(path).getroot().findall("a:entry", NS)  # noqa: S314 - our own fixture file


def text(entry: ET.Element, tag: str) -> str:
    return " ".join((entry.findtext(tag, default="", namespaces=NS)).split())


# Results -------------------------------------------------------------------------------------------------------
async def test_search_maps_the_recorded_feed(
    server: LoopbackServer, arxiv_dir: Path, make_tool: Callable[..., ArxivTool]
) -> None:
    entries = recorded_entries(arxiv_dir / "xml/search_all_testing_start0_max10.xml")[:5]

    result = await make_tool(server.url).search("testing", num_results=5)

    assert result.ok, result.failure
    chunks = result.chunks
    assert [c.title for c in chunks] == [text(e, "a:title") for e in entries]
    assert [c.content for c in chunks] == [text(e, "a:summary") for e in entries]
    ids = [text(e, "a:id").split("/abs/")[-1] for e in entries]
    assert [c.source_id for c in chunks] == ids
    assert [c.url for c in chunks] == [f"https://arxiv.org/abs/{i}" for i in ids]
    assert [c.chunk_id for c in chunks] == [f"arxiv:{i}" for i in ids]
    assert [c.authors for c in chunks] == [[text(a, "a:name") for a in e.findall("a:author", NS)] for e in entries]
    assert [c.source_date for c in chunks] == [
        datetime.fromisoformat(text(e, "a:published").replace("Z", "+00:00")) for e in entries
    ]
    first, entry = chunks[0], entries[0]
    assert first.metadata["categories"] == [c.get("term") for c in entry.findall("a:category", NS)]
    assert first.metadata["primary_category"] == entry.find("arxiv:primary_category", NS).get("term")  # type: ignore[union-attr]
    assert first.metadata["pdf_url"].startswith("https://arxiv.org/pdf/")
    assert first.metadata["updated"].startswith(text(entry, "a:updated")[:19])
    with_doi = [(c, e) for c, e in zip(chunks, entries, strict=True) if e.find("arxiv:doi", NS) is not None]
    assert all(c.metadata["doi"] == text(e, "arxiv:doi") for c, e in with_doi)
    assert all(c.source_type == "arxiv" and c.tool_name == "academic_search" for c in chunks)
    scores = [c.semantic_relevance for c in chunks]
    assert all(0 <= s <= 1 for s in scores) and scores == sorted(scores, reverse=True) and scores[0] > scores[-1]

    (request,) = server.requests
    assert (request.method, request.path) == ("GET", "/api/query")
    assert request.query == {  # (id_list= is sent empty; the server's parse_qs drops blank values)
        "search_query": ["testing"],
        "sortBy": ["relevance"],
        "sortOrder": ["descending"],
        "start": ["0"],
        "max_results": ["5"],
    }
    assert request.headers["user-agent"].startswith("arxiv.py/")


async def test_sort_by_date_asks_for_submitted_date(
    server: LoopbackServer, make_tool: Callable[..., ArxivTool]
) -> None:
    chunks = await make_tool(server.url).execute("testing", num_results=4, sort_by="date")

    assert server.requests[0].query["sortBy"] == ["submittedDate"]
    dates = [c.source_date for c in chunks]
    assert len(chunks) == 4 and dates == sorted(dates, reverse=True)  # type: ignore[type-var]
    assert {c.semantic_relevance for c in chunks} == {0.5}  # date order carries no relevance information


@pytest.mark.parametrize(
    ("query", "id_list", "expected"),
    [
        ("2104.12255v1", "2104.12255v1", ["2104.12255v1"]),
        ("arXiv:astro-ph/0601001", "astro-ph/0601001", ["astro-ph/0601001v1"]),
        ("0808.05394, 1707.08567", "0808.05394,1707.08567", ["1707.08567v1"]),
    ],
)
async def test_queries_of_arxiv_ids_are_id_lookups(
    server: LoopbackServer, make_tool: Callable[..., ArxivTool], query: str, id_list: str, expected: list[str]
) -> None:
    chunks = await make_tool(server.url).execute(query)
    assert server.requests[0].query["id_list"] == [id_list]
    assert server.requests[0].query.get("search_query", [""]) == [""]
    assert [c.source_id for c in chunks] == expected


async def test_id_lookup_fields(server: LoopbackServer, make_tool: Callable[..., ArxivTool]) -> None:
    (chunk,) = await make_tool(server.url).execute("2104.12255v1")
    assert chunk.title == "0"
    assert chunk.authors == ["Quan Thoi Minh Nguyen"]
    assert chunk.source_date == datetime(2021, 4, 20, 16, 7, 14, tzinfo=UTC)
    assert chunk.content.startswith("What is the funniest number in cryptography? 0.")
    assert chunk.metadata["primary_category"] == "cs.CR" and chunk.metadata["categories"] == ["cs.CR"]
    assert chunk.metadata["pdf_url"] == "https://arxiv.org/pdf/2104.12255v1"


@pytest.mark.parametrize("query", ["0000.0000", "a query nobody recorded"])
async def test_zero_results_is_an_empty_success(
    server: LoopbackServer, make_tool: Callable[..., ArxivTool], query: str
) -> None:
    result = await make_tool(server.url).search(query)
    assert result.ok and result.chunks == []


@pytest.mark.parametrize(
    ("kwargs", "needle"), [({"num_results": 0}, "num_results"), ({"sort_by": "citations"}, "sort_by")]
)
async def test_bad_arguments_are_invalid_requests(
    server: LoopbackServer, make_tool: Callable[..., ArxivTool], kwargs: dict[str, Any], needle: str
) -> None:
    result = await make_tool(server.url).search("testing", **kwargs)
    assert result.failure is not None and result.failure.kind == "invalid_request" and needle in result.failure.message
    assert server.requests == []


# Faults --------------------------------------------------------------------------------------------------------
async def test_error_feed_message_is_reported(fake: ArxivFake, make_tool: Callable[..., ArxivTool]) -> None:
    status, body, _ = fake.recordings[("", "abc", "0")]  # the real HTTP 400 error feed
    with LoopbackServer(lambda _: Reply.text(body, status=status, content_type=ATOM)) as server:
        result = await make_tool(server.url, num_retries=1).search("testing")
    assert result.failure is not None
    assert (result.failure.kind, result.failure.status_code) == ("http_error", 400)
    assert "incorrect id format for abc" in result.failure.message
    assert len(server.requests) == 1  # a 4xx is not retried


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (Reply.text("Rate exceeded.", status=429), "http_error", 429),
        (Reply.text("Internal Server Error", status=500), "http_error", 500),
        (Reply.text("<html><body>Service unavailable</body></html>", content_type="text/html"), "bad_response", None),
        (Reply.text(b"\x00\xff not xml at all", content_type=ATOM), "bad_response", None),
        (Reply(drop_connection=True), "unreachable", None),
    ],
    ids=["429", "500", "html-200", "garbage-200", "dropped"],
)
async def test_faults_are_reported_with_their_kind(
    make_tool: Callable[..., ArxivTool], reply: Reply, kind: str, status: int | None
) -> None:
    with LoopbackServer(lambda _: reply) as server:
        result = await make_tool(server.url).search("testing", timeout=5.0)
    assert result.failure is not None, result.chunks
    assert (result.failure.kind, result.failure.status_code) == (kind, status)
    assert len(server.requests) == 1


async def test_5xx_is_retried_once_and_paced(fake: ArxivFake, make_tool: Callable[..., ArxivTool]) -> None:
    answers = iter([Reply.text("Service Unavailable", status=503)])

    def flaky(request: Request) -> Reply:
        recorded = fake(request)  # the fake also notes the arrival time
        return next(answers, None) or recorded

    with LoopbackServer(flaky) as server:
        tool = make_tool(server.url, num_retries=1, min_interval_s=0.2)
        result = await tool.search("testing", num_results=2)
    assert result.ok and len(result.chunks) == 2
    assert len(server.requests) == 2
    # The retry waits for its turn like any request.
    assert tool.spacer.request_starts[1] - tool.spacer.request_starts[0] >= 0.2
    assert_each_request_arrived_after_its_turn(tool.spacer.request_starts, fake.times())


async def test_hang_is_cut_at_the_tool_timeout(make_tool: Callable[..., ArxivTool]) -> None:
    with LoopbackServer(lambda _: Reply.text("", delay_s=30)) as server:
        started = time.perf_counter()
        result = await make_tool(server.url).search("testing", timeout=0.5)
        elapsed = time.perf_counter() - started
    assert result.failure is not None and result.failure.kind == "timeout"
    assert 0.45 <= elapsed < 5.0  # cut near its 0.5 s, not by the 7 s default nor the 30 s hang (load margin)


async def test_hang_is_cut_by_the_request_timeout_from_settings(make_tool: Callable[..., ArxivTool]) -> None:
    with LoopbackServer(lambda _: Reply.text("", delay_s=30)) as server:
        started = time.perf_counter()
        result = await make_tool(server.url, timeout_s=0.3, num_retries=1).search("testing")  # no Tool timeout
        elapsed = time.perf_counter() - started
    assert result.failure is not None and result.failure.kind == "timeout"
    assert elapsed < 5.0  # cut near the 0.3 s set, not by the 7 s default nor the 30 s hang (load margin)
    assert len(server.requests) == 1  # a timeout is not retried: the budget is spent


async def test_connection_refused_is_unreachable(make_tool: Callable[..., ArxivTool]) -> None:
    started = time.perf_counter()
    result = await make_tool(f"http://127.0.0.1:{closed_port()}").search("testing", timeout=5.0)
    assert result.failure is not None and result.failure.kind == "unreachable"
    assert time.perf_counter() - started < 3.0  # at once, not after the 5 s timeout (load margin)


async def test_execute_returns_empty_list_on_failure(make_tool: Callable[..., ArxivTool]) -> None:
    assert await make_tool(f"http://127.0.0.1:{closed_port()}").execute("testing") == []


async def test_event_loop_keeps_running_during_a_request(fake: ArxivFake, make_tool: Callable[..., ArxivTool]) -> None:
    # The server answers only once the client's loop has run while the request was in flight (a gap bound on a
    # ticker failed CI at load 30): a request that blocked the loop would wait out the gate's 20 s and fail here.
    gate = LoopGatedReplies()
    with LoopbackServer(gate.holding(fake)) as server:
        tool = make_tool(server.url, timeout_s=30.0)
        async with gate:
            chunks = await tool.execute("testing", num_results=3)
    assert len(chunks) == 3
    assert gate.every_reply_waited_for_the_loop


# Pacing --------------------------------------------------------------------------------------------------------
def test_spacer_spaces_request_starts_on_a_fake_clock() -> None:
    now = [100.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    spacer = RequestSpacer(3.0, clock=lambda: now[0], sleep=sleep)
    spacer.wait_turn()  # first request: no wait
    now[0] += 1.0  # the first request took 1 s
    spacer.wait_turn()
    spacer.wait_turn()  # queued right behind
    now[0] += 10.0
    spacer.wait_turn()  # long after: no wait
    assert sleeps == [2.0, 3.0]
    assert spacer.request_starts == [100.0, 103.0, 106.0, 116.0]


async def test_concurrent_queries_are_queued_and_spaced(
    server: LoopbackServer, fake: ArxivFake, make_tool: Callable[..., ArxivTool]
) -> None:
    spacer = RequestSpacer(0.2)
    one, other = make_tool(server.url, spacer=spacer), make_tool(server.url, spacer=spacer)  # two instances
    try:
        results = await asyncio.gather(
            one.search("testing", num_results=2),
            other.search("2104.12255v1"),
            one.search("astro-ph/0601001"),
        )
    finally:
        spacer.close()
    assert all(r.ok and r.chunks for r in results)  # queued, none dropped
    assert len(server.requests) == 3
    starts, arrivals = spacer.request_starts, fake.times()
    assert all(later - earlier >= 0.2 for earlier, later in itertools.pairwise(starts))
    assert_each_request_arrived_after_its_turn(starts, arrivals)


def test_spacing_holds_across_threads_and_event_loops(
    server: LoopbackServer, fake: ArxivFake, make_tool: Callable[..., ArxivTool]
) -> None:
    spacer = RequestSpacer(0.2)
    tools = [make_tool(server.url, spacer=spacer) for _ in range(2)]
    outcomes: list[list[ContextChunk]] = []

    def run(tool: ArxivTool, query: str) -> None:
        outcomes.append(asyncio.run(tool.execute(query)))

    queries = ["testing", "2104.12255v1"]
    threads = [threading.Thread(target=run, args=pair) for pair in zip(tools, queries, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    spacer.close()
    assert len(outcomes) == 2 and all(outcomes)
    assert spacer.request_starts[1] - spacer.request_starts[0] >= 0.2
    assert_each_request_arrived_after_its_turn(spacer.request_starts, fake.times())


def test_default_spacer_is_shared_per_api_host() -> None:
    first = ArxivTool(ArxivSettings(api_url="http://127.0.0.1:9/api/query", min_interval_s=3.0))
    second = ArxivTool(ArxivSettings(api_url="http://127.0.0.1:9/api/query", min_interval_s=1.0))
    elsewhere = ArxivTool(ArxivSettings(api_url="http://127.0.0.1:10/api/query", min_interval_s=3.0))
    try:
        assert first.spacer is second.spacer is spacer_for("http://127.0.0.1:9/other", 0.0)
        assert first.spacer.min_interval_s == 3.0  # the strictest interval wins
        assert elsewhere.spacer is not first.spacer
        assert ArxivSettings().min_interval_s == 3.0  # arXiv's terms, by default
    finally:
        for tool in (first, second, elsewhere):
            tool.close()


# Cache and shared requests -------------------------------------------------------------------------------------
async def test_cache_answers_repeats_and_expires(server: LoopbackServer, make_tool: Callable[..., ArxivTool]) -> None:
    now = [0.0]
    tool = make_tool(server.url, clock=lambda: now[0], cache_ttl_s=60.0)

    first = await tool.execute("testing", num_results=3)
    now[0] = 59.0
    again = await tool.execute("testing", num_results=3)
    assert len(server.requests) == 1 and again == first
    await tool.execute("testing", num_results=2)  # a different query: its own request
    await tool.execute("testing", num_results=3, sort_by="date")
    assert len(server.requests) == 3
    now[0] = 60.5
    await tool.execute("testing", num_results=3)  # expired
    assert len(server.requests) == 4


async def test_cache_is_bounded(server: LoopbackServer, make_tool: Callable[..., ArxivTool]) -> None:
    tool = make_tool(server.url, cache_size=1)
    for query in ("testing", "2104.12255v1", "testing"):
        await tool.execute(query)
    assert len(server.requests) == 3  # "testing" was evicted by the second query


async def test_failures_are_not_cached(fake: ArxivFake, make_tool: Callable[..., ArxivTool]) -> None:
    answers = iter([Reply.text("Internal Server Error", status=500)])
    with LoopbackServer(lambda request: next(answers, None) or fake(request)) as server:
        tool = make_tool(server.url)
        failed = await tool.search("testing", num_results=2)
        recovered = await tool.search("testing", num_results=2)
    assert failed.failure is not None and recovered.ok and len(recovered.chunks) == 2
    assert len(server.requests) == 2


async def test_concurrent_identical_queries_share_one_request(
    fake: ArxivFake, make_tool: Callable[..., ArxivTool]
) -> None:
    with LoopbackServer(lambda request: dataclasses.replace(fake(request), delay_s=0.2)) as server:
        tool = make_tool(server.url)
        results = await asyncio.gather(*(tool.execute("testing", num_results=2) for _ in range(3)))
    assert len(server.requests) == 1
    assert all(chunks == results[0] and len(chunks) == 2 for chunks in results)
    assert results[0][0] is not results[1][0]  # every caller gets its own copies


async def test_a_caller_that_gives_up_does_not_cancel_the_others(
    fake: ArxivFake, make_tool: Callable[..., ArxivTool]
) -> None:
    with LoopbackServer(lambda request: dataclasses.replace(fake(request), delay_s=0.3)) as server:
        tool = make_tool(server.url)
        impatient, patient = await asyncio.gather(
            tool.search("testing", num_results=2, timeout=0.05), tool.search("testing", num_results=2, timeout=5)
        )
    assert impatient.failure is not None and impatient.failure.kind == "timeout"
    assert patient.ok and len(patient.chunks) == 2
    assert len(server.requests) == 1
