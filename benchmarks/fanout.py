"""Fan-out overhead of the Retriever, and how quickly a hung source is cut off.

    .venv/bin/python benchmarks/fanout.py [--runs 50]

Four in-process tools sleep 50/100/200/400 ms (asyncio.sleep, so they overlap like real I/O). Each run's overhead is
the Retriever's wall time minus the slowest tool's own measured time: what the fan-out itself costs (task
creation, waiting, validation, aggregation). Then one tool hangs under a 0.5 s timeout and the wall time is
measured. Prints one JSON document; targets from issue 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
from typing import Any

from researchcrew.contracts import ContextChunk, RetrieverInput
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.tools.base import Tool

TARGETS = {"overhead_median_ms": 10.0, "overhead_p95_ms": 25.0, "hung_wall_s": 0.55}
DELAYS_S = {"rag": 0.05, "web": 0.1, "arxiv": 0.2, "memory": 0.4}


class SleepingTool(Tool):
    """Sleeps, then returns `count` chunks; records how long its own work took."""

    name = "sleeping"
    description = "benchmark tool"
    source_type = "rag"

    def __init__(self, source_type: str, delay_s: float | None, count: int = 5) -> None:
        self.source_type = source_type  # type: ignore[misc]
        self.name = f"{source_type}_sleep"  # type: ignore[misc]
        self.delay_s = delay_s
        self.chunks = [
            ContextChunk(
                chunk_id=f"{source_type}-{i}",
                source_type=source_type,
                content=f"evidence {i} " * 40,
                semantic_relevance=0.5,
                title=f"title {i}",
                url=f"https://example.org/{source_type}/{i}",
            )
            for i in range(count)
        ]
        self.last_elapsed_s = 0.0

    async def _search(self, query: str, **kwargs: Any) -> list[ContextChunk]:
        started = time.perf_counter()
        if self.delay_s is None:
            await asyncio.Event().wait()  # hangs until cancelled
        await asyncio.sleep(self.delay_s or 0)
        self.last_elapsed_s = time.perf_counter() - started
        return self.chunks


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def overhead(runs: int) -> dict[str, Any]:
    tools = [SleepingTool(source, delay) for source, delay in DELAYS_S.items()]
    agent = Retriever(tools)
    request = RetrieverInput(query_text="benchmark query", user_id="u", session_id="s", timeout_per_source=5)
    for _ in range(3):  # warm-up: first-call costs (imports, pydantic schema caches) are not fan-out overhead
        await agent.run(request)

    vs_measured: list[float] = []
    vs_nominal: list[float] = []
    reported_minus_wall: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        output = await agent.run(request)
        wall_s = time.perf_counter() - started
        assert output.retrieval_status == "success", output.error_message
        assert len(output.aggregated_context.chunks) == 20
        slowest_s = max(tool.last_elapsed_s for tool in tools)
        vs_measured.append((wall_s - slowest_s) * 1000)
        vs_nominal.append((wall_s - max(DELAYS_S.values())) * 1000)
        reported_minus_wall.append(output.execution_time_ms - wall_s * 1000)
    return {
        "runs": runs,
        "tool_delays_ms": {source: delay * 1000 for source, delay in DELAYS_S.items()},
        "overhead_median_ms": round(statistics.median(vs_measured), 3),
        "overhead_p95_ms": round(percentile(vs_measured, 0.95), 3),
        "overhead_max_ms": round(max(vs_measured), 3),
        "overhead_vs_nominal_400ms_median_ms": round(statistics.median(vs_nominal), 3),
        "execution_time_ms_minus_wall_median_ms": round(statistics.median(reported_minus_wall), 3),
    }


async def hung(runs: int) -> dict[str, Any]:
    tools = [
        SleepingTool("rag", 0.05),
        SleepingTool("web", 0.1),
        SleepingTool("arxiv", 0.2),
        SleepingTool("memory", None),
    ]
    agent = Retriever(tools)
    request = RetrieverInput(query_text="benchmark query", user_id="u", session_id="s", timeout_per_source=0.5)
    walls: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        output = await agent.run(request)
        walls.append(time.perf_counter() - started)
        assert output.retrieval_status == "partial"
        assert output.sources_failed == ["memory"]
        assert len(output.aggregated_context.chunks) == 15
    return {
        "runs": runs,
        "timeout_s": 0.5,
        "hung_wall_median_s": round(statistics.median(walls), 4),
        "hung_wall_max_s": round(max(walls), 4),
    }


async def main(runs: int, hung_runs: int) -> dict[str, Any]:
    fan_out = await overhead(runs)
    hung_case = await hung(hung_runs)
    return {
        "benchmark": "fanout",
        "fan_out": fan_out,
        "hung_tool": hung_case,
        "targets": TARGETS,
        "meets_targets": {
            "overhead_median_ms": fan_out["overhead_median_ms"] <= TARGETS["overhead_median_ms"],
            "overhead_p95_ms": fan_out["overhead_p95_ms"] <= TARGETS["overhead_p95_ms"],
            "hung_wall_s": hung_case["hung_wall_max_s"] <= TARGETS["hung_wall_s"],
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50, help="measured fan-out runs (default 50)")
    parser.add_argument("--hung-runs", type=int, default=10, help="runs with one hung tool (default 10)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the hung tool's expected timeout warnings are not results
    print(json.dumps(asyncio.run(main(args.runs, args.hung_runs)), indent=2))
