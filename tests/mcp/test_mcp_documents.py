"""``add_document`` over ``/mcp``: a document goes into the caller's private collection through the service's
Library (the same checks as ``POST /v1/documents``), is ready when the tool returns, and is then searched for its
owner only; a file the loaders refuse is a one-line tool error with nothing stored."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from mcp.types import TextContent

from tests.mcp.support import http_session, mcp_service

NOTES = (
    "# Lab notes\n\n## Flaky tests\n\nQuarantining flaky tests keeps the main branch green while the zorblax "
    "scheduler reruns them overnight.\n"
)


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


async def test_a_document_added_over_mcp_is_ready_and_searched_for_its_owner_only(tmp_path: Path) -> None:
    with mcp_service(tmp_path, None) as service:  # the real knowledge base of the data folder
        async with http_session(service.url, service.auth("ada")) as ada:
            added = await ada.call_tool("add_document", {"filename": "lab-notes.md", "text": NOTES})
            found = await ada.call_tool("search_knowledge_base", {"query": "zorblax scheduler reruns flaky tests"})
            corrupt = await ada.call_tool(
                "add_document",
                {"filename": "broken.pdf", "content_base64": base64.b64encode(b"%PDF-1.4 not really").decode()},
            )
            neither = await ada.call_tool("add_document", {"filename": "x.md"})
        async with http_session(service.url, service.auth("bob")) as bob:
            hidden = await bob.call_tool("search_knowledge_base", {"query": "zorblax scheduler reruns flaky tests"})

    assert not added.isError, text_of(added)
    document = added.structuredContent
    assert document is not None
    assert (document["status"], document["collection"], document["filename"]) == ("ready", "user:ada", "lab-notes.md")
    assert document["chunks"] >= 1
    assert "zorblax" in text_of(found)
    assert hidden.structuredContent is not None
    assert hidden.structuredContent["passages"] == []  # another user's private document is not searched
    assert corrupt.isError and "\n" not in text_of(corrupt) and "broken.pdf" in text_of(corrupt)
    assert neither.isError and "exactly one of text, content_base64 or url" in text_of(neither)
