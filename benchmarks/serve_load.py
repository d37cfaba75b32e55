"""Load on one `researchcrew serve` process, offline: the bundled demo corpus in a fresh data directory, no LLM
(extractive answers), rag + memory, authentication and the per-user limits on (defaults).

    .venv/bin/python benchmarks/serve_load.py [--users 50] [--questions-per-user 5] [--time-limit 300]

1. The server (a subprocess, one worker) answers the sequential questions over HTTP, one at a time, as JSON and
   then as server-sent events; the first event's delay is measured from the moment the request is sent. Both
   modes pause the same 0.3 s after each answer, so that the background memory write of one question does not
   land inside the next one's time.
2. ``--users`` simulated users at once (httpx, one connection pool), each with its own key and session, asking
   ``--questions-per-user`` questions with follow-ups ("What are its limitations?"); no new question is started
   after ``--time-limit`` seconds. Reported: errors (any non-200), answers/s, p50/p95 latency, the server
   process's memory (RSS after start-up, and its peak sampled every 0.25 s).
3. In-process baseline, after the server has stopped (a Milvus Lite file is one process's): one warmed-up
   ``ResearchAssistant`` answers the same sequential questions; the p50 of ``ask``.

The HTTP overhead is measured per request, paired, so that load drifting between the phases on a shared machine
cancels out: the time outside the research Flow (latency minus the answer's ``execution_time_ms``) over HTTP,
minus the same in process (p50s). The plain difference of the two latency p50s is reported too.

Targets (issue 11): 0 errors at 50 concurrent users; HTTP overhead over the in-process ``ask`` p50 ≤ 15 ms; first
SSE event ≤ 50 ms after the request is sent. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ask_latency import QUESTIONS, WARMUP_QUESTIONS, percentile

TARGET_OVERHEAD_MS = 15.0
TARGET_FIRST_EVENT_MS = 50.0
PAUSE_S = 0.3
FOLLOW_UPS = ["What are its limitations?", "How is it evaluated?", "What did I ask about first?"]


def session_script(user: int, per_user: int) -> list[str]:
    """A conversation: a topic question, follow-ups that point back at it, another topic question, and so on."""
    topics = [q for q in QUESTIONS if "capital" not in q]
    script: list[str] = []
    position = user
    while len(script) < per_user:
        script.append(topics[position % len(topics)])
        script += FOLLOW_UPS[: max(0, min(2, per_user - len(script)))]
        position += 7
    return script[:per_user]


async def in_process(settings: Any, questions: list[str]) -> tuple[list[float], list[float]]:
    """Latencies of ``ask``, and of each the part outside the research Flow (latency - execution_time_ms)."""
    from researchcrew.assistant import ResearchAssistant

    latencies: list[float] = []
    outside: list[float] = []
    async with ResearchAssistant(settings) as assistant:
        for question in WARMUP_QUESTIONS:
            await assistant.ask(question, user_id="baseline", session_id="warmup")
        for question in questions:
            started = time.perf_counter()
            answer = await assistant.ask(question, user_id="baseline", session_id="s1")
            latencies.append((time.perf_counter() - started) * 1000)
            outside.append(latencies[-1] - answer.execution_time_ms)
            await assistant.flush_memory(timeout_s=60)
            await asyncio.sleep(PAUSE_S)
    return latencies, outside


def ingest_in_child(data_dir: Path) -> dict[str, Any]:
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from benchmarks.ask_latency import ingest_demo_corpus\n"
        "from researchcrew.embedding.embedder import default_cache_dir\n"
        "from researchcrew.settings import EmbeddingSettings, Settings\n"
        "settings = Settings(data_dir=Path(sys.argv[1]), embedding=EmbeddingSettings(cache_dir=default_cache_dir()))\n"
        "print(json.dumps(ingest_demo_corpus(settings)))\n"
    )
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root, "GRPC_VERBOSITY": "NONE"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(data_dir)], env=env, capture_output=True, text=True, check=True, timeout=600
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def add_users(settings: Any, count: int) -> list[str]:
    from researchcrew.runtime import open_runtime
    from researchcrew.service.accounts import Accounts

    async with open_runtime(settings) as runtime:
        accounts = Accounts(await runtime.memory_store())
        return [(await accounts.add_user(f"user{n}")).key for n in range(count)]


def start_server(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    from researchcrew.embedding.embedder import default_cache_dir

    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCHCREW_")}
    env.update(
        {
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
            "RESEARCHCREW_DATA_DIR": str(data_dir),
            "RESEARCHCREW_ENABLED_SOURCES": '["rag", "memory"]',
            "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(default_cache_dir()),
            "HF_HUB_OFFLINE": "1",
            "GRPC_VERBOSITY": "NONE",
        }
    )
    command = [sys.executable, "-c", "from researchcrew.cli import main; main()", "serve", "--port", str(port)]
    with log_path.open("wb") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


async def wait_ready(base: str, process: subprocess.Popen[bytes], log_path: Path) -> float:
    import httpx

    started = time.perf_counter()
    last = "no answer"
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:
        while time.perf_counter() - started < 180:
            if process.poll() is not None:
                raise SystemExit(f"serve exited:\n{_read(log_path)}")
            try:
                response = await client.get("/readyz")
                if response.status_code == 200:
                    return time.perf_counter() - started
                last = response.text
            except httpx.TransportError as error:
                last = repr(error)
            await asyncio.sleep(0.2)
    raise SystemExit(f"serve was not ready within 180 s ({last}):\n{_read(log_path)}")


def _read(path: Path) -> str:
    return path.read_text(errors="replace")


async def sequential_http(base: str, key: str, questions: list[str]) -> dict[str, list[float]]:
    """The baseline's questions over HTTP, one at a time: JSON latency, then SSE latency and first-event delay."""
    import httpx

    auth = {"Authorization": f"Bearer {key}"}
    json_ms: list[float] = []
    json_outside_ms: list[float] = []
    sse_ms: list[float] = []
    first_event_ms: list[float] = []
    async with httpx.AsyncClient(base_url=base, headers=auth, timeout=60) as client:
        session = (await client.post("/v1/sessions", json={})).json()["session_id"]
        for question in WARMUP_QUESTIONS:
            (await client.post(f"/v1/sessions/{session}/messages", json={"question": question})).raise_for_status()
        for question in questions:
            started = time.perf_counter()
            response = await client.post(f"/v1/sessions/{session}/messages", json={"question": question})
            json_ms.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            json_outside_ms.append(json_ms[-1] - response.json()["execution_time_ms"])
            await asyncio.sleep(PAUSE_S)
        for question in questions:
            started = time.perf_counter()
            first: float | None = None
            async with client.stream(
                "POST",
                f"/v1/sessions/{session}/messages",
                json={"question": question},
                headers={"Accept": "text/event-stream"},
            ) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if first is None and line.startswith("event:"):
                        first = (time.perf_counter() - started) * 1000
                    if line == "event: done":
                        break
            sse_ms.append((time.perf_counter() - started) * 1000)
            first_event_ms.append(first if first is not None else float("inf"))
            await asyncio.sleep(PAUSE_S)
    return {"json": json_ms, "json_outside": json_outside_ms, "sse": sse_ms, "first_event": first_event_ms}


