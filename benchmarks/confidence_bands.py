"""Does the confidence band mean something? Labelled questions on the demo corpus, answered offline.

    .venv/bin/python benchmarks/confidence_bands.py [--data-dir DIR] [--no-tune]

``benchmarks/data/confidence_questions.jsonl`` holds 44 questions the bundled demo corpus (105 arXiv abstracts,
mostly on software testing) answers and 44 it does not — off-topic ones, and ones that share words with it
("How much gallium is on Jupiter's moons?" against hot-Jupiter abstracts; "flaky pastry", "stress test for banks").
Each row is labelled ``answerable`` and assigned to a ``split``: ``tune`` or ``report`` (alternating within each
label, 22 + 22 per split).

1. The demo corpus is ingested into a fresh Milvus Lite knowledge base.
2. **Tuning (the tune split only).** For each question the knowledge base's top hits are scored once (question–
   passage cosine and the share of the question's words found, ``pipeline/_support.py``); a grid over
   ``semantic_floor``, ``semantic_full`` and ``answer_min_support`` picks the gate with the best accuracy of
   "answer iff answerable" on the tune split; among equally accurate gates the one closest to the settings'
   defaults wins (the defaults stand unless the tune split shows a better gate), then the widest margin between
   the support scores and the threshold. ``--no-tune`` keeps the defaults.
3. **Measurement (both splits, reported apart).** Every question goes through the real pipeline (``Runtime.ask``:
   retrieval, evaluation, the gate, reformulation, extractive synthesis, the answer's confidence) with the chosen
   settings; only the knowledge base is searched, nothing is remembered.

For each split it prints, per band, how many answers landed there and how often that was right — an answer (high,
medium, low, or too low but answered) is right when the question is answerable; the uncertainty answer is right
when it is not — and the overall accuracy of "uncertainty answer iff unanswerable". One JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUESTIONS = Path(__file__).resolve().parent / "data" / "confidence_questions.jsonl"
BANDS = ("high", "medium", "low", "too_low_answered", "uncertainty")
FLOORS = (0.25, 0.30, 0.35, 0.40, 0.45)
SPANS = (0.15, 0.20, 0.25, 0.30, 0.35)  # semantic_full = floor + span
THRESHOLDS = tuple(round(0.25 + 0.05 * step, 2) for step in range(11))  # 0.25 … 0.75


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answerable: bool
    split: str


@dataclass(frozen=True)
class Passage:
    cosine: float  # question–passage cosine
    coverage: float  # share of the question's content words in the passage


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Question(row["id"], row["question"], bool(row["answerable"]), row["split"]) for row in rows]


def support(passage: Passage, floor: float, full: float, coverage_weight: float) -> float:
    semantic = min(1.0, max(0.0, (passage.cosine - floor) / (full - floor)))
    return (1 - coverage_weight) * semantic + coverage_weight * passage.coverage


def tune(questions: Sequence[Question], passages: dict[str, list[Passage]], defaults: Any) -> dict[str, Any]:
    """The gate (floor, full, threshold) with the best tune-split accuracy; ties → closest to the defaults, then the
    widest margin."""
    tuning = [q for q in questions if q.split == "tune"]
    best: tuple[float, float, float, dict[str, float]] | None = None
    floors = sorted({*FLOORS, defaults.semantic_floor})
    spans = sorted({*SPANS, round(defaults.semantic_full - defaults.semantic_floor, 2)})
    thresholds = sorted({*THRESHOLDS, defaults.answer_min_support})
    for floor, span, threshold in itertools.product(floors, spans, thresholds):
        full = round(floor + span, 2)
        right, margin = 0, 1.0
        for question in tuning:
            scores = [support(p, floor, full, defaults.coverage_weight) for p in passages[question.id]]
            score = max(scores, default=0.0)
            right += (score >= threshold) == question.answerable
            margin = min(margin, abs(score - threshold))
        distance = (
            abs(floor - defaults.semantic_floor)
            + abs(full - defaults.semantic_full)
            + abs(threshold - defaults.answer_min_support)
        )
        settings = {"semantic_floor": floor, "semantic_full": full, "answer_min_support": threshold}
        candidate = (right / len(tuning), -round(distance, 4), margin, settings)
        if best is None or candidate[:3] > best[:3]:
            best = candidate
    assert best is not None
    return {"accuracy": round(best[0], 4), "margin": round(best[2], 4), "settings": best[3]}


def band_of(response: Any) -> str:
    if response.answer_kind == "uncertainty":
        return "uncertainty"
    level = str(response.confidence_level)
    return "too_low_answered" if level == "insufficient" else level


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    bands: dict[str, dict[str, Any]] = {}
    for name in BANDS:
        members = [row for row in rows if row["band"] == name]
        right = sum(row["right"] for row in members)
        bands[name] = {"answers": len(members), "right": right, "right_rate": _rate(right, len(members))}
    right = sum(row["right"] for row in rows)
    return {
        "questions": len(rows),
        "answerable": sum(row["answerable"] for row in rows),
        "bands": bands,
        "uncertainty_iff_unanswerable_accuracy": _rate(right, len(rows)),
        "mistakes": [
            {key: row[key] for key in ("id", "question", "answerable", "band", "confidence", "final_reason")}
            for row in rows
            if not row["right"]
        ],
    }


def _rate(right: int, total: int) -> float | None:
    return round(right / total, 4) if total else None


async def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="Data directory to use (default: a fresh temporary one).")
    parser.add_argument("--no-tune", action="store_true", help="Measure with the settings' defaults.")
    args = parser.parse_args()

    from benchmarks.machine import describe_cpu
    from researchcrew.contracts.request import ResearchRequest
    from researchcrew.data import demo_corpus_path
    from researchcrew.embedding.embedder import default_cache_dir, get_embedder
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.loaders import load_file
    from researchcrew.pipeline._support import EmbeddingSupport
    from researchcrew.runtime import open_runtime
    from researchcrew.settings import ConfidenceSettings, EmbeddingSettings, Settings
    from researchcrew.tools.rag import to_context_chunk

    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="rc-confidence-")) if temporary else args.data_dir
    try:
        base = Settings(
            data_dir=data_dir, embedding=EmbeddingSettings(cache_dir=default_cache_dir()), enabled_sources=["rag"]
        )
        embedder = get_embedder(base)
        knowledge_base = KnowledgeBase(base, embedder=embedder)
        started = time.perf_counter()
        loaded = load_file(demo_corpus_path())
        knowledge_base.add_documents(loaded.documents)
        ingest_s = time.perf_counter() - started
        questions = load_questions()

        # Features once per question: every top hit's cosine and coverage (what support is made of).
        raw = EmbeddingSupport(embedder, ConfidenceSettings(semantic_floor=-1.0, semantic_full=1.0))
        passages: dict[str, list[Passage]] = {}
        for question in questions:
            hits = knowledge_base.search(question.text, top_k=base.retrieval.num_results, min_relevance=0.0)
            scored = raw.score(question.text, [to_context_chunk(hit, query=question.text) for hit in hits])
            passages[question.id] = [Passage(s.semantic or -1.0, s.coverage) for s in scored.values()]

        defaults = ConfidenceSettings()
        tuned = None if args.no_tune else tune(questions, passages, defaults)
        chosen = defaults.model_copy(update=tuned["settings"]) if tuned else defaults
        settings = base.model_copy(update={"confidence": chosen})

        rows: list[dict[str, Any]] = []
        async with open_runtime(settings, knowledge_base=knowledge_base, remember=False) as runtime:
            for question in questions:
                response = await runtime.ask(ResearchRequest(question=question.text, user_id="bench"))
                band = band_of(response)
                rows.append(
                    {
                        "id": question.id,
                        "question": question.text,
                        "answerable": question.answerable,
                        "split": question.split,
                        "band": band,
                        "confidence": response.confidence,
                        "final_reason": response.final_reason,
                        "right": (band != "uncertainty") == question.answerable,
                    }
                )
        knowledge_base.close()
        return {
            "benchmark": "confidence_bands",
            "machine": describe_cpu(),
            "corpus": {"documents": len(loaded.documents), "ingest_s": round(ingest_s, 1)},
            "question_set": str(QUESTIONS.relative_to(QUESTIONS.parent.parent.parent)),
            "tuning": tuned,
            "confidence_settings": chosen.model_dump(),
            "defaults_match_tuned": tuned is None
            or all(getattr(defaults, k) == v for k, v in tuned["settings"].items()),
            "splits": {
                split: summarise([row for row in rows if row["split"] == split]) for split in ("tune", "report")
            },
            "all": summarise(rows),
        }
    finally:
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=2))
