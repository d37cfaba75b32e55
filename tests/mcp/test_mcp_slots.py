"""Questions asked through ``/mcp`` take the user's places for working questions like the chat route's do: past
``service.max_concurrent_questions`` an ``ask`` or a ``research`` is a tool error saying so (the routes' 429), the
place comes back when the call ends, and another user's places are their own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from mcp.types import TextContent

from researchcrew.contracts import ContextChunk
from researchcrew.testing import fake_chunk
from researchcrew.tools.base import Tool
from tests.mcp.support import http_session, mcp_service
from tests.service.support import EVIDENCE


class GatedSource(Tool):
    """Answers once ``gate`` is open (set from the test's thread); ``searching`` says a search is under way."""

    name: ClassVar[str] = "gated_rag"
    description: ClassVar[str] = "A source that waits for the test."
    source_type: ClassVar[str] = "rag"

    def __init__(self) -> None:
        self.searching = threading.Event()
        self.gate = threading.Event()

    async def _search(self, query: str, **_: Any) -> Sequence[ContextChunk]:
        self.searching.set()
        await asyncio.to_thread(self.gate.wait, 60)
        return [fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9)]


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


async def test_an_ask_past_the_users_limit_is_a_tool_error_and_the_place_comes_back(tmp_path: Path) -> None:
    source = GatedSource()
    with mcp_service(tmp_path, [source], max_concurrent_questions=1) as service:
        throttle = service.app.state.service.throttle
        async with (
            http_session(service.url, service.auth("ada")) as first,
            http_session(service.url, service.auth("ada")) as second,
        ):
            working = asyncio.create_task(first.call_tool("ask", {"question": "How does pooled testing save tests?"}))
            try:
                assert await asyncio.to_thread(source.searching.wait, 60), "the first ask never started"
                assert throttle.running("ada") == 1
                refused = await second.call_tool("ask", {"question": "What is pooled testing?"})
                deep = await second.call_tool("research", {"question": "What is known about pooled testing?"})
            finally:
                source.gate.set()
            answered = await working
            assert not answered.isError, text_of(answered)
            assert throttle.running("ada") == 0  # given back when the call ended
            again = await second.call_tool("ask", {"question": "What is pooled testing?"})
            assert not again.isError, text_of(again)

    for limited in (refused, deep):
        message = text_of(limited)
        assert limited.isError and "1 question(s) or deep runs working, the most allowed at once" in message
        assert "429" in message and "too-many-questions" in message and "\n" not in message
