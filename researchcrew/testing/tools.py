"""A fake retrieval source for tests: a real ``Tool`` that answers with scripted chunks, or fails as told.

    tool = FakeTool("rag", chunks=[fake_chunk("rag", 1, content="Metamorphic testing checks relations.")])
    slow = FakeTool("web", delay_s=0.2)                           # answers after 200 ms
    down = FakeTool("arxiv", fail_with=("http_error", "HTTP 503"))  # reported as a failed source
    async with ResearchAssistant(settings, tools=[tool, slow, down], remember=False) as assistant: ...
    assert tool.calls[0][0] == "What is metamorphic testing?"

It records every call (query and keyword arguments), how many calls started, and whether one was cancelled, so a
test can assert who was asked what, and that a cut-off source was really stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from researchcrew.contracts import ContextChunk
from researchcrew.errors import FailureKind, ToolError
from researchcrew.tools.base import Tool


def fake_chunk(source_type: str, number: int, **fields: Any) -> ContextChunk:
    """A valid chunk with a predictable id (``rag-1``) and content; any field can be given."""
    values: dict[str, Any] = {
        "chunk_id": f"{source_type}-{number}",
        "source_type": source_type,
        "content": f"evidence {number} from {source_type}",
        "semantic_relevance": 0.5,
        **fields,
    }
    return ContextChunk(**values)


class FakeTool(Tool):
    """Answers with ``chunks`` (default: ``count`` generated ones) after ``delay_s``; or, with ``fail_with``,
    raises ``ToolError(kind, message)`` as a real tool does for a failure it understands; or, with ``hang``,
    never answers (until cancelled)."""

    name = "fake"
    description = "A scripted fake source."
    source_type = "rag"

    def __init__(
        self,
        source_type: str = "rag",
        *,
        name: str | None = None,
        chunks: Sequence[ContextChunk] | None = None,
        count: int = 2,
        delay_s: float = 0.0,
        fail_with: tuple[FailureKind, str] | None = None,
        hang: bool = False,
    ) -> None:
        # Instance attributes shadow the class attributes, so one class serves every source type.
        self.source_type = source_type  # type: ignore[misc]
        self.name = name or f"{source_type}_fake"  # type: ignore[misc]
        self.chunks = list(chunks) if chunks is not None else [fake_chunk(source_type, i) for i in range(count)]
        self.delay_s = delay_s
        self.fail_with = fail_with
        self.hang = hang
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.started = 0
        self.cancelled = False

    async def _search(
        self,
        query: str,
        *,
        num_results: int = 5,
        user_id: str | None = None,
        session_id: str | None = None,
        **options: Any,
    ) -> list[ContextChunk]:
        self.calls.append(
            (query, {"num_results": num_results, "user_id": user_id, "session_id": session_id, **options})
        )
        self.started += 1
        try:
            await self._behave()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return list(self.chunks)

    async def _behave(self) -> None:
        """What happens before the chunks are returned; subclasses script other behaviours here."""
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.hang:
            await asyncio.Event().wait()
        if self.fail_with is not None:
            raise ToolError(*self.fail_with)
