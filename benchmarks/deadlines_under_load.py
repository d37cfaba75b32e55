"""Do the per-source timeouts and the run's budget hold under load? (issue 20 item 5)

    .venv/bin/python benchmarks/deadlines_under_load.py [--burners 10] [--questions 8] [--min-load 8]

Load: ``--burners`` CPU-bound subprocesses (each a busy Python loop) run for the whole benchmark; it waits (at most
``--warmup-s``) until the 1-minute load average reaches ``--min-load``, then asks. Injected blocking work, as under
load: the knowledge base's search and the memory recall's embedding block on their worker threads (sleeping, then
burning CPU in a C extension) far beyond their timeouts, as sync pymilvus and an embedding under a starved CPU do.

Each question runs through the whole pipeline (``Runtime.ask``: retrieve, evaluate, synthesize), in two phases:
the sources' timeout (``--timeout-s``) shorter than the run's budget (``--budget-s``), so that they time out on
their own; then the sources' 7 s default and a shorter budget (``--capped-budget-s``), which must cut them.
Reported: each timed-out source's observed time against its limit (the time limit the run gave that retrieval: its
budget less what the stages after retrieval took in recent runs), each question's wall time against the budget
with where it went (before and during retrieval, after it),
the worst overshoot in %, and whether everything held within 10 % — with the load average before and during, and
what the blocking pools abandoned. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from researchcrew.blocking import ABANDONED
from researchcrew.contracts.request import ResearchRequest
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import RetrievalSettings, Settings, SourceHealthSettings
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.tools.memory_recall import MemoryTool
from researchcrew.tools.rag import RAGTool

TOLERANCE = 0.10
_BURNER = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    sum(range(10_000))\n"
_BLOCK = bytes(256 * 1024)


def _blocking_work(release: threading.Event, hold_s: float) -> None:
    """Sleep a little, then burn CPU (in hashlib, which lets go of the GIL) until released or ``hold_s`` ends."""
    end = time.monotonic() + hold_s
    time.sleep(0.05)
    while not release.is_set() and time.monotonic() < end:
        hashlib.sha256(_BLOCK).digest()


class BlockingEmbedder:
    model_name = "benchmark-blocking-embedder"
    dimension = 8

    def __init__(self, release: threading.Event, hold_s: float) -> None:
        self.release, self.hold_s = release, hold_s

    def embed_query(self, text: str) -> Any:
        _blocking_work(self.release, self.hold_s)
        return np.ones(self.dimension, dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> Any:
        return np.ones((len(texts), self.dimension), dtype=np.float32)


class BlockingKnowledgeBase(KnowledgeBase):
    def __init__(self, settings: Settings, release: threading.Event, hold_s: float) -> None:
        super().__init__(settings, embedder=BlockingEmbedder(release, hold_s))
        self.release, self.hold_s = release, hold_s

    def search(self, query: str, **options: Any) -> Any:
        _blocking_work(self.release, self.hold_s)
        return []


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def overshoot(observed: list[float], configured: float) -> float:
    """The worst overshoot in % of the configured time (negative: every one ended early)."""
    return round(100 * (max(observed) - configured) / configured, 1) if observed else 0.0


def worst_against(observed: list[float], limits: list[float]) -> float:
    """The worst overshoot in % of each observation against its own limit."""
    return max((round(100 * (o - limit) / limit, 1) for o, limit in zip(observed, limits, strict=True)), default=0.0)


async def phase(
    data_dir: Path, release: threading.Event, *, timeout_s: float, budget_s: float, questions: int, loads: list[float]
) -> dict[str, Any]:
    """``questions`` questions through the whole pipeline with the blocking knowledge base and memory recall."""
    hold_s = 4 * max(timeout_s, budget_s)
    settings = Settings(
        data_dir=data_dir,
        retrieval=RetrievalSettings(timeout_per_source_s=timeout_s, run_deadline_s=budget_s),
        health=SourceHealthSettings(enabled=False),  # every question meets the blocking work again
    )
    memory = await MemoryStore.open(
        f"sqlite+aiosqlite:///{data_dir / f'memory-{timeout_s:g}-{budget_s:g}.db'}",
        embedder=BlockingEmbedder(release, hold_s),
    )
    knowledge_base = BlockingKnowledgeBase(settings, release, hold_s)
    evidence = [fake_chunk("web", i, content=f"Mutation testing seeds small faults, finding {i}.") for i in range(3)]
    tools = [RAGTool(knowledge_base), MemoryTool(memory), FakeTool("web", chunks=evidence, delay_s=0.05)]
    sources: dict[str, list[float]] = {"rag": [], "memory": []}
    limits: dict[str, list[float]] = {"rag": [], "memory": []}
    runs: list[float] = []
    split: list[dict[str, float]] = []
    try:
        async with open_runtime(settings, tools=tools, memory_store=memory, remember=False) as runtime:
            stages = await runtime.stages()  # imports and builds the pipeline once, outside the measurement
            source_limit_s = min(timeout_s, stages.retrieval_budget_s(budget_s))
            for number in range(questions):
                loads.append(load_average())
                events: list[Any] = []
                started = time.perf_counter()
                response = await runtime.ask(
                    ResearchRequest(question=f"How does mutation testing find faults? ({number})", user_id="bench"),
                    on_event=events.append,
                )
                runs.append(time.perf_counter() - started)
                retrievals = [e for e in events if e.stage == "retrieve"]
                limit_s = min(timeout_s, *(e.detail["time_limit_s"] for e in retrievals if e.status == "started"))
                retrieved_s = max(e.elapsed_ms for e in retrievals if e.status == "finished") / 1000
                split.append(
                    {
                        "time_limit_s": limit_s,
                        "until_retrieved_s": round(retrieved_s, 3),
                        "after_s": round(runs[-1] - retrieved_s, 3),
                    }
                )
                for report in response.source_reports:
                    if report.source_type in sources and report.error_kind == "timeout":
                        sources[report.source_type].append(report.latency_ms / 1000)
                        limits[report.source_type].append(limit_s)
            pools = {"kb-search": knowledge_base.search_pool.stats(), "memory-recall": memory.recall_pool.stats()}
    finally:
        knowledge_base.close()
        await memory.close()
    return {
        "configured": {"timeout_per_source_s": timeout_s, "run_budget_s": budget_s, "source_limit_s": source_limit_s},
        "run_wall_s": [round(value, 3) for value in runs],
        "run_split": split,
        "source_timeouts_s": {source: [round(v, 3) for v in values] for source, values in sources.items()},
        "worst_overshoot_pct": {
            "run vs budget": overshoot(runs, budget_s),
            **{f"{source} vs its limit": worst_against(values, limits[source]) for source, values in sources.items()},
        },
        "pools": pools,
    }


async def measure(args: argparse.Namespace, data_dir: Path, loads: list[float]) -> dict[str, Any]:
    release = threading.Event()
    try:
        own = await phase(
            data_dir, release, timeout_s=args.timeout_s, budget_s=args.budget_s, questions=args.questions, loads=loads
        )
        # The sources' 7 s default timeout, longer than the run's budget: the budget must cut them.
        capped = await phase(
            data_dir, release, timeout_s=7.0, budget_s=args.capped_budget_s, questions=args.questions, loads=loads
        )
    finally:
        release.set()
    worst = [value for result in (own, capped) for value in result["worst_overshoot_pct"].values()]
    return {
        "sources_time_out_on_their_own": own,
        "the_run_budget_cuts_the_sources": capped,
        "holds_within_10pct": all(value <= 100 * TOLERANCE for value in worst),
        "abandoned_tasks": ABANDONED.count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burners", type=int, default=10, help="CPU-bound subprocesses generating the load.")
    parser.add_argument("--min-load", type=float, default=8.0, help="Wait for this 1-minute load average.")
    parser.add_argument("--warmup-s", type=float, default=150.0, help="Wait at most this long for it.")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--timeout-s", type=float, default=2.0, help="The per-source timeout of the first phase.")
    parser.add_argument("--budget-s", type=float, default=6.0, help="The run's budget in the first phase.")
    parser.add_argument(
        "--capped-budget-s", type=float, default=3.0, help="The run's budget in the second phase (sources: 7 s)."
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # an ERROR here would be one a user must read: none is expected

    before = load_average()
    script = _BURNER.format(seconds=args.warmup_s + 120 + args.questions * (args.budget_s + args.capped_budget_s) * 2)
    burners = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(args.burners)]
    loads: list[float] = []
    try:
        waited = time.monotonic()
        while load_average() < args.min_load and time.monotonic() - waited < args.warmup_s:
            time.sleep(2)
        with tempfile.TemporaryDirectory() as folder:
            result = asyncio.run(measure(args, Path(folder), loads))
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()
    report = {
        "benchmark": "deadlines_under_load",
        "cores": os.cpu_count(),
        "burners": args.burners,
        "load_average": {"before": before, "during": loads, "min_during": min(loads) if loads else None},
        "load_target_reached": bool(loads) and min(loads) >= args.min_load,
        **result,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
