"""Deep research runs, measured: wall time per run and per sub-question, references detected / followed / kept, and
the quality scores (first report and, where it ran, the remediation retry).

    .venv/bin/python benchmarks/deep_research.py [--questions 3] [--max-items 5] [--data-dir DIR] [--keep]

Three scenarios over the bundled demo corpus (105 arXiv abstracts, ingested into a fresh data directory), each run
approved automatically (``auto_approve``), nothing remembered, no internet:

* ``offline`` — the knowledge base alone, no LLM: rule plan, extractive answers, extractive remediation;
* ``offline_references`` — plus an in-process "web" source whose pages cite demo-corpus papers the way pages do
  (a "References" list with [n] markers, a quoted title) and one arXiv id; the arXiv id is resolved through the
  ``arxiv`` client against the loopback arXiv server replaying ../shared/fixtures/arxiv (skipped without them);
* ``loopback_llm`` — the same sources with crewAI's real ``LLM`` class talking to a loopback OpenAI-compatible
  server (tests/loopback/openai.py) whose scripted replies are instant: what the pipeline itself costs around a
  model, and the token accounting from the server's usage figures.

One uncounted warm-up run per scenario comes first.

``reference_corpus`` (issue 21 item 3) runs the bundled reference corpus (``researchcrew/data/reference_corpus``: six
notes citing each other by DOI, numbered list and title, and four arXiv papers served by the loopback arXiv server
from the corpus' recorded-format responses) with its plan approved as the user's, once without following and once
per setting (depth 1, 2, 3; depth 2 with a 300-token budget): references detected / followed / kept (by depth), why
the rest were skipped, the cited sources following added, and the coverage of the facts only cited documents hold
(``questions.json``) before and after. ``--only reference_corpus`` runs just that.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ask_latency import ingest_demo_corpus, percentile
from benchmarks.machine import describe_cpu

QUESTIONS = [
    "What is known about metamorphic testing?",
    "What is known about flaky tests?",
    "What is known about generating unit tests with large language models?",
]
PAGES = {
    "metamorphic": (
        "Metamorphic testing in practice (blog)",
        "Metamorphic testing has been applied to deep learning forecasters [1] and to pose estimation systems [2]. "
        "See also the paper “Metamorphic Testing for Quality Assurance of Protein Function Prediction Tools”.\n\n"
        "References\n[1] Metamorphic Testing of a Deep Learning based Forecaster. 2019.\n"
        "[2] Metamorphic Testing for Pose Estimation Systems. 2025.",
    ),
    "flaky": (
        "Flaky tests, explained (blog)",
        "Flaky tests were studied in Python projects [1] and predicted from code history [2]; zero-value bugs in "
        "BLS signature libraries are a different kind of flakiness (arXiv:2104.12255v1).\n\n"
        "References\n[1] An Empirical Study of Flaky Tests in Python. 2021.\n"
        "[2] Practical Flaky Test Prediction using Common Code Evolution and Test History Data. 2023.",
    ),
    "language models": (
        "LLMs write unit tests (blog)",
        "Fine-tuned large language models generate unit tests [1], and readability of generated tests improves "
        "with them [2].\n\nReferences\n"
        "[1] A Large-scale Empirical Study on Fine-tuning Large Language Models for Unit Testing. 2024.\n"
        "[2] Improving the Readability of Automatically Generated Tests using Large Language Models. 2024.",
    ),
}


def _pages_tool() -> Any:
    """An in-process web source: the page whose key the query mentions."""
    from researchcrew.contracts import ContextChunk
    from researchcrew.tools.base import Tool

    class PagesTool(Tool):
        name: ClassVar[str] = "pages"
        description: ClassVar[str] = "In-process pages that cite papers."
        source_type: ClassVar[str] = "web"

        async def _search(
            self, query: str, *, num_results: int = 5, user_id: str | None = None, session_id: str | None = None
        ) -> Sequence[ContextChunk]:
            lowered = query.lower()
            return [
                ContextChunk(
                    chunk_id=f"page-{key.replace(' ', '-')}",
                    source_type="web",
                    content=text,
                    semantic_relevance=0.6,
                    title=title,
                    url=f"https://example.org/{key.replace(' ', '-')}",
                    source_date=datetime(2025, 6, 1, tzinfo=UTC),
                )
                for key, (title, text) in PAGES.items()
                if key.split()[0] in lowered
            ][:num_results]

    return PagesTool()


def _blocks(prompt: str) -> dict[int, str]:
    found = re.findall(r"<<<EVIDENCE (\d+)>>>\n(.*?)<<<END EVIDENCE \1>>>", prompt, flags=re.DOTALL)
    return {int(number): body.split("text:\n", 1)[-1].strip() for number, body in found}


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))[0]
    return sentence[:300]


def scripted_reply(body: dict[str, Any]) -> str:
    """The loopback model: answers each kind of prompt the deep run sends, from the prompt itself."""
    messages = body.get("messages", [])
    system = str(messages[0].get("content", "")) if messages else ""
    user = str(messages[-1].get("content", "")) if messages else ""
    if "clarifying questions" in system:
        return json.dumps({"questions": [{"facet": "sub_topic", "question": "Which aspect?", "options": []}]})
    if "sub_questions" in system:
        topic = re.search(r"<<<QUESTION>>>\n(.*?)\n<<<END QUESTION>>>", user, flags=re.DOTALL)
        subject = re.sub(r"^what is known about ", "", (topic.group(1) if topic else "it").rstrip("?"), flags=re.I)
        angles = (
            "What is {}?",
            "Which methods are used for {}?",
            "What results are reported on {}?",
            "What limits {}?",
        )
        return json.dumps({"sub_questions": [{"question": angle.format(subject)} for angle in angles]})
    if "rewrite search queries" in system:
        return "testing evidence"
    if "contradict" in system.lower():
        return json.dumps({"contradiction": False, "explanation": "different settings"})
    numbers = _blocks(user)
    if "<<<REVIEW>>>" in user:
        plan = re.search(r"<<<PLAN>>>\n(.*?)\n<<<END PLAN>>>", user, flags=re.DOTALL)
        lines = plan.group(1).splitlines() if plan else []
        ordered = sorted(numbers)
        sections = [
            {
                "heading": line.strip(),
                "perspective": None,
                "claims": [
                    {"text": _first_sentence(numbers[n]), "citations": [n]} for n in ordered[i :: len(lines)][:2]
                ],
            }
            for i, line in enumerate(lines)
        ]
        return json.dumps({"sections": sections})
    claims = [{"text": _first_sentence(numbers[n]), "citations": [n]} for n in sorted(numbers)[:3]]
    return json.dumps({"sections": [{"heading": "", "perspective": None, "claims": claims}]})


@contextmanager
def loopback_arxiv(*extra: Path) -> Iterator[Any]:
    """An ArxivTool against the loopback server replaying the recorded feeds (and those in ``extra`` folders);
    None without ../shared."""
    fixtures = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "arxiv"
    if not fixtures.is_dir():
        yield None
        return
    from researchcrew.settings import ArxivSettings
    from researchcrew.tools.arxiv import ArxivTool, RequestSpacer
    from tests.loopback.arxiv import ArxivFake
    from tests.loopback.server import LoopbackServer

    with LoopbackServer(ArxivFake(fixtures, *extra)) as server:
        yield ArxivTool(
            ArxivSettings(api_url=f"{server.url}/api/query", min_interval_s=0, num_retries=0, timeout_s=5),
            spacer=RequestSpacer(0),
        )


async def run_scenario(settings: Any, tools: list[Any], questions: list[str], max_items: int) -> dict[str, Any]:
    from researchcrew.contracts.deep import DeepOptions
    from researchcrew.contracts.request import ResearchRequest
    from researchcrew.runtime import open_runtime

    runs: list[dict[str, Any]] = []
    per_subquestion_ms: list[float] = []
    totals = {"detected": 0, "followed": 0, "kept": 0, "unresolved": 0, "skipped": 0}
    async with open_runtime(settings, tools=tools, remember=False) as runtime:
        # Warm-up, not counted: the embedding model, Milvus Lite's first queries, crewAI's first Flow.
        await (await runtime.deep_research()).research(
            ResearchRequest(question="What is software testing?", user_id="bench", session_id="warmup"),
            DeepOptions(auto_approve=True, max_subquestions=1, follow_references=False),
        )
        for question in questions:
            started = time.perf_counter()
            run = await (await runtime.deep_research()).research(
                ResearchRequest(question=question, user_id="bench", session_id="deep"),
                DeepOptions(auto_approve=True, max_subquestions=max_items),
            )
            wall_s = time.perf_counter() - started
            report = run.report
            if report is None:
                raise SystemExit(f"no report for {question!r}: {run.status} {run.error}")
            references = report.references
            counts = {
                "detected": len(references),
                "followed": sum(1 for r in references if r.outcome in ("kept", "rejected")),
                "kept": sum(1 for r in references if r.outcome == "kept"),
                "unresolved": sum(1 for r in references if r.outcome == "unresolved"),
                "skipped": sum(1 for r in references if r.outcome == "skipped"),
            }
            for key, value in counts.items():
                totals[key] += value
            sub_ms = [sub.elapsed_ms for sub in report.sub_questions if sub.status != "not_researched"]
            per_subquestion_ms += sub_ms
            final = report.quality[-1] if report.remediated else report.quality[0]
            runs.append(
                {
                    "question": question,
                    "wall_s": round(wall_s, 3),
                    "sub_questions": len(report.plan.items),
                    "answered": sum(1 for sub in report.sub_questions if sub.status == "answered"),
                    "sub_question_ms": [round(value, 1) for value in sub_ms],
                    "references": counts,
                    "kept": [f"{r.kind} {r.target[:70]}" for r in references if r.outcome == "kept"],
                    "quality_first": report.quality[0].model_dump(exclude={"issues", "threshold", "attempt"}),
                    "quality_final": final.model_dump(exclude={"issues", "threshold", "attempt"}),
                    "retried": len(report.quality) == 2,
                    "remediated": report.remediated,
                    "citations": len(report.response.citations),
                    "citations_removed": report.response.citation_stats.removed,
                    "tokens_used": report.budget.tokens_used,
                    "partial": report.partial,
                }
            )
    return {
        "runs": runs,
        "sub_question_ms": {
            "median": round(statistics.median(per_subquestion_ms), 1) if per_subquestion_ms else None,
            "p95": round(percentile(per_subquestion_ms, 0.95), 1) if per_subquestion_ms else None,
            "count": len(per_subquestion_ms),
        },
        "run_wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 3),
        "references": totals,
        "quality_final_mean": round(statistics.fmean(r["quality_final"]["overall"] for r in runs), 4),
        "retries": sum(r["retried"] for r in runs),
    }


REFERENCE_SETTINGS: dict[str, dict[str, Any]] = {
    "depth_1": {"follow_depth": 1},
    "depth_2": {"follow_depth": 2},
    "depth_3": {"follow_depth": 3},
    "depth_2_budget_300": {"follow_depth": 2, "reference_token_budget": 300},
}


def _skip_reason(reason: str) -> str:
    for prefix, name in (
        ("already in the evidence", "already_in_evidence"),
        ("convergence: depth", "convergence_no_new_source"),
        ("convergence:", "convergence_same_document"),
        ("depth limit", "depth_limit"),
        ("reference token budget", "token_budget"),
        ("look-up limit", "look_up_limit"),
    ):
        if reason.startswith(prefix):
            return name
    return "other"


async def _corpus_run(runtime: Any, script: dict[str, Any], plan: list[str], follow: bool) -> tuple[Any, float]:
    from researchcrew.contracts.deep import DeepOptions, PlanChoice, PlanDecision
    from researchcrew.contracts.request import ResearchRequest

    research = await runtime.deep_research()
    request = ResearchRequest(question=script["question"], user_id="bench", session_id="refs")
    started = time.perf_counter()
    run = await research.research(request, DeepOptions(clarify=False, max_subquestions=5, follow_references=follow))
    decision = PlanDecision(items=[PlanChoice(question=question) for question in plan])
    await research.decide_plan(run.run_id, user_id="bench", decision=decision)
    run = await research.resume_research(run.run_id, user_id="bench")
    if run.report is None:
        raise SystemExit(f"reference corpus run failed: {run.status} {run.error}")
    return run.report, time.perf_counter() - started


def _kept_documents(report: Any) -> dict[str, list[str]]:
    """Per sub-question, the documents its kept references brought (cited titles; uncited: the passage id), with
    the depth that first reached each."""
    titles = {passage.chunk_id: c.title for c in report.response.citations for passage in c.passages}
    titles.update({c.chunk_id: c.title for c in report.response.citations})
    found: dict[str, dict[str, int]] = {}
    for record in report.references:
        if record.outcome == "kept":
            documents = found.setdefault(str(record.sub_question), {})
            for chunk_id in record.resolved:
                name = titles.get(chunk_id) or chunk_id
                documents[name] = min(documents.get(name, record.depth), record.depth)
    return {index: sorted(f"{name} (depth {depth})" for name, depth in docs.items()) for index, docs in found.items()}


def _facts(report: Any, script: dict[str, Any]) -> list[str]:
    text = " ".join(claim.text for section in report.response.sections for claim in section.claims)
    return [fact for fact, phrase in script["facts"].items() if phrase in text]


async def reference_corpus_scenario(settings: Any, tools: list[Any]) -> dict[str, Any]:
    from researchcrew.data import reference_corpus_path
    from researchcrew.runtime import open_runtime

    script = json.loads((reference_corpus_path() / "questions.json").read_text(encoding="utf-8"))
    async with open_runtime(settings, tools=tools, remember=False) as runtime:
        await _corpus_run(runtime, script, script["plan"], follow=False)  # warm-up, not counted
    return {
        "question": script["question"],
        # The corpus' plan; and its first two items only, where the policy (reached by its DOI) is read for one
        # sub-question alone, so what it cites is reached only at depth 2.
        "plan": await _plan_runs(settings, tools, script, script["plan"], list(REFERENCE_SETTINGS)),
        "short_plan": await _plan_runs(settings, tools, script, script["short_plan"], ["depth_1", "depth_2"]),
    }


async def _plan_runs(
    settings: Any, tools: list[Any], script: dict[str, Any], plan: list[str], names: list[str]
) -> dict[str, Any]:
    from researchcrew.runtime import open_runtime
    from researchcrew.settings import DeepResearchSettings

    async with open_runtime(settings, tools=tools, remember=False) as runtime:
        baseline, baseline_s = await _corpus_run(runtime, script, plan, follow=False)
    before_titles = {citation.title for citation in baseline.response.citations}
    before_facts = _facts(baseline, script)
    rows: dict[str, Any] = {
        "no_following": {
            "wall_s": round(baseline_s, 3),
            "cited_sources": len(before_titles),
            "facts_covered": f"{len(before_facts)}/{len(script['facts'])}",
            "coverage": round(len(before_facts) / len(script["facts"]), 3),
        }
    }
    for name in names:
        deep = REFERENCE_SETTINGS[name]
        configured = settings.model_copy(update={"deep": DeepResearchSettings(**deep)})
        async with open_runtime(configured, tools=tools, remember=False) as runtime:
            report, wall_s = await _corpus_run(runtime, script, plan, follow=True)
        records = report.references
        kept = [r for r in records if r.outcome == "kept"]
        titles = {citation.title for citation in report.response.citations}
        facts = _facts(report, script)
        skipped = dict(Counter(_skip_reason(r.reason) for r in records if r.outcome == "skipped"))
        rows[name] = {
            "settings": deep,
            "wall_s": round(wall_s, 3),
            "references": {
                "detected": len(records),
                "followed": sum(1 for r in records if r.outcome in ("kept", "rejected")),
                "kept": len(kept),
                "rejected": sum(1 for r in records if r.outcome == "rejected"),
                "unresolved": sum(1 for r in records if r.outcome == "unresolved"),
                "skipped": skipped,
                "kept_by_depth": dict(sorted(Counter(str(r.depth) for r in kept).items())),
                "kept_by_kind": dict(sorted(Counter(r.kind for r in kept).items())),
            },
            "kept_documents_per_sub_question": _kept_documents(report),
            "cited_sources": len(titles),
            "new_cited_sources": sorted(title or "" for title in titles - before_titles),
            "facts_covered": f"{len(facts)}/{len(script['facts'])}",
            "coverage": round(len(facts) / len(script["facts"]), 3),
            "facts_added": sorted(set(facts) - set(before_facts)),
            "facts_lost": sorted(set(before_facts) - set(facts)),  # quoted without following, not with it
            "quality_overall": report.quality[-1].overall,
        }
    return {"sub_questions": plan, "runs": rows}


def run_reference_corpus(base: Any) -> dict[str, Any] | None:
    """The reference-corpus scenario in its own data directory; None without ../shared (the loopback arXiv)."""
    from researchcrew.data import reference_corpus_path
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.tools.rag import RAGTool

    settings = base.model_copy(update={"data_dir": base.data_dir / "reference_corpus"})
    with ExitStack() as stack:
        arxiv = stack.enter_context(loopback_arxiv(reference_corpus_path() / "arxiv"))
        if arxiv is None:
            return None
        knowledge_base = stack.enter_context(KnowledgeBase(settings))
        knowledge_base.ingest([reference_corpus_path() / "documents"], progress=False)
        return asyncio.run(reference_corpus_scenario(settings, [RAGTool(knowledge_base), arxiv]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="How many questions per scenario.")
    parser.add_argument("--max-items", type=int, default=5, help="Most sub-questions per plan.")
    parser.add_argument("--data-dir", type=Path, default=None, help="Data directory (default: a fresh temporary one).")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary data directory.")
    parser.add_argument(
        "--only", choices=["reference_corpus"], default=None, help="Run only this scenario (default: all)."
    )
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.embedding.embedder import default_cache_dir
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.settings import EmbeddingSettings, LLMSettings, Settings
    from researchcrew.tools.rag import RAGTool
    from tests.loopback.openai import openai_server

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="researchcrew-deep-bench-"))
    base = Settings(
        data_dir=data_dir, enabled_sources=["rag"], embedding=EmbeddingSettings(cache_dir=default_cache_dir())
    )
    questions = (QUESTIONS * (1 + args.questions // len(QUESTIONS)))[: args.questions]
    scenarios: dict[str, Any] = {}
    corpus: dict[str, Any] = {}
    try:
        if args.only == "reference_corpus":
            scenarios["reference_corpus"] = run_reference_corpus(base)
            return _print(scenarios, corpus, [], args.max_items)
        corpus = ingest_demo_corpus(base)
        with ExitStack() as stack:
            knowledge_base = stack.enter_context(KnowledgeBase(base))
            rag = RAGTool(knowledge_base)
            arxiv = stack.enter_context(loopback_arxiv())
            with_pages = [rag, _pages_tool(), *([arxiv] if arxiv is not None else [])]
            scenarios["offline"] = asyncio.run(run_scenario(base, [rag], questions, args.max_items))
            scenarios["offline_references"] = asyncio.run(run_scenario(base, with_pages, questions, args.max_items))
            server, service = stack.enter_context(openai_server([scripted_reply] * 500))
            llm_settings = base.model_copy(
                update={"llm": LLMSettings(model="openai/bench-model", base_url=f"{server.url}/v1", api_key="sk-bench")}
            )
            scenarios["loopback_llm"] = asyncio.run(run_scenario(llm_settings, with_pages, questions, args.max_items))
            scenarios["loopback_llm"]["llm_requests"] = len(service.bodies)
        scenarios["reference_corpus"] = run_reference_corpus(base)
    finally:
        if args.data_dir is None and not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    _print(scenarios, corpus, questions, args.max_items)


def _print(scenarios: dict[str, Any], corpus: dict[str, Any], questions: list[str], max_items: int) -> None:
    print(
        json.dumps(
            {
                "benchmark": "deep_research",
                "setup": {
                    "demo_corpus": corpus,
                    "questions": questions,
                    "max_subquestions": max_items,
                    "arxiv_loopback": "used" if scenarios.get("reference_corpus") else "absent",
                },
                "scenarios": scenarios,
                "machine": describe_cpu(),
                "load_average_1m": round(os.getloadavg()[0], 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
