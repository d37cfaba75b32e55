"""Evidence and requests for Synthesizer tests: small, realistic, and built the way the Evaluator hands them over."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from researchcrew.contracts import ContextChunk, ContradictionRecord, FilteredContext, Query, ScoredChunk
from researchcrew.contracts.query import ResponseFormat
from researchcrew.contracts.synthesizer import SynthesizerInput

QUESTION = "At what temperature does water boil, and does altitude change it?"

PASSAGES: list[tuple[str, str, str]] = [
    (
        "web",
        "Boiling point - Physics Notes",
        "Water boils at 100 degrees Celsius at sea level, where the air pressure is one standard atmosphere. "
        "At higher altitudes the air pressure is lower, so water boils at a lower temperature. "
        "In Denver, about 1,600 metres above sea level, water boils at roughly 95 degrees Celsius.",
    ),
    (
        "arxiv",
        "Phase transitions of water under reduced pressure",
        "We measure the boiling temperature of water between 0.5 and 1.0 atm. "
        "The boiling temperature falls by about 3.4 degrees Celsius for every 1,000 metres of altitude. "
        "Dissolved salts raise the boiling point slightly, by less than one degree at culinary concentrations.",
    ),
    (
        "rag",
        "Kitchen science handbook",
        "Cooks at high altitude must extend cooking times because water boils at a lower temperature. "
        "Pressure cookers raise the pressure and therefore the boiling point, to about 120 degrees Celsius. "
        "Pasta water should be salted for flavour, not to change the boiling point.",
    ),
]


def scored(
    number: int,
    content: str,
    *,
    source_type: str = "web",
    title: str | None = None,
    quality: float = 0.75,
    url: str | None = None,
) -> ScoredChunk:
    chunk = ContextChunk(
        chunk_id=f"chunk-{number}",
        source_type=source_type,
        content=content,
        semantic_relevance=0.7,
        title=title,
        url=url or f"https://example.org/doc/{number}",
        source_id=f"doc-{number}",
        source_date=datetime(2023, 5, number, tzinfo=UTC),
        authors=[f"Author {number}"],
    )
    return ScoredChunk(chunk=chunk, quality_score=quality, source_reputation=0.7, recency=0.6, relevance=0.7)


def evidence(count: int = 3) -> list[ScoredChunk]:
    chunks = []
    for number in range(1, count + 1):
        source_type, title, content = PASSAGES[(number - 1) % len(PASSAGES)]
        chunks.append(scored(number, content, source_type=source_type, title=f"{title} ({number})"))
    return chunks


def contradiction(a: str = "chunk-1", b: str = "chunk-3") -> ContradictionRecord:
    return ContradictionRecord(
        chunk_id_a=a,
        chunk_id_b=b,
        claim_a="In Denver, about 1,600 metres above sea level, water boils at roughly 95 degrees Celsius.",
        claim_b="Pressure cookers raise the pressure and therefore the boiling point, to about 120 degrees Celsius.",
        kind="numeric",
        subject="boiling point of water",
        confidence=0.8,
    )


def request(
    chunks: list[ScoredChunk] | None = None,
    *,
    question: str = QUESTION,
    contradictions: list[ContradictionRecord] | None = None,
    response_format: ResponseFormat = "detailed",
    max_words: int = 2000,
    min_words: int = 0,
    include_sections: bool = True,
) -> SynthesizerInput:
    chunks = evidence() if chunks is None else chunks
    return SynthesizerInput(
        filtered_context=FilteredContext(query_text=question, chunks=chunks),
        original_query=Query(text=question, user_id="user-1", session_id="session-1"),
        contradictions=contradictions or [],
        response_format=response_format,
        max_response_length=max_words,
        min_response_length=min_words,
        include_sections=include_sections,
    )


def draft_json(*sections: dict[str, Any]) -> str:
    return json.dumps({"sections": list(sections)})


def section(heading: str, *claims: tuple[str, list[int]], perspective: str | None = None) -> dict[str, Any]:
    return {
        "heading": heading,
        "perspective": perspective,
        "claims": [{"text": text, "citations": numbers} for text, numbers in claims],
    }


GOOD_REPLY = draft_json(
    section(
        "Boiling point at sea level",
        ("Water boils at 100 degrees Celsius at sea level.", [1]),
        ("Dissolved salts raise the boiling point by less than one degree.", [2]),
    ),
    section(
        "Altitude",
        ("The boiling temperature falls by about 3.4 degrees Celsius per 1,000 metres.", [2]),
        ("In Denver water boils at roughly 95 degrees Celsius.", [1, 3]),
    ),
)
