"""The MCP server: researchcrew's operations as MCP tools and resources, on the official SDK's ``FastMCP``.

``build_server(door)`` makes the server; ``researchcrew mcp`` runs it over stdio (``researchcrew.cli._mcp``), and the
HTTP service mounts it as streamable HTTP at ``/mcp`` behind its API keys (``researchcrew.service._mcp_http``).

Tools (each named as the operation is named at the other doors):

* ``ask`` — a cited answer: the answer and its numbered sources as text, the same as structured content;
* ``search_knowledge_base`` — passages of the knowledge base with their sources, no synthesis;
* ``research`` — deep research: the plan goes to the user for approval through elicitation when the client can
  elicit, and is approved by the run itself when it cannot; progress notifications per phase and sub-question;
* ``list_sessions`` — the user's sessions.

Resources: ``researchcrew://sessions/{session_id}`` (a session's history) and ``researchcrew://reports/{run_id}`` (a
finished deep-research report).

Everything goes through the runtime (``runtime.ask``, ``runtime.search_knowledge_base``, ``runtime.deep_research``)
and its conversation layer, exactly as the SDK, the CLI and HTTP do. A failure is an MCP tool error (``isError``)
with one line saying why, credentials masked (``redaction.public_text``), never a traceback.

FastMCP rather than the low-level ``Server``: the tools' input and output schemas come from their signatures and
Pydantic models (the same models the rest of the code base uses), and it gives ``Context.report_progress``,
``Context.elicit`` with schema validation, resource templates and the streamable-HTTP session manager; the low-level
server would make us write each of those by hand.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from researchcrew.contracts.query import ResponseFormat
from researchcrew.contracts.request import ResearchRequest, ResponseOptions
from researchcrew.mcp_server import _results as results
from researchcrew.mcp_server._calls import ResearchServer, alongside, guarded, one_line
from researchcrew.mcp_server._documents import register_add_document
from researchcrew.mcp_server._research import run_research
from researchcrew.runtime import Runtime

if TYPE_CHECKING:
    from researchcrew.knowledge.library import Library

logger = logging.getLogger(__name__)

SERVER_NAME = "researchcrew"
INSTRUCTIONS = (
    "Research answers in which every claim cites its source. `ask` answers a question from the knowledge base, "
    "the web, arXiv and the conversation so far; `search_knowledge_base` returns passages without an answer; "
    "`research` runs a deep, planned investigation and writes a report. Pass the same session_id to continue a "
    "conversation."
)


class SessionRow(Protocol):
    """A session as the session directory lists it."""

    @property
    def session_id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def exchanges(self) -> int: ...


class SessionDirectory(Protocol):
    """The users' sessions (``service.chat_sessions.ChatSessions``, which stands beside this door)."""

    async def list_sessions(self, user_id: str, *, limit: int = 50, offset: int = 0) -> Sequence[SessionRow]: ...
    async def ensure(self, user_id: str, session_id: str, *, first_question: str) -> bool: ...
    async def touch(self, user_id: str, session_id: str, *, question: str | None = None) -> bool: ...


QuestionSlots = Callable[[str, float], AbstractAsyncContextManager[object]]
"""``slots(user_id, lease_s)``: hold one of the user's places for working questions while the block runs; raises a
``ToolError`` saying why when none is free."""


def _no_slots(user_id: str, lease_s: float) -> AbstractAsyncContextManager[object]:
    return contextlib.nullcontext()


@dataclass(frozen=True)
class McpDoor:
    """What the tools stand on: the process's runtime, the session directory, and who the caller is."""

    runtime: Callable[[], Runtime]
    sessions: Callable[[], Awaitable[SessionDirectory]]
    user_of: Callable[[Context[Any, Any, Any]], str]
    # The service's documents (its Library); None on stdio, where `add_document` says to use `researchcrew ingest`.
    library: Callable[[], Library | None] = lambda: None
    # The service's per-user places for working questions (``service.max_concurrent_questions``), which `ask` and
    # each segment of `research` take as the HTTP routes do; none on stdio (one user's own process).
    question_slots: QuestionSlots = _no_slots


async def refuse_over_budget(runtime: Runtime, user_id: str) -> None:
    """A tool error when the user's monthly budget is spent (the same rule and words as the HTTP routes' 402)."""
    from researchcrew.memory.usage_ledger import over_budget

    budget = runtime.settings.service.monthly_budget_usd
    ledger = await runtime.usage_ledger() if budget is not None else None
    if ledger is not None and (refusal := await over_budget(ledger, user_id, budget)) is not None:
        raise ToolError(refusal)


