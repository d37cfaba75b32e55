"""Batch research throughput, offline: the bundled demo corpus, no LLM (extractive answers), sources rag + memory.

    .venv/bin/python benchmarks/batch_throughput.py [--questions 500] [--concurrency 4] [--overhead-questions 150]
        [--database-url postgresql+asyncpg://...] [--redis-url redis://127.0.0.1:6379/0] [--no-slot]

Measures, on one PostgreSQL database (a fresh one on 127.0.0.1:5432 by default) and Redis:

* ``ask``: ``Runtime.ask`` one question after another, in this process — the reference per-question time;
* ``in_process``: a 500-question job run by ``Jobs.run`` in this process (``--concurrency`` at once);
* ``one_worker`` / ``two_workers``: the same run on one and on two `researchcrew worker` processes (each with
  ``--concurrency`` at once and its own copy of the knowledge base: Milvus Lite serves one process per file);
* queue overhead per question: one worker researching one question at a time, minus ``ask`` — what the queue, the
  lease, the stored result and the acknowledgement add (target ≤ 20 ms);
* the time from a schedule slot to its first question starting (scheduler process + workers; waits for the next
  minute, so up to a minute; ``--no-slot`` skips it).

Prints one JSON document. Targets (issue 12): overhead ≤ 20 ms per question; two workers ≥ 1.6× one worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import describe_cpu  # noqa: E402

TARGET_OVERHEAD_MS = 20.0
TARGET_SPEEDUP = 1.6
TEMPLATES = [
    "What does the paper '{title}' report?",
    "What method is proposed in '{title}'?",
    "Which results are presented in '{title}'?",
    "What problem does '{title}' address?",
    "How is '{title}' evaluated?",
]


def questions(count: int) -> list[str]:
    from researchcrew.data import demo_corpus_path

    titles = [json.loads(line)["title"] for line in demo_corpus_path().read_text().splitlines() if line.strip()]
    made = [template.format(title=" ".join(title.split())[:160]) for template in TEMPLATES for title in titles]
    return (made * (1 + count // len(made)))[:count]


async def create_database() -> tuple[str, str]:
    import asyncpg

    name = f"rc_bench_{uuid.uuid4().hex[:10]}"
    for user in ("postgres", "root"):
        try:
            connection = await asyncpg.connect(host="127.0.0.1", port=5432, user=user, database="test", timeout=3)
        except (OSError, asyncpg.PostgresError):
            continue
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        return f"postgresql+asyncpg://{user}@127.0.0.1:5432/{name}", user
    raise SystemExit("PostgreSQL is not reachable on 127.0.0.1:5432 (or pass --database-url)")


async def drop_database(url: str, user: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(host="127.0.0.1", port=5432, user=user, database="test", timeout=3)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    finally:
        await connection.close()


def ingest(data_dir: Path) -> dict[str, Any]:
    from researchcrew.data import demo_corpus_path
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.settings import Settings

    started = time.perf_counter()
    with KnowledgeBase(Settings(data_dir=data_dir)) as knowledge_base:
        report = knowledge_base.ingest([demo_corpus_path()], progress=False)
    return {
        "documents": report.documents_added,
        "chunks": report.chunks_added,
        "seconds": round(time.perf_counter() - started, 1),
    }


class Workers:
    """`researchcrew worker` / `scheduler` processes sharing the benchmark's database and Redis."""

    def __init__(self, base: Path, environment: dict[str, str]) -> None:
        self.base = base
        self.environment = environment
        self.processes: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.started = 0

    def start(self, command: str, *, concurrency: int) -> Path:
        number = self.started
        self.started += 1
        data_dir = self.base / f"{command}-{number}"
        shutil.copytree(self.base / "kb", data_dir)  # a knowledge-base copy of its own (Milvus Lite: one process)
        log = self.base / f"{command}-{number}.log"
        environment = {
            **self.environment,
            "RESEARCHCREW_DATA_DIR": str(data_dir),
            "RESEARCHCREW_JOBS__CONCURRENCY": str(concurrency),
        }
        with log.open("wb") as handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "researchcrew", "-v", command],
                cwd=ROOT,
                env=environment,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append((process, log))
        return log

    def wait_ready(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        for process, log in self.processes:
            while not any(
                mark in log.read_text(errors="replace") for mark in ("Listening started", "Startup completed")
            ):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{log.name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.2)

    def stop(self) -> None:
        for process, _ in self.processes:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process, _ in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes = []


async def run_job(jobs: Any, name: str, asked: list[str], *, executor: str) -> dict[str, Any]:
    await jobs.create("bench", name=name, questions=asked)
    started = time.perf_counter()
    if executor == "in_process":
        info = await jobs.run("bench", name)
    else:
        info = await jobs.start("bench", name, executor="queue")
        while not info.finished:
            await asyncio.sleep(0.25)  # a status read costs the workers' database too: poll gently
            info = await jobs.status("bench", info.id)
    wall = time.perf_counter() - started
    counts = info.counts
    return {
        "questions": counts.total,
        "answered": counts.answered,
        "uncertain": counts.uncertain,
        "failed": counts.failed,
        "wall_s": round(wall, 2),
        "questions_per_s": round(counts.total / wall, 2),
        "ms_per_question": round(1000 * wall / counts.total, 1),
    }


async def slot_latency(jobs: Any) -> dict[str, Any]:
    """A job scheduled every minute: from its next slot to its first question starting."""
    from researchcrew.jobs._store import JobStore

    await jobs.create("bench", name="every-minute", questions=questions(3), schedule="* * * * *")
    deadline = time.monotonic() + 150
    store: JobStore = await jobs.store()
    while time.monotonic() < deadline:
        runs = await jobs.runs("bench", "every-minute")
        if runs and runs[-1].started_at is not None:
            run = runs[-1]
            results = await store.results(run.id, owner="bench", full=False)
            first = min(r.started_at for r in results if r.started_at is not None)
            assert run.slot_at is not None
            return {
                "slot_at": run.slot_at.isoformat(),
                "trigger": run.trigger,
                "slot_to_first_question_s": round((first - run.slot_at).total_seconds(), 3),
                "slot_to_run_created_s": round((run.created_at - run.slot_at).total_seconds(), 3),
            }
        await asyncio.sleep(0.1)
    raise SystemExit("no scheduled run started within 150 s")


async def measure(args: argparse.Namespace, base: Path, database_url: str, redis_url: str) -> dict[str, Any]:
    from researchcrew.contracts.request import ResearchRequest
    from researchcrew.jobs.api import Jobs
    from researchcrew.runtime import open_runtime
    from researchcrew.settings import JobsSettings, MemorySettings, RedisSettings, Settings

    prefix = f"rcbench{uuid.uuid4().hex[:8]}"
    shutil.copytree(base / "kb", base / "here")
    settings = Settings(
        data_dir=base / "here",
        enabled_sources=["rag", "memory"],
        memory=MemorySettings(database_url=database_url),
        redis=RedisSettings(url=redis_url, key_prefix=prefix),
        jobs=JobsSettings(concurrency=args.concurrency, max_questions=100_000),
    )
    environment = {key: value for key, value in os.environ.items() if not key.startswith("RESEARCHCREW_")}
    environment.update(
        {
            "PYTHONPATH": str(ROOT),
            "RESEARCHCREW_ENABLED_SOURCES": '["rag", "memory"]',
            "RESEARCHCREW_MEMORY__DATABASE_URL": database_url,
            "RESEARCHCREW_REDIS__URL": redis_url,
            "RESEARCHCREW_REDIS__KEY_PREFIX": prefix,
            "RESEARCHCREW_JOBS__SCHEDULE_REFRESH_S": "2",
            "CREWAI_DISABLE_TELEMETRY": "true",
            "OTEL_SDK_DISABLED": "true",
            "CREWAI_TRACING_ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
        }
    )
    asked = questions(args.questions)
    report: dict[str, Any] = {}
    async with open_runtime(settings, remember=False) as runtime:
        jobs = Jobs(runtime)
        for warm in asked[:5]:
            await runtime.ask(ResearchRequest(question=warm, user_id="bench"), remember=False)
        started = time.perf_counter()
        for question in asked[: args.overhead_questions]:
            await runtime.ask(ResearchRequest(question=question, user_id="bench"), remember=False)
        ask_ms = 1000 * (time.perf_counter() - started) / args.overhead_questions
        report["ask"] = {"questions": args.overhead_questions, "ms_per_question": round(ask_ms, 1)}
        report["in_process"] = await run_job(jobs, "in-process", asked, executor="in_process")

        workers = Workers(base, environment)
        try:
            workers.start("worker", concurrency=1)
            workers.wait_ready()
            await run_job(jobs, "warm-one", asked[:5], executor="queue")
            serial = await run_job(jobs, "one-at-a-time", asked[: args.overhead_questions], executor="queue")
            report["one_worker_one_at_a_time"] = serial
            report["queue_overhead_ms_per_question"] = round(serial["ms_per_question"] - ask_ms, 1)
            workers.stop()

            workers.start("worker", concurrency=args.concurrency)
            workers.wait_ready()
            await run_job(jobs, "warm-two", asked[:5], executor="queue")
            report["one_worker"] = await run_job(jobs, "one-worker", asked, executor="queue")
            workers.start("worker", concurrency=args.concurrency)
            workers.wait_ready()
            await run_job(jobs, "warm-three", asked[:10], executor="queue")
            report["two_workers"] = await run_job(jobs, "two-workers", asked, executor="queue")
            if not args.no_slot:
                workers.start("scheduler", concurrency=1)
                workers.wait_ready()
                report["schedule_slot"] = await slot_latency(jobs)
        finally:
            workers.stop()
            await jobs.aclose()
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(redis_url)
            keys = [key async for key in client.scan_iter(f"{prefix}:*")]
            if keys:
                await client.delete(*keys)  # the stream and limits of this benchmark only
            await client.aclose()
    report["two_workers_speedup"] = round(
        report["two_workers"]["questions_per_s"] / report["one_worker"]["questions_per_s"], 2
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4, help="Questions at once per process.")
    parser.add_argument("--overhead-questions", type=int, default=150, help="Questions for the overhead measure.")
    parser.add_argument("--database-url", default=None, help="Default: a fresh database on 127.0.0.1:5432.")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--no-slot", action="store_true", help="Skip the schedule-slot latency (up to a minute).")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    base = Path(tempfile.mkdtemp(prefix="researchcrew-batch-bench-"))
    created: tuple[str, str] | None = None
    try:
        corpus = ingest(base / "kb")
        database_url = args.database_url
        if database_url is None:
            created = asyncio.run(create_database())
            database_url = created[0]
        report = asyncio.run(measure(args, base, database_url, args.redis_url))
    finally:
        if created is not None:
            asyncio.run(drop_database(*created))
        shutil.rmtree(base, ignore_errors=True)
    print(
        json.dumps(
            {
                "benchmark": "batch_throughput",
                "setup": {
                    "llm": None,
                    "enabled_sources": ["rag", "memory"],
                    "demo_corpus": corpus,
                    "questions": args.questions,
                    "concurrency_per_process": args.concurrency,
                    "database": "postgresql" if "postgresql" in (args.database_url or "postgresql") else "sqlite",
                },
                **report,
                "target_queue_overhead_ms": TARGET_OVERHEAD_MS,
                "target_two_workers_speedup": TARGET_SPEEDUP,
                "meets_overhead_target": report["queue_overhead_ms_per_question"] <= TARGET_OVERHEAD_MS,
                "meets_speedup_target": report["two_workers_speedup"] >= TARGET_SPEEDUP,
                "cpu": describe_cpu(),
                "cpus": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2),
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
