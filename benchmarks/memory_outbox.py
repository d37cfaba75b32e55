"""Outbox recovery: writes made while Zep is down are delivered exactly once after it comes back.

    .venv/bin/python benchmarks/memory_outbox.py [--writes 1000] [--outage-s 5] [--down refused|503]
                                                 [--database-url postgresql+asyncpg://...]

A loopback Zep (the contract tests' fake, speaking the v2 routes) is down: nothing listens on its port
(``refused``) or it answers 503. The background OutboxWorker runs with its default retry policy while ``--writes``
turns (50 users, 2 sessions each) are enqueued into a fresh store and the outage lasts ``--outage-s`` seconds. Then
Zep comes up on the same port and the clock runs until the outbox is empty. Checks that every message arrived once.
Target (issue 5): all delivered within 30 s of Zep coming back, duplicates = 0. Prints one JSON document.

The recovery time includes the circuit's wait before it probes Zep again (up to ``RetryPolicy.max_delay_s``, 5 s,
jittered), so it varies by a few seconds from run to run. ``delivery_span_s`` (first to last ``delivered_at``) and
``store_commits_during_recovery`` isolate the delivery itself: the worker's work per row, store writes included.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event, func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the loopback Zep lives in tests/

from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.db.models import OutboxRow
from researchcrew.memory.outbox import OutboxWorker
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory
from researchcrew.settings import ZepSettings
from tests.loopback.server import LoopbackServer, closed_port
from tests.loopback.zep import FakeZep

TARGET_S = 30.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def run(writes: int, outage_s: float, down: str, database_url: str) -> dict[str, Any]:
    store = await MemoryStore.open(database_url)
    fake = FakeZep(api_key="bench-key")
    port = closed_port()
    standby: LoopbackServer | None = None
    if down == "503":
        fake.mode = "down"
        standby = LoopbackServer(fake.route, port=port).start()
    zep = ZepMemory(ZepSettings(api_url=f"http://127.0.0.1:{port}", api_key="bench-key", timeout_s=5))
    worker = OutboxWorker(store, zep)
    worker.start()
    enqueue_ms: list[float] = []
    response_ids: set[str] = set()
    outage_started = time.monotonic()
    for i in range(writes):
        user = f"user{i % 50}"
        query = Query(
            text=f"Question {i}: how does BM25 compare with dense retrieval on SciFact?",
            user_id=user,
            session_id=f"session{i % 2}",
        )
        response = FinalResponse(query=query, answer=f"Answer {i}: BM25 is a strong zero-shot baseline [1].")
        started = time.perf_counter()
        await worker.enqueue_turn(user_id=user, session_id=query.session_id, query=query, response=response)
        enqueue_ms.append((time.perf_counter() - started) * 1000)
        response_ids.add(response.response_id)
    await asyncio.sleep(max(0.0, outage_s - (time.monotonic() - outage_started)))
    during_outage = await store.outbox_counts()
    commits = itertools.count()
    event.listen(store.engine.sync_engine, "commit", lambda _connection: next(commits))

    back = time.monotonic()
    if standby is not None:
        fake.mode = "up"
        server = standby
    else:
        server = LoopbackServer(fake.route, port=port).start()
    drained_s: float | None = None
    while time.monotonic() - back < TARGET_S * 3:
        if (await store.outbox_counts())["pending"] == 0:
            drained_s = time.monotonic() - back
            break
        await asyncio.sleep(0.05)
    await worker.stop()
    commits_during_recovery = next(commits)
    await zep.aclose()
    server.stop()
    final = await store.outbox_counts()
    async with store.engine.connect() as connection:
        first, last = (
            await connection.execute(select(func.min(OutboxRow.delivered_at), func.max(OutboxRow.delivered_at)))
        ).one()
    await store.close()

    received = fake.message_ids_received()
    delivered_responses = {m["metadata"]["researchcrew_response_id"] for m in fake.all_messages()}
    return {
        "benchmark": "memory_outbox",
        "writes": writes,
        "down_mode": down,
        "backend": database_url.split(":", 1)[0],
        "outage_s": round(back - outage_started, 2),
        "enqueue_ms": {"p50": round(statistics.median(enqueue_ms), 3), "p95": round(percentile(enqueue_ms, 0.95), 3)},
        "failed_attempts_during_outage": during_outage["failed_attempts"],
        "seconds_to_deliver_all_after_zep_is_back": None if drained_s is None else round(drained_s, 2),
        "delivery_span_s": None if first is None else round((last - first).total_seconds(), 2),
        "store_commits_during_recovery": commits_during_recovery,
        "delivered_turns": final["delivered"],
        "pending_turns": final["pending"],
        "dead_turns": final.get("dead", 0),
        "messages_received": len(received),
        "duplicates": sum(n - 1 for n in fake.duplicates().values()),
        "missing_turns": len(response_ids - delivered_responses),
        "zep_requests_total": len(server.requests),
        "target": {"seconds": TARGET_S, "duplicates": 0},
        "meets_target": drained_s is not None
        and drained_s <= TARGET_S
        and not fake.duplicates()
        and len(received) == 2 * writes,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--outage-s", type=float, default=5.0)
    parser.add_argument("--down", choices=("refused", "503"), default="refused")
    parser.add_argument("--database-url", default=None, help="default: a SQLite file in a temporary directory")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'memory.db'}"
        result = asyncio.run(run(args.writes, args.outage_s, args.down, url))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
