"""``/mcp``: the MCP server (``researchcrew.mcp_server``) over streamable HTTP, behind the service's API keys.

Each request is authenticated exactly as the routes' are (``auth.authenticated_user``: ``Authorization: Bearer
<key>``, 401 problem+json without a valid one; the local user when ``service.auth`` is off), each POST (one MCP
message) counts against the user's rate limit (429 with ``Retry-After`` past it), then it is handed to the
SDK's streamable-HTTP session manager with the user in the request's scope, where the tools read it. ``ask`` and
each segment of ``research`` take one of the user's places for working questions (``service._slots``, shared with
the chat, OpenAI and deep-run routes); with none free the call is a tool error naming the limit. The session
manager runs inside the app's lifespan (``McpEndpoint.running``); a fresh server is built each time the lifespan
starts, since a session manager runs once.

Sessions of the MCP protocol live in the process that created them. With several server processes (``serve
--workers N``) requests are spread over processes, so the server is stateless there: everything works but
elicitation (a stateless server knows no client capabilities), and ``research`` approves its own plan.
With ``service.auth`` off (loopback hosts only) the SDK's DNS-rebinding protection is on: a web page cannot drive
the local server through a rebinding host name. With keys, the keys protect it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp import Context
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from researchcrew.mcp_server import McpDoor, SessionDirectory, build_server
from researchcrew.service._auth import authenticated_user, bearer_credentials, rate_limited_user
from researchcrew.service._problems import ApiProblem, problem_response
from researchcrew.service._slots import question_slot
from researchcrew.service._state import ServiceState, service_state

if TYPE_CHECKING:
    from fastapi import FastAPI

    from researchcrew.knowledge.library import Library
    from researchcrew.runtime import Runtime

MCP_PATH = "/mcp"
_USER_KEY = "researchcrew.mcp_user"  # where the authenticated user rides in the request scope's state


def _user_of(ctx: Context[Any, Any, Any]) -> str:
    request = ctx.request_context.request
    user = request.scope.get("state", {}).get(_USER_KEY) if isinstance(request, Request) else None
    if not isinstance(user, str):
        raise ToolError("no authenticated user on this request")
    return user


class McpEndpoint:
    """The ASGI endpoint at ``/mcp`` of ``app``."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._manager: StreamableHTTPSessionManager | None = None

    def _state(self) -> ServiceState:
        state = getattr(self.app.state, "service", None)
        if not isinstance(state, ServiceState):
            raise ToolError("the service is not running (it is starting or stopping); retry shortly")
        return state

    def _runtime(self) -> Runtime:
        return self._state().runtime

    def _library(self) -> Library:
        return self._state().library

    async def _sessions(self) -> SessionDirectory:
        return self._state().sessions

    @asynccontextmanager
    async def _question_slot(self, user_id: str, lease_s: float) -> AsyncIterator[None]:
        """One of the user's places for working questions, as the chat and deep-run routes take it (``_slots``); the
        refusal those routes answer with a 429 (or a 402 past the budget) is a tool error with the same reason."""
        async with AsyncExitStack() as held:
            try:
                await held.enter_async_context(question_slot(self._state(), user_id, lease_s=lease_s))
            except ApiProblem as refused:
                raise ToolError(f"{refused.detail} ({refused.status}, {refused.kind or 'refused'})") from refused
            yield

    @asynccontextmanager
    async def running(self, state: ServiceState) -> AsyncIterator[None]:
        """Serve MCP while the app runs (started and stopped by its lifespan). The session manager runs in a task of
        its own: its task group must be left by the task that entered it, and whoever drives the lifespan (uvicorn,
        a test's fixture) may start and stop it from different tasks."""
        options: dict[str, Any] = {"stateless_http": state.settings.service.workers > 1}
        if state.settings.service.auth:
            options["transport_security"] = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        door = McpDoor(
            runtime=self._runtime,
            sessions=self._sessions,
            user_of=_user_of,
            library=self._library,
            question_slots=self._question_slot,
        )
        server = build_server(door, **options)
        server.streamable_http_app()  # makes the session manager
        manager = server.session_manager
        ready, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with manager.run():
                self._manager = manager
                ready.set()
                await stop.wait()

        serving = asyncio.create_task(serve(), name="mcp-session-manager")
        waiting = asyncio.create_task(ready.wait())
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if serving.done():
            serving.result()  # it failed to start: raise why
        try:
            yield
        finally:
            self._manager = None
            stop.set()
            await serving

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            service = service_state(request)
            user = await authenticated_user(service, request, await bearer_credentials(request))
            if request.method == "POST":  # each MCP message counts against the user's rate, as each request does
                await rate_limited_user(service, user)
            if self._manager is None:
                raise ApiProblem(503, "The MCP endpoint is not running (the service is starting or stopping).")
        except ApiProblem as problem:
            response = problem_response(problem.status, problem.detail, headers=problem.headers, kind=problem.kind)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[_USER_KEY] = user.user_id
        await self._manager.handle_request(scope, receive, send)
