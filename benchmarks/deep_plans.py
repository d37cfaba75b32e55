"""Deep-research plans from the evidence (issue 21 item 1), measured: are the rule plan's sub-questions on topic,
distinct from each other, and free of template artefacts?

    .venv/bin/python benchmarks/deep_plans.py [--corpora demo,scifact] [--split report] [--data-dir DIR] [--rows]

For each broad question of ``data/deep_plan_questions.jsonl`` (26: 14 over the bundled demo corpus, 12 over SciFact;
each marked ``tune`` or ``report``) the script does what a deep run without an LLM does before its plan: a probe of
the knowledge base (``RAGTool``, ``deep.probe_results`` results), the facets of the probe's documents with the
knowledge base's embedder, each candidate sub-question checked by searching the knowledge base as its research will
(``_facet_search.searched_facets``, as the deep Flow does), then ``plan.rule_plan`` over the facets kept, at the
default ``deep.max_subquestions``. Each sub-question is then searched the
same way, and its top evidence is the first ``--top-k`` (3) documents found:

* **on topic** — at least two of them hold one of the question's labelled topic terms (case-insensitive word
  prefixes, e.g. "tubercul"; short acronyms such as "TB" whole and case-sensitive);
* **distinct** — they share at most one document with every other sub-question's top evidence;
* **good** — both; the target is a share of good sub-questions ≥ 0.9 on the report split;
* **artefacts** — ``_facets.artefacts`` (conversation text, "What is known about", a year the evidence does not hold,
  repeated words, a dangling function word, ...); the target is none.

Knowledge bases: the demo corpus (105 arXiv abstracts), and SciFact (../shared/data/scifact): the abstracts whose
title holds a SciFact question's topic term plus ``--scifact-others`` (800) more chosen by hash, so a broad question
has its neighbours. Built in ``--data-dir`` (reused when it exists) or a temporary directory. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import describe_cpu

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "benchmarks" / "data" / "deep_plan_questions.jsonl"
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
CORPORA = ("demo", "scifact")
TARGET = 0.9


@dataclass(frozen=True)
class Question:
    id: str
    corpus: str
    split: str
    question: str
    topic_terms: tuple[str, ...]


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        Question(row["id"], row["corpus"], row["split"], row["question"], tuple(row["topic_terms"])) for row in rows
    ]


def term_pattern(terms: Sequence[str]) -> re.Pattern[str]:
    """One pattern for a question's topic terms: short acronyms whole and case-sensitive, the rest as
    case-insensitive word prefixes."""
    parts = []
    for term in terms:
        if len(term) <= 4 and any(char.isupper() for char in term):
            parts.append(rf"(?-i:\b{re.escape(term)}\b)")
        else:
            parts.append(rf"(?<![a-z0-9]){re.escape(term)}")
    return re.compile("|".join(parts), re.IGNORECASE)


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def scifact_documents(questions: Sequence[Question], others: int, scifact: Path = SCIFACT) -> list[Any]:
    from researchcrew.knowledge.documents import Document

    pattern = term_pattern([term for q in questions if q.corpus == "scifact" for term in q.topic_terms])
    records = [json.loads(line) for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    on_topic = [r for r in records if pattern.search(str(r.get("title") or ""))]
    chosen_ids = {str(r["_id"]) for r in on_topic}
    rest = sorted((r for r in records if str(r["_id"]) not in chosen_ids), key=lambda r: _hash(str(r["_id"])))
    return [
        Document(
            source_key=f"scifact#{record['_id']}",
            text=str(record.get("text") or record.get("title")),
            title=str(record.get("title") or "") or None,
        )
        for record in [*on_topic, *rest[:others]]
    ]


def open_knowledge_base(corpus: str, data_dir: Path, questions: Sequence[Question], others: int) -> tuple[Any, dict]:
    from researchcrew.data import demo_corpus_path
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.settings import MilvusSettings, Settings

    # Generous Milvus timeouts: on a loaded machine (two cores, several benchmarks) a search took more than 10 s.
    settings = Settings(data_dir=data_dir / corpus, milvus=MilvusSettings(timeout_s=120))
    knowledge_base = KnowledgeBase(settings)
    started = time.perf_counter()
    existing = knowledge_base.stats().documents
    if existing == 0:
        if corpus == "demo":
            knowledge_base.ingest([demo_corpus_path()], progress=False)
        else:
            knowledge_base.add_documents(scifact_documents(questions, others))
    built = {
        "documents": knowledge_base.stats().documents,
        "reused": existing > 0,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return knowledge_base, built


async def plan_and_judge(knowledge_base: Any, question: Question, *, top_k: int) -> dict[str, Any]:
    from researchcrew.deep._facet_search import CHECK_RESULTS, searched_facets
    from researchcrew.deep._facets import artefacts
    from researchcrew.deep._plan import rule_plan, topic_of
    from researchcrew.pipeline.clarify import summarize_evidence
    from researchcrew.tools.rag import RAGTool

    tool = RAGTool(knowledge_base)

    async def search(text: str, count: int) -> list[Any]:
        result = await tool.search(text, num_results=count)
        if result.failure is not None:  # a failed search would read as a plan with no evidence: stop instead
            raise SystemExit(f"the knowledge base failed on {text!r}: {result.failure}")
        return list(result.chunks)

    settings = knowledge_base.settings
    started = time.perf_counter()
    probe = await search(question.question, settings.deep.probe_results)
    summary = summarize_evidence(question.question, [question.question], probe, [])
    facets = await searched_facets(
        question.question,
        topic_of(question.question),
        probe,
        search=lambda text: search(text, CHECK_RESULTS),
        max_facets=settings.deep.max_subquestions,
        embedder=knowledge_base.embedder,
    )
    plan = rule_plan(
        question.question, summary, max_items=settings.deep.max_subquestions, facets=facets, checked=bool(probe)
    )
    plan_ms = (time.perf_counter() - started) * 1000
    years = [chunk.source_date.year for chunk in probe if chunk.source_date is not None]
    pattern = term_pattern(question.topic_terms)
    tops: list[list[str]] = []
    on_topic: list[bool] = []
    for item in plan.items:
        found = await search(item.question, top_k * 4)
        documents: dict[str, str] = {}
        for chunk in found:
            key = chunk.source_id or chunk.chunk_id
            documents.setdefault(key, f"{chunk.title or ''}. {chunk.content}")
        top = list(documents)[:top_k]
        tops.append(top)
        hits = sum(bool(pattern.search(documents[key])) for key in top)
        on_topic.append(hits >= min(2, len(top)) and bool(top))
    rows = []
    for index, item in enumerate(plan.items):
        shared = max((len(set(tops[index]) & set(other)) for j, other in enumerate(tops) if j != index), default=0)
        distinct = shared <= 1
        flaws = artefacts(item.question, years)
        rows.append(
            {
                "question": item.question,
                "on_topic": on_topic[index],
                "distinct": distinct,
                "good": on_topic[index] and distinct,
                "artefacts": flaws,
                "top": tops[index],
            }
        )
    return {
        "id": question.id,
        "corpus": question.corpus,
        "split": question.split,
        "question": question.question,
        "written_by": plan.written_by,
        "plan_ms": round(plan_ms, 1),
        "probe_documents": len({chunk.source_id or chunk.chunk_id for chunk in probe}),
        "items": rows,
    }


def summarise(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    items = [item for result in results for item in result["items"]]
    count = len(items)

    def share(key: str) -> float | None:
        return round(sum(bool(item[key]) for item in items) / count, 3) if count else None

    return {
        "questions": len(results),
        "sub_questions": count,
        "per_plan": round(count / len(results), 2) if results else None,
        "on_topic": share("on_topic"),
        "distinct": share("distinct"),
        "good": share("good"),
        "with_artefacts": sum(bool(item["artefacts"]) for item in items),
        "angle_fallback_plans": sum(
            1 for result in results if any(item["question"].startswith("What does ") for item in result["items"][:1])
        ),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    questions = [q for q in load_questions() if q.corpus in args.corpora]
    if args.split != "all":
        questions = [q for q in questions if q.split == args.split]
    results: list[dict[str, Any]] = []
    corpora: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="deep_plans_") as scratch:
        data_dir = args.data_dir or Path(scratch)
        for corpus in args.corpora:
            chosen = [q for q in questions if q.corpus == corpus]
            if not chosen:
                continue
            if corpus == "scifact" and not SCIFACT.exists():
                raise SystemExit(f"SciFact is missing at {SCIFACT}; pass --corpora demo")
            knowledge_base, built = open_knowledge_base(corpus, data_dir, load_questions(), args.scifact_others)
            corpora[corpus] = built
            try:
                for question in chosen:
                    results.append(await plan_and_judge(knowledge_base, question, top_k=args.top_k))
                    print(f"{question.id}: {len(results[-1]['items'])} sub-questions", file=sys.stderr, flush=True)
            finally:
                knowledge_base.close()
    by_split = {
        split: summarise([r for r in results if r["split"] == split])
        for split in ("tune", "report")
        if any(r["split"] == split for r in results)
    }
    by_corpus = {
        f"{corpus}/{split}": summarise([r for r in results if r["corpus"] == corpus and r["split"] == split])
        for corpus in args.corpora
        for split in ("tune", "report")
        if any(r["corpus"] == corpus and r["split"] == split for r in results)
    }
    report = by_split.get("report")
    output: dict[str, Any] = {
        "benchmark": "deep_plans",
        "machine": describe_cpu(),
        "top_k": args.top_k,
        "target_good": TARGET,
        "corpora": corpora,
        "splits": by_split,
        "by_corpus": by_corpus,
        "meets_target": bool(report and report["good"] is not None and report["good"] >= TARGET)
        and bool(report and report["with_artefacts"] == 0),
        "plan_ms_mean": round(sum(r["plan_ms"] for r in results) / len(results), 1) if results else None,
    }
    if args.rows:
        output["rows"] = results
    return output


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default=",".join(CORPORA), help="Comma-separated subset of demo,scifact.")
    parser.add_argument("--split", default="all", choices=("all", "tune", "report"))
    parser.add_argument("--data-dir", type=Path, default=None, help="Where the knowledge bases are built / reused.")
    parser.add_argument("--scifact-others", type=int, default=800, help="SciFact abstracts beyond the on-topic ones.")
    parser.add_argument("--top-k", type=int, default=3, help="Documents that make a sub-question's top evidence.")
    parser.add_argument("--rows", action="store_true", help="Include every plan and sub-question in the output.")
    args = parser.parse_args(argv)
    args.corpora = [name for name in args.corpora.split(",") if name]
    unknown = set(args.corpora) - set(CORPORA)
    if unknown:
        parser.error(f"unknown corpora: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    print(json.dumps(asyncio.run(run(parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
