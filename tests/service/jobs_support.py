"""Pieces of the batch-job HTTP tests: a running app whose rate limit polling cannot reach, and polling a run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from researchcrew.settings import JobsSettings, ServiceSettings, Settings
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.tools.base import Tool
from tests.service.support import EVIDENCE, ServiceHarness, running_service

QUESTIONS = ["What is metamorphic testing?", "How does metamorphic testing address the oracle problem?"]


def jobs_settings(data_dir: Path, **jobs: Any) -> Settings:
    values = {"concurrency": 2, "retry_backoff_s": 0.01, "retry_backoff_max_s": 0.05, **jobs}
    return Settings(
        data_dir=data_dir,
        service=ServiceSettings(rate_limit="100000/minute"),
        jobs=JobsSettings(**values),
    )


def evidence_tool(delay_s: float = 0.0) -> FakeTool:
    return FakeTool("rag", chunks=[fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9)], delay_s=delay_s)


@asynccontextmanager
async def jobs_service(settings: Settings, tools: Sequence[Tool] | None = None) -> AsyncIterator[ServiceHarness]:
    async with running_service(settings, tools=list(tools) if tools is not None else [evidence_tool()]) as harness:
        yield harness


async def poll(client: httpx.AsyncClient, path: str, auth: dict[str, str], done: Any, timeout_s: float = 30) -> Any:
    """GET ``path`` until ``done(body)``; the last body."""
    body: Any = None
    for _ in range(int(timeout_s / 0.05)):
        response = await client.get(path, headers=auth)
        assert response.status_code == 200, response.text
        body = response.json()
        if done(body):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} did not finish in {timeout_s} s: {body}")


async def finished_run(client: httpx.AsyncClient, run_id: str, auth: dict[str, str]) -> Any:
    return await poll(client, f"/v1/runs/{run_id}", auth, lambda run: run["status"] not in ("queued", "running"))
