"""A small in-process corpus for deep-run tests: a source that answers each query with the passages sharing its
content words (relevance from the overlap), so every sub-question gets its own evidence, as from a real index."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from researchcrew.contracts import ContextChunk
from researchcrew.text.terms import term_set
from researchcrew.tools.base import Tool

PASSAGES = {
    "pool-1": (
        "Pooled testing",
        "Pooled testing screens many samples with few tests by mixing samples before testing.",
    ),
    "pool-2": ("Dilution in pools", "Dilution lowers the sensitivity of pooled testing when pools grow large."),
    "pool-3": ("Dorfman screening", "Dorfman proposed group testing in 1943 to screen soldiers for syphilis."),
    "pool-4": (
        "Adaptive pooling",
        "Adaptive pooling designs retest positive pools in a second stage to find infected samples.",
    ),
    "pool-5": ("Pooling cost", "Pooling samples saves reagents and laboratory time during large screening campaigns."),
    "pool-6": ("Pooling limits", "Pooled testing works poorly when the prevalence of infection is high."),
}


class CorpusTool(Tool):
    """Answers with the passages that share content words with the query; records the queries."""

    name: ClassVar[str] = "corpus_search"
    description: ClassVar[str] = "An in-process corpus."
    source_type: ClassVar[str] = "rag"

    def __init__(
        self, passages: dict[str, tuple[str, str]] | None = None, *, delay_s: float = 0.0, only_if: str | None = None
    ) -> None:
        self.passages = passages or PASSAGES
        self.delay_s = delay_s
        self.only_if = only_if  # answer nothing unless the query contains this word (to force a clarification)
        self.queries: list[str] = []

    async def _search(
        self, query: str, *, num_results: int = 5, user_id: str | None = None, session_id: str | None = None
    ) -> Sequence[ContextChunk]:
        self.queries.append(query)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.only_if and self.only_if not in query.lower():
            return []
        wanted = term_set(query)
        hits = []
        for chunk_id, (title, text) in self.passages.items():
            shared = len(wanted & term_set(f"{title} {text}"))
            if shared:
                relevance = min(0.95, 0.45 + 0.15 * shared)
                hits.append(
                    ContextChunk(
                        chunk_id=chunk_id,
                        source_type="rag",
                        content=text,
                        semantic_relevance=relevance,
                        title=title,
                        source_id=chunk_id,
                        source_date=datetime(2025, 3, 1, tzinfo=UTC),
                        tool_name=self.name,
                    )
                )
        hits.sort(key=lambda chunk: chunk.semantic_relevance, reverse=True)
        return hits[:num_results]
