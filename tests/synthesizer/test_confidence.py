"""Confidence from credibility and agreement, its bands, and the coverage metrics."""

from __future__ import annotations

import pytest

from researchcrew.pipeline.synthesize._confidence import (
    ANSWER_BANDS,
    answer_confidence,
    claim_confidence,
    confidence_level,
    coverage_metrics,
)
from tests.synthesizer.builders import contradiction, scored


@pytest.mark.parametrize(
    ("score", "level"),
    [
        (0.0, "insufficient"),
        (0.3499, "insufficient"),
        (0.35, "low"),
        (0.5499, "low"),
        (0.55, "medium"),
        (0.7499, "medium"),
        (0.75, "high"),
        (1.0, "high"),
    ],
)
def test_bands(score: float, level: str) -> None:
    assert confidence_level(score) == level
    assert (ANSWER_BANDS.high, ANSWER_BANDS.medium, ANSWER_BANDS.low) == (0.75, 0.55, 0.35)


def test_confidence_is_credibility_times_agreement() -> None:
    strong = [scored(1, "a", quality=0.9), scored(2, "b", quality=0.7)]
    assert answer_confidence(strong, []) == pytest.approx(0.8)
    # a contradiction (confidence 0.8) touching a cited chunk: agreement 1 - 0.25 * 0.8 = 0.8
    record = contradiction("chunk-1", "chunk-9")
    assert answer_confidence(strong, [record]) == pytest.approx(0.64)
    # one that touches nothing cited does not count
    assert answer_confidence(strong, [contradiction("chunk-7", "chunk-9")]) == pytest.approx(0.8)
    # disagreement never takes away more than half
    assert answer_confidence(strong, [record] * 10) == pytest.approx(0.4)
    assert answer_confidence([], []) == 0.0


def test_claim_confidence_rewards_corroboration_and_discounts_contested_evidence() -> None:
    one = [scored(1, "a", quality=0.6)]
    two = [*one, scored(2, "b", quality=0.5)]
    assert claim_confidence(one, set()) == pytest.approx(0.6)
    assert claim_confidence(two, set()) == pytest.approx(0.65)
    assert claim_confidence(two, {"chunk-2"}) == pytest.approx(0.4875)


def test_coverage_metrics() -> None:
    available = [
        scored(1, "Water boils at 100 degrees at sea level.", source_type="web"),
        scored(2, "Boiling points drop with altitude.", source_type="arxiv"),
        scored(3, "Altitude and water: cooking times grow.", source_type="rag"),
    ]
    metrics = coverage_metrics("How does altitude change the boiling of water?", available[:2], available)
    # topics: altitude, change, boiling, water
    assert metrics.coverage_of_topics == {"altitude": 0.5, "change": 0.0, "boiling": 1.0, "water": 0.5}
    assert metrics.query_addressed == pytest.approx(0.75)
    assert metrics.source_diversity == pytest.approx(2 / 3, abs=1e-4)
    assert metrics.information_completeness == pytest.approx((1 + 0 + 1 + 1) / 4)
