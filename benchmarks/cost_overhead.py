"""What costing adds to an answer (issue 23, target ≤ 1 ms): pricing its token usage with the bundled price table
(warm: the table is loaded when the runtime starts) and writing the usage ledger row (SQLite in a temporary folder).

    .venv/bin/python benchmarks/cost_overhead.py [--answers 2000]

Prints one JSON document: per-answer p50/p95 in milliseconds for pricing a one-stage and a four-stage usage of a
priced model, an unknown model, and an answer without LLM calls; the ledger write; and the price table's load time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from researchcrew.contracts.follow_up import TokenCount, TokenUsage
from researchcrew.llm.pricing import Pricing


def _timed(function: object, runs: int) -> dict[str, float]:
    samples = []
    for number in range(runs):
        started = time.perf_counter()
        function(number)  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 4), "p95_ms": round(samples[int(len(samples) * 0.95)], 4)}


async def _ledger_writes(runs: int) -> dict[str, float]:
    from researchcrew.contracts.cost import AnswerCost
    from researchcrew.memory.store import MemoryStore
    from researchcrew.memory.usage_ledger import UsageLedger
    from researchcrew.settings import Settings

    with tempfile.TemporaryDirectory() as folder:
        store = await MemoryStore.from_settings(Settings(data_dir=Path(folder)))
        ledger = UsageLedger(store.engine)
        cost = AnswerCost(model="gpt-4o-mini", usd=0.00045, stages={"synthesis": 0.00045})
        samples = []
        for number in range(runs):
            started = time.perf_counter()
            await ledger.record(
                user_id="ada", kind="answer", response_id=f"r{number}", tokens=TokenCount.of(1000, 500), cost=cost
            )
            samples.append((time.perf_counter() - started) * 1000)
        await store.close()
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 3), "p95_ms": round(samples[int(len(samples) * 0.95)], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--ledger-writes", type=int, default=200)
    args = parser.parse_args()

    priced, unknown, nothing = Pricing("openai/gpt-4o-mini"), Pricing("my-local-model"), Pricing(None)
    started = time.perf_counter()
    priced.warm()
    load_ms = (time.perf_counter() - started) * 1000
    unknown.warm()
    one = TokenUsage(synthesis=TokenCount.of(1_800, 350))
    four = TokenUsage(
        follow_up=TokenCount.of(300, 30),
        reformulation=TokenCount.of(200, 20),
        adjudication=TokenCount.of(400, 40),
        synthesis=TokenCount.of(1_800, 350),
    )
    report = {
        "price_table_load_ms": round(load_ms, 1),
        "per_answer": {
            "priced_one_stage": _timed(lambda n: priced.cost(one), args.answers),
            "priced_four_stages": _timed(lambda n: priced.cost(four), args.answers),
            "unknown_model": _timed(lambda n: unknown.cost(one), args.answers),
            "no_llm_calls": _timed(lambda n: nothing.cost(TokenUsage()), args.answers),
        },
        "ledger_write_sqlite": asyncio.run(_ledger_writes(args.ledger_writes)),
        "target_ms": 1.0,
        "load_average": list(os.getloadavg()),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
