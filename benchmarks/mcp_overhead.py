"""What the MCP door adds to a tool call, offline: the bundled demo corpus in a fresh data directory, no LLM
(extractive answers), rag + memory sources, the official MCP Python client.

    .venv/bin/python benchmarks/mcp_overhead.py [--calls 30]

Three phases, one after the other (a Milvus Lite file is one process's at a time), each asking the same questions
in the same order as its own user, after the same warm-up:

1. stdio: ``researchcrew mcp`` as a subprocess, ``tools/call ask`` and ``tools/call search_knowledge_base``;
2. streamable HTTP: ``researchcrew serve`` as a subprocess, the same calls on ``/mcp`` with an API key;
3. in process: ``runtime.ask`` and ``runtime.search_knowledge_base`` on one warmed runtime (the baseline).

Each MCP call is timed at the client from the request to the result (the session is initialized once, before). The
added time is measured per call, paired: the call's wall time minus the runtime operation's own time, which the
server reports in the result's ``_meta`` (``researchcrew/operation_ms``); its p50 is ``*_added_p50_ms``. The plain
difference of the p50s with the in-process phase is reported too (it drifts with the load on a shared machine).
``ask`` over MCP also records the session (one read, one write): that is part of what the door adds.

Target (issue 23): ≤ 20 ms added at p50, over stdio and over /mcp. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serve_load import _read, ingest_in_child, wait_ready  # noqa: E402
from researchcrew.mcp_server._server import OPERATION_MS  # noqa: E402

QUESTIONS = [
    "What causes flaky tests?",
    "What is metamorphic testing?",
    "How does mutation testing find weak tests?",
    "How are test suites prioritized?",
    "What is property-based testing?",
    "How do fuzzers find bugs?",
]
TOOLS = ("ask", "search_knowledge_base")
WARM_UP = 3
TARGET_MS = 20.0


def environment(data_dir: Path) -> dict[str, str]:
    """The benchmark's offline settings, for this process and the children."""
    from researchcrew.embedding.embedder import default_cache_dir

    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCHCREW_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "RESEARCHCREW_DATA_DIR": str(data_dir),
            "RESEARCHCREW_ENABLED_SOURCES": '["rag", "memory"]',
            "RESEARCHCREW_SERVICE__RATE_LIMIT": "100000/minute",  # each MCP message counts; the default is 60/min
            "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(default_cache_dir()),
            "HF_HUB_OFFLINE": "1",
            "GRPC_VERBOSITY": "NONE",
        }
    )
    return env


def questions(calls: int) -> list[str]:
    return [QUESTIONS[n % len(QUESTIONS)] for n in range(WARM_UP + calls)]


async def in_process(env: dict[str, str], calls: int) -> dict[str, list[float]]:
    from researchcrew.contracts.request import ResearchRequest
    from researchcrew.runtime import open_runtime
    from researchcrew.settings import Settings

    os.environ.update(env)
    times: dict[str, list[float]] = {"ask": [], "search_knowledge_base": []}
    async with open_runtime(Settings()) as runtime:
        await runtime.stages()
        for n, question in enumerate(questions(calls)):
            started = time.perf_counter()
            await runtime.search_knowledge_base(question, user_id="bench-inproc")
            searched = time.perf_counter()
            request = ResearchRequest(question=question, user_id="bench-inproc", session_id=uuid.uuid4().hex)
            await runtime.ask(request)
            asked = time.perf_counter()
            if n >= WARM_UP:
                times["search_knowledge_base"].append((searched - started) * 1000)
                times["ask"].append((asked - searched) * 1000)
            await asyncio.sleep(0.5)  # as over MCP: the answer's memory write is not inside the next call
    return times


