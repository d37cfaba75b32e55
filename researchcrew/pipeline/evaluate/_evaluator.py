"""The Evaluator (seed 003): score, deduplicate, filter and cross-check the Retriever's evidence.

Everything here is deterministic, CPU-light async Python; an LLM is used only to adjudicate suspected
contradictions, and only when one is given. The steps, in order:

1. **Sanity**: a chunk with no words (only punctuation or markup) is removed as ``empty``; a second chunk reusing
   an earlier ``chunk_id`` is removed as ``invalid`` (citations are resolved by id, so ids must be unique).
2. **Score** every received chunk (``scoring``): reputation, recency, relevance, weighted.
3. **Deduplicate** best first (``dedup``): near-identical chunks are removed as ``duplicate`` of the better one;
   similar ones keep their place with the seed's redundancy penalty (score × 0.5). Before either, the pair is
   checked for a *disagreement* (``disagreement``: another number, the opposite direction, a negation): two such
   chunks are both kept, unpenalised, and reported as a contradiction — dedup never deletes one side of one.
4. **Filter**: chunks scoring below ``quality_threshold`` are removed as ``below_threshold``, the score and its
   components in the reason. If that removes *everything*, nothing is kept: garbage is not promoted to evidence.
   The kept list is then empty, the Flow's confidence check sees no evidence and answers with an uncertainty
   response, and ``rejected_chunks`` (best first) gives it the best low-quality matches to show.
5. **Statistics** over all received chunks (score buckets) and the kept ones (average).
6. **Contradictions** among the kept chunks (``contradictions``), adjudicated by the LLM when one is configured
   (``adjudication``).

The agent never raises for bad evidence: every removal is reported as data. ``evaluate`` is the synchronous,
deterministic part (steps 1–6 without the LLM); ``run`` adds adjudication and runs ``evaluate`` in a worker thread
when the evidence is large (``OFFLOAD_CHARS``), so the event loop is never frozen by a big batch of web pages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from researchcrew.contracts.chunks import ContextChunk, is_evidence
from researchcrew.contracts.evaluator import (
    ContradictionRecord,
    EvaluatorInput,
    EvaluatorOutput,
    FilteredContext,
    QualityStatistics,
    RemovalReason,
    ScoredChunk,
)
from researchcrew.pipeline._sources import document_key
from researchcrew.pipeline.evaluate._adjudication import adjudicate
from researchcrew.pipeline.evaluate._dedup import find_duplicates, shingles
from researchcrew.pipeline.evaluate._disagreement import disagreement
from researchcrew.pipeline.evaluate._scoring import ScoreParts, Scorer
from researchcrew.pipeline.evaluate.contradictions import detect_contradictions
from researchcrew.settings import EvaluationSettings

if TYPE_CHECKING:
    from crewai import BaseLLM

logger = logging.getLogger(__name__)

BUCKETS: tuple[str, ...] = ("0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0")
# Above this much text (~15k words, tens of milliseconds of CPU) the evaluation runs in a worker thread.
OFFLOAD_CHARS = 100_000


def bucket_of(score: float) -> str:
    """The quality bucket of a score; each bucket includes its lower bound, the last one also 1.0."""
    return BUCKETS[min(int(score * len(BUCKETS)), len(BUCKETS) - 1)]


def quality_statistics(received: Sequence[float], kept: Sequence[float]) -> QualityStatistics:
    distribution = dict.fromkeys(BUCKETS, 0)
    for score in received:
        distribution[bucket_of(score)] += 1
    removed = len(received) - len(kept)
    return QualityStatistics(
        original_chunk_count=len(received),
        filtered_chunk_count=len(kept),
        removal_rate=round(100.0 * removed / len(received), 2) if received else 0.0,
        average_quality_score=round(sum(kept) / len(kept), 4) if kept else 0.0,
        quality_distribution=distribution,
    )


class Evaluator:
    """Turns an ``AggregatedContext`` into a ``FilteredContext`` with reasons, statistics and contradictions."""

    def __init__(self, settings: EvaluationSettings | None = None, *, llm: BaseLLM | None = None) -> None:
        self.settings = settings or EvaluationSettings()
        self.llm = llm

    async def run(self, request: EvaluatorInput) -> EvaluatorOutput:
        """Evaluate, then let the LLM (if any) adjudicate the suspected contradictions."""
        started = time.perf_counter()
        if sum(len(chunk.content) for chunk in request.aggregated_context.chunks) > OFFLOAD_CHARS:
            # Pure-Python CPU work: in a worker thread the event loop keeps serving other requests and progress
            # streams (the GIL is handed over every few milliseconds) instead of freezing for the whole evaluation.
            output = await asyncio.to_thread(self.evaluate, request)
        else:
            output = self.evaluate(request)
        suspected = output.contradictions_found
        if suspected and self.llm is not None and self.settings.max_llm_adjudications > 0:
            result = await adjudicate(suspected, self.llm, self.settings)
            output.contradictions_found = result.kept
            output.dismissed_contradictions = result.dismissed
        output.execution_time_ms = (time.perf_counter() - started) * 1000.0
        return output

    def evaluate(self, request: EvaluatorInput) -> EvaluatorOutput:
        """The deterministic part: scores, duplicates, filtering, statistics and *suspected* contradictions."""
        started = time.perf_counter()
        chunks = request.aggregated_context.chunks
        scorer = Scorer.for_request(request, self.settings)
        parts = [scorer.score(chunk) for chunk in chunks]
        final = [p.score for p in parts]
        shingle_sets = [shingles(chunk.content) for chunk in chunks]
        removals: dict[int, RemovalReason] = {}

        seen_ids: dict[str, int] = {}
        for index, chunk in enumerate(chunks):
            if chunk.chunk_id in seen_ids:
                removals[index] = RemovalReason(
                    chunk_id=chunk.chunk_id,
                    reason="invalid",
                    quality_score=parts[index].score,
                    detail=f"chunk_id already used by chunk #{seen_ids[chunk.chunk_id] + 1}; ids must be unique",
                )
            elif not is_evidence(chunk):
                removals[index] = RemovalReason(
                    chunk_id=chunk.chunk_id,
                    reason="not_evidence",
                    quality_score=parts[index].score,
                    detail="conversation memory that is context, not evidence: only what the user said counts "
                    "(the assistant's earlier answers are never evidence, compared or cited)",
                )
            elif not shingle_sets[index]:
                removals[index] = RemovalReason(
                    chunk_id=chunk.chunk_id,
                    reason="empty",
                    quality_score=parts[index].score,
                    detail="no words in the content (only punctuation or markup)",
                )
            seen_ids.setdefault(chunk.chunk_id, index)

        candidates = [i for i in range(len(chunks)) if i not in removals]
        best_first = sorted(candidates, key=lambda i: (-parts[i].score, i))
        disagreements: dict[tuple[int, int], ContradictionRecord] = {}

        def keep_apart(worse: int, better: int) -> bool:
            record = disagreement(chunks[better], chunks[worse], tolerance=self.settings.numeric_tolerance)
            if record is not None:
                disagreements[(better, worse)] = record
            return record is not None

        decisions = find_duplicates(
            shingle_sets,
            best_first,
            duplicate_threshold=self.settings.duplicate_threshold,
            redundancy_threshold=self.settings.redundancy_threshold,
            keep_apart=keep_apart,
        )
        similar_to: dict[int, str] = {}
        for index in best_first:
            decision = decisions[index]
            if decision.kind == "unique" or decision.other is None:
                continue
            other = chunks[decision.other]
            if decision.kind == "duplicate":
                removals[index] = RemovalReason(
                    chunk_id=chunks[index].chunk_id,
                    reason="duplicate",
                    duplicate_of=other.chunk_id,
                    quality_score=parts[index].score,
                    components=parts[index].components(),
                    detail=f"{decision.containment:.0%} of its text repeats {other.chunk_id} "
                    f"({other.source_type}, quality {parts[decision.other].score:.3f} ≥ {parts[index].score:.3f})",
                )
            else:
                final[index] = parts[index].score * self.settings.redundancy_penalty
                similar_to[index] = other.chunk_id

        scored = {i: self._scored(chunks[i], parts[i], final[i], similar_to.get(i)) for i in best_first}
        kept: list[int] = []
        rejected: list[int] = []
        for index in best_first:
            if index in removals:
                continue
            if final[index] >= request.quality_threshold:
                kept.append(index)
                continue
            rejected.append(index)
            removals[index] = self._below_threshold(
                scorer, chunks[index], parts[index], final[index], request.quality_threshold, similar_to.get(index)
            )
        rank = {index: position for position, index in enumerate(best_first)}
        kept.sort(key=lambda i: (-final[i], rank[i]))
        rejected.sort(key=lambda i: (-final[i], i))
        if chunks and not kept:
            logger.info(
                "evaluation kept none of %d chunks (threshold %.2f); best score %.3f",
                len(chunks),
                request.quality_threshold,
                max(final),
            )

        return EvaluatorOutput(
            filtered_context=FilteredContext(
                query_text=request.aggregated_context.query_text, chunks=[scored[i] for i in kept]
            ),
            quality_stats=quality_statistics(final, [final[i] for i in kept]),
            contradictions_found=self._contradictions(
                [chunks[i] for i in kept], [r for (a, b), r in disagreements.items() if a in kept and b in kept]
            ),
            removal_rationale=[removals[i] for i in sorted(removals)],
            rejected_chunks=[scored[i] for i in rejected],
            execution_time_ms=(time.perf_counter() - started) * 1000.0,
        )

    def _scored(self, chunk: ContextChunk, parts: ScoreParts, final: float, similar_to: str | None) -> ScoredChunk:
        return ScoredChunk(
            chunk=chunk,
            quality_score=final,
            source_reputation=parts.reputation,
            recency=parts.recency,
            relevance=parts.relevance,
            redundancy_penalised=similar_to is not None,
            base_score=parts.score,
            similar_to=similar_to,
        )

    def _below_threshold(
        self,
        scorer: Scorer,
        chunk: ContextChunk,
        parts: ScoreParts,
        final: float,
        threshold: float,
        similar_to: str | None,
    ) -> RemovalReason:
        components = parts.components()
        detail = f"quality {final:.3f} < threshold {threshold:.2f}: {scorer.describe(chunk, parts)}"
        if similar_to is not None:
            components["redundancy_penalty"] = self.settings.redundancy_penalty
            detail += f", × redundancy penalty {self.settings.redundancy_penalty:g} (repeats {similar_to})"
        return RemovalReason(
            chunk_id=chunk.chunk_id,
            reason="below_threshold",
            detail=detail,
            quality_score=final,
            components=components,
        )

    def _contradictions(
        self, chunks: Sequence[ContextChunk], near_duplicates: Sequence[ContradictionRecord] = ()
    ) -> list[ContradictionRecord]:
        """Disagreements among the kept chunks: those dedup found between near-identical passages first (certain:
        the rest of the text is the same), then the detector's; one record per pair of chunks and kind. Passages of
        the same document are one source (``pipeline.sources``) and never "disagree" with each other."""
        if len(chunks) < 2 or self.settings.max_contradictions == 0:
            return []
        found = list(near_duplicates) + detect_contradictions(
            chunks, tolerance=self.settings.numeric_tolerance, limit=self.settings.max_contradictions
        )
        document = {chunk.chunk_id: document_key(chunk) for chunk in chunks}
        pairs: set[tuple[frozenset[str], str]] = set()
        unique: list[ContradictionRecord] = []
        for record in found:
            if document.get(record.chunk_id_a, "a") == document.get(record.chunk_id_b, "b"):
                continue  # two passages of one document are one source: it does not disagree with itself
            pair = (frozenset((record.chunk_id_a, record.chunk_id_b)), record.kind)
            if pair not in pairs:
                pairs.add(pair)
                unique.append(record)
        return unique[: self.settings.max_contradictions]
