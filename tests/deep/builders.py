"""Sub-question results and reports built by hand, for the report and quality tests."""

from __future__ import annotations

from researchcrew.contracts import (
    AnswerSection,
    Citation,
    CitationStats,
    Claim,
    ContextChunk,
    FinalResponse,
    Query,
    ScoredChunk,
)
from researchcrew.contracts.deep import PlanItem, ResearchPlan
from researchcrew.deep._research import SubQuestionResult
from researchcrew.pipeline.synthesize._citations import citation_for
from researchcrew.testing import fake_chunk


def scored(chunk_id: str, content: str, *, quality: float = 0.8, **fields: object) -> ScoredChunk:
    source_type, _, number = chunk_id.partition("-")
    chunk = fake_chunk(source_type, int(number), content=content, source_id=chunk_id, **fields)
    return ScoredChunk(chunk=chunk, quality_score=quality, source_reputation=0.8, recency=0.5, relevance=0.8)


def answer(
    question: str, sections: list[tuple[str, list[tuple[str, list[ContextChunk]]]]], **fields: object
) -> FinalResponse:
    """A checked answer: sections of (heading, [(claim text, chunks it cites)])."""
    numbers: dict[str, int] = {}
    chunks: dict[str, ContextChunk] = {}
    built = []
    for heading, claims in sections:
        built_claims = []
        for text, cited in claims:
            for chunk in cited:
                numbers.setdefault(chunk.chunk_id, len(numbers) + 1)
                chunks[chunk.chunk_id] = chunk
            built_claims.append(Claim(text=text, citations=[numbers[chunk.chunk_id] for chunk in cited]))
        built.append(AnswerSection(heading=heading, claims=built_claims))
    citations: list[Citation] = [citation_for(number, chunks[chunk_id]) for chunk_id, number in numbers.items()]
    values: dict[str, object] = {
        "query": Query(text=question, user_id="u", session_id="s"),
        "answer": "rendered",
        "sections": built,
        "citations": citations,
        "answer_kind": "extractive",
        "citation_stats": CitationStats(valid=sum(len(c.citations) for s in built for c in s.claims)),
    }
    values.update(fields)
    return FinalResponse(**values)  # type: ignore[arg-type]


def result(
    item_id: int,
    question: str,
    evidence: list[ScoredChunk],
    claims: list[tuple[str, list[int]]] | None = None,
    *,
    weak: list[ScoredChunk] | None = None,
    status: str | None = None,
) -> SubQuestionResult:
    """A researched sub-question whose answer makes ``claims`` (text, indexes into ``evidence``)."""
    item = PlanItem(id=item_id, question=question)
    if not claims:
        response = FinalResponse(
            query=Query(text=question, user_id="u", session_id="s"), answer="…", answer_kind="uncertainty"
        )
        return SubQuestionResult(
            item=item, status=status or "weak", response=response, evidence=evidence, weak_evidence=weak or []
        )  # type: ignore[arg-type]
    response = answer(question, [("", [(text, [evidence[i].chunk for i in cited]) for text, cited in claims])])
    return SubQuestionResult(
        item=item, status=status or "answered", response=response, evidence=evidence, weak_evidence=weak or []
    )  # type: ignore[arg-type]


def plan_of(*results: SubQuestionResult, question: str = "What is known about testing?") -> ResearchPlan:
    return ResearchPlan(question=question, items=[r.item for r in results], max_items=8)
