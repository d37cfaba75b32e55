"""From a draft (LLM or extractive) to the Synthesizer's output.

Both synthesizers end here, so the same guarantees hold for every answer: citations validated against the
evidence that was given (``validate_draft``), the length bound enforced at claim boundaries, confidence from the
cited evidence, coverage metrics, the answer text rendered from the validated sections, and caveats saying what
the reader should know.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from researchcrew.contracts.evaluator import ContradictionRecord, ScoredChunk
from researchcrew.contracts.synthesizer import (
    AnswerDraft,
    AnswerKind,
    AnswerSection,
    Claim,
    CoverageMetrics,
    FinalResponse,
    SynthesizerInput,
    SynthesizerOutput,
)
from researchcrew.pipeline.synthesize._citations import ValidationMode, validate_draft
from researchcrew.pipeline.synthesize._confidence import (
    answer_confidence,
    claim_confidence,
    confidence_level,
    contested_chunk_ids,
    coverage_metrics,
)
from researchcrew.pipeline.synthesize._rendering import answer_words, render_answer
from researchcrew.pipeline.synthesize.prompts import length_bounds

logger = logging.getLogger(__name__)

NO_EVIDENCE_ANSWER = "No evidence was available to answer this question, so no answer was written."


def relevant_contradictions(
    contradictions: Sequence[ContradictionRecord], evidence: Sequence[ScoredChunk]
) -> list[ContradictionRecord]:
    """The disagreements between two chunks that are both part of the evidence."""
    ids = {scored.chunk.chunk_id for scored in evidence}
    return [c for c in contradictions if c.chunk_id_a in ids and c.chunk_id_b in ids]


def _merge_unsectioned(sections: list[AnswerSection]) -> list[AnswerSection]:
    """With sections turned off: one untitled section, plus the perspective sections (untitled too)."""
    plain = [claim for section in sections if section.perspective is None for claim in section.claims]
    merged = [AnswerSection(heading="", claims=plain)] if plain else []
    merged += [s.model_copy(update={"heading": ""}) for s in sections if s.perspective is not None]
    return merged


def _scored_claim(claim: Claim, number_to_chunks: dict[int, list[ScoredChunk]], contested: set[str]) -> Claim:
    cited = [scored for number in claim.citations for scored in number_to_chunks[number]]
    return claim.model_copy(update={"confidence": claim_confidence(cited, contested)})


def empty_output(request: SynthesizerInput, started: float) -> SynthesizerOutput:
    """The answer when there is no evidence at all: nothing is claimed, nothing is cited."""
    response = FinalResponse(
        query=request.original_query,
        answer=NO_EVIDENCE_ANSWER,
        answer_kind="uncertainty",
        confidence=0.0,
        confidence_level="insufficient",
        caveats=["No evidence passed evaluation for this question."],
    )
    return SynthesizerOutput(
        final_response=response,
        generation_method="standard",
        coverage_metrics=coverage_metrics(request.original_query.text, [], []),
        execution_time_ms=(time.perf_counter() - started) * 1000,
    )


def finalize(
    request: SynthesizerInput,
    evidence: Sequence[ScoredChunk],
    draft: AnswerDraft,
    *,
    answer_kind: AnswerKind,
    caveats: list[str],
    started: float,
    mode: ValidationMode = "remove",
) -> SynthesizerOutput:
    """Validate ``draft`` (its numbers index ``evidence``) and build the output. ``started`` is a
    ``time.perf_counter()`` reading taken when synthesis began."""
    if not evidence:
        return empty_output(request, started)
    bounds = length_bounds(request)
    validated = validate_draft(draft, evidence, mode=mode, max_words=bounds.high)
    sections = validated.sections if request.include_sections else _merge_unsectioned(validated.sections)

    by_id = {scored.chunk.chunk_id: scored for scored in evidence}
    cited = [by_id[chunk_id] for chunk_id in validated.cited_chunk_ids]
    contradictions = relevant_contradictions(request.contradictions, evidence)
    contested = contested_chunk_ids(contradictions)
    number_to_chunks = {c.number: [by_id[i] for i in c.chunk_ids] for c in validated.citations}
    sections = [
        section.model_copy(
            update={"claims": [_scored_claim(claim, number_to_chunks, contested) for claim in section.claims]}
        )
        for section in sections
    ]

    stats = validated.stats
    notes = list(caveats)
    if stats.claims_removed:
        notes.append(
            f"{stats.claims_removed} statement(s) were dropped because they cited no evidence that was provided."
        )
    if stats.claims_flagged:
        notes.append(f"{stats.claims_flagged} statement(s) are marked unsupported: no provided evidence backs them.")
    if validated.trimmed_claims:
        notes.append(f"The answer was shortened to the {bounds.high}-word limit.")
    words = answer_words(sections)
    if sections and words < bounds.low:
        notes.append(f"The evidence supported a shorter answer ({words} words) than the {bounds.low} requested.")
    in_perspectives = {
        scored.chunk.chunk_id
        for section in sections
        if section.perspective
        for claim in section.claims
        for n in claim.citations
        for scored in number_to_chunks[n]
    }
    for record in contradictions:
        about = f" about {record.subject}" if record.subject else ""
        shown = record.chunk_id_a in in_perspectives and record.chunk_id_b in in_perspectives
        notes.append(f"Sources disagree{about}" + ("; the answer shows both views." if shown else "."))

    confidence = answer_confidence(cited, contradictions)
    level = confidence_level(confidence)
    if level in ("low", "insufficient") and sections:
        notes.append(f"Confidence is {level}: the cited evidence is weak or contested.")
    multi = any(section.perspective for section in sections)
    if not sections:
        logger.warning("no statement of the %s answer survived citation validation", answer_kind)
    response = FinalResponse(
        query=request.original_query,
        answer=render_answer(sections, answer_kind=answer_kind),
        sections=sections,
        citations=validated.citations,
        confidence=confidence,
        confidence_level=level,
        generation_method="multi_perspective" if multi else "standard",
        answer_kind=answer_kind,
        contradictions=contradictions,
        citation_stats=stats,
        caveats=notes,
    )
    coverage: CoverageMetrics = coverage_metrics(request.original_query.text, cited, evidence)
    return SynthesizerOutput(
        final_response=response,
        generation_method=response.generation_method,
        coverage_metrics=coverage,
        execution_time_ms=(time.perf_counter() - started) * 1000,
    )
