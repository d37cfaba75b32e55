"""The fault matrix (issue 13): each of the four real tools under each of eight faults, through the whole pipeline.

For every (tool, fault) a ``Runtime`` answers one question from two sources — the tool under the fault and a
healthy in-process companion — and the test checks that the answer comes back within the run's deadline, with the
faulty source reported as it should be: failed with the right kind, or used (slow, empty). The 4 × 8 table is
printed at the end of the run (tests/faults/conftest.py).

The tools are the real ones, driving their real client libraries:

* **web** — ``WebSearchTool``: firecrawl-py against the loopback Firecrawl (``tests/loopback/firecrawl.py``);
* **arxiv** — ``ArxivTool``: the ``arxiv`` package (requests) against the loopback arXiv API;
* **memory** — ``MemoryTool`` over ``ZepMemory``: zep-python against the loopback Zep;
* **rag** — ``RAGTool`` over a ``KnowledgeBase`` on Milvus Lite (a real collection of demo abstracts).

HTTP faults are replies of the loopback servers: a hang is a reply delayed past the client's timeout; 429 carries
``Retry-After: 30``; malformed is a truncated JSON body / a page that is not an Atom feed; refused is a port where
nothing listens; slow is a normal reply 0.4 s late (well inside the source timeout); empty is the service's real
empty answer; oversized is a body over the source's 1 MB limit (``max_response_mb``).

Milvus speaks gRPC, not HTTP, so for **rag** the faults that need a misbehaving server are injected at the client
boundary: the ``pymilvus.MilvusClient`` inside the store is wrapped so that ``search`` behaves as pymilvus does
when the server misbehaves — hang: the call blocks (until the test ends) and then raises what pymilvus raises at
its deadline (``MilvusException`` DEADLINE_EXCEEDED); 429: ``MilvusException`` code 8 "rate limit exceeded" (what
pymilvus raises once its rate-limit retries give up); 500: code 65535 "unexpected error" (Milvus' internal-error
status); malformed: hits without a distance or key (a response the client decoded into nonsense); oversized: the
gRPC error RESOURCE_EXHAUSTED "Received message larger than max" that the client raises for a response over its
message limit; slow: 0.4 s, then the real search. Refused and empty need no injection: a Milvus server URI at a
closed port (pymilvus really connects), and a real, empty collection.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts import FinalResponse
from researchcrew.contracts.request import ResearchRequest
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.memory.zep import ZepMemory
from researchcrew.runtime import open_runtime
from researchcrew.settings import (
    ArxivSettings,
    EmbeddingSettings,
    FirecrawlSettings,
    MilvusSettings,
    RetrievalSettings,
    Settings,
    ZepSettings,
)
from researchcrew.testing.tools import FakeTool, fake_chunk
from researchcrew.tools.arxiv import ArxivTool, RequestSpacer
from researchcrew.tools.base import Tool
from researchcrew.tools.memory_recall import MemoryTool
from researchcrew.tools.rag import RAGTool
from researchcrew.tools.web import WebSearchTool
from tests.e2e.support import MODEL_CACHE_DIR, demo_documents, shared_embedder
from tests.faults.matrix import FAULTS, RESULTS, TOOLS
from tests.loopback.arxiv import ATOM, ArxivFake
from tests.loopback.firecrawl import FirecrawlFake
from tests.loopback.server import LoopbackServer, Reply, Request, closed_port
from tests.loopback.zep import FakeZep

QUESTION = "What is metamorphic testing?"
# A hang is recognised by the clock, so its timeouts are short: the answer must come back near them. Every other
# fault must be recognised by its nature (a status, a size, a parse error) before any clock runs out, at load
# average 10 too: the oversized reply is read up to its 1 MB cap, which took over 1 s on a loaded CI machine and was
# then reported as a timeout. So those cases get timeouts that only a real hang would reach.
HANG_SOURCE_TIMEOUT_S = 1.5
HANG_CLIENT_TIMEOUT_S = 1.0
FAULT_SOURCE_TIMEOUT_S = 4.5
FAULT_CLIENT_TIMEOUT_S = 4.0
DEADLINE_S = 6.0
MARGIN_S = 2.0  # a functional bound: the answer comes back near the deadline, not after a hang
SLOW_S = 0.4
HANG_S = 30.0
LIMIT_MB = 1.0
BIG = "x" * int(1.5 * 1024 * 1024)  # over the 1 MB limit

# What each fault must produce: ("failed", kind) or ("used", None).
EXPECTED: dict[str, tuple[str, str | None]] = {
    "hang": ("failed", "timeout"),
    "429": ("failed", "http_error"),
    "500": ("failed", "http_error"),
    "malformed": ("failed", "bad_response"),
    "refused": ("failed", "unreachable"),
    "slow": ("used", None),
    "empty": ("used", None),
    "oversized": ("failed", "bad_response"),
}


def _rate_limited(body: bytes, content_type: str) -> Reply:
    return Reply(status=429, body=body, headers={"Content-Type": content_type, "Retry-After": "30"})


# ---- web: firecrawl-py against the loopback Firecrawl ------------------------------------------------------------
def _web_route(fault: str, fake: FirecrawlFake) -> Callable[[Request], Reply]:
    results = fake.recorded_results("search_5_web_results_multilingual")

    def route(request: Request) -> Reply:
        if fault == "hang":
            return Reply.json({"success": True, "data": {"web": results}}, delay_s=HANG_S)
        if fault == "429":
            return _rate_limited(b'{"success": false, "error": "Rate limit exceeded"}', "application/json")
        if fault == "500":
            return Reply.json({"success": False, "error": "Internal server error"}, status=500)
        if fault == "malformed":
            return Reply.text('{"success": true, "data": {"web": [{"url": ', content_type="application/json")
        if fault == "slow":
            return Reply.json({"success": True, "data": {"web": results}}, delay_s=SLOW_S)
        if fault == "oversized":
            page = {"url": "https://example.org/big", "title": "Big", "description": "big", "markdown": BIG}
            return Reply.json({"success": True, "data": {"web": [page]}})
        return fake(request)  # empty: a query nobody recorded gets Firecrawl's real empty answer

    return route


@contextmanager
def web_tool(fault: str, fixtures: Path, _: Any) -> Iterator[Tool]:
    fake = FirecrawlFake(fixtures / "firecrawl")
    if fault == "refused":
        url = f"http://127.0.0.1:{closed_port()}"
        yield WebSearchTool(_firecrawl(url, fault))
        return
    with LoopbackServer(_web_route(fault, fake)) as server:
        yield WebSearchTool(_firecrawl(server.url, fault))


def _firecrawl(url: str, fault: str) -> FirecrawlSettings:
    timeout_s = client_timeout_s(fault)
    return FirecrawlSettings(api_key="fc-test-key", api_url=url, timeout_s=timeout_s, max_response_mb=LIMIT_MB)  # type: ignore[arg-type]


# ---- arxiv: the arxiv package against the loopback arXiv API -------------------------------------------------------
def _arxiv_route(fault: str, fake: ArxivFake) -> Callable[[Request], Reply]:
    feed = next(body for status, body, _ in fake.recordings.values() if status == 200 and b"<entry>" in body)

    def route(request: Request) -> Reply:
        if fault == "hang":
            return Reply.text(feed, content_type=ATOM, delay_s=HANG_S)
        if fault == "429":
            return _rate_limited(b"Rate exceeded.", "text/plain")
        if fault == "500":
            return Reply.text("Internal Server Error", status=500)
        if fault == "malformed":
            return Reply.text("<html><body>Service temporarily moved</body></html>", content_type="text/html")
        if fault == "slow":
            return Reply.text(feed, content_type=ATOM, delay_s=SLOW_S)
        if fault == "oversized":
            return Reply.text(feed.replace(b"</summary>", BIG.encode() + b"</summary>", 1), content_type=ATOM)
        return Reply.text(fake.zero_results, content_type=ATOM)  # empty: arXiv's real zero-results feed

    return route


@contextmanager
def arxiv_tool(fault: str, fixtures: Path, _: Any) -> Iterator[Tool]:
    def build(url: str) -> ArxivTool:
        settings = ArxivSettings(
            api_url=f"{url}/api/query",
            min_interval_s=0,
            num_retries=0,
            timeout_s=client_timeout_s(fault),
            cache_ttl_s=0,
            max_response_mb=LIMIT_MB,
        )
        return ArxivTool(settings, spacer=RequestSpacer(0))

    if fault == "refused":
        tool = build(f"http://127.0.0.1:{closed_port()}")
        yield tool
        tool.close()
        return
    with LoopbackServer(_arxiv_route(fault, ArxivFake(fixtures / "arxiv"))) as server:
        tool = build(server.url)
        yield tool
        tool.spacer.close()
        tool.close()


# ---- memory: zep-python against the loopback Zep -------------------------------------------------------------------
def _zep_fault(fault: str) -> Callable[[Request], Reply | None]:
    def fault_reply(request: Request) -> Reply | None:
        if fault == "hang":
            return Reply.json({"results": []}, delay_s=HANG_S)
        if fault == "429":
            return _rate_limited(b'{"message": "rate limit exceeded"}', "application/json")
        if fault == "500":
            return Reply.json({"message": "internal server error"}, status=500)
        if fault == "malformed":
            return Reply.text('{"results": [{"message": {"uuid": ', content_type="application/json")
        if fault == "slow":
            time.sleep(SLOW_S)
            return None
        if fault == "oversized":
            message = {"uuid": "m1", "role_type": "user", "content": BIG, "metadata": {}}
            return Reply.json({"results": [{"message": message, "session_id": "s", "score": 0.9}]})
        return None  # empty: the real answer for a user without messages

    return fault_reply


@contextmanager
def memory_tool(fault: str, fixtures: Path, shared: dict[str, Any]) -> Iterator[Tool]:
    def build(url: str) -> tuple[ZepMemory, MemoryTool]:
        settings = ZepSettings(
            api_url=url, api_key="test-key", timeout_s=client_timeout_s(fault), max_response_mb=LIMIT_MB
        )  # type: ignore[arg-type]
        zep = ZepMemory(settings)
        return zep, MemoryTool(zep)

    if fault == "refused":
        zep, tool = build(f"http://127.0.0.1:{closed_port()}")
        shared["closers"].append(zep.aclose)
        yield tool
        return
    fake = FakeZep(api_key="test-key", fault=_zep_fault(fault))
    with LoopbackServer(fake.route) as server:
        zep, tool = build(server.url)
        shared["closers"].append(zep.aclose)  # its HTTP client is closed by the test, on the event loop
        yield tool


# ---- rag: Milvus Lite, faults at the pymilvus client boundary -------------------------------------------------------
class FaultyMilvusClient:
    """Delegates to the real ``MilvusClient``; ``search`` misbehaves as pymilvus does under the fault."""

    def __init__(self, inner: Any, fault: str, released: threading.Event) -> None:
        self._inner = inner
        self._fault = fault
        self._released = released

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        import grpc
        from pymilvus import MilvusException

        if self._fault == "hang":
            self._released.wait(HANG_S)  # the server never answers (released when the test ends)
            raise MilvusException(grpc.StatusCode.DEADLINE_EXCEEDED, "[search] Retry timeout: 10s, deadline exceeded")
        if self._fault == "429":
            raise MilvusException(8, "rate limit exceeded[rate=0.1]")
        if self._fault == "500":
            raise MilvusException(65535, "unexpected error: segment load failed")
        if self._fault == "malformed":
            return [[{"id": "pk-1", "entity": {}}]]
        if self._fault == "oversized":
            raise MilvusException(
                grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max (300000000 vs. 268435456)"
            )
        if self._fault == "slow":
            time.sleep(SLOW_S)
        return self._inner.search(*args, **kwargs)


@contextmanager
def rag_tool(fault: str, fixtures: Path, shared: dict[str, Any]) -> Iterator[Tool]:
    if fault == "refused":
        milvus = MilvusSettings(uri=f"http://127.0.0.1:{closed_port()}", timeout_s=client_timeout_s(fault))
        settings = _settings(shared["tmp"] / "refused", fault, milvus=milvus)
        refused = KnowledgeBase(settings, embedder=shared["embedder"])
        yield RAGTool(refused)
        refused.close()
        return
    if fault == "empty":
        yield RAGTool(shared["empty_kb"])
        return
    knowledge_base: KnowledgeBase = shared["kb"]
    real = knowledge_base.store.client
    released = threading.Event()
    knowledge_base.store._client = FaultyMilvusClient(real, fault, released)
    try:
        yield RAGTool(knowledge_base)
    finally:
        released.set()
        knowledge_base.store._client = real


# ---- the matrix -----------------------------------------------------------------------------------------------------
BUILDERS: dict[str, Callable[[str, Path, dict[str, Any]], AbstractContextManager[Tool]]] = {
    "rag": rag_tool,
    "web": web_tool,
    "arxiv": arxiv_tool,
    "memory": memory_tool,
}


def client_timeout_s(fault: str) -> float:
    """The timeout of a source's own client (HTTP, gRPC) in the case of ``fault``."""
    return HANG_CLIENT_TIMEOUT_S if fault == "hang" else FAULT_CLIENT_TIMEOUT_S


