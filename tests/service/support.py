"""Pieces of the service tests: an app over a runtime with in-process sources, a client for it, a live uvicorn
server in a thread (for what ASGITransport cannot show: disconnects, streaming as it happens), and the rule that
a test needing Redis or PostgreSQL fails under CI instead of skipping."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from fastapi import FastAPI

from researchcrew.runtime import Runtime, open_runtime
from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.settings import ServiceSettings, Settings
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.tools.base import Tool
from tests.helpers.services import reachable_redis

QUESTION = "What is metamorphic testing?"
EVIDENCE = (
    "Metamorphic testing checks relations between the outputs of related inputs. "
    "It addresses the oracle problem when expected outputs are unknown."
)


def redis_url() -> str:
    """Redis on this machine (skip, or fail under CI, when it is not running)."""
    return reachable_redis()


def service_settings(data_dir: Path, **service: Any) -> Settings:
    return Settings(data_dir=data_dir, service=ServiceSettings(**service))


def default_tools() -> list[Tool]:
    return [FakeTool("rag", chunks=[fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9)])]


class ServiceHarness:
    """An app, its runtime, and keys for two users (ada and bob)."""

    def __init__(self, app: FastAPI, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime
        self.keys: dict[str, str] = {}

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    async def add_user(self, name: str) -> str:
        issued = await Accounts(await self.runtime.memory_store()).add_user(name)
        self.keys[name] = issued.key
        return issued.key

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://service.test")


H = TypeVar("H", bound=ServiceHarness)


@asynccontextmanager
async def running_service(
    settings: Settings,
    *,
    tools: Sequence[Tool] | None = None,
    harness_class: type[H] = ServiceHarness,  # type: ignore[assignment]
    **runtime_options: Any,
) -> AsyncIterator[H]:
    """The app with its lifespan running (as uvicorn runs it), and keys for ada and bob."""
    runtime = open_runtime(settings, tools=list(tools) if tools is not None else default_tools(), **runtime_options)
    app = create_app(settings, runtime=runtime)
    harness = harness_class(app, runtime)
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
        self.config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        (socket,) = self.server.servers[0].sockets
        host, port = socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def run_in_loop(self, coroutine: Any, timeout: float = 60) -> Any:
        """Run a coroutine on the server's loop (where its runtime lives) and wait for it."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


LIVE_SERVER_START_TIMEOUT_S = 240.0


@contextmanager
def live_server(app: FastAPI) -> Iterator[LiveServer]:
    server = LiveServer(app)

    original_startup = server.server.startup

    async def startup(*args: Any, **kwargs: Any) -> None:
        server.loop = asyncio.get_running_loop()
        await original_startup(*args, **kwargs)

    server.server.startup = startup  # type: ignore[method-assign]
    server.thread.start()
    # The app's start (runtime, migrations, warm-up) took over 60 s at load average 15-20 on 2 cores (a CI run
    # with every schema-fuzz case in error): the wait only has to catch a server that never starts.
    deadline = time.monotonic() + LIVE_SERVER_START_TIMEOUT_S
    while not server.server.started:
        if not server.thread.is_alive():
            raise RuntimeError("the live server did not start")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the live server did not start within {LIVE_SERVER_START_TIMEOUT_S:.0f} s")
        threading.Event().wait(0.05)
    try:
        yield server
    finally:
        server.server.should_exit = True
        server.thread.join(timeout=30)
