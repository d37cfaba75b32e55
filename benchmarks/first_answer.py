"""First answer in a fresh process: wall time of `researchcrew ask "..." --json`, the demo corpus already ingested.

    .venv/bin/python benchmarks/first_answer.py [--runs 3] [--data-dir DIR]

Setup (not timed): a fresh data directory with the bundled demo corpus ingested (`researchcrew ingest --demo`;
this also makes the one-off ONNX export of the embedding model into the data directory, as a user's first ingest
does). Each run is then a new `researchcrew ask` process (the console script), offline: no LLM, web search
unconfigured, arXiv pointed at a closed loopback port (refused at once), memory on. Wall and CPU time per run.

What dominates is measured three ways, each in its own fresh process:
* phases — the same work done step by step with wall and CPU time each (settings, researchcrew's imports, embedding
  model load, Milvus Lite start, memory store open, the first and a second question, closing), plus checks that
  matter for a first run: nothing but JSON on stdout (no crewAI panels), and which heavy libraries an extractive
  answer loaded (none of crewAI, chromadb, fastapi, litellm, LanceDB, openai since issue 19; crewAI's telemetry is
  switched off in case an LLM brings crewAI in);
* imports — `python -X importtime` of the real command: the top-level packages by cumulative import time
  (importtime's own overhead inflates these, so read them as proportions).
Prints one JSON document; the target is issue 19's (≤ 4 s on an idle 2-core machine; issue 4's was < 10 s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_S = 4.0
# Libraries an extractive answer does not use (issue 19); pandas is not here: pymilvus imports it.
NOT_NEEDED = ("crewai", "chromadb", "fastapi", "litellm", "lancedb", "openai", "uvicorn")
QUESTION = "What is metamorphic testing?"

PHASES_SCRIPT = r"""
import asyncio, json, os, sys, time
marks = []
def phase(name, started):
    wall, cpu = started
    marks.append({"phase": name, "wall_s": round(time.perf_counter() - wall, 3),
                  "cpu_s": round(time.process_time() - cpu, 3)})
def now():
    return time.perf_counter(), time.process_time()
total = now()
t = now()
from researchcrew.settings import Settings
from researchcrew.llm import quiet_crewai
settings = Settings()
quiet_crewai()
phase("python + settings", t)
t = now()
import researchcrew.pipeline.flow, researchcrew.pipeline.assemble, researchcrew.pipeline.retrieve
import researchcrew.pipeline.evaluate._evaluator, researchcrew.pipeline.synthesize._llm_writer
import researchcrew.pipeline.synthesize.extractive, researchcrew.pipeline.synthesize._citations
phase("import researchcrew flow + agents (no crewAI)", t)
t = now()
import researchcrew.tools.web
phase("import tools.web (firecrawl)", t)
t = now()
import researchcrew.tools.arxiv, researchcrew.tools.rag, researchcrew.tools.memory_recall
phase("import tools.arxiv/rag/memory_recall", t)
t = now()
import researchcrew.pipeline.remember.writer, researchcrew.memory.store
phase("import memory agent + store (sqlalchemy, alembic, outbox)", t)
t = now()
from researchcrew.embedding.embedder import get_embedder
embedder = get_embedder(settings)
phase("load embedding model", t)
t = now()
from researchcrew.knowledge.collection import KnowledgeBase
kb = KnowledgeBase(settings, embedder=embedder)
kb.store.client
phase("start Milvus Lite + open collection", t)
async def main():
    from researchcrew.assistant import ResearchAssistant
    from researchcrew.memory.store import MemoryStore
    t = now()
    store = await MemoryStore.from_settings(settings, embedder=embedder)
    phase("open memory store (migrations)", t)
    assistant = ResearchAssistant(settings, knowledge_base=kb, memory_store=store)
    t = now()
    await assistant.start()
    phase("build agents", t)
    t = now()
    first = await assistant.ask(sys.argv[1])
    phase("first question", t)
    t = now()
    await assistant.ask("Why are some tests flaky?")
    phase("second question", t)
    t = now()
    await assistant.aclose()
    await store.close()
    kb.close()
    phase("close (memory flush, Milvus flush)", t)
    return first
