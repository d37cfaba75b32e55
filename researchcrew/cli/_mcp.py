"""`researchcrew mcp`: the MCP server over stdio, for Claude Desktop, IDEs and crewAI agents (``mcp_server``).

stdout carries the protocol and nothing else: before the server starts, file descriptor 1 is pointed at stderr, so
a library that prints (or a C extension that writes to fd 1) cannot corrupt the JSON-RPC stream; the protocol keeps
a private copy of the original stdout. Logs go to stderr as for every command.

The server runs in this process on its own runtime (the same stores as ``researchcrew ask``); the pipeline is
warmed in the background while the client initializes, so the first question does not pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from io import TextIOWrapper
from typing import TYPE_CHECKING, Any

import click

from researchcrew.cli._common import load_settings, with_runtime

if TYPE_CHECKING:
    from researchcrew.mcp_server import SessionDirectory
    from researchcrew.runtime import Runtime

logger = logging.getLogger(__name__)


@click.command()
@click.option(
    "--user",
    "user_id",
    default="local",
    show_default=True,
    envvar="RESEARCHCREW_USER",
    help="Whose memory and sessions the tools use (the one person at the other end of stdio).",
)
def mcp(user_id: str) -> None:
    """Run the MCP server over stdio: tools ask, search_knowledge_base, research, list_sessions."""
    if not user_id.strip():
        raise click.UsageError("--user must not be empty")
    settings = load_settings()
    protocol_out = _take_stdout()
    with_runtime(lambda runtime: serve_stdio(runtime, user_id, protocol_out), settings)


def _take_stdout() -> TextIOWrapper:
    """The process's stdout for the protocol alone; fd 1 (and ``sys.stdout``) go to stderr from now on."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return TextIOWrapper(os.fdopen(private, "wb"), encoding="utf-8")


async def serve_stdio(runtime: Runtime, user_id: str, protocol_out: TextIOWrapper) -> None:
    """Serve MCP on stdin and ``protocol_out`` until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    from researchcrew.mcp_server import McpDoor, build_server
    from researchcrew.service.chat_sessions import ChatSessions

    sessions: list[ChatSessions] = []

    async def directory() -> SessionDirectory:
        if not sessions:
            sessions.append(ChatSessions(await runtime.memory_store()))
        return sessions[0]

    server = build_server(McpDoor(runtime=lambda: runtime, sessions=directory, user_of=lambda _: user_id))
    warming = asyncio.create_task(_warm(runtime))
    try:
        async with stdio_server(stdout=anyio.wrap_file(protocol_out)) as (read_stream, write_stream):
            lowlevel: Any = server._mcp_server  # FastMCP.run_stdio_async, with our own stdout
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        warming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await warming


async def _warm(runtime: Runtime) -> None:
    """Build the pipeline now (crewAI, the embedding model, the stores): about seconds the first call would wait."""
    from researchcrew.errors import ResearchCrewError

    try:
        await runtime.stages()
    except ResearchCrewError as error:  # the first tool call reports it, in one line
        logger.warning("the research pipeline could not be prepared: %s", error)