async def over_mcp(session: Any, calls: int, user: str) -> dict[str, list[float]]:
    """Wall time of each call at the client, and the door's share of it: the wall time minus the runtime
    operation's own time, which the server reports in the result's ``_meta`` (paired per call, so load drifting on a
    shared machine cancels out). The client's own check of the result against the tool's output schema is timed
    again on the side (the SDK's client runs ``jsonschema.validate`` on every call, which re-checks the schema)."""
    import jsonschema

    schemas = {tool.name: tool.outputSchema for tool in (await session.list_tools()).tools}
    times: dict[str, list[float]] = {f"{tool}{kind}": [] for tool in TOOLS for kind in ("", "_door", "_check")}
    for n, question in enumerate(questions(calls)):
        for tool, arguments in (("search_knowledge_base", {"query": question}), ("ask", {"question": question})):
            started = time.perf_counter()
            result = await session.call_tool(tool, arguments)
            wall_ms = (time.perf_counter() - started) * 1000
            if result.isError:
                raise SystemExit(f"{user}: {tool} failed: {result.content}")
            checked = time.perf_counter()
            jsonschema.validate(result.structuredContent, schemas[tool])
            if n >= WARM_UP:
                times[tool].append(wall_ms)
                times[f"{tool}_door"].append(wall_ms - float((result.meta or {})[OPERATION_MS]))
                times[f"{tool}_check"].append((time.perf_counter() - checked) * 1000)
        await asyncio.sleep(0.5)  # as in process: the answer's memory write is not inside the next call
    return times


async def stdio(env: dict[str, str], calls: int, log: Path) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "researchcrew", "mcp", "--user", "bench-stdio"], env=env
    )
    with log.open("w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await over_mcp(session, calls, "stdio")


def start_service(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """`researchcrew serve` on a free port, and the API key of its benchmark user: (process, base URL, key)."""
    added = subprocess.run(
        [sys.executable, "-m", "researchcrew", "users", "add", "bench-http", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    port = _free_port()
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "researchcrew", "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    return server, f"http://127.0.0.1:{port}", json.loads(added.stdout)["key"]


async def streamable_http(server: subprocess.Popen[bytes], base: str, key: str, calls: int, log: Path) -> Any:
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    await wait_ready(base, server, log)
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await over_mcp(session, calls, "http")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def p95(values: list[float]) -> float:
    return round(sorted(values)[max(0, int(len(values) * 0.95) - 1)], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="Timed calls per tool and transport.")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-overhead-") as folder:
        data_dir = Path(folder)
        env = environment(data_dir)
        os.environ.update(env)
        load_at_start = round(os.getloadavg()[0], 2)
        ingested = ingest_in_child(data_dir)
        # The MCP phases first, each in its own process; the in-process baseline last (once this process has opened
        # the Milvus Lite file, no other process can until it exits).
        over_stdio = asyncio.run(stdio(env, arguments.calls, data_dir / "stdio.log"))
        server, base, key = start_service(env, data_dir / "serve.log")
        try:
            over_http = asyncio.run(streamable_http(server, base, key, arguments.calls, data_dir / "serve.log"))
        except BaseException:
            print(_read(data_dir / "serve.log")[-3000:], file=sys.stderr)
            raise
        finally:
            server.terminate()
            server.wait(timeout=60)
        baseline = asyncio.run(in_process(env, arguments.calls))
    report: dict[str, Any] = {
        "calls": arguments.calls,
        "corpus": ingested,
        "target_added_p50_ms": TARGET_MS,
        "load_average_1m": {"start": load_at_start, "end": round(os.getloadavg()[0], 2)},
        "cpus": os.cpu_count(),
    }
    worst = 0.0
    for tool in TOOLS:
        base = p50(baseline[tool])
        row: dict[str, Any] = {"in_process_ms": {"p50": base, "p95": p95(baseline[tool])}}
        for name, times in (("stdio", over_stdio), ("http", over_http)):
            row[f"{name}_ms"] = {"p50": p50(times[tool]), "p95": p95(times[tool])}
            row[f"{name}_added_p50_ms"] = p50(times[f"{tool}_door"])  # paired: wall time minus the operation
            row[f"{name}_client_schema_check_p50_ms"] = p50(times[f"{tool}_check"])  # part of the added time
            row[f"{name}_p50_minus_in_process_p50_ms"] = round(p50(times[tool]) - base, 2)  # drifts with load
            worst = max(worst, p50(times[f"{tool}_door"]))
        report[tool] = row
    report["meets_target"] = worst <= TARGET_MS
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
