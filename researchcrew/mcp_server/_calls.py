"""How a tool call of the MCP door runs: what fails becomes one line (an MCP tool error, ``isError``), never a
traceback; bookkeeping runs alongside the research instead of after it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import McpError
from pydantic import ValidationError

from researchcrew.errors import ResearchCrewError
from researchcrew.redaction import public_text

logger = logging.getLogger(__name__)

T = TypeVar("T")


def one_line(text: str) -> str:
    """A message as a client may see it: credentials and SQL masked, on one line."""
    return " ".join(public_text(text).split()) or "no reason given"


async def guarded(operation: str, work: Awaitable[T], *, error: type[Exception] = ToolError) -> T:
    """Run a tool's work; what fails becomes ``error`` (a tool error: ``isError``) with one line saying why."""
    try:
        return await work
    except (ToolError, ResourceError):
        raise
    except ValidationError as problem:
        raise error(invalid_input(problem)) from problem
    except ResearchCrewError as problem:
        raise error(one_line(str(problem))) from problem
    except McpError as problem:  # the client failed a request of ours (an elicitation it could not show)
        raise error(one_line(f"the client could not answer: {problem.error.message}")) from problem
    except Exception as problem:  # the door's one outermost guard: a bug becomes one line here, the traceback a log
        logger.exception("MCP %s failed", operation)
        raise error(
            f"{operation} failed unexpectedly ({type(problem).__name__}); the server log has the details"
        ) from problem


def invalid_input(problem: ValidationError) -> str:
    reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in problem.errors())
    return one_line(f"invalid input: {reasons}")


class ResearchServer(FastMCP[Any]):
    """FastMCP whose tool errors are one line: the SDK puts its own argument validation's message (several lines of
    Pydantic's) into the error as it is."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):  # the arguments did not fit the tool's signature
                raise ToolError(f"Error executing tool {name}: {invalid_input(cause)}") from error
            raise ToolError(one_line(str(error))) from error


async def alongside(main: Awaitable[T], side: Awaitable[object]) -> T:
    """``main``, with ``side`` (bookkeeping) running at the same time rather than adding its time to the call; both
    must succeed, and ``side`` is cancelled when ``main`` fails."""
    task = asyncio.ensure_future(side)
    try:
        result = await main
    except BaseException:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise
    await task
    return result
