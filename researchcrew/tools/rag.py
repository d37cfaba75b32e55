"""``RAGTool`` (``rag_search``): the knowledge base in Milvus as a retrieval source.

The tool is a thin adapter: it receives a ``KnowledgeBase`` (constructed at the edge and shared), runs its hybrid
search on a worker thread (``KnowledgeBase.asearch``), and maps hits to ``ContextChunk`` with the document id as
``source_id`` and the section heading, position and source key in ``metadata`` so citations can say where a
passage sits. Each chunk also carries ``metadata["matches"]``: how many passages of the knowledge base cleared the
relevance floor for this query (counted in the search's candidate pool, so "at least" that many), which tells a
broad question from a precise one; counting costs nothing, the search scores the whole pool anyway. An empty
collection is "no results", not a failure; a Milvus server that cannot be reached is a ``ToolError("unreachable")``
that the Retriever reports as data.

Who may read what (``knowledge/access.py``): every search is limited to the document collections the asking user
may read, asked of ``access`` on each call (so a member removed from a collection loses access with the next search)
and put into the Milvus filter expression as ``collection in [...]`` — never applied to results afterwards, so the
best ``top_k`` are the best the user may read. A caller's own ``filters.collections`` can only narrow that set. A
search without a user reads ``shared`` only. When the collections store cannot be read, the search falls back to
what needs no store (``shared`` and the user's private collection): never more than the user may read.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.errors import (
    KnowledgeBaseError,
    KnowledgeBaseServerError,
    KnowledgeBaseTimeoutError,
    KnowledgeBaseUnavailableError,
    MemoryStoreError,
    ModelUnavailableError,
    ToolError,
)
from researchcrew.knowledge.access import CollectionAccess, ImplicitAccess, implicit_readable
from researchcrew.knowledge.filters import SearchFilters
from researchcrew.tools.base import Tool

if TYPE_CHECKING:
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.search import SearchHit

logger = logging.getLogger(__name__)

MATCHES_COUNTED = 200  # hits asked of the search to count the matches (its candidate pool holds at most 2 × 100)


class RAGTool(Tool):
    """Hybrid (dense + BM25) search over the knowledge-base collection in Milvus."""

    name: ClassVar[str] = "rag_search"
    description: ClassVar[str] = (
        "Search the local knowledge base (papers and notes loaded with `researchcrew ingest`) for passages "
        "relevant to the query; returns cited passages with title, section and date."
    )
    source_type: ClassVar[str] = "rag"

    def __init__(self, knowledge_base: KnowledgeBase, *, access: CollectionAccess | None = None) -> None:
        self.knowledge_base = knowledge_base
        self.access: CollectionAccess = access or ImplicitAccess()

    async def readable(self, user_id: str | None) -> list[str]:
        """The collections ``user_id`` may read now (see the module docstring for the fallback)."""
        try:
            return await self.access.readable(user_id)
        except MemoryStoreError as error:
            logger.warning("collections of user %s unreadable, searching only shared and private: %s", user_id, error)
            return implicit_readable(user_id)

    async def _search(  # type: ignore[override]
        self,
        query: str,
        *,
        num_results: int = 5,
        top_k: int | None = None,
        min_relevance: float | None = None,
        filters: SearchFilters | dict[str, object] | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> list[ContextChunk]:
        """``top_k`` is the seed's name for ``num_results``; ``user_id`` limits the search to the collections that
        user may read; ``session_id`` is accepted and unused."""
        del session_id
        count = top_k if top_k is not None else num_results
        if count < 1:
            raise ToolError("invalid_request", f"num_results must be at least 1, got {count}")
        threshold = self.knowledge_base.settings.retrieval.min_relevance if min_relevance is None else min_relevance
        if not 0.0 <= threshold <= 1.0:
            raise ToolError("invalid_request", f"min_relevance must be in [0, 1], got {threshold}")
        try:
            parsed = SearchFilters.model_validate(filters) if isinstance(filters, dict) else filters
        except ValueError as error:
            raise ToolError("invalid_request", f"invalid filters: {error}") from error
        readable = await self.readable(user_id)
        asked = parsed.collections if parsed is not None else None
        allowed = readable if asked is None else [name for name in asked if name in readable]
        parsed = (parsed or SearchFilters()).model_copy(update={"collections": allowed})
        try:
            hits = await self.knowledge_base.asearch(
                query, top_k=max(count, MATCHES_COUNTED), min_relevance=threshold, filters=parsed
            )
        except KnowledgeBaseTimeoutError as error:
            raise ToolError("timeout", str(error)) from error
        except KnowledgeBaseUnavailableError as error:
            raise ToolError("unreachable", str(error)) from error
        except KnowledgeBaseServerError as error:
            raise ToolError("http_error", str(error)) from error
        except KnowledgeBaseError as error:  # refused, malformed or oversized
            raise ToolError("bad_response", str(error)) from error
        except ModelUnavailableError as error:
            raise ToolError("not_configured", str(error)) from error
        matches = len(hits)
        chunks = [to_context_chunk(hit, tool_name=self.name, query=query) for hit in hits[:count]]
        for chunk in chunks:
            chunk.metadata["matches"] = matches
        return chunks


def to_context_chunk(hit: SearchHit, *, tool_name: str = RAGTool.name, query: str | None = None) -> ContextChunk:
    """A search hit as evidence: relevance, citation fields, and where in the document it sits. ``query`` (what
    was searched) is kept with the scores, which are relative to it."""
    metadata: dict[str, object] = {
        **({"query": query} if query is not None else {}),
        **hit.metadata,
        "heading": hit.heading,
        "position": hit.position,
        "chunk_count": hit.chunk_count,
        "source_key": hit.source_key,
        "source": hit.source,
        "collection": hit.collection,
        "scores": hit.scores.model_dump(),
    }
    if hit.date_hint_match is not None:
        metadata["date_hint_match"] = hit.date_hint_match
    if hit.exact_terms:
        metadata["exact_terms"] = list(hit.exact_terms)
    authors = metadata.pop("authors", [])
    return ContextChunk(
        chunk_id=hit.chunk_id,
        source_type=RAGTool.source_type,
        content=hit.text,
        semantic_relevance=hit.relevance,
        title=hit.title,
        url=hit.url,
        source_id=hit.doc_id,
        source_date=hit.source_date,
        authors=[str(author) for author in authors] if isinstance(authors, list) else [],
        metadata=metadata,
        tool_name=tool_name,
    )
