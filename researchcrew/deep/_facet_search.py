"""Facets checked against the sources themselves (issue 21 item 1): a candidate sub-question is searched the way its
research will search it, and kept only when what comes back is on the broad topic, holds a document of its own facet,
and shares at most one of its best three documents with every sub-question kept before it.

Judging inside the probe (``_facets.find_facets``) is not enough: the probe holds the broad question's best twenty
passages, while a sub-question's research searches the whole source, where the topic's central documents outrank a
facet's own for any question that names the topic. A candidate that fails is worded again (with a phrase that sets
its facet apart, then without the topic's words) or dropped; a topic with few documents gets a shorter plan rather
than sub-questions that would read the same evidence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.deep._facets import (
    EXCLUDED_SOURCES,
    MAX_CHECKS,
    MAX_SHARED,
    TOP_EVIDENCE,
    Facet,
    FacetDraft,
    Judgement,
    document_key,
    draft_facets,
    select_facets,
)

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder

logger = logging.getLogger(__name__)

Search = Callable[[str], Awaitable[Sequence[ContextChunk]]]
"""Searches the sources for a text and returns what they found, best first (never raises: nothing on failure)."""

CHECK_RESULTS = 4 * TOP_EVIDENCE  # passages asked of each source per check (several may come from one document)


def ranked_documents(chunks: Sequence[ContextChunk]) -> list[tuple[str, str]]:
    """(key, title and text) of the documents a search found, in the order found (the sources rank them; their
    relevance scores are not comparable with the rank a fused search gives), one per document, memory left out."""
    documents: dict[str, str] = {}
    for chunk in chunks:
        if chunk.source_type in EXCLUDED_SOURCES:
            continue
        key = document_key(chunk)
        documents[key] = f"{documents.get(key, chunk.title or '')} {chunk.content}"
    return list(documents.items())


def judge_found(draft: FacetDraft, chunks: Sequence[ContextChunk]) -> Judgement:
    """A wording's top evidence (its search's best ``TOP_EVIDENCE`` documents) and whether it is on topic: at least
    two of them (all, when fewer) on the broad topic (``FacetDraft.on_topic``)."""
    top = ranked_documents(chunks)[:TOP_EVIDENCE]
    on_topic = sum(draft.on_topic(key, text) for key, text in top)
    return tuple(key for key, _ in top), bool(top) and on_topic >= min(2, len(top))


async def searched_facets(
    question: str,
    topic: str,
    evidence: Sequence[ContextChunk],
    *,
    search: Search,
    max_facets: int,
    embedder: Embedder | None = None,
    max_checks: int = MAX_CHECKS,
) -> list[Facet]:
    """The facets of what the probe found whose sub-questions, searched in ``search``, each read on-topic evidence
    the others do not (see the module docstring); at most ``max_facets``, at most ``max_checks`` searches. A check
    whose search finds nothing (a failed source) is judged inside the probe instead. [] when the probe found nothing
    usable."""
    draft = await asyncio.to_thread(draft_facets, question, topic, evidence, embedder=embedder)
    if draft is None or max_facets < 1:
        return []
    selection = select_facets(
        draft, max_facets=max_facets, top_count=TOP_EVIDENCE, max_shared=MAX_SHARED, max_checks=max_checks
    )
    try:
        wording = next(selection)
        while True:
            found = await search(wording)
            if found:
                judgement = judge_found(draft, found)
            else:
                logger.info("checking the sub-question %r found nothing; judged inside the probe", wording)
                judgement = (draft.in_probe(wording), True)
            wording = selection.send(judgement)
    except StopIteration as done:
        return list(done.value)
