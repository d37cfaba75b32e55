"""An answer's confidence, its band and the one line that says why (seed 001's ``final_reason``).

The evidence gate (``ResearchFlow.assess_confidence``) decides *whether* to answer from the support of the best
evidence (``pipeline.support``). Once the answer is written, its confidence is computed over what it actually cites:

    confidence = (support_weight × best cited support + (1 − support_weight) × mean cited quality) × agreement

* support — how well the cited evidence matches the question (0–1, the same measure for every source);
* quality — the Evaluator's score of the cited evidence (source reputation, recency, relevance), averaged over
  independent sources: passages of one document, or near-duplicates, count once;
* agreement — 1 − min(0.5, 0.25 × Σ confidence of the contradictions that involve a cited passage).

The band follows ``ConfidenceSettings`` (seed 001): high ≥ 0.80, medium ≥ 0.70 (caveated), low ≥ 0.50 (a
partial answer), else too low (the answer stands, with a strong note to clarify). Each band has the seed's code,
which starts ``final_reason``; the rest of the line names the evidence behind it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.evaluator import ContradictionRecord, ScoredChunk
from researchcrew.contracts.synthesizer import ConfidenceLevel, FinalResponse
from researchcrew.pipeline._sources import independent_sources
from researchcrew.pipeline._support import Support
from researchcrew.settings import ConfidenceSettings

BAND_CODES: dict[ConfidenceLevel, str] = {
    "high": "confidence_high",
    "medium": "confidence_medium_caveated",
    "low": "confidence_low_partial",
    "insufficient": "confidence_too_low_clarify",
}
BAND_CAVEATS: dict[ConfidenceLevel, str] = {
    "medium": "Confidence is medium: the cited evidence matches the question only in part, or sources disagree; "
    "check the cited passages.",
    "low": "Confidence is low: the evidence supports only part of the question; treat this as a partial answer.",
    "insufficient": "Confidence is too low: the cited evidence barely matches the question; rephrase or narrow the "
    "question, or add sources that cover it.",
}
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class AnswerAssessment:
    """An answer's confidence, band, reason and the caveat its band calls for (None for high)."""

    confidence: float
    level: ConfidenceLevel
    reason: str
    caveat: str | None


def band(score: float, settings: ConfidenceSettings) -> ConfidenceLevel:
    if score >= settings.high:
        return "high"
    if score >= settings.medium:
        return "medium"
    if score >= settings.low:
        return "low"
    return "insufficient"


def agreement(contradictions: Sequence[ContradictionRecord], ids: set[str]) -> tuple[float, int]:
    """1 − min(0.5, 0.25 × Σ confidence) over the contradictions touching ``ids``; and how many there are."""
    touching = [c for c in contradictions if c.chunk_id_a in ids or c.chunk_id_b in ids]
    return 1.0 - min(0.5, 0.25 * sum(c.confidence for c in touching)), len(touching)


def assess_answer(
    response: FinalResponse,
    evidence: Sequence[ScoredChunk],
    supports: Mapping[str, Support],
    contradictions: Sequence[ContradictionRecord],
    settings: ConfidenceSettings,
) -> AnswerAssessment:
    """The confidence of a written answer, from the evidence it cites (see the module docstring)."""
    by_id = {scored.chunk.chunk_id: scored for scored in evidence}
    cited = [by_id[i] for c in response.citations for i in c.chunk_ids if i in by_id]
    cited = list({scored.chunk.chunk_id: scored for scored in cited}.values())
    if not cited:
        level: ConfidenceLevel = "insufficient"
        reason = f"{BAND_CODES[level]}: no statement of the answer is backed by a cited passage"
        return AnswerAssessment(0.0, level, reason, None)
    ids = {scored.chunk.chunk_id for scored in cited}
    scores = [supports[i].score if i in supports else by_id[i].chunk.semantic_relevance for i in ids]
    support = max(scores)
    sources = independent_sources(cited)  # passages of one document (or near-duplicates) are one source
    credibility = sum(max(scored.quality_score for scored in source) for source in sources) / len(sources)
    agreed, disputes = agreement(contradictions, ids)
    weight = settings.support_weight
    confidence = round(max(0.0, min(1.0, (weight * support + (1 - weight) * credibility) * agreed)), 4)
    level = band(confidence, settings)
    kinds = ", ".join(dict.fromkeys(scored.chunk.source_type for scored in cited))
    of_sources = f" of {len(sources)} source(s)" if len(sources) < len(cited) else ""
    reason = (
        f"{BAND_CODES[level]}: {len(cited)} cited passage(s){of_sources} from {kinds}; the best matches the question "
        f"with support {support:.2f}; evidence quality {credibility:.2f}"
    )
    if disputes:
        reason += f"; {disputes} disagreement(s) between cited sources lower it (×{agreed:.2f})"
    return AnswerAssessment(confidence, level, _one_line(reason), BAND_CAVEATS.get(level))


def uncertainty_reason(
    best_support: float, settings: ConfidenceSettings, reports: Sequence[SourceReport], evidence_count: int
) -> str:
    """Why the uncertainty answer was given: sources that could not be searched first, then how weak the rest was."""
    failed = [r for r in reports if r.status == "failed" and r.failure is not None]
    answered = [r for r in reports if r.status in ("success", "empty")]
    code = BAND_CODES["insufficient"]
    parts: list[str] = []
    if failed:
        parts.append(
            "could not search " + ", ".join(f"{r.source_type} ({r.failure.kind})" for r in failed if r.failure)
        )
    if not answered and failed:
        parts.append("no source could be searched")
    elif evidence_count == 0:
        parts.append("the sources searched found nothing usable")
    else:
        parts.append(
            f"the best evidence supports the question only at {best_support:.2f} "
            f"(answering needs {settings.answer_min_support:.2f})"
        )
    return _one_line(f"{code}: " + "; ".join(parts))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


__all__ = ["BAND_CAVEATS", "BAND_CODES", "AnswerAssessment", "agreement", "assess_answer", "band", "uncertainty_reason"]
