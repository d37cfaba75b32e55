"""What memory work adds to an answer's latency when the Flow hands it to ``remember_in_background``.

    .venv/bin/python benchmarks/memory_overhead.py [--answers 200] [--interval-ms 100] [--database-url ...]

A real MemoryWriter on a real MemoryStore (SQLite in a temporary directory by default) with the packaged embedding
model (every exchange is embedded for recall), the rule-based entity extractor and the Zep outbox (a loopback Zep,
worker running). Answers arrive every ``--interval-ms``; for each, the time from calling
``remember_in_background`` to getting control back is what memory adds to that answer (target ≤ 5 ms, issue 5).
Because the work then runs on the same event loop, the benchmark also reports the event-loop lag seen meanwhile
(how late a 10 ms timer fires) and how long the memory work itself took. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the loopback Zep lives in tests/

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.memory import MemoryInput
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import Citation, FinalResponse
from researchcrew.embedding.embedder import get_embedder
from researchcrew.memory.outbox import OutboxWorker
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory
from researchcrew.pipeline.remember.writer import MemoryWriter
from researchcrew.settings import EmbeddingSettings, ZepSettings
from tests.loopback.server import LoopbackServer
from tests.loopback.zep import FakeZep
from tests.memory_logic.exchanges import ALL

TARGET_MS = 5.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "p95": round(percentile(values, 0.95), 3),
        "max": round(max(values), 3),
    }


def answer(i: int) -> MemoryInput:
    question, text = list(ALL.values())[i % len(ALL)]
    user, session = f"user{i % 10}", f"session{i % 3}"
    query = Query(text=f"{question} (variant {i})", user_id=user, session_id=session)
    response = FinalResponse(
        query=query,
        answer=text,
        citations=[Citation(number=1, chunk_id=f"rag:{i}", source_type="rag", title="a source")],
        source_reports=[SourceReport(source_type="rag", tool_name="rag_search", status="success", chunk_count=1)],
    )
    return MemoryInput(
        query=query,
        final_response=response,
        user_id=user,
        session_id=session,
        context={"request": {"response_format": "concise"}},
    )


async def lag_probe(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.01)
        lags.append((time.perf_counter() - started - 0.01) * 1000)


async def run(answers: int, interval_s: float, database_url: str) -> dict[str, Any]:
    with warnings.catch_warnings():  # sentence-transformers renamed a method the embedder calls; not ours here
        warnings.simplefilter("ignore", FutureWarning)
        embedder = get_embedder(EmbeddingSettings())
        embedder.embed_query("warm up")
    store = await MemoryStore.open(database_url, embedder=embedder)
    fake = FakeZep(api_key="bench-key")
    server = LoopbackServer(fake.route).start()
    zep = ZepMemory(ZepSettings(api_url=server.url, api_key="bench-key"))
    worker = OutboxWorker(store, zep)
    worker.start()
    agent = MemoryWriter(store, zep_outbox=worker)
    await agent.run(answer(-1))  # warm-up: first-call costs (schema caches, first embedding) are not per-answer

    handoff_ms: list[float] = []
    lags: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(lag_probe(stop, lags))
    tasks = []
    started_all = time.perf_counter()
    for i in range(answers):
        memory_input = answer(i)
        started = time.perf_counter()
        tasks.append(agent.remember_in_background(memory_input))
        handoff_ms.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(interval_s)
    await agent.wait_idle(120)
    stop.set()
    await probe
    elapsed = time.perf_counter() - started_all
    outputs = [t.result() for t in tasks]
    await worker.drain(60)
    outbox = await store.outbox_counts()
    await worker.stop()
    await zep.aclose()
    server.stop()
    await store.close()
    return {
        "benchmark": "memory_overhead",
        "answers": answers,
        "interval_ms": interval_s * 1000,
        "backend": database_url.split(":", 1)[0],
        "handoff_ms": summary(handoff_ms),
        "event_loop_lag_ms_while_memory_works": summary(lags),
        "memory_work_ms": summary([o.execution_time_ms for o in outputs]),
        "statuses": {s: sum(o.status == s for o in outputs) for s in ("success", "partial", "failed")},
        "errors": sorted({o.error_message for o in outputs if o.error_message})[:5],
        "zep_turns": {"delivered": outbox["delivered"], "pending": outbox["pending"]},
        "wall_s": round(elapsed, 2),
        "target": {"handoff_ms": TARGET_MS},
        "meets_target": percentile(handoff_ms, 0.95) <= TARGET_MS,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--interval-ms", type=float, default=100.0)
    parser.add_argument("--database-url", default=None, help="default: a SQLite file in a temporary directory")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'memory.db'}"
        result = asyncio.run(run(args.answers, args.interval_ms / 1000, url))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
