"""Evaluator end to end without an LLM: threshold filtering, the all-removed guard, statistics, sanity."""

from __future__ import annotations

from typing import Any

import pytest

from researchcrew.contracts import ContextChunk, EvaluatorInput, EvaluatorOutput
from researchcrew.pipeline.evaluate._evaluator import BUCKETS, OFFLOAD_CHARS, Evaluator, bucket_of
from researchcrew.settings import EvaluationSettings
from tests.evaluator.factories import chunk, request
from tests.helpers.event_loop import LoopWatch

# Distinct texts, so that no deduplication interferes with the score arithmetic.
TEXTS = [
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "The Treaty of Westphalia ended the Thirty Years War and reshaped European diplomacy.",
    "Quicksort partitions an array around a pivot and sorts both halves recursively.",
    "Volcanic eruptions inject sulfate aerosols that temporarily cool the global climate.",
    "Mitochondria produce most of the cell's supply of adenosine triphosphate.",
    "Bloom filters answer membership queries with false positives but no false negatives.",
    "The Great Barrier Reef is the largest coral reef system on Earth.",
    "Compilers translate high-level source code into machine instructions for a processor.",
]


def relevance_only(chunks: list[ContextChunk], **fields: Any) -> EvaluatorInput:
    """Weights that make the score equal the relevance: the arithmetic of the tests stays obvious."""
    return request(chunks, source_weight=0.0, recency_weight=0.0, relevance_weight=1.0, **fields)


async def test_threshold_filters_with_reasons_and_components() -> None:
    good = chunk("good", TEXTS[0], source_type="arxiv", relevance=0.9)
    weak = chunk("weak", TEXTS[1], source_type="web", relevance=0.2, date=None)
    out = await Evaluator().run(request([weak, good], quality_threshold=0.6))
    assert [s.chunk.chunk_id for s in out.filtered_context.chunks] == ["good"]
    (reason,) = out.removal_rationale
    assert reason.chunk_id == "weak" and reason.reason == "below_threshold"
    # web 0.6, undated 0.5, relevance 0.2: (0.18 + 0.1 + 0.08) / 0.9 = 0.4
    assert reason.quality_score == pytest.approx(0.4)
    assert reason.components == {"reputation": 0.6, "recency": 0.5, "relevance": 0.2, "score": 0.4}
    assert "0.400 < threshold 0.60" in reason.detail and "(undated)" in reason.detail and "[web]" in reason.detail
    assert [s.chunk.chunk_id for s in out.rejected_chunks] == ["weak"]


async def test_score_equal_to_threshold_is_kept() -> None:
    out = await Evaluator().run(relevance_only([chunk("a", TEXTS[0], relevance=0.6)], quality_threshold=0.6))
    assert len(out.filtered_context.chunks) == 1


async def test_when_everything_is_below_threshold_nothing_is_kept() -> None:
    chunks = [chunk(f"c{i}", TEXTS[i], relevance=r) for i, r in enumerate([0.3, 0.1, 0.5])]
    out = await Evaluator().run(relevance_only(chunks, quality_threshold=0.6))
    assert out.filtered_context.chunks == []
    assert out.quality_stats.filtered_chunk_count == 0
    assert out.quality_stats.removal_rate == 100.0
    assert out.quality_stats.average_quality_score == 0.0
    assert {r.reason for r in out.removal_rationale} == {"below_threshold"}
    # The best low-quality matches, best first, for the uncertainty response.
    assert [s.chunk.chunk_id for s in out.rejected_chunks] == ["c2", "c0", "c1"]
    assert out.contradictions_found == []


async def test_statistics_buckets_over_all_received_chunks() -> None:
    relevances = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 0.6, 0.2]
    chunks = [chunk(f"c{i}", TEXTS[i], relevance=r) for i, r in enumerate(relevances)]
    out = await Evaluator().run(relevance_only(chunks, quality_threshold=0.6))
    stats = out.quality_stats
    assert stats.original_chunk_count == 8 and stats.filtered_chunk_count == 4
    assert stats.removal_rate == 50.0
    assert stats.average_quality_score == pytest.approx((0.6 + 0.7 + 0.9 + 1.0) / 4)
    assert stats.quality_distribution == {"0.0-0.2": 1, "0.2-0.4": 2, "0.4-0.6": 1, "0.6-0.8": 2, "0.8-1.0": 2}
    assert [s.quality_score for s in out.filtered_context.chunks] == [1.0, 0.9, 0.7, 0.6]  # best first


@pytest.mark.parametrize(
    ("score", "bucket"),
    [(0.0, "0.0-0.2"), (0.1999, "0.0-0.2"), (0.2, "0.2-0.4"), (0.6, "0.6-0.8"), (0.8, "0.8-1.0"), (1.0, "0.8-1.0")],
)
def test_bucket_edges(score: float, bucket: str) -> None:
    assert bucket_of(score) == bucket
    assert bucket in BUCKETS


async def test_empty_input_gives_empty_output() -> None:
    out = await Evaluator().run(request([]))
    assert out.filtered_context.chunks == [] and out.removal_rationale == []
    assert out.quality_stats.original_chunk_count == 0 and out.quality_stats.removal_rate == 0.0
    assert sum(out.quality_stats.quality_distribution.values()) == 0
    assert out.filtered_context.query_text == "what does the evidence say?"


async def test_wordless_and_reused_id_chunks_are_removed_with_reasons() -> None:
    chunks = [
        chunk("a", TEXTS[0]),
        chunk("b", "--- *** ---"),
        chunk("a", TEXTS[1]),  # same id, different content: citations could not tell them apart
    ]
    out = await Evaluator().run(request(chunks, quality_threshold=0.0))
    assert [s.chunk.content for s in out.filtered_context.chunks] == [TEXTS[0]]
    reasons = [(r.chunk_id, r.reason) for r in out.removal_rationale]
    assert reasons == [("b", "empty"), ("a", "invalid")]
    assert out.quality_stats.original_chunk_count == 3
    assert out.quality_stats.removal_rate == pytest.approx(66.67)


async def test_output_round_trips_as_json_and_times_itself() -> None:
    chunks = [chunk(f"c{i}", text) for i, text in enumerate(TEXTS)]
    out = await Evaluator(EvaluationSettings()).run(request(chunks))
    assert out.execution_time_ms > 0
    assert EvaluatorOutput.model_validate_json(out.model_dump_json()) == out


async def test_large_evidence_is_evaluated_without_freezing_the_event_loop() -> None:
    # ~1.2 × the offload size of distinct sentences: the evaluation runs in a worker thread and a ticker on the
    # loop keeps running meanwhile (on the loop itself it would not tick at all until the evaluation returned).
    sentences = [f"Finding {i} concerns topic {i * 7919 % 10007} measured in cohort {i % 97}." for i in range(2_000)]
    chunks = [chunk(f"c{i}", " ".join(sentences[i * 40 : (i + 1) * 40])) for i in range(50)]
    assert sum(len(c.content) for c in chunks) > OFFLOAD_CHARS
    async with LoopWatch(interval_s=0) as watch:
        before = watch.ticks
        out = await Evaluator().run(request(chunks, quality_threshold=0.0))
        ticks = watch.ticks
    assert out.quality_stats.original_chunk_count == 50
    assert ticks - before >= 2
