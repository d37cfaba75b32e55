"""What the OpenAI-compatible route adds to an answer, compared with the native messages route; and how soon a
streamed answer shows its first progress line and its first words.

    .venv/bin/python benchmarks/openai_routes.py [--questions 60]

The service app served by uvicorn on a loopback port in this process (the official ``openai`` SDK and httpx as
clients; a real server, so that a stream arrives as it is sent), a real SQLite memory store with the packaged
embedding model, and two in-process sources: a knowledge base that answers in 50 ms and a web search that fails at
once. The answers are extractive (no LLM): what is measured is the service, not a model.

* ``route``: the cost of the route itself. The pipeline is replaced by a recorded answer (returned at once), so that
  what remains is the HTTP handling, authentication, limits, sessions and rendering. Per request: wall time and CPU
  time of this process (server and client; the CPU time is what a loaded shared machine changes least). Routes:
  native ``POST /v1/sessions/{id}/messages`` (JSON), openai ``POST /v1/chat/completions`` with a new conversation
  each time (its session is derived and recorded), and openai_follow_up, one conversation continued (the whole
  history resent). Interleaved question by question, so that a busy moment hits every route alike.
  ``overhead_cpu_ms`` is openai's median CPU time minus native's (target ≤ 10 ms).
* ``end_to_end``: the real pipeline, streamed: time to the first chunk, the first ``reasoning_content`` line (a
  source answering), the first ``content`` and ``[DONE]``; and the JSON route's latency.

``--questions`` per route, after 3 warm-up ones. Prints one JSON document.
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
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test helpers live in tests/

import httpx
import openai
import uvicorn

from benchmarks.machine import describe_cpu
from researchcrew.contracts import FinalResponse
from researchcrew.contracts.request import ResearchRequest
from researchcrew.runtime import Runtime, open_runtime
from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.settings import EmbeddingSettings, ServiceSettings, Settings
from researchcrew.testing import FakeTool, fake_chunk
from tests.e2e.support import MODEL_CACHE_DIR

TARGET_OVERHEAD_MS = 10.0
EVIDENCE = (
    "Metamorphic testing checks relations between the outputs of related inputs. "
    "It addresses the oracle problem when expected outputs are unknown."
)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 2),
        "max": round(ordered[-1], 2),
    }


class Timings:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    async def time(self, call: Callable[[int], Awaitable[Any]], i: int) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        await call(i)
        self.cpu.append((time.process_time() - cpu) * 1000)
        self.wall.append((time.perf_counter() - wall) * 1000)

    def report(self) -> dict[str, dict[str, float]]:
        return {"wall_ms": summary(self.wall), "cpu_ms": summary(self.cpu)}


async def main(questions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(
            data_dir=Path(data_dir),
            embedding=EmbeddingSettings(cache_dir=MODEL_CACHE_DIR),
            service=ServiceSettings(rate_limit="100000/minute", max_concurrent_questions=100),
        )
        chunk = fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9, url="https://example.org/mt")
        tools = [
            FakeTool("rag", chunks=[chunk], delay_s=0.05),
            FakeTool("web", fail_with=("http_error", "Firecrawl answered HTTP 429")),
        ]
        runtime = open_runtime(settings, tools=tools)
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings, runtime=runtime), host="127.0.0.1", port=0, log_level="error")
        )
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                if serving.done():
                    raise RuntimeError("uvicorn did not start")
                await asyncio.sleep(0.05)
            (sock,) = server.servers[0].sockets
            base = f"http://127.0.0.1:{sock.getsockname()[1]}"
            key = (await Accounts(await runtime.memory_store()).add_user("bench")).key
            async with httpx.AsyncClient(base_url=base, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
                client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, http_client=http)
                end_to_end = await pipeline_timings(questions, http, client, runtime)
                route = await route_timings(questions, http, client, runtime)
        finally:
            server.should_exit = True
            await serving
            await runtime.aclose()
    overhead = route["openai"]["cpu_ms"]["p50"] - route["native"]["cpu_ms"]["p50"]
    return {
        "benchmark": "openai_routes",
        "questions": questions,
        "machine": describe_cpu(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "route": route,
        "end_to_end": end_to_end,
        "overhead_cpu_ms": round(overhead, 2),
        "overhead_wall_ms": round(route["openai"]["wall_ms"]["p50"] - route["native"]["wall_ms"]["p50"], 2),
        "target_overhead_ms": TARGET_OVERHEAD_MS,
        "met": overhead <= TARGET_OVERHEAD_MS,
    }


def routes(
    http: httpx.AsyncClient, client: openai.AsyncOpenAI, session: str
) -> dict[str, Callable[[int], Awaitable[Any]]]:
    history: list[dict[str, str]] = []

    async def native(i: int) -> None:
        response = await http.post(
            f"/v1/sessions/{session}/messages", json={"question": f"What is metamorphic testing? ({i})"}
        )
        response.raise_for_status()

    async def completion(i: int) -> None:
        await client.chat.completions.create(
            model="researchcrew", messages=[{"role": "user", "content": f"What is metamorphic testing? ({i})"}]
        )

    async def follow_up(i: int) -> None:
        history.append({"role": "user", "content": f"And what about case {i}?"})
        answer = await client.chat.completions.create(model="researchcrew", messages=list(history))
        history.append({"role": "assistant", "content": answer.choices[0].message.content or ""})

    return {"native": native, "openai": completion, "openai_follow_up": follow_up}


async def route_timings(
    questions: int, http: httpx.AsyncClient, client: openai.AsyncOpenAI, runtime: Runtime
) -> dict[str, dict[str, dict[str, float]]]:
    recorded = await runtime.ask(ResearchRequest(question="What is metamorphic testing?", user_id="bench"))
    await runtime.flush_memory()

    async def replay(request: ResearchRequest, **options: Any) -> FinalResponse:
        return recorded.model_copy(update={"response_id": uuid.uuid4().hex})

    runtime.ask = replay  # type: ignore[method-assign]
    session = (await http.post("/v1/sessions")).json()["session_id"]
    calls = routes(http, client, session)
    timings = {name: Timings() for name in calls}
    for i in range(-3, questions):
        for name, call in calls.items():
            await (timings[name].time(call, i) if i >= 0 else call(i))
    return {name: timing.report() for name, timing in timings.items()}


async def pipeline_timings(
    questions: int, http: httpx.AsyncClient, client: openai.AsyncOpenAI, runtime: Runtime
) -> dict[str, Any]:
    session = (await http.post("/v1/sessions")).json()["session_id"]
    calls = routes(http, client, session)
    json_route = Timings()
    marks: dict[str, list[float]] = {"first_chunk": [], "first_reasoning": [], "first_content": [], "done": []}
    for i in range(-3, questions):
        await (json_route.time(calls["openai"], i) if i >= 0 else calls["openai"](i))
        started = time.perf_counter()
        seen: dict[str, float] = {}
        stream = await client.chat.completions.create(
            model="researchcrew",
            messages=[{"role": "user", "content": f"How are flaky tests found? ({i})"}],
            stream=True,
        )
        async for chunk in stream:
            now = (time.perf_counter() - started) * 1000
            seen.setdefault("first_chunk", now)
            delta = chunk.choices[0].delta if chunk.choices else None
            if delta is not None and getattr(delta, "reasoning_content", None):
                seen.setdefault("first_reasoning", now)
            if delta is not None and delta.content:
                seen.setdefault("first_content", now)
        seen["done"] = (time.perf_counter() - started) * 1000
        if i >= 0:
            for name, values in marks.items():
                values.append(seen[name])
        await runtime.flush_memory()
    return {"openai_json": json_route.report(), "openai_stream_ms": {name: summary(v) for name, v in marks.items()}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=60, help="Timed questions per route (after 3 warm-up).")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(json.dumps(asyncio.run(main(arguments.questions)), indent=2))
