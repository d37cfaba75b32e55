"""The follow-up stage: how often the deterministic rule resolves a follow-up, how often it rewrites a question that
stood alone (target 0), and what the stage adds to a question's latency.

    .venv/bin/python benchmarks/follow_up.py [--repeat 2000]

Quality: a labelled set kept here (not the unit tests' cases): follow-ups after a first question, each labelled
with what its stand-alone form must name (None where nothing can be resolved safely), and questions that stand on
their own asked after each of the same first questions. ``resolved`` counts follow-ups rewritten to name what they
must; ``false_rewrites`` counts stand-alone questions that were changed; every rewrite is listed to be read.

Latency: the rule alone (per question); one summary update (``summary_after``, per exchange, in the Memory stage
in the background); and the whole stage as the Flow runs it before retrieval (``ResearchStages.rewrite_follow_up``
with the real loader: one summary read from a real SQLite memory store, then the rule). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import describe_cpu
from researchcrew.memory.records import SessionSummary, SessionTurn
from researchcrew.memory.store import MemoryStore
from researchcrew.pipeline.assemble import _follow_up
from researchcrew.pipeline.follow_up._rule import rule_rewrite
from researchcrew.pipeline.follow_up._session import summary_after, turn_of
from researchcrew.pipeline.stages import ResearchStages
from researchcrew.settings import Settings
from researchcrew.testing.stages import scripted_stages

# (first question, follow-up, what the stand-alone question must name — None where nothing can be resolved safely)
FOLLOW_UPS: list[tuple[str, str, str | None]] = [
    ("What is retrieval-augmented generation?", "What are its main components?", "retrieval-augmented generation"),
    ("What is retrieval-augmented generation?", "Who proposed it?", "retrieval-augmented generation"),
    (
        "What is retrieval-augmented generation?",
        "How does it handle outdated documents?",
        "retrieval-augmented generation",
    ),
    ("What is retrieval-augmented generation?", "What about hallucinations?", "retrieval-augmented generation"),
    ("What is retrieval-augmented generation?", "Any benchmarks?", "retrieval-augmented generation"),
    ("What is retrieval-augmented generation?", "Why?", "retrieval-augmented generation"),
    ("What are the drawbacks of BM25?", "And for long documents?", "BM25"),
    ("What are the drawbacks of BM25?", "What about dense retrieval?", "drawbacks of dense retrieval"),
    ("What are the drawbacks of BM25?", "How can they be mitigated?", None),  # "they": the drawbacks, not BM25
    ("Explain contrastive learning", "How does it differ from supervised learning?", "contrastive learning"),
    ("Explain contrastive learning", "Who uses this technique?", "contrastive learning"),
    ("Explain contrastive learning", "Tell me more", "contrastive learning"),
    ("Compare Milvus and Qdrant", "Which of them scales better?", "Milvus and Qdrant"),
    ("Compare Milvus and Qdrant", "Is the former open source?", "Milvus"),
    ("Compare Milvus and Qdrant", "What is the latter written in?", "Qdrant"),
    ("Compare Milvus and Qdrant", "What are their licenses?", "Milvus and Qdrant"),
    ("Compare Milvus and Qdrant", "How fast is it?", None),  # which one?
    ("What are graph neural networks?", "How do they scale to large graphs?", "graph neural networks"),
    ("What are graph neural networks?", "What are their limitations?", "graph neural networks"),
    ("What are graph neural networks?", "Who introduced them?", "graph neural networks"),
    ("How does CRISPR work?", "What are its risks?", "CRISPR"),
    ("How does CRISPR work?", "Is it used in agriculture?", "CRISPR"),
    ("How does CRISPR work?", "And in medicine?", "CRISPR"),
    ("What is the attention mechanism in transformers?", "And in RNNs?", "attention mechanism in RNNs"),
    ("What is the attention mechanism in transformers?", "Why is it expensive?", "attention mechanism"),
    ("Who invented the Rust borrow checker?", "How does this work?", "borrow checker"),
    ("What is property-based testing?", "What are the main advantages?", "property-based testing"),
    ("What is property-based testing?", "Examples?", "property-based testing"),
    ("What is property-based testing?", "Why is that?", None),  # "that": a statement in the answer
    ("How do I read a CSV file in Python?", "And in Java?", "CSV file in Java"),
    ("How do I read a CSV file in Python?", "What about JSON?", None),  # the rule cannot tell what JSON replaces
]

STAND_ALONE: list[str] = [
    "What is the difference between precision and recall?",
    "How do vector databases index embeddings?",
    "Is it possible to fine-tune BERT on a laptop?",
    "Is it true that dropout prevents overfitting?",
    "How long does it take to index a million documents in Milvus?",
    "Would it be faster to use HNSW or IVF?",
    "What is the role of IT in hospitals?",
    "Which paper introduced the transformer?",
    "What did the 2020 RAG paper by Lewis et al. propose?",
    "Compare SciFact and FEVER",
    "Tell me about CRISPR off-target effects.",
    "What are the limitations of graph neural networks?",
    "Why does BM25 saturate term frequency?",
    "How do I read a CSV file in Python?",
    "What happened in NLP this year?",
    "Which model that was released in 2023 is the most accurate?",
    "Can large language models do arithmetic?",
    "What causes flaky tests?",
    "Is that claim about transformers supported by evidence?",
    "Who maintains the Qdrant project?",
]


def session(first: str) -> SessionSummary:
    turn = SessionTurn(question=first, standalone=first)
    return SessionSummary(user_id="bench", session_id="s1", turns=1, recent=[turn])


def quality() -> dict[str, Any]:
    firsts = sorted({first for first, _, _ in FOLLOW_UPS})
    resolved = declined = 0
    misses: list[dict[str, str | None]] = []
    rewrites: list[str] = []
    for first, question, must_name in FOLLOW_UPS:
        result = rule_rewrite(question, session(first))
        got = result.question if result.rewritten else None
        if got is not None:
            rewrites.append(f"{question} → {got}")
        if must_name is None and got is None:
            declined += 1
        elif must_name is not None and got is not None and must_name.lower() in got.lower():
            resolved += 1
        else:
            misses.append({"after": first, "question": question, "must_name": must_name, "got": got})
    false_rewrites = [
        {"after": first, "question": question, "got": result.question}
        for question in STAND_ALONE
        for first in firsts
        if (result := rule_rewrite(question, session(first))).rewritten
    ]
    resolvable = sum(must_name is not None for _, _, must_name in FOLLOW_UPS)
    return {
        "follow_ups": len(FOLLOW_UPS),
        "resolvable": resolvable,
        "resolved": resolved,
        "resolved_share": round(resolved / resolvable, 3),
        "declined_where_unresolvable": f"{declined} of {len(FOLLOW_UPS) - resolvable}",
        "misses": misses,
        "rewrites": rewrites,
        "stand_alone_checks": len(STAND_ALONE) * len(firsts),
        "false_rewrites": len(false_rewrites),
        "false_rewrite_examples": false_rewrites[:5],
        "target": "false_rewrites == 0 (the rest is what the LLM rewrite is for)",
    }


def timings_us(action: Any, repeat: int) -> dict[str, float]:
    values = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        values.append((time.perf_counter() - started) * 1e6)
    values.sort()
    return {"p50": round(statistics.median(values), 1), "p95": round(values[int(0.95 * (len(values) - 1))], 1)}


async def stage_latency(repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        settings = Settings(data_dir=Path(directory))
        store = await MemoryStore.open(settings.memory_database_url)
        try:
            summary = None
            for n in range(30):  # a long session: the summary stays bounded
                question = f"What is topic number {n}?"
                summary = summary_after(
                    summary,
                    turn_of(question, question, "An answer.", answered=True, asked_at=None),
                    user_id="u",
                    session_id="s",
                )
            final = summary
            assert final is not None
            await store.update_session_summary(user_id="u", session_id="s", update=lambda _: final)
            options = _follow_up(settings, llm=None, memory_store=store, memory_writer=None)
            stages: ResearchStages = scripted_stages(None, **options)  # type: ignore[arg-type]
            values = []
            for _ in range(repeat):
                started = time.perf_counter()
                result = await stages.rewrite_follow_up("What are its limitations?", "u", "s", 30.0)
                values.append((time.perf_counter() - started) * 1000)
                assert result.rewritten
            values.sort()
        finally:
            await store.close()
    return {
        "what": "summary read (SQLite) + rule, as the Flow runs it before retrieval",
        "ms_p50": round(statistics.median(values), 3),
        "ms_p95": round(values[int(0.95 * (len(values) - 1))], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    summary = session("What are the drawbacks of BM25?")
    long_summary = None
    for n in range(50):
        question = f"What is topic number {n}?"
        long_summary = summary_after(
            long_summary,
            turn_of(question, question, "An answer.", answered=True, asked_at=None),
            user_id="u",
            session_id="s",
        )
    last = turn_of("What is BM25?", "What is BM25?", "A ranking function.", answered=True, asked_at=None)
    report = {
        "benchmark": "follow_up",
        "machine": describe_cpu(),
        "quality": quality(),
        "rule_us": {
            "follow_up": timings_us(lambda: rule_rewrite("And for long documents?", summary), args.repeat),
            "stand_alone": timings_us(
                lambda: rule_rewrite("How do vector databases index embeddings?", summary), args.repeat
            ),
        },
        "summary_update_us": timings_us(
            lambda: summary_after(long_summary, last, user_id="u", session_id="s"), args.repeat
        ),
        "stage": asyncio.run(stage_latency(min(args.repeat, 300))),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
