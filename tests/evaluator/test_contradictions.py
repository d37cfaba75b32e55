"""Numeric and polarity contradictions: found where claims conflict, not found where they only look alike."""

from __future__ import annotations

import pytest

from researchcrew.pipeline.evaluate._evaluator import Evaluator
from researchcrew.pipeline.evaluate.contradictions import (
    detect_contradictions,
    numeric_contradictions,
    polarity_contradictions,
)
from researchcrew.settings import EvaluationSettings
from tests.evaluator.factories import chunk, request


def numeric(a: str, b: str, tolerance: float = 0.05) -> list:  # type: ignore[type-arg]
    return numeric_contradictions([chunk("a", a), chunk("b", b)], tolerance)


def polarity(a: str, b: str) -> list:  # type: ignore[type-arg]
    return polarity_contradictions([chunk("a", a), chunk("b", b)])


@pytest.mark.parametrize(
    ("claim_a", "claim_b", "subject", "shown"),
    [
        (
            "The model reaches an accuracy of 92% on ImageNet.",
            "On ImageNet, the model's accuracy is only 75%.",
            "model accuracy imagenet",
            "92% vs 75%",
        ),
        (
            "Median latency is 20 ms per request.",
            "The median latency is 0.5 seconds per request.",
            "median latency request",
            "20 ms vs 0.5 seconds",
        ),
        (
            "The dataset contains 1.5 million images.",
            "The dataset contains 300K images.",
            "dataset contains images",
            "1.5 million vs 300K",
        ),
        ("Llama-2 has 7B parameters.", "Llama-2 has 70 billion parameters.", "llama parameters", "7B vs 70 billion"),
        ("Training cost $4.6 million.", "Training cost $12M.", "training cost", "$4.6 million vs $12M"),
        ("Accuracy is 92 percent.", "Accuracy is 0.75%.", "accuracy", "92 percent vs 0.75%"),
        ("Peak memory use was 16 GB.", "Peak memory use was 512 MB.", "peak memory", "16 GB vs 512 MB"),
        ("Accuracy is more than 90%.", "Accuracy is 60%.", "accuracy", "90% vs 60%"),
        (
            "Decoding throughput is 500 tokens/s.",
            "Decoding throughput is 1,200 tokens/s.",
            "decoding throughput",
            "500 tokens/s vs 1,200 tokens/s",
        ),
    ],
)
def test_numeric_contradictions_are_found_across_units(claim_a: str, claim_b: str, subject: str, shown: str) -> None:
    (record,) = numeric(claim_a, claim_b)
    assert record.kind == "numeric"
    assert (record.chunk_id_a, record.chunk_id_b) == ("a", "b")
    assert (record.claim_a, record.claim_b) == (claim_a, claim_b)
    assert record.subject == subject
    assert record.explanation is not None and shown in record.explanation
    assert 0.5 < record.confidence <= 0.8


@pytest.mark.parametrize(
    ("claim_a", "claim_b"),
    [
        # the same value in other units or notation
        ("The model has 7B parameters.", "The model has 7,000,000,000 parameters."),
        ("Median latency is 20 ms.", "Median latency is 0.02 s."),
        ("The corpus has 1.5 million documents.", "The corpus has 1,500,000 documents."),
        # within the tolerance
        ("Accuracy on the benchmark is 90%.", "Accuracy on the benchmark is 91.5%."),
        # years, citation numbers, reference numbers
        ("The method was published in 2019.", "The method was published in 2021."),
        ("As shown in [12], accuracy is 92%.", "As reported in [3], accuracy is 92%."),
        ("Table 3 lists the accuracy.", "Table 5 lists the accuracy."),
        ("GPT-4 improved accuracy.", "GPT-3 improved accuracy."),
        # different quantities
        ("Accuracy on ImageNet is 92%.", "Accuracy on CIFAR-10 is 75%."),
        ("The accuracy is 92%.", "The error rate is 8%."),
        ("The model has 12 layers.", "The model has 24 attention heads."),
        ("Latency is 20 ms.", "Accuracy is 20%."),
        ("We found 117 out of 729 real bugs.", "Of the reported issues, 13 bugs were confirmed."),
        ("The daily dose was 800 mg/d.", "The daily dose was 400 mg."),  # a rate and an amount
        # asides: parenthesised statistics, spreads, labels, results dumps, population words
        ("Risk fell (hazard ratio 0.71, 95% CI 0.5 to 0.9).", "Risk fell (hazard ratio 0.9, 95% CI 0.8 to 1.0)."),
        ("Mean age was 42±11 years in the obese cohort.", "Mean age was 42±3 years in the obese cohort."),
        ("Toll-like receptor 4 is expressed in monocytes.", "Toll-like receptor 7 is expressed in monocytes."),
        ("Among patients, 61% were women.", "Among patients, 19% were women."),
        ("Scores were 1%, 2%, 3%, 4% and 5% for accuracy.", "Scores were 9%, 8%, 7%, 6% and 50% for accuracy."),
        # consistent ranges, bounds and changes
        ("Accuracy rose from 75% to 92% after tuning.", "Accuracy of the tuned model is 92%."),
        ("Accuracy is more than 90%.", "Accuracy is 95%."),
        ("Latency is between 10 and 20 ms.", "Latency is 15 ms."),
        ("Tuning improved accuracy by 5%.", "Tuning improved accuracy by 12%."),
    ],
)
def test_numeric_contradictions_are_not_found(claim_a: str, claim_b: str) -> None:
    assert numeric(claim_a, claim_b) == []


