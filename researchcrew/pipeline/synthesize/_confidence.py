"""How much to trust an answer, and how well its evidence covers the question.

**Confidence** (seed 003: "based on source credibility and agreement") is computed over the chunks the answer
actually cites:

* credibility = mean over the cited *sources* of their best Evaluator quality score (reputation, recency and
  relevance combined); passages of one document, and near-duplicates of each other, are one source
  (``pipeline.sources.independent_sources``), so two passages of one abstract do not weigh as two papers;
* agreement = 1 − min(0.5, 0.25 × Σ confidence of the contradictions that involve a cited chunk);
* confidence = credibility × agreement, in [0, 1]; 0 when nothing is cited.

**Bands** (the levels of seed 000: high / medium / low / insufficient). Seed 000 places its bands on mean cosine
relevance (0.55 / 0.40 / 0.25, used by the Flow before synthesis); an answer's confidence is on the quality scale,
where evidence passing the Evaluator's default threshold already scores ≥ 0.6, so its bands sit higher:

=============  ==========================
high           confidence ≥ 0.75
medium         0.55 ≤ confidence < 0.75
low            0.35 ≤ confidence < 0.55
insufficient   confidence < 0.35
=============  ==========================

**Coverage** (seed 003 ``CoverageMetrics``), over the query's topics (its stemmed content words):

* ``coverage_of_topics[t]`` = min(1, cited sources mentioning t / 2) — a topic is fully covered when two
  independent cited sources speak to it (two passages of one document are one source);
* ``query_addressed`` = share of topics mentioned by at least one cited chunk;
* ``source_diversity`` = distinct source types cited / distinct source types available;
* ``information_completeness`` = mean over topics of min(1, available sources mentioning t / 2) — how complete the
  evidence itself is for the question, whatever the answer used.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from researchcrew.contracts.evaluator import ContradictionRecord, ScoredChunk
from researchcrew.contracts.synthesizer import ConfidenceLevel, CoverageMetrics
from researchcrew.pipeline._sources import independent_sources
from researchcrew.text.terms import query_topics, term_set


@dataclass(frozen=True)
class Bands:
    """Lower bounds of the high, medium and low levels; anything below ``low`` is insufficient."""

    high: float
    medium: float
    low: float


ANSWER_BANDS = Bands(high=0.75, medium=0.55, low=0.35)


def confidence_level(score: float, bands: Bands = ANSWER_BANDS) -> ConfidenceLevel:
    if score >= bands.high:
        return "high"
    if score >= bands.medium:
        return "medium"
    if score >= bands.low:
        return "low"
    return "insufficient"


def _touching(contradictions: Sequence[ContradictionRecord], ids: Collection[str]) -> list[ContradictionRecord]:
    return [c for c in contradictions if c.chunk_id_a in ids or c.chunk_id_b in ids]


def answer_confidence(cited: Sequence[ScoredChunk], contradictions: Sequence[ContradictionRecord]) -> float:
    """credibility × agreement over the cited chunks (see the module docstring)."""
    if not cited:
        return 0.0
    sources = independent_sources(cited)
    credibility = sum(max(scored.quality_score for scored in source) for source in sources) / len(sources)
    ids = {scored.chunk.chunk_id for scored in cited}
    disagreement = sum(record.confidence for record in _touching(contradictions, ids))
    agreement = 1.0 - min(0.5, 0.25 * disagreement)
    return round(max(0.0, min(1.0, credibility * agreement)), 4)


def claim_confidence(cited: Sequence[ScoredChunk], contested_ids: Collection[str]) -> float:
    """One claim's support: its best cited chunk's quality, +0.05 per further independent source (at most +0.1;
    another passage of the same document, or a near-duplicate, corroborates nothing), and three quarters of that
    when a cited chunk is part of a disagreement."""
    if not cited:
        return 0.0
    corroborating = len(independent_sources(cited)) - 1
    score = max(scored.quality_score for scored in cited) + min(0.1, 0.05 * corroborating)
    if any(scored.chunk.chunk_id in contested_ids for scored in cited):
        score *= 0.75
    return round(max(0.0, min(1.0, score)), 4)


def contested_chunk_ids(contradictions: Sequence[ContradictionRecord]) -> set[str]:
    return {c.chunk_id_a for c in contradictions} | {c.chunk_id_b for c in contradictions}


def _chunk_terms(scored: ScoredChunk) -> frozenset[str]:
    chunk = scored.chunk
    return term_set(f"{chunk.title or ''} {chunk.content}")


def _source_terms(chunks: Sequence[ScoredChunk]) -> list[frozenset[str]]:
    """The terms of each independent source: a source mentions a topic when any of its passages does."""
    return [frozenset().union(*(_chunk_terms(scored) for scored in source)) for source in independent_sources(chunks)]


def coverage_metrics(
    query_text: str, cited: Sequence[ScoredChunk], available: Sequence[ScoredChunk]
) -> CoverageMetrics:
    """Seed 003's CoverageMetrics for an answer citing ``cited`` out of the ``available`` evidence."""
    topics = query_topics(query_text)
    cited_terms = _source_terms(cited)
    available_terms = _source_terms(available)

    def mentions(stemmed: str, term_sets: list[frozenset[str]]) -> int:
        return sum(stemmed in terms for terms in term_sets)

    coverage = {word: min(1.0, mentions(stemmed, cited_terms) / 2) for stemmed, word in topics.items()}
    if topics:
        addressed = sum(mentions(stemmed, cited_terms) > 0 for stemmed in topics) / len(topics)
        completeness = sum(min(1.0, mentions(s, available_terms) / 2) for s in topics) / len(topics)
    else:  # a question without content words: judge by whether anything was cited at all
        addressed = 1.0 if cited else 0.0
        completeness = 1.0 if available else 0.0
    available_types = {scored.chunk.source_type for scored in available}
    cited_types = {scored.chunk.source_type for scored in cited}
    diversity = len(cited_types & available_types) / len(available_types) if available_types else 0.0
    return CoverageMetrics(
        query_addressed=round(addressed, 4),
        coverage_of_topics={word: round(value, 4) for word, value in coverage.items()},
        source_diversity=round(diversity, 4),
        information_completeness=round(completeness, 4),
    )