def _settings(data_dir: Path, fault: str = "hang", **fields: Any) -> Settings:
    source_timeout_s = HANG_SOURCE_TIMEOUT_S if fault == "hang" else FAULT_SOURCE_TIMEOUT_S
    return Settings(
        data_dir=data_dir,
        embedding=EmbeddingSettings(cache_dir=MODEL_CACHE_DIR),
        retrieval=RetrievalSettings(timeout_per_source_s=source_timeout_s, run_deadline_s=DEADLINE_S),
        **fields,
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One embedder, a real knowledge base of demo abstracts, and an empty one, for every rag case."""
    tmp = tmp_path_factory.mktemp("fault_matrix")
    embedder: Embedder = shared_embedder()
    with ExitStack() as stack:
        kb = KnowledgeBase(_settings(tmp / "kb"), embedder=embedder)
        stack.callback(kb.close)
        kb.add_documents(demo_documents(["Metamorphic"]))
        empty = KnowledgeBase(_settings(tmp / "empty"), embedder=embedder)
        stack.callback(empty.close)
        empty.store.open()
        yield {"tmp": tmp, "embedder": embedder, "kb": kb, "empty_kb": empty}


def _companion() -> FakeTool:
    """A healthy source, so there is always something to answer from."""
    content = "Metamorphic testing checks relations between the outputs of related inputs when no oracle exists."
    return FakeTool("notes", chunks=[fake_chunk("notes", 1, content=content, semantic_relevance=0.9)])


def _observed(response: FinalResponse, source_type: str) -> tuple[str, str | None]:
    report = next(r for r in response.source_reports if r.source_type == source_type)
    if report.status == "failed":
        return "failed", report.failure.kind if report.failure else None
    return ("used", None) if report.status in ("success", "empty") else (report.status, None)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("tool_name", TOOLS)
async def test_the_answer_comes_back_and_the_fault_is_reported(
    tool_name: str, fault: str, shared: dict[str, Any], fixtures_dir: Path, tmp_path: Path
) -> None:
    RESULTS[(tool_name, fault)] = (False, "error")
    settings = _settings(tmp_path, fault)
    shared["closers"] = []
    try:
        with BUILDERS[tool_name](fault, fixtures_dir, shared) as tool:
            async with open_runtime(settings, tools=[tool, _companion()], remember=False) as runtime:
                await runtime.stages()  # start-up (the embedding model) is not part of the question's time
                started = time.monotonic()
                request = ResearchRequest(question=QUESTION, user_id="ada", deadline_s=DEADLINE_S)
                response = await runtime.ask(request)
                elapsed = time.monotonic() - started
    finally:
        for close in shared["closers"]:
            await close()

    status, kind = _observed(response, tool.source_type)
    report = next(r for r in response.source_reports if r.source_type == tool.source_type)
    shown = kind if kind else f"used ({report.status})"
    RESULTS[(tool_name, fault)] = (False, f"{shown} {elapsed:.1f}s")
    assert elapsed < DEADLINE_S + MARGIN_S, f"took {elapsed:.1f} s"
    assert response.answer.strip()
    assert any(c.source_type == "notes" for c in response.citations)  # the healthy source still answers
    assert (status, kind) == EXPECTED[fault], report.model_dump_json()
    if kind is not None:
        assert report.failure is not None and "Traceback" not in report.failure.message
        assert len(report.failure.message) < 1_000
        assert json.dumps(report.model_dump(mode="json"))  # reportable as data
    RESULTS[(tool_name, fault)] = (True, f"{shown} {elapsed:.1f}s")