first = asyncio.run(main())
phase("total", total)
print("PHASES=" + json.dumps({
    "phases": marks, "answer_kind": first.answer_kind,
    "heavy_modules_loaded": sorted(m for m in sys.argv[2].split(",") if m in sys.modules),
    "crewai_telemetry_disabled": os.environ.get("CREWAI_DISABLE_TELEMETRY") == "true",
}))
"""


def console_script() -> Path:
    script = Path(sys.executable).parent / "researchcrew"
    if not script.exists():
        raise SystemExit(f"console script not found at {script}; run `pip install -e .` in this venv first")
    return script


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(data_dir: Path) -> dict[str, str]:
    """The user's environment without researchcrew/crewAI/Firecrawl settings (researchcrew must switch crewAI's
    telemetry off by itself), offline as described in the module docstring."""
    dropped = ("RESEARCHCREW_", "CREWAI_", "FIRECRAWL_", "OTEL_SDK_DISABLED")
    env = {name: value for name, value in os.environ.items() if not name.startswith(dropped)}
    env.update(
        {
            "RESEARCHCREW_DATA_DIR": str(data_dir),
            "RESEARCHCREW_ARXIV__API_URL": f"http://127.0.0.1:{closed_port()}/api/query",
            "RESEARCHCREW_ARXIV__MIN_INTERVAL_S": "0",
            "RESEARCHCREW_ARXIV__NUM_RETRIES": "0",
        }
    )
    return env


def ingest(data_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """The demo corpus, through the CLI when it has `ingest --demo`, else through the SDK."""
    started = time.perf_counter()
    help_text = subprocess.run(
        [str(console_script()), "ingest", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    if help_text.returncode == 0 and "--demo" in help_text.stdout:
        command = [str(console_script()), "ingest", "--demo", "--json"]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"`researchcrew ingest --demo` failed: {done.stderr.strip()[-2000:]}")
        how = "researchcrew ingest --demo"
    else:
        code = (
            "from researchcrew.settings import Settings\nfrom researchcrew.knowledge.collection import "
            "KnowledgeBase\nfrom researchcrew.data import demo_corpus_path\nwith KnowledgeBase(Settings()) as kb:\n"
            "    report = kb.ingest([demo_corpus_path()], progress=False)\nassert report.documents_added > 0\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"ingesting the demo corpus failed: {done.stderr.strip()[-2000:]}")
        how = "KnowledgeBase.ingest (no `ingest --demo` yet)"
    return {"how": how, "seconds": round(time.perf_counter() - started, 1)}


def time_ask(env: dict[str, str]) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [str(console_script()), "ask", QUESTION, "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"`researchcrew ask` failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    try:
        answer = json.loads(done.stdout)  # stdout must be the JSON document alone: no panels, no prints
    except json.JSONDecodeError as error:
        raise SystemExit(f"stdout of `researchcrew ask --json` is not JSON ({error}): {done.stdout[:500]!r}") from error
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "answer_kind": answer["answer_kind"],
        "citations": len(answer["citations"]),
        "sources": {r["source_type"]: r["status"] for r in answer["source_reports"]},
    }


def phases(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PHASES_SCRIPT, QUESTION, ",".join(NOT_NEEDED)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if done.returncode != 0:
        raise SystemExit(f"phase probe failed: {done.stderr.strip()[-2000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("PHASES="))
    result: dict[str, Any] = json.loads(line.removeprefix("PHASES="))
    return result


def import_times(env: dict[str, str], top: int = 12) -> list[dict[str, Any]]:
    """Top-level packages by cumulative import time during a real `researchcrew ask` (python -X importtime)."""
    command = [sys.executable, "-X", "importtime", "-m", "researchcrew", "ask", QUESTION, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    totals: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        root = name.split(".")[0]
        if name == root:  # the package's own top-level import includes everything it pulled in first
            totals[root] = max(totals.get(root, 0), int(cumulative))
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return [{"package": name, "cumulative_ms": round(us / 1000)} for name, us in ranked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="Fresh `researchcrew ask` processes to time.")
    parser.add_argument("--data-dir", type=Path, default=None, help="Data directory (default: a fresh temporary one).")
    args = parser.parse_args()

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="researchcrew-first-"))
    env = environment(data_dir)
    try:
        setup = ingest(data_dir, env)
        runs = [time_ask(env) for _ in range(args.runs)]
        probe = phases(env)
        imports = import_times(env)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    walls = [run["wall_s"] for run in runs]
    print(
        json.dumps(
            {
                "benchmark": "first_answer",
                "command": f'researchcrew ask "{QUESTION}" --json',
                "setup": setup,
                "runs": runs,
                "wall_median_s": round(statistics.median(walls), 2),
                "wall_max_s": max(walls),
                "cpu_median_s": round(statistics.median(run["cpu_s"] for run in runs), 2),
                "target_s": TARGET_S,
                "meets_target": statistics.median(walls) <= TARGET_S,
                "phases": probe,
                "imports_top": imports,
                "load_average_1m": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
