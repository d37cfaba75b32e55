"""Pieces of the OpenAI-compatible route tests and the browser test: the service app over a runtime with chosen
sources and keys for two users, the official ``openai`` SDK pointed at it (in process through ``ASGITransport``),
and uvicorn serving it on a loopback port in a thread (for a real browser)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from fastapi import FastAPI

from researchcrew.memory.accounts import Accounts
from researchcrew.runtime import Runtime, open_runtime
from researchcrew.service.app import create_app
from researchcrew.settings import ServiceSettings, Settings
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.tools.base import Tool

QUESTION = "What is metamorphic testing?"
EVIDENCE = (
    "Metamorphic testing checks relations between the outputs of related inputs. "
    "It addresses the oracle problem when expected outputs are unknown."
)


def require_service(reason: str) -> None:
    """Something a test needs is absent: fail under CI (CI=true), skip with the reason elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs this: {reason}")
    pytest.skip(reason)


def service_settings(data_dir: Path, **service: Any) -> Settings:
    return Settings(data_dir=data_dir, service=ServiceSettings(**service))


def evidence_tools() -> list[Tool]:
    """A knowledge base that answers with one cited passage, and a web search that fails."""
    chunk = fake_chunk(
        "rag",
        1,
        content=EVIDENCE,
        semantic_relevance=0.9,
        title="Metamorphic Testing: A Review",
        url="https://example.org/metamorphic",
        authors=["T. Y. Chen"],
    )
    return [FakeTool("rag", chunks=[chunk]), FakeTool("web", fail_with=("http_error", "Firecrawl answered HTTP 429"))]


class Harness:
    """An app with its lifespan running, its runtime, and keys for ada and bob."""

    def __init__(self, app: FastAPI, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime
        self.keys: dict[str, str] = {}

    async def add_user(self, name: str) -> str:
        issued = await Accounts(await self.runtime.memory_store()).add_user(name)
        self.keys[name] = issued.key
        return issued.key

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://service.test")

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    @asynccontextmanager
    async def openai(self, user: str = "ada", **options: Any) -> AsyncIterator[openai.AsyncOpenAI]:
        """The official SDK as a user of this app (no retries unless asked: a test sees the first answer)."""
        async with self.http() as http:
            options.setdefault("max_retries", 0)
            yield openai.AsyncOpenAI(
                base_url="http://service.test/v1", api_key=self.keys.get(user, "none"), http_client=http, **options
            )


@asynccontextmanager
async def running_service(
    settings: Settings, *, tools: Sequence[Tool] | None = None, **runtime_options: Any
) -> AsyncIterator[Harness]:
    runtime = open_runtime(settings, tools=list(tools) if tools is not None else evidence_tools(), **runtime_options)
    app = create_app(settings, runtime=runtime)
    harness = Harness(app, runtime)
    try:
        async with app.router.lifespan_context(app):
            if settings.service.auth:
                await harness.add_user("ada")
                await harness.add_user("bob")
            yield harness
    finally:
        await runtime.aclose()


class LiveServer:
    """uvicorn serving an app on a free loopback port, in a thread with its own event loop."""

    def __init__(self, app: FastAPI) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        (sock,) = self.server.servers[0].sockets
        host, port = sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def run(self, coroutine: Any, timeout: float = 60) -> Any:
        """Run a coroutine on the server's loop (where its runtime lives) and wait for its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


@contextmanager
def live_server(app: FastAPI) -> Iterator[LiveServer]:
    server = LiveServer(app)
    original_startup = server.server.startup

    async def startup(*args: Any, **kwargs: Any) -> None:
        server.loop = asyncio.get_running_loop()
        await original_startup(*args, **kwargs)

    server.server.startup = startup  # type: ignore[method-assign]
    server.thread.start()
    for _ in range(1200):
        if server.server.started:
            break
        if not server.thread.is_alive():
            raise RuntimeError("the live server did not start")
        threading.Event().wait(0.05)
    else:
        raise RuntimeError("the live server did not start within 60 s")
    try:
        yield server
    finally:
        server.server.should_exit = True
        server.thread.join(timeout=30)
