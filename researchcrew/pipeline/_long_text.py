"""The long-text route (seed 004 §5, issue 22): summaries first, then the matching sections' passages.

``search_vector(scope=summary)`` then ``scope=segment``: the question's vector (the same cached query vector the
knowledge-base search uses) is matched against the summaries of long documents and of their sections
(``knowledge/summaries``); the best summaries at or above ``summary_min_score`` name the documents and sections
the question is about, and the knowledge base is then searched *within them* — the sections are part of the Milvus
filter expression (``SearchFilters.sections``), so a section found by its theme gives its best passages even when
none of them would win against the whole collection on its own. The passages come in the order of their sections'
matches: each section's best passage, the best-matching section's first, then the rest by relevance.

A matching document summary drills into its matching sections when there are some, else into the whole document.
When no summary reaches the threshold (no long documents, or none about the question), nothing is returned and the
question goes on by plain retrieval (``route.tried`` ends with ``retrieval``).

The passages found join the first retrieval's evidence (``with_long_text``): short documents have no summaries, so
the ordinary search still runs beside the drill-down and the evaluator ranks both.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from researchcrew.contracts import ContextChunk
from researchcrew.contracts.retriever import RetrieverOutput
from researchcrew.knowledge.filters import SearchFilters, SectionRef

if TYPE_CHECKING:
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.search import SearchHit
    from researchcrew.knowledge.summaries import SummaryHit, SummaryIndex

logger = logging.getLogger(__name__)

SUMMARIES_SEARCHED = 20  # summaries compared with the question (documents and sections together)
PASSAGES = 5  # passages taken from the matching sections


@dataclass
class LongTextResult:
    """What the long-text route found: the summaries that matched, the sections searched, their passages."""

    matches: list[SummaryHit] = field(default_factory=list)
    sections: list[SectionRef] = field(default_factory=list)
    chunks: list[ContextChunk] = field(default_factory=list)
    best_score: float | None = None

    def describe(self) -> str:
        """One line for the route's reason: which sections were searched, or why none."""
        if not self.sections:
            best = "no summaries" if self.best_score is None else f"best summary {self.best_score:.2f}"
            return f"no summary matched ({best}): plain retrieval"
        named = [_name(hit) for hit in self.matches[:3]]
        return f"summaries matched: {'; '.join(named)} → {len(self.chunks)} passages from {len(self.sections)} sections"


class LongTextSearch:
    """Summary search, then a chunk search filtered to the matching documents and sections (module docstring)."""

    def __init__(
        self,
        knowledge_base: KnowledgeBase,
        summaries: SummaryIndex,
        *,
        min_score: float = 0.3,
        sections: int = 3,
        passages: int = PASSAGES,
    ) -> None:
        self.knowledge_base = knowledge_base
        self.summaries = summaries
        self.min_score = min_score
        self.sections = sections
        self.passages = passages

    def run(self, question: str, collections: Sequence[str]) -> LongTextResult:
        """Blocking (embedding and pymilvus): call it on a worker thread. Raises ``KnowledgeBaseError``."""
        result = LongTextResult()
        if not collections:
            return result
        vector = self.knowledge_base.embedder.embed_query(question)
        hits = self.summaries.search(vector.tolist(), collections, limit=SUMMARIES_SEARCHED)
        result.best_score = hits[0].score if hits else None
        result.matches = [hit for hit in hits if hit.score >= self.min_score]
        result.sections = self.targets(result.matches)
        if not result.sections:
            return result
        filters = SearchFilters(collections=list(collections), sections=result.sections)
        found = self.knowledge_base.search(question, top_k=self.passages, filters=filters)
        from researchcrew.tools.rag import to_context_chunk

        for hit in _by_section(found, result.sections):
            chunk = to_context_chunk(hit, query=question)
            chunk.metadata["long_text"] = True
            result.chunks.append(chunk)
        return result

    def targets(self, matches: Sequence[SummaryHit]) -> list[SectionRef]:
        """The sections to search, best first: each matching section; a matching whole document as its matching
        sections when it has some, else as the whole document (a PDF: its pages)."""
        sections_of: dict[tuple[str, str], list[SummaryHit]] = {}
        for hit in matches:
            if hit.kind == "section":
                sections_of.setdefault((hit.collection, hit.group), []).append(hit)
        chosen: dict[tuple[str, str | None], SectionRef] = {}
        for hit in matches:
            if len(chosen) >= self.sections:
                break
            if hit.kind == "section":
                refs = [_section(hit)]
            elif sections_of.get((hit.collection, hit.group)):
                continue  # its sections are listed by their own scores
            else:
                refs = _whole(hit)
            for ref in refs:
                chosen.setdefault((ref.source_key, ref.heading), ref)
        return list(chosen.values())


