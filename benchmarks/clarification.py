"""Clarify when the question is unclear, not when retrieval missed (issue 20 item 4), end to end, offline.

    .venv/bin/python benchmarks/clarification.py [--split report|tune|all] [--data-dir DIR]

Every question of the labelled set ``benchmarks/data/clarification_questions.jsonl`` (vague and broad questions, and
clear ones — among them short precise questions such as "Who wrote QuickCheck?" and clear questions the corpus cannot
answer) is asked through the SDK (``ResearchAssistant.ask``) over the bundled demo corpus, with no LLM (extractive
answers) and only the knowledge base and memory as sources, each in a fresh session (so no question is taken as the
reply to another's clarification). A question counts as clarified when the answer is a clarification.

The detector's rules were written and tuned on the ``tune`` split only; the targets hold on the ``report`` split:
clarify rate on vague ≥ 0.85, on clear ≤ 0.05. Prints one JSON document: rates per split and label, the misses with
the rule that fired (or did not), and what the clear questions got instead (extractive answer or uncertainty).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATA = Path(__file__).resolve().parent / "data" / "clarification_questions.jsonl"
TARGET_VAGUE = 0.85
TARGET_CLEAR = 0.05


def load(split: str) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in rows if split == "all" or row["split"] == split]


def ingest_demo_corpus(settings: Any) -> int:
    from researchcrew.data import demo_corpus_path
    from researchcrew.knowledge.collection import KnowledgeBase

    with KnowledgeBase(settings) as knowledge_base:
        report = knowledge_base.ingest([demo_corpus_path()], progress=False)
    documents = report.documents_added + report.documents_unchanged
    if documents == 0:
        raise SystemExit(f"ingesting the demo corpus failed: {report.errors[:3]}")
    return documents


async def ask_all(settings: Any, rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    from researchcrew.assistant import ResearchAssistant
    from researchcrew.pipeline._vagueness import vagueness

    results: list[dict[str, Any]] = []
    async with ResearchAssistant(settings, remember=False) as assistant:
        for number, row in enumerate(rows):
            started = time.perf_counter()
            response = await assistant.ask(row["question"], user_id="bench", session_id=f"q{number}")
            unclear = vagueness(row["question"])
            results.append(
                {
                    **row,
                    "clarified": response.answer_kind == "clarification",
                    "answer_kind": response.answer_kind,
                    "reason": response.clarification.reason if response.clarification else None,
                    "rule": unclear.rule if unclear else None,
                    "searches": 1 + len(response.reformulations),
                    "ms": round((time.perf_counter() - started) * 1000, 1),
                }
            )
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_split: dict[str, Any] = {}
    for split in sorted({row["split"] for row in results}):
        rows = [row for row in results if row["split"] == split]
        vague = [row for row in rows if row["label"] == "vague"]
        clear = [row for row in rows if row["label"] == "clear"]
        vague_rate = sum(row["clarified"] for row in vague) / len(vague) if vague else 0.0
        clear_rate = sum(row["clarified"] for row in clear) / len(clear) if clear else 0.0
        by_split[split] = {
            "vague": len(vague),
            "clear": len(clear),
            "clarify_rate_vague": round(vague_rate, 3),
            "clarify_rate_clear": round(clear_rate, 3),
            "targets_met": vague_rate >= TARGET_VAGUE and clear_rate <= TARGET_CLEAR,
            "vague_not_clarified": [row["question"] for row in vague if not row["clarified"]],
            "clear_clarified": [row["question"] for row in clear if row["clarified"]],
            "clear_answer_kinds": dict(Counter(row["answer_kind"] for row in clear)),
            "vague_rules": dict(Counter(row["rule"] for row in vague)),
            "clear_searches_mean": round(sum(row["searches"] for row in clear) / len(clear), 2) if clear else 0.0,
        }
    return by_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["report", "tune", "all"], default="all", help="Which questions to ask.")
    parser.add_argument("--data-dir", type=Path, default=None, help="Data directory (default: a fresh temporary one).")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.embedding.embedder import default_cache_dir
    from researchcrew.settings import EmbeddingSettings, Settings

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="researchcrew-bench-"))
    settings = Settings(
        data_dir=data_dir, enabled_sources=["rag", "memory"], embedding=EmbeddingSettings(cache_dir=default_cache_dir())
    )
    rows = load(args.split)
    try:
        documents = ingest_demo_corpus(settings)
        results = asyncio.run(ask_all(settings, rows))
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(
        json.dumps(
            {
                "benchmark": "clarification",
                "setup": {
                    "llm": None,
                    "enabled_sources": settings.enabled_sources,
                    "demo_corpus_documents": documents,
                    "questions": len(rows),
                    "data": str(DATA.relative_to(DATA.parent.parent.parent)),
                },
                "targets": {"clarify_rate_vague": f">= {TARGET_VAGUE}", "clarify_rate_clear": f"<= {TARGET_CLEAR}"},
                "splits": summarize(results),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
