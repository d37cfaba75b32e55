"""The ``add_document`` tool: a document into the caller's knowledge base, through the service's Library — the same
checks, limits, collections and background ingestion as ``POST /v1/documents`` (issue 19 item 3, issue 23).

Exactly one of ``text`` (a Markdown or plain-text document), ``content_base64`` (any file the loaders read: PDF,
HTML, JSONL ...) or ``url`` (fetched through the address policy). The tool waits up to ``wait_s`` for the ingestion
to finish, reporting its progress, and answers with the document's status; a bad file is a tool error with the
loader's reason and nothing stored. Only the service's ``/mcp`` has a Library: on stdio the tool says to use
``researchcrew ingest`` (or the service).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from researchcrew.knowledge.intake import UploadedFile
from researchcrew.mcp_server._calls import guarded

if TYPE_CHECKING:
    from researchcrew.knowledge.library import Library
    from researchcrew.settings import Settings

WAIT_LIMIT_S = 600.0


class DocumentAdded(BaseModel):
    """The document as the knowledge base has it now."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The document's id (GET /v1/documents/{id}).")
    filename: str = Field(description="Its file name, as citations show it.")
    collection: str = Field(description="The collection it belongs to (who may search it).")
    status: str = Field(description="queued, ingesting, ready or failed.")
    chunks: int = Field(description="Its passages in the knowledge base once ready.")
    error: str | None = Field(description="Why it failed, if it did.")


def register_add_document(
    server: FastMCP[Any],
    *,
    library: Callable[[], Library | None],
    settings: Callable[[], Settings],
    user_of: Callable[[Context[Any, Any, Any]], str],
) -> None:
    """Add the ``add_document`` tool to ``server``."""

    @server.tool(annotations=ToolAnnotations(title="Add a document to the knowledge base", readOnlyHint=False))
    async def add_document(
        ctx: Context[Any, Any, Any],
        filename: Annotated[
            str | None, Field(default=None, max_length=255, description="Its name (and type): notes.md, paper.pdf.")
        ] = None,
        text: Annotated[
            str | None, Field(default=None, description="The document as text (Markdown or plain).")
        ] = None,
        content_base64: Annotated[
            str | None, Field(default=None, description="The file's bytes, base64-encoded (PDF, HTML, JSONL ...).")
        ] = None,
        url: Annotated[str | None, Field(default=None, max_length=2048, description="Fetch the document here.")] = None,
        collection: Annotated[
            str | None, Field(default=None, max_length=128, description="Its collection; none: your private one.")
        ] = None,
        wait_s: Annotated[
            float, Field(default=60.0, ge=0, le=WAIT_LIMIT_S, description="Wait this long for it to be ready.")
        ] = 60.0,
    ) -> DocumentAdded:
        """Add a document to your knowledge base (private unless you name a collection you may write to), ingest
        it, and say when it is ready to be searched and cited."""

        async def work() -> DocumentAdded:
            documents = library()
            if documents is None:
                raise ToolError(
                    "add_document needs the service's /mcp (researchcrew serve); here use researchcrew ingest"
                )
            given = [value for value in (text, content_base64, url) if value is not None]
            if len(given) != 1:
                raise ToolError("give exactly one of text, content_base64 or url")
            file = await _file(filename, text, content_base64, url, settings())
            [stored] = await documents.add(user_of(ctx), [file], collection)
            status, chunks, error = await _wait(documents, stored.id, stored.status, wait_s, ctx)
            return DocumentAdded(
                id=stored.id,
                filename=stored.filename,
                collection=stored.collection,
                status=status,
                chunks=chunks,
                error=error,
            )

        return await guarded("add_document", work())


async def _file(
    filename: str | None, text: str | None, content_base64: str | None, url: str | None, settings: Settings
) -> UploadedFile:
    if url is not None:
        from researchcrew.knowledge.url_fetch import fetch

        return await fetch(url, settings)
    if text is not None:
        return UploadedFile(filename=filename or "document.md", content=text.encode("utf-8"))
    if not filename:
        raise ToolError("content_base64 needs a filename that says its type (paper.pdf, page.html ...)")
    try:
        content = base64.b64decode(content_base64 or "", validate=True)
    except (binascii.Error, ValueError) as error:
        raise ToolError(f"content_base64 is not base64: {error}") from error
    return UploadedFile(filename=filename, content=content)


async def _wait(
    documents: Library, document_id: str, status: str, wait_s: float, ctx: Context[Any, Any, Any]
) -> tuple[str, int, str | None]:
    """The document's status once ingestion ends or ``wait_s`` passes, with progress reported on the way."""
    queue = documents.subscribe(document_id)
    deadline = time.monotonic() + wait_s
    chunks, error = 0, None
    try:
        current = await documents.store.get(document_id)  # it may have finished before we listened
        if current is not None:
            status, chunks, error = current.status, current.chunks, current.error
        while status in ("queued", "ingesting"):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                event = await asyncio.wait_for(queue.get(), timeout=left)
            except TimeoutError:
                break
            status, chunks, error = event.status, event.chunks, event.error
            if event.total:
                await ctx.report_progress(event.done, event.total, f"{document_id}: {event.status}")
    finally:
        documents.unsubscribe(document_id, queue)
    return status, chunks, error


__all__ = ["DocumentAdded", "register_add_document"]