def _by_section(hits: Sequence[SearchHit], sections: Sequence[SectionRef]) -> list[SearchHit]:
    """The passages in the order of their sections' summary matches: the best passage of each section first (the
    section that matched best leads, even when a passage of another section scores higher on its own), then the
    rest by relevance."""
    rank: dict[tuple[str, str | None], int] = {}
    for number, ref in enumerate(sections):
        rank.setdefault((ref.source_key, ref.heading), number)

    def section_of(hit: SearchHit) -> int:
        exact = rank.get((hit.source_key, hit.heading or ""))
        whole = rank.get((hit.source_key, None))
        found = [value for value in (exact, whole) if value is not None]
        return min(found) if found else len(sections)

    leaders: dict[int, SearchHit] = {}
    for hit in hits:  # best first: the first hit of a section is its best
        leaders.setdefault(section_of(hit), hit)
    first = [leaders[number] for number in sorted(leaders)]
    return first + [hit for hit in hits if all(hit is not leader for leader in first)]


def _section(hit: SummaryHit) -> SectionRef:
    # A PDF page's section is the page itself (its chunks carry no heading of their own).
    heading = hit.heading if hit.heading or hit.source_key == hit.group else None
    return SectionRef(source_key=hit.source_key, heading=heading)


def _whole(hit: SummaryHit) -> list[SectionRef]:
    if hit.pages:
        return [SectionRef(source_key=f"{hit.group}#page={page}") for page in hit.pages]
    return [SectionRef(source_key=hit.source_key)]


def _name(hit: SummaryHit) -> str:
    title = hit.title or hit.group
    where = (
        f" § {hit.heading}" if hit.heading else (f" p. {hit.pages[0]}" if hit.kind == "section" and hit.pages else "")
    )
    return f"{title}{where} ({hit.score:.2f})"[:200]


def with_long_text(output: RetrieverOutput, chunks: Sequence[ContextChunk]) -> RetrieverOutput:
    """The retrieval's evidence with the long-text route's passages added (those it did not find itself)."""
    if not chunks:
        return output
    context = output.aggregated_context
    known = {chunk.chunk_id for chunk in context.chunks}
    added = [chunk for chunk in chunks if chunk.chunk_id not in known]
    if not added:
        return output
    updated = context.model_copy(update={"chunks": [*context.chunks, *added]})
    sources = list(dict.fromkeys([*output.sources_used, *(chunk.source_type for chunk in added)]))
    return output.model_copy(update={"aggregated_context": updated, "sources_used": sources})


def long_text_search(kb: KnowledgeBase) -> LongTextSearch | None:
    """The long-text route as ``kb``'s settings ask: None when summaries are off."""
    from researchcrew.knowledge.summaries import summaries_for

    summaries = summaries_for(kb)
    if summaries is None:
        return None
    structured = kb.settings.structured
    return LongTextSearch(kb, summaries, min_score=structured.summary_min_score, sections=structured.long_text_sections)


__all__ = ["LongTextResult", "LongTextSearch", "long_text_search", "with_long_text"]
