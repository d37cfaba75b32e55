"""Speed of the no-LLM synthesis path: the extractive synthesizer and citation validation.

    .venv/bin/python benchmarks/synthesis.py [--runs 200] [--chunks 20]

Evidence: the first N abstracts of the bundled demo corpus (real arXiv text, ~1 KB each), scored as the Evaluator
would hand them over, with two contradictions. Questions cycle through a few phrasings over the corpus. Measures
``ExtractiveSynthesizer.answer`` (sentence split, scoring, MMR, grouping, validation, confidence, coverage,
rendering) cold (the per-chunk sentence and term caches emptied before every run: evidence never seen before) and warm
(the same chunks again, as knowledge-base chunks recur across questions), and ``validate_citations`` re-checking
a finished answer. CPU time is reported beside wall time because the machine is shared: under load, wall time
measures the neighbours. Prints one JSON document. Target (issue 4): extractive synthesis of 20 chunks ≤ 20 ms (cold).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from researchcrew.contracts import ContextChunk, ContradictionRecord, FilteredContext, Query, ScoredChunk
from researchcrew.contracts.synthesizer import SynthesizerInput
from researchcrew.pipeline.synthesize._citations import validate_citations
from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer, analysed_sentences
from researchcrew.text.terms import term_set

CORPUS = Path(__file__).resolve().parent.parent / "researchcrew" / "data" / "demo_corpus" / "arxiv_abstracts.jsonl"
QUESTIONS = [
    "How are neural networks used for information theory and communications?",
    "What methods detect anomalies in large graphs?",
    "Which results are known about quantum error correction codes?",
    "How do transformers handle long documents?",
]
TARGET_P50_MS = 20.0


def load_evidence(count: int) -> list[ScoredChunk]:
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    evidence = []
    for index, record in enumerate(records[:count]):
        chunk = ContextChunk(
            chunk_id=f"demo-{index}",
            source_type=("rag", "arxiv", "web")[index % 3],
            content=record["abstract"],
            title=record["title"],
            url=record["id"],
            authors=record.get("authors", [])[:5],
            semantic_relevance=0.5 + 0.02 * (index % 10),
        )
        quality = 0.6 + 0.015 * (index % 20)
        evidence.append(
            ScoredChunk(
                chunk=chunk,
                quality_score=quality,
                source_reputation=0.8,
                recency=0.5,
                relevance=chunk.semantic_relevance,
            )
        )
    return evidence


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=20)
    args = parser.parse_args()

    evidence = load_evidence(args.chunks)
    contradictions = [
        ContradictionRecord(
            chunk_id_a="demo-0",
            chunk_id_b="demo-3",
            claim_a=evidence[0].chunk.content[:120],
            claim_b=evidence[3].chunk.content[:120],
            kind="numeric",
            subject="a quantity",
        ),
        ContradictionRecord(
            chunk_id_a="demo-5",
            chunk_id_b="demo-8",
            claim_a=evidence[5].chunk.content[:120],
            claim_b=evidence[8].chunk.content[:120],
            kind="polarity",
        ),
    ]
    synthesizer = ExtractiveSynthesizer()
    results: dict[str, Any] = {
        "chunks": len(evidence),
        "runs": args.runs,
        "evidence_chars": sum(len(s.chunk.content) for s in evidence),
    }
    for response_format in ("concise", "detailed", "technical"):
        times, cpu_times, warm_times, validate_times, sentences = [], [], [], [], []
        for run in range(args.runs):
            question = QUESTIONS[run % len(QUESTIONS)]
            request = SynthesizerInput(
                filtered_context=FilteredContext(query_text=question, chunks=evidence),
                original_query=Query(text=question, user_id="bench", session_id="bench"),
                contradictions=contradictions,
                response_format=response_format,
            )
            analysed_sentences.cache_clear()
            term_set.cache_clear()
            started, cpu_started = time.perf_counter(), time.process_time()
            output = synthesizer.answer(request)
            times.append((time.perf_counter() - started) * 1000)
            cpu_times.append((time.process_time() - cpu_started) * 1000)
            started = time.perf_counter()
            synthesizer.answer(request)
            warm_times.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            validate_citations(output.final_response, evidence)
            validate_times.append((time.perf_counter() - started) * 1000)
            sentences.append(sum(len(s.claims) for s in output.final_response.sections))
        results[response_format] = {
            "synthesis_ms": {
                "p50": round(statistics.median(times), 2),
                "p95": round(percentile(times, 0.95), 2),
                "max": round(max(times), 2),
            },
            "synthesis_cpu_ms_p50": round(statistics.median(cpu_times), 2),
            "warm_synthesis_ms": {
                "p50": round(statistics.median(warm_times), 2),
                "p95": round(percentile(warm_times, 0.95), 2),
            },
            "validate_citations_ms_p50": round(statistics.median(validate_times), 3),
            "claims_median": statistics.median(sentences),
        }
    results["target_synthesis_p50_ms"] = TARGET_P50_MS
    results["meets_target"] = all(
        results[f]["synthesis_ms"]["p50"] <= TARGET_P50_MS for f in ("concise", "detailed", "technical")
    )
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