def test_numeric_tolerance_is_configurable() -> None:
    assert numeric("Accuracy is 90%.", "Accuracy is 94%.", tolerance=0.05) == []
    assert len(numeric("Accuracy is 90%.", "Accuracy is 94%.", tolerance=0.02)) == 1


def test_chunks_that_also_agree_on_the_subject_are_not_flagged() -> None:
    # Chunk a reports the new and the old accuracy in separate sentences; b agrees with the new one.
    a = "The tuned model reaches 92% accuracy. The untuned model reaches 75% accuracy."
    assert numeric(a, "The model reaches 92% accuracy.") == []


def test_chunks_of_one_document_are_not_compared() -> None:
    same_paper = [
        chunk("p1", "Our method reaches 92% accuracy.", source_type="arxiv", source_id="2101.00001"),
        chunk("p2", "Our method reaches 75% accuracy.", source_type="arxiv", source_id="2101.00001"),
    ]
    assert numeric_contradictions(same_paper, 0.05) == []


@pytest.mark.parametrize(
    "negated",
    [
        "Dropout does not improve generalization in deep networks.",
        "There is no evidence that dropout improves generalization in deep networks.",
        "Dropout never improves generalization of deep networks.",
        "Dropout fails to improve generalization in deep networks.",
        "Dropout doesn't improve generalization in deep networks.",
    ],
)
def test_polarity_contradiction_is_found(negated: str) -> None:
    positive = "Dropout improves generalization in deep networks."
    (record,) = polarity(positive, negated)
    assert record.kind == "polarity"
    assert (record.claim_a, record.claim_b) == (positive, negated)
    assert record.subject == "dropout improves generalization deep networks"
    assert 0.6 <= record.confidence <= 0.8


@pytest.mark.parametrize(
    ("claim_a", "claim_b"),
    [
        ("Dropout improves generalization at no extra cost.", "Dropout improves generalization."),
        ("Dropout improves generalization.", "Dropout does not improve training speed."),
        (
            "Dropout improves generalization in deep networks.",
            "Batch normalization does not improve generalization when dropout is used in deep networks.",
        ),
        (
            "Batch normalization improves generalization in deep networks with dropout.",
            "Dropout does not improve generalization in deep networks.",
        ),
        (
            "Does dropout improve generalization in deep networks?",
            "Dropout does not improve generalization in deep networks.",
        ),
        (
            "Dropout doesn't hurt generalization in deep networks.",
            "Dropout does not hurt generalization in deep networks.",
        ),
        (
            "It is not true that dropout never improves generalization in deep networks.",
            "Dropout improves generalization in deep networks.",
        ),
    ],
)
def test_polarity_contradiction_is_not_found(claim_a: str, claim_b: str) -> None:
    assert polarity(claim_a, claim_b) == []


async def test_evaluator_reports_both_chunks_and_the_actual_sentences() -> None:
    a = chunk(
        "web-1",
        "Sparse attention is an active research area. The method reaches an accuracy of 92% on ImageNet. "
        "Dropout improves generalization in deep networks.",
        relevance=0.9,
    )
    b = chunk(
        "arxiv-7",
        "We revisit the method under a fixed training budget. On ImageNet, its accuracy is only 75%. "
        "We find that dropout does not improve generalization in deep networks.",
        source_type="arxiv",
        relevance=0.9,
    )
    out = await Evaluator().run(request([a, b]))
    claims = {
        record.kind: {record.chunk_id_a: record.claim_a, record.chunk_id_b: record.claim_b}
        for record in out.contradictions_found
    }
    assert claims == {
        "numeric": {
            "web-1": "The method reaches an accuracy of 92% on ImageNet.",
            "arxiv-7": "On ImageNet, its accuracy is only 75%.",
        },
        "polarity": {
            "web-1": "Dropout improves generalization in deep networks.",
            "arxiv-7": "We find that dropout does not improve generalization in deep networks.",
        },
    }
    assert all(record.verdict_source == "heuristic" for record in out.contradictions_found)


async def test_removed_chunks_are_not_cross_checked() -> None:
    a = chunk("good", "The model reaches an accuracy of 92% on ImageNet.", relevance=0.9)
    b = chunk("weak", "The model reaches an accuracy of 75% on ImageNet.", relevance=0.05, date=None)
    out = await Evaluator().run(request([a, b], quality_threshold=0.6))
    assert [s.chunk.chunk_id for s in out.filtered_context.chunks] == ["good"]
    assert out.contradictions_found == []


def test_detection_is_capped_and_ordered_by_confidence() -> None:
    chunks = [chunk(f"c{i}", f"The model reaches an accuracy of {50 + 10 * i}% on ImageNet.") for i in range(5)]
    found = detect_contradictions(chunks, tolerance=0.05, limit=3)
    assert len(found) == 3
    assert [r.confidence for r in found] == sorted((r.confidence for r in found), reverse=True)
    assert EvaluationSettings().max_contradictions == 20
