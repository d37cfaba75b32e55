"""Builds the sound half of the deep-report quality set from real deep runs over the demo corpus.

    .venv/bin/python benchmarks/deep_quality_build.py [--out tests/deep/data/quality_reports.json]

Each question of ``QUESTIONS`` is researched offline (knowledge base of the bundled demo corpus, no LLM: rule plan,
extractive answers), approved automatically, nothing remembered, no reference following. What the report was built
from (the evidence the report numbered) is captured beside it. The file keeps, per run: the question, the approved
plan, the first report (``FinalResponse``) and the evidence chunks it cites. ``tests/deep/quality_set.py`` turns these
into the labelled set (sound reports and named flaw transformations). Re-run it when the report's shape changes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ask_latency import ingest_demo_corpus

QUESTIONS = [
    "What is known about metamorphic testing?",
    "What is known about flaky tests?",
    "What is known about generating unit tests with large language models?",
    "How is mutation testing applied to deep learning and smart contracts?",
    "What approaches exist for testing REST APIs?",
    "How are GUI tests generated for mobile and web applications?",
    "What is known about group testing and pooled screening designs?",
    "How are autonomous driving systems tested in simulation?",
    "What is known about fuzzing cyber-physical systems?",
    "How is test case prioritisation done with machine learning?",
    "What is known about regression test optimization in continuous integration?",
    "How are digital twins used in testing?",
    "What is known about testing deep learning models?",
    "How do generative adversarial networks support software testing?",
    "What is known about fairness testing of software?",
    "How is web testing changing with artificial intelligence?",
    "What is known about test automation maturity?",
    "How are large language models used to repair or improve tests?",
    "What is known about hypothesis testing under privacy constraints?",
    "What is known about distribution testing?",
    "How is software-in-the-loop testing done for automotive systems?",
    "What is known about energy consumption of testing?",
    "How are test oracles built with large language models?",
    "What is known about testing quantum programs and quantum computers?",
    "What is known about IoT interoperability testing?",
    "How are test generators configured from bug reports?",
    "What is known about model-based testing?",
    "What is known about Android testing in continuous integration?",
    "How is search-based test generation used for pedestrian detection?",
    "What is known about agent-based software testing?",
    "What is known about ChatGPT in software testing education?",
    "What is known about property-based testing and mutation?",
    "How are test cases generated from finite state machines?",
    "What is known about diversity-based test techniques?",
    "What is known about testing games with neuroevolution?",
    "What is known about performance testing?",
    "What is known about integration testing of heterogeneous systems?",
    "How is reliability testing done in software engineering?",
    "What is known about datamorphic testing of AI applications?",
    "What is known about testing data types from algebraic specifications?",
    "What is known about testing large language models with metamorphic relations?",
    "What is known about goodness-of-fit tests?",
    "What is known about adversarial tests for competitive programming?",
    "How are static analysis warnings validated by testing?",
]


def _chunk_json(chunk: Any, limit: int = 1_500) -> dict[str, Any]:
    data: dict[str, Any] = chunk.model_dump(mode="json", exclude={"metadata"})
    data["content"] = chunk.content[:limit]
    return data


async def build(settings: Any, tools: list[Any], questions: list[str], max_items: int) -> list[dict[str, Any]]:
    from researchcrew.contracts.deep import DeepOptions
    from researchcrew.contracts.request import ResearchRequest
    from researchcrew.deep import _flow
    from researchcrew.runtime import open_runtime

    captured: list[Any] = []
    original = _flow.assemble_report

    def capturing(*args: Any, **kwargs: Any) -> Any:
        draft = original(*args, **kwargs)
        captured.append(draft)
        return draft

    _flow.assemble_report = capturing  # type: ignore[assignment]
    runs: list[dict[str, Any]] = []
    try:
        async with open_runtime(settings, tools=tools, remember=False) as runtime:
            for question in questions:
                captured.clear()
                run = await (await runtime.deep_research()).research(
                    ResearchRequest(question=question, user_id="build", session_id="quality"),
                    DeepOptions(auto_approve=True, max_subquestions=max_items, follow_references=False, clarify=False),
                )
                if run.report is None or not captured:
                    print(f"skipped {question!r}: {run.status} {run.error}", file=sys.stderr)
                    continue
                draft = captured[0]
                cited = {chunk_id for c in draft.response.citations for chunk_id in c.chunk_ids}
                runs.append(
                    {
                        "question": run.report.question,
                        "plan": run.report.plan.model_dump(mode="json"),
                        "response": draft.response.model_dump(
                            mode="json", include={"query", "answer", "sections", "citations", "answer_kind"}
                        ),
                        "evidence": [_chunk_json(s.chunk) for s in draft.evidence if s.chunk.chunk_id in cited],
                    }
                )
                print(f"{len(runs):3d} {question}", file=sys.stderr)
    finally:
        _flow.assemble_report = original  # type: ignore[assignment]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/deep/data/quality_reports.json"))
    parser.add_argument("--max-items", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.embedding.embedder import default_cache_dir
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.settings import EmbeddingSettings, Settings
    from researchcrew.tools.rag import RAGTool

    data_dir = Path(tempfile.mkdtemp(prefix="researchcrew-quality-set-"))
    try:
        settings = Settings(
            data_dir=data_dir, enabled_sources=["rag"], embedding=EmbeddingSettings(cache_dir=default_cache_dir())
        )
        ingest_demo_corpus(settings)
        with KnowledgeBase(settings) as knowledge_base:
            runs = asyncio.run(build(settings, [RAGTool(knowledge_base)], QUESTIONS, args.max_items))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"source": "demo corpus, offline deep runs", "runs": runs}, indent=1) + "\n")
    print(json.dumps({"runs": len(runs), "out": str(args.out)}))


if __name__ == "__main__":
    main()