async def load(base: str, keys: list[str], per_user: int, time_limit_s: float, pid: int) -> dict[str, Any]:
    import httpx
    import psutil

    server = psutil.Process(pid)
    rss_start = server.memory_info().rss
    peak = rss_start
    stop_sampling = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop_sampling.is_set():
            peak = max(peak, server.memory_info().rss)
            await asyncio.sleep(0.25)

    latencies: list[float] = []
    errors: list[str] = []
    answered = 0
    deadline = time.perf_counter() + time_limit_s
    limits = httpx.Limits(max_connections=len(keys) + 10, max_keepalive_connections=len(keys) + 10)

    async def user(index: int, key: str, client: httpx.AsyncClient) -> None:
        nonlocal answered
        auth = {"Authorization": f"Bearer {key}"}
        created = await client.post("/v1/sessions", json={}, headers=auth)
        if created.status_code != 201:
            errors.append(f"create session: {created.status_code} {created.text[:200]}")
            return
        session = created.json()["session_id"]
        for question in session_script(index, per_user):
            if time.perf_counter() > deadline:
                return
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"/v1/sessions/{session}/messages", json={"question": question}, headers=auth
                )
            except httpx.HTTPError as error:
                errors.append(f"{type(error).__name__}: {error}")
                continue
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code == 200:
                answered += 1
            else:
                errors.append(f"{response.status_code}: {response.text[:200]}")

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        await asyncio.gather(*(user(i, key, client) for i, key in enumerate(keys)))
    elapsed = time.perf_counter() - started
    stop_sampling.set()
    await sampler
    return {
        "users": len(keys),
        "questions_per_user": per_user,
        "answers": answered,
        "errors": len(errors),
        "error_examples": errors[:5],
        "seconds": round(elapsed, 1),
        "answers_per_s": round(answered / elapsed, 2),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p95_ms": round(percentile(latencies, 0.95), 1) if latencies else None,
        "max_ms": round(max(latencies), 1) if latencies else None,
        "server_rss_mb_start": round(rss_start / 2**20, 1),
        "server_rss_mb_peak": round(peak / 2**20, 1),
    }


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 1), "p95_ms": round(percentile(values, 0.95), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50, help="Simulated users at once.")
    parser.add_argument("--questions-per-user", type=int, default=5, help="Questions in each user's session.")
    parser.add_argument("--sequential", type=int, default=20, help="Questions for the overhead measurement.")
    parser.add_argument("--time-limit", type=float, default=300.0, help="No new question after this many seconds.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary data directory.")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.embedding.embedder import default_cache_dir
    from researchcrew.settings import EmbeddingSettings, Settings
    from tests.loopback.server import closed_port

    data_dir = Path(tempfile.mkdtemp(prefix="researchcrew-serve-bench-"))
    settings = Settings(
        data_dir=data_dir, enabled_sources=["rag", "memory"], embedding=EmbeddingSettings(cache_dir=default_cache_dir())
    )
    questions = (QUESTIONS * (1 + args.sequential // len(QUESTIONS)))[: args.sequential]
    process: subprocess.Popen[bytes] | None = None
    try:
        # A Milvus Lite file is one process's: ingest in a child process, serve, stop the server, and only then
        # open the knowledge base here for the in-process baseline.
        corpus = ingest_in_child(data_dir)
        keys = asyncio.run(add_users(settings, args.users + 1))
        port = closed_port()
        base = f"http://127.0.0.1:{port}"
        process = start_server(data_dir, port, data_dir / "serve.log")
        ready_s = asyncio.run(wait_ready(base, process, data_dir / "serve.log"))
        sequential = asyncio.run(sequential_http(base, keys[-1], questions))
        loaded = asyncio.run(load(base, keys[:-1], args.questions_per_user, args.time_limit, process.pid))
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        baseline, baseline_outside = asyncio.run(in_process(settings, questions))
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)

    ask_p50 = statistics.median(baseline)
    http_p50 = statistics.median(sequential["json"])
    # Paired per request, so that load drifting between the two phases (a shared machine) cancels out: the time
    # outside the research Flow (latency - the answer's execution_time_ms), over HTTP and in process.
    overhead = statistics.median(sequential["json_outside"]) - statistics.median(baseline_outside)
    first_event = summary(sequential["first_event"])
    print(
        json.dumps(
            {
                "benchmark": "serve_load",
                "setup": {
                    "llm": None,
                    "enabled_sources": settings.enabled_sources,
                    "demo_corpus": corpus,
                    "workers": 1,
                    "sequential_questions": len(questions),
                    "server_ready_s": round(ready_s, 2),
                },
                "in_process_ask": summary(baseline),
                "http_json": summary(sequential["json"]),
                "http_sse": summary(sequential["sse"]),
                "http_overhead_p50_ms": round(overhead, 1),
                "outside_flow_p50_ms": {
                    "http": round(statistics.median(sequential["json_outside"]), 1),
                    "in_process": round(statistics.median(baseline_outside), 1),
                },
                "p50_difference_ms": round(http_p50 - ask_p50, 1),
                "first_sse_event": first_event,
                "load": loaded,
                "targets": {
                    "errors_at_50_users": 0,
                    "http_overhead_p50_ms": TARGET_OVERHEAD_MS,
                    "first_sse_event_ms": TARGET_FIRST_EVENT_MS,
                },
                "meets_targets": {
                    "errors": loaded["errors"] == 0 and loaded["users"] >= 50,
                    "http_overhead": overhead <= TARGET_OVERHEAD_MS,
                    "first_sse_event": first_event["p50_ms"] <= TARGET_FIRST_EVENT_MS,
                },
                "load_average_1m": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