OPERATION_MS = "researchcrew/operation_ms"  # _meta key: the runtime operation's own time, measured in the server


def _tool_result(text: str, structured: BaseModel, operation_s: float | None = None) -> CallToolResult:
    """The result: ``text`` for the reader, ``structured`` as structured content, and how long the runtime operation
    took in ``_meta`` (what the door adds to a call is the caller's time minus this)."""
    meta = {OPERATION_MS: round(operation_s * 1000, 3)} if operation_s is not None else None
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent=structured.model_dump(mode="json"),
        _meta=meta,
    )


Question = Annotated[str, Field(min_length=1, max_length=4_000, description="The question, in plain words.")]
SessionArg = Annotated[
    str | None,
    Field(default=None, min_length=1, max_length=256, description="Continue this session; none: a new one."),
]


def build_server(door: McpDoor, **settings: Any) -> FastMCP[Any]:
    """The MCP server over ``door``. ``settings`` are FastMCP's (``stateless_http``, ``transport_security``...)."""
    # FastMCP's constructor calls logging.basicConfig (a Rich handler on the root logger) in a process whose logging
    # is not configured yet (a uvicorn worker): the process's own logging is left as it was.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = ResearchServer(SERVER_NAME, instructions=INSTRUCTIONS, streamable_http_path="/", **settings)
    root.handlers[:] = handlers
    root.setLevel(level)

    async def record_session(user_id: str, session_id: str, question: str) -> None:
        """The session in the user's list (made with its first question as title, or marked used now)."""
        sessions = await door.sessions()
        if not await sessions.ensure(user_id, session_id, first_question=question):
            await sessions.touch(user_id, session_id, question=question)

    @server.tool(annotations=ToolAnnotations(title="Ask a research question", readOnlyHint=False, openWorldHint=True))
    async def ask(
        question: Question,
        ctx: Context[Any, Any, Any],
        sources: Annotated[
            list[str] | None,
            Field(default=None, description='Source types to prefer: "rag", "web", "arxiv", "memory".'),
        ] = None,
        format: Annotated[  # the operation's argument name at every door
            ResponseFormat | None, Field(default=None, description="Answer style: concise, detailed or technical.")
        ] = None,
        session_id: SessionArg = None,
    ) -> Annotated[CallToolResult, results.AskResult]:
        """Research a question and answer it with numbered citations ([n]) to the sources it used."""

        async def work() -> CallToolResult:
            from researchcrew.mcp_server._progress import ProgressRelay

            user_id, chosen = door.user_of(ctx), session_id or uuid.uuid4().hex
            await refuse_over_budget(door.runtime(), user_id)
            request = ResearchRequest(
                question=question,
                user_id=user_id,
                session_id=chosen,
                preferred_sources=sources,
                response=ResponseOptions(response_format=format),
            )
            deadline = request.deadline_s or door.runtime().settings.retrieval.run_deadline_s
            async with door.question_slots(user_id, deadline), ProgressRelay(ctx) as progress:
                started = time.perf_counter()
                asking = door.runtime().ask(request, on_event=progress.stage)
                response = await alongside(asking, record_session(user_id, chosen, question))
                finished = time.perf_counter()
            answer = results.ask_result(response, chosen)
            text = answer.answer + results.sources_text(answer.citations)
            return _tool_result(text, answer, finished - started)

        return await guarded("ask", work())

    @server.tool(annotations=ToolAnnotations(title="Search the knowledge base", readOnlyHint=True))
    async def search_knowledge_base(
        query: Annotated[str, Field(min_length=1, max_length=4_000, description="What to look for.")],
        ctx: Context[Any, Any, Any],
        num_results: Annotated[int, Field(default=5, ge=1, le=50, description="At most this many passages.")] = 5,
    ) -> Annotated[CallToolResult, results.SearchResult]:
        """Passages of the local knowledge base that match the query, with their sources; no answer is written."""

        async def work() -> CallToolResult:
            started = time.perf_counter()
            found = await door.runtime().search_knowledge_base(
                query, user_id=door.user_of(ctx), num_results=num_results
            )
            operation_s = time.perf_counter() - started
            if found.failure is not None:
                raise ToolError(
                    one_line(
                        f"the knowledge base could not be searched ({found.failure.kind}): {found.failure.message}"
                    )
                )
            result = results.SearchResult(query=query, passages=[results.passage(chunk) for chunk in found.chunks])
            return _tool_result(results.passages_text(result), result, operation_s)

        return await guarded("search_knowledge_base", work())

    @server.tool(annotations=ToolAnnotations(title="Deep research", readOnlyHint=False, openWorldHint=True))
    async def research(
        question: Question,
        ctx: Context[Any, Any, Any],
        max_subquestions: Annotated[
            int | None, Field(default=None, ge=1, le=12, description="Most sub-questions the plan may hold.")
        ] = None,
        session_id: SessionArg = None,
    ) -> Annotated[CallToolResult, results.ResearchResult]:
        """Deep research: a plan of sub-questions (sent to you for approval when your client supports it), each
        researched, then one checked report with numbered citations. Takes minutes; reports progress."""

        async def work() -> CallToolResult:
            user_id, chosen = door.user_of(ctx), session_id or uuid.uuid4().hex
            await refuse_over_budget(door.runtime(), user_id)
            request = ResearchRequest(question=question, user_id=user_id, session_id=chosen)
            deep = await door.runtime().deep_research()
            lease_s = door.runtime().settings.deep.deadline_s
            researching = run_research(
                ctx,
                deep,
                request,
                max_subquestions=max_subquestions,
                segment=lambda: door.question_slots(user_id, lease_s),
            )
            outcome = await alongside(researching, record_session(user_id, chosen, question))
            text = outcome.report or f"Deep run {outcome.run_id}: {outcome.status}. {outcome.note or ''}".strip()
            return _tool_result(text + results.sources_text(outcome.citations), outcome)

        return await guarded("research", work())

    @server.tool(annotations=ToolAnnotations(title="List your sessions", readOnlyHint=True))
    async def list_sessions(
        ctx: Context[Any, Any, Any],
        limit: Annotated[int, Field(default=20, ge=1, le=200, description="At most this many.")] = 20,
    ) -> Annotated[CallToolResult, results.SessionsResult]:
        """Your sessions, most recently used first; read one with the resource researchcrew://sessions/{id}."""

        async def work() -> CallToolResult:
            rows = await (await door.sessions()).list_sessions(door.user_of(ctx), limit=limit)
            listed = results.SessionsResult(
                sessions=[
                    results.SessionSummary(
                        session_id=row.session_id, title=row.title, updated_at=row.updated_at, exchanges=row.exchanges
                    )
                    for row in rows
                ]
            )
            lines = [f"{s.session_id}  {s.title}  ({s.exchanges} exchanges)" for s in listed.sessions]
            return _tool_result("\n".join(lines) or "No sessions yet.", listed)

        return await guarded("list_sessions", work())

    register_add_document(server, library=door.library, settings=lambda: door.runtime().settings, user_of=door.user_of)

    @server.resource("researchcrew://sessions/{session_id}", mime_type="text/markdown", title="A session's history")
    # Resource functions take the bare ``Context``: the SDK validates their arguments, and a parametrized
    # ``Context[...]`` annotation makes it rebuild the context without its request (mcp 1.30).
    async def session_history(session_id: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """The questions and cited answers of one of your sessions, oldest first."""

        async def work() -> str:
            store = await door.runtime().memory_store()
            exchanges = await store.history(user_id=door.user_of(ctx), session_id=session_id, limit=100)
            if not exchanges:
                raise ResourceError(f"no session {session_id!r} with answered questions")
            return "\n\n".join(f"## {e.question}\n\n{e.answer}" for e in exchanges)

        return await guarded("reading a session", work(), error=ResourceError)

    @server.resource("researchcrew://reports/{run_id}", mime_type="text/markdown", title="A deep-research report")
    async def research_report(run_id: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """The report of one of your finished deep-research runs, with its numbered sources."""

        async def work() -> str:
            deep = await door.runtime().deep_research()
            run = await deep.get_research_run(run_id, user_id=door.user_of(ctx))
            if run.report is None:
                raise ResourceError(f"deep run {run_id} has no report (it is {run.status})")
            sources = results.sources_text(results.cited_sources(run.report.response.citations))
            return f"# {run.report.question}\n\n{run.report.response.answer}{sources}"

        return await guarded("reading a report", work(), error=ResourceError)

    return server
