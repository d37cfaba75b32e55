"""Any researchcrew ``Tool`` as a crewAI tool, so a crewAI agent can search the same sources the Retriever uses.

``CrewAIToolAdapter(tool)`` is a ``crewai.tools.BaseTool``: its name and description come from the tool, its
arguments are ``query`` and ``num_results``, and it answers with compact text an LLM can read and cite (chunk id,
title, url, date, a bounded excerpt). When the source fails it returns a crewAI ``ToolFailure`` (never raises): the
agent reads one line saying the source failed and why, and crewAI records the call as failed (its
``tool_failure_policy`` decides what happens next).

* ``arun`` / ``_arun`` is the real async path: it awaits ``Tool.search`` on the caller's event loop.
* ``run`` / ``_run`` is the sync path crewAI agents use (often from a worker thread). With no event loop running in
  the calling thread it runs the search with ``asyncio.run``; when a loop *is* running there (a sync call from
  async code) it cannot use that loop without deadlocking, so it runs the search on a private loop in a helper
  thread and blocks until it is done. Tools must therefore not tie resources to one event loop at construction
  (create loop-bound clients per call or lazily per loop).

Importing this module imports crewAI; import it only where an agent is built.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from datetime import datetime
from typing import Any

from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure
from pydantic import BaseModel, Field, PrivateAttr

from researchcrew.contracts.chunks import ContextChunk, SourceFailure
from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.tools.base import Tool, ToolResult

# Bounds on what goes back into the LLM's context: per chunk excerpt and for the whole answer.
DEFAULT_EXCERPT_CHARS = 700
DEFAULT_MAX_OUTPUT_CHARS = 6_000


class ToolSearchArgs(BaseModel):
    """What an agent passes when it calls a researchcrew tool."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to search for.")
    num_results: int = Field(default=5, ge=1, le=20, description="How many results to return.")


class CrewAIToolAdapter(BaseTool):
    """A researchcrew ``Tool`` exposed to crewAI agents (see the module docstring)."""

    args_schema: type[BaseModel] = ToolSearchArgs

    _tool: Tool = PrivateAttr()
    _timeout_s: float = PrivateAttr()
    _context: dict[str, Any] = PrivateAttr()
    _excerpt_chars: int = PrivateAttr()
    _max_output_chars: int = PrivateAttr()

    def __init__(
        self,
        tool: Tool,
        *,
        timeout_s: float = 7.0,
        user_id: str | None = None,
        session_id: str | None = None,
        options: dict[str, Any] | None = None,
        excerpt_chars: int = DEFAULT_EXCERPT_CHARS,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        **base_tool_fields: Any,
    ) -> None:
        """``user_id``/``session_id`` scope the tool to one conversation (memory recall needs them); ``options`` are
        passed to every search (e.g. ``{"domains": [...]}`` for web search)."""
        if not isinstance(tool, Tool):
            raise TypeError(f"expected a researchcrew Tool, got {type(tool).__name__}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        super().__init__(name=tool.name, description=tool.description, **base_tool_fields)
        self._tool = tool
        self._timeout_s = timeout_s
        context: dict[str, Any] = dict(options or {})
        if user_id is not None:
            context["user_id"] = user_id
        if session_id is not None:
            context["session_id"] = session_id
        self._context = context
        self._excerpt_chars = excerpt_chars
        self._max_output_chars = max_output_chars

    @property
    def tool(self) -> Tool:
        """The wrapped researchcrew tool."""
        return self._tool

    async def _arun(self, query: str, num_results: int = 5) -> str | ToolFailure:
        result = await self._tool.search(query, timeout=self._timeout_s, num_results=num_results, **self._context)
        if result.failure is not None:
            return failure_for_agent(result)
        return format_result(result, query, excerpt_chars=self._excerpt_chars, max_output_chars=self._max_output_chars)

    def _run(self, query: str, num_results: int = 5) -> str | ToolFailure:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the usual case in crewAI's tool-execution threads
            return asyncio.run(self._arun(query, num_results))
        # Called synchronously from code running on an event loop: that loop is blocked by this very call, so the
        # search runs on its own loop in a helper thread.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-sync") as pool:
            return pool.submit(asyncio.run, self._arun(query, num_results)).result()


def to_crewai_tools(tools: list[Tool], **adapter_options: Any) -> list[CrewAIToolAdapter]:
    """Wrap several tools at once with the same options (timeout, user/session scope)."""
    return [CrewAIToolAdapter(tool, **adapter_options) for tool in tools]


# Formatting -------------------------------------------------------------------------------------------------


def format_result(
    result: ToolResult,
    query: str,
    *,
    excerpt_chars: int = DEFAULT_EXCERPT_CHARS,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
) -> str:
    """Text for an LLM: one block per chunk with what it needs to cite it, bounded in length."""
    if result.failure is not None:
        return failure_for_agent(result).as_agent_message()
    if not result.chunks:
        return f'{result.tool_name} found no results for "{query}".'
    lines = [f'{result.tool_name}: {len(result.chunks)} result(s) for "{query}".']
    used = len(lines[0])
    for number, chunk in enumerate(result.chunks, start=1):
        block = _chunk_block(number, chunk, excerpt_chars)
        if used + len(block) + 1 > max_output_chars:
            lines.append(f"[{len(result.chunks) - number + 1} more result(s) omitted to stay within length]")
            break
        lines.append(block)
        used += len(block) + 1
    return "\n".join(lines)


def failure_for_agent(result: ToolResult) -> ToolFailure:
    """A failed search as crewAI's structured failure; the agent sees the message (and the kind as its code)."""
    failure = result.failure
    if failure is None:
        raise ValueError("the result did not fail")
    return ToolFailure(
        message=f"{result.tool_name} failed: {failure.message}. No results from this source; do not cite it.",
        code=failure.kind,
        retryable=_retryable(failure),
        details={"source_type": result.source_type, "status_code": failure.status_code},
    )


def _retryable(failure: SourceFailure) -> bool:
    """Whether asking again later may work: timeouts, unreachable servers, 429 and 5xx answers."""
    if failure.kind == "http_error":
        return failure.status_code is None or failure.status_code == 429 or failure.status_code >= 500
    return failure.kind in ("timeout", "unreachable")


def _chunk_block(number: int, chunk: ContextChunk, excerpt_chars: int) -> str:
    header = [f"[{number}] chunk_id={chunk.chunk_id}", f"source={chunk.source_type}"]
    if chunk.title:
        header.append(f"title={_one_line(chunk.title, 200)}")
    if chunk.url:
        header.append(f"url={chunk.url}")
    if chunk.source_date:
        header.append(f"date={_date(chunk.source_date)}")
    header.append(f"relevance={chunk.semantic_relevance:.2f}")
    return " | ".join(header) + "\n    " + _one_line(chunk.content, excerpt_chars)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _date(value: datetime) -> str:
    return value.date().isoformat()
