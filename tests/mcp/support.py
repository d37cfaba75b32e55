"""Pieces of the MCP tests: the service on a loopback uvicorn with keys for ada and bob, and an MCP client session
(the official SDK's ``ClientSession``) on its ``/mcp`` endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool
from tests.service.support import LiveServer, live_server, service_settings

Elicit = Callable[[RequestContext[ClientSession, Any], ElicitRequestParams], Awaitable[ElicitResult]]


@dataclass
class McpService:
    """A live service and the API keys of its users."""

    server: LiveServer
    app: FastAPI
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"{self.server.url}/mcp"

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    def flush_memory(self) -> None:
        """Wait until the answers given so far are remembered (memory is written after the answer goes out)."""
        assert self.server.run_in_loop(self.app.state.service.runtime.flush_memory())


@contextmanager
def mcp_service(data_dir: Path, tools: Sequence[Tool] | None, **service: Any) -> Iterator[McpService]:
    """The service (its own runtime over ``tools``; None: the built-in sources over the data folder's knowledge
    base) on a free loopback port, with keys for ada and bob. Deep plans are judged in the probe: the six-passage
    corpus answers nearly every query with the same passages, so checked against it a plan keeps one sub-question
    (tests/deep/test_plan_checks.py), and these tests leave out items of a plan of several."""
    settings: Settings = service_settings(data_dir, **service)
    settings = settings.model_copy(update={"deep": settings.deep.model_copy(update={"plan_checks": 0})})
    app = create_app(settings, tools=list(tools) if tools is not None else None)
    with live_server(app) as server:
        running = McpService(server, app)
        if settings.service.auth:

            async def add(name: str) -> str:
                return (await Accounts(await app.state.service.runtime.memory_store()).add_user(name)).key

            for name in ("ada", "bob"):
                running.keys[name] = server.run_in_loop(add(name))
        yield running


@asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str] | None = None, *, elicit: Elicit | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session over streamable HTTP."""
    async with (
        httpx.AsyncClient(headers=headers or {}, timeout=httpx.Timeout(120, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


class ProgressLog:
    """A progress callback that keeps what it was sent."""

    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))

    @property
    def messages(self) -> list[str]:
        return [message or "" for _, _, message in self.updates]
