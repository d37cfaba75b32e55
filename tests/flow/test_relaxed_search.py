"""A widened search after a miss (seed 004, issue 20): the Retriever asks each source for more results and gives the
sources that take a relevance floor half of it, unless the request set one itself."""

from __future__ import annotations

from typing import Any

from researchcrew.contracts import ContextChunk, RetrieverInput
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.settings import RetrievalSettings
from researchcrew.testing import FakeTool


class FlooredTool(FakeTool):
    """A fake knowledge base that takes a relevance floor, as the RAG tool does, and records what it was asked."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(self.source_type, **kwargs)
        self.asked: list[dict[str, Any]] = []

    async def _search(  # type: ignore[override]
        self, query: str, *, num_results: int = 5, min_relevance: float | None = None, **kwargs: Any
    ) -> list[ContextChunk]:
        self.asked.append({"num_results": num_results, "min_relevance": min_relevance})
        return await super()._search(query, num_results=num_results, **kwargs)


def request(**fields: Any) -> RetrieverInput:
    return RetrieverInput(query_text="Who wrote QuickCheck?", user_id="u", session_id="s", **fields)


async def test_a_relaxed_search_asks_for_more_results_under_a_lower_floor() -> None:
    floored, plain = FlooredTool(), FakeTool("web")
    agent = Retriever([floored, plain], settings=RetrievalSettings(num_results=5, min_relevance=0.3))
    await agent.run(request())
    await agent.run(request(relaxed=True))
    assert floored.asked == [
        {"num_results": 5, "min_relevance": None},
        {"num_results": 10, "min_relevance": 0.15},
    ]
    outcome = await agent.run(request(relaxed=True))
    assert {r.source_type: r.status for r in outcome.aggregated_context.source_reports}["web"] == "success"


async def test_a_floor_the_request_set_is_kept() -> None:
    floored = FlooredTool()
    agent = Retriever([floored], settings=RetrievalSettings(num_results=5, min_relevance=0.3))
    await agent.run(request(relaxed=True, tool_options={"rag": {"min_relevance": 0.5}}))
    assert floored.asked[-1]["min_relevance"] == 0.5


async def test_conversation_memory_is_not_widened() -> None:
    class Memory(FlooredTool):
        source_type = "memory"

    memory = Memory()
    agent = Retriever([memory], settings=RetrievalSettings(num_results=5, min_relevance=0.3))
    await agent.run(request(relaxed=True))
    assert memory.asked == [{"num_results": 5, "min_relevance": None}]
