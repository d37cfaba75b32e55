"""Shared pieces of the end-to-end tests: offline settings, in-process sources, demo documents, answer checks.

The end-to-end tests run the real agents (Retriever, Evaluator, Synthesizer or the extractive synthesizer, citation
validation, Memory) behind ``ResearchAssistant``; only the sources are chosen per test. Everything stays on this
machine: web search is unconfigured, arXiv points at a closed loopback port, LLMs are a ``FakeLLM`` or a loopback
OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import fcntl
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from researchcrew.contracts import ContextChunk, FinalResponse
from researchcrew.data import demo_corpus_path
from researchcrew.embedding.embedder import Embedder, default_cache_dir, get_embedder
from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders import load_file
from researchcrew.settings import ArxivSettings, EmbeddingSettings, LLMSettings, RetrievalSettings, Settings
from researchcrew.tools.base import Tool
from tests.helpers.services import MEMORY_CONNECT_TIMEOUT
from tests.loopback.server import closed_port

# One ONNX export of the embedding model per machine (the user's cache), shared by every test in the process:
# exporting it again per temporary data directory would cost ~20 s each time.
MODEL_CACHE_DIR = default_cache_dir()


def shared_embedder() -> Embedder:
    """The packaged model from ``MODEL_CACHE_DIR`` (``get_embedder``), exported there once per machine even when
    several test processes (pytest-xdist's workers) ask at the same moment: an exclusive lock on a file in the cache
    is held while loading, so one process exports (~20 s) and the others wait, then load the export, instead of each
    exporting the same model. (The export's rename into place already keeps concurrent exports correct.)"""
    MODEL_CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with (MODEL_CACHE_DIR / ".tests-export.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return get_embedder(EmbeddingSettings(cache_dir=MODEL_CACHE_DIR))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


_MARKER = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def offline_settings(data_dir: Path, *, llm: LLMSettings | None = None, **fields: Any) -> Settings:
    """Settings as a user without keys or network has them: Firecrawl unconfigured, arXiv unreachable (a closed
    loopback port, refused at once, no retries, no pacing), the packaged embedding model from the shared cache."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "arxiv": ArxivSettings(
            api_url=f"http://127.0.0.1:{closed_port()}/api/query", min_interval_s=0, num_retries=0, timeout_s=2
        ),
        "embedding": EmbeddingSettings(cache_dir=MODEL_CACHE_DIR),
        # Generous bounds (returned from at once when sources answer): at load average 10+ the knowledge base's
        # search alone took more than 5 s. Tests of timeouts and deadlines set their own.
        "retrieval": RetrievalSettings(timeout_per_source_s=30, run_deadline_s=90),
        "llm": llm or LLMSettings(),
        **fields,
    }
    return Settings(**values)


def offline_environment(data_dir: Path) -> dict[str, str]:
    """The same as ``offline_settings``, as the environment variables the CLI reads."""
    return {
        "RESEARCHCREW_DATA_DIR": str(data_dir),
        "RESEARCHCREW_ARXIV__API_URL": f"http://127.0.0.1:{closed_port()}/api/query",
        "RESEARCHCREW_ARXIV__MIN_INTERVAL_S": "0",
        "RESEARCHCREW_ARXIV__NUM_RETRIES": "0",
        "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(MODEL_CACHE_DIR),
        **MEMORY_CONNECT_TIMEOUT,
    }


def demo_documents(title_words: Sequence[str]) -> list[Document]:
    """Records of the bundled demo corpus whose title contains one of ``title_words``, loaded by the same loader
    that `researchcrew ingest --demo` uses."""
    loaded = load_file(demo_corpus_path())
    assert not loaded.issues, loaded.issues
    words = [word.lower() for word in title_words]
    return [document for document in loaded.documents if any(word in (document.title or "").lower() for word in words)]


def evidence(
    chunk_id: str,
    content: str,
    *,
    relevance: float = 0.8,
    source_type: str = "rag",
    title: str | None = None,
    **fields: Any,
) -> ContextChunk:
    """A chunk as a source returns it, dated recently so the Evaluator's recency does not filter it."""
    values: dict[str, Any] = {
        "source_date": datetime(2025, 6, 1, tzinfo=UTC),
        "title": title or f"Source {chunk_id}",
        "url": f"https://example.org/{chunk_id}",
        **fields,
    }
    return ContextChunk(
        chunk_id=chunk_id,
        source_type=source_type,
        content=content,
        semantic_relevance=relevance,
        tool_name=f"{source_type}_spy",
        **values,
    )


class SpyTool(Tool):
    """A real in-process source: returns the given chunks (after ``delay_s``) and records every query."""

    name: ClassVar[str] = "spy_search"
    description: ClassVar[str] = "An in-process source with scripted evidence."
    source_type: ClassVar[str] = "rag"

    def __init__(
        self, chunks: Sequence[ContextChunk], *, delay_s: float = 0.0, source_type: str = "rag", name: str | None = None
    ) -> None:
        self.chunks = list(chunks)
        self.delay_s = delay_s
        self.queries: list[str] = []
        # Instance attributes shadow the class ones, so one class can play several sources.
        self.source_type = source_type  # type: ignore[misc]
        self.name = name or f"{source_type}_spy"  # type: ignore[misc]

    async def _search(
        self, query: str, *, num_results: int = 5, user_id: str | None = None, session_id: str | None = None
    ) -> list[ContextChunk]:
        self.queries.append(query)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self.chunks[:num_results]


def claim_texts(response: FinalResponse) -> list[str]:
    return [claim.text for section in response.sections for claim in section.claims]


def assert_every_claim_cited(response: FinalResponse) -> None:
    """Every statement carries at least one citation, every citation number is listed, every listed citation is
    used, and every line of the answer's prose that makes a statement ends with a marker."""
    numbers = {citation.number for citation in response.citations}
    used: set[int] = set()
    claims = [claim for section in response.sections for claim in section.claims]
    assert claims, "the answer makes no statements"
    for claim in claims:
        assert claim.citations, f"uncited statement: {claim.text!r}"
        assert set(claim.citations) <= numbers, f"{claim.text!r} cites {claim.citations}, listed are {numbers}"
        used.update(claim.citations)
    assert used == numbers, f"listed but never cited: {sorted(numbers - used)}"
    for line in response.answer.splitlines():
        if line.startswith("- "):
            cited = re.search(r"\[\d+(?:\s*,\s*\d+)*\][.?!]?$", line.strip())
            assert cited, f"answer line without a citation: {line!r}"
    assert response.citation_stats.valid >= len(claims)


def without_markers(text: str) -> str:
    return _MARKER.sub("", text).strip()
