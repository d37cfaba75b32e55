"""The evidence gate: is what was found enough to answer, worth a reformulated search, or too weak to use?

Evidence confidence follows seed 000: the mean calibrated relevance of the best evidence decides between answering
(high/medium), reformulating (low) and the uncertainty response (insufficient). The thresholds were set for
cosine-like relevance in [0, 1]; the knowledge base calibrates its scores to that scale.
"""

from __future__ import annotations

from collections.abc import Sequence

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.synthesizer import ConfidenceLevel

# Seed 000, "Confidence Thresholds": mean relevance of the top evidence.
HIGH_CONFIDENCE = 0.55
MEDIUM_CONFIDENCE = 0.40
LOW_CONFIDENCE = 0.25
TOP_EVIDENCE = 5


def evidence_confidence(chunks: Sequence[ContextChunk], top: int = TOP_EVIDENCE) -> tuple[ConfidenceLevel, float]:
    """The confidence band and the mean relevance of the ``top`` most relevant chunks (0 when there are none)."""
    if not chunks:
        return "insufficient", 0.0
    best = sorted((chunk.semantic_relevance for chunk in chunks), reverse=True)[:top]
    mean = sum(best) / len(best)
    if mean >= HIGH_CONFIDENCE:
        return "high", mean
    if mean >= MEDIUM_CONFIDENCE:
        return "medium", mean
    if mean >= LOW_CONFIDENCE:
        return "low", mean
    return "insufficient", mean
