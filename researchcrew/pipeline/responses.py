"""The answers the Flow gives without synthesis (refusal, uncertainty), and the caveat for each failed source."""

from __future__ import annotations

from collections.abc import Sequence

from researchcrew.contracts.chunks import ContextChunk, SourceReport
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.pipeline.synthesize._citations import citation_for


def source_caveats(reports: Sequence[SourceReport]) -> list[str]:
    """One caveat per source that failed, saying why — the user should know what was not searched."""
    caveats: list[str] = []
    for report in reports:
        if report.failure is None:
            continue
        name = f"{report.source_type} ({report.tool_name})"
        if report.status == "failed":
            caveats.append(f"{name} was not used: {report.failure.kind} — {report.failure.message}")
        elif report.status == "skipped":  # backing off after a recent failure (tools/health.py)
            caveats.append(f"{name} was not searched: {report.failure.message}")
    return caveats


def _why(reports: Sequence[SourceReport]) -> str:
    """Why the evidence was not enough, without blaming the topic for a source that could not be searched."""
    failed = [r.source_type for r in reports if r.status == "failed" or (r.status == "skipped" and r.failure)]
    answered = [r.source_type for r in reports if r.status in ("success", "empty")]
    if failed and not answered:
        names = ", ".join(failed)
        return f"None of the sources could be searched ({names}: see below), so this says nothing about the topic."
    if failed:
        return (
            f"{', '.join(failed)} could not be searched (see below); the sources that were searched "
            f"({', '.join(answered)}) may not cover this topic."
        )
    return "The sources I could search may not cover this topic."


def refusal_response(query: Query, reply: str, reason: str) -> FinalResponse:
    """The polite answer to input the guard rejected. Nothing was searched, nothing is cited."""
    return FinalResponse(
        query=query,
        answer=reply,
        answer_kind="refusal",
        confidence=0.0,
        confidence_level="insufficient",
        caveats=[f"Not researched: {reason}."],
    )


def uncertainty_response(
    query: Query,
    *,
    searched: Sequence[str],
    best_matches: Sequence[ContextChunk],
    source_reports: Sequence[SourceReport],
    confidence: float,
    max_matches: int = 3,
) -> FinalResponse:
    """Seed 000's uncertainty response: say that the evidence is insufficient, what was searched, and the best
    low-relevance matches (cited, so the user can judge them) — never an answer built on weak evidence."""
    matches = sorted(best_matches, key=lambda chunk: chunk.semantic_relevance, reverse=True)[:max_matches]
    citations = [citation_for(number, chunk) for number, chunk in enumerate(matches, start=1)]
    lines = [
        "I could not find sufficient information to answer this question confidently. " + _why(source_reports),
        "",
        "Searched: " + "; ".join(f"“{text}”" for text in searched),
    ]
    if matches:
        lines += ["", "Best matches (low relevance):"]
        for citation, chunk in zip(citations, matches, strict=True):
            label = chunk.title or chunk.source_id or chunk.chunk_id
            relevance = f"{chunk.source_type}, relevance {chunk.semantic_relevance:.2f}"
            lines.append(f"  [{citation.number}] {label} ({relevance})")
    return FinalResponse(
        query=query,
        answer="\n".join(lines),
        citations=citations,
        answer_kind="uncertainty",
        confidence=round(confidence, 4),
        confidence_level="insufficient",
        source_reports=list(source_reports),
        caveats=source_caveats(source_reports),
        reformulations=list(searched[1:]),
    )
