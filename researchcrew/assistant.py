"""``ResearchAssistant``: the SDK door. A thin layer over the process's ``Runtime`` (``researchcrew.runtime``): it
turns keyword arguments into a ``ResearchRequest`` and offers synchronous forms for code without an event loop.

    async with ResearchAssistant() as assistant:
        answer = await assistant.ask("What is retrieval-augmented generation?", user_id="ada", session_id="s1")

    assistant = ResearchAssistant(settings=Settings(data_dir="/tmp/rc"))
    answer = assistant.ask_sync("...")         # from synchronous code; reuses one private event loop
    assistant.close()

``ask``'s keyword arguments beyond the user and session are those of ``ResearchRequest`` (``preferred_sources``,
``exclude_sources``, ``tool_options``, ``deadline_s``) and of its ``ResponseOptions`` (``response_format="concise"``,
``max_response_length=300``, ...), for this question only; unknown ones fail fast with the valid names.

Through a running service (``researchcrew serve``) instead of opening the stores in this process — on the same
machine by its Unix socket, elsewhere by its HTTP port and an API key; ``ask``, ``ask_sync`` and ``stream`` give the
same ``FinalResponse`` and progress events (``researchcrew.client``)::

    assistant = ResearchAssistant(service_url="unix:///home/ada/.local/share/researchcrew/service.sock")
    assistant = ResearchAssistant(service_url="http://127.0.0.1:8000", api_key="rc_...")

Deep research (a plan of sub-questions, each researched, references followed, one checked report)::

    run = await assistant.research("What is known about testing ML systems?", user_id="ada")
    if run.awaiting == "clarification":
        run = await assistant.answer_clarification(run.run_id, "metamorphic testing, since 2019", user_id="ada")
    if run.awaiting == "plan_approval":                       # approve, or PlanDecision.edits(run.plan, cut=[3])
        run = await assistant.decide_plan(run.run_id, user_id="ada")
    print(run.report.response.answer)

    run = await assistant.research("...", approve=True)     # batch: no questions, the plan approved as proposed

The operations have one name at every door (SDK, CLI, HTTP): ``research``, ``get_research_run``,
``answer_clarification``, ``decide_plan``, ``resume_research``, ``cancel_research``. ``ask_in_session`` takes a message
as the chat service does: when the session's deep run waits for an answer to its clarifying questions, the message is
that answer (the conversation layer, ``researchcrew.pipeline.conversation``, decides, for every door alike).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from researchcrew.contracts import FinalResponse, ProgressEvent
from researchcrew.contracts.clarification import ClarificationAnswer
from researchcrew.contracts.deep import DeepOptions, DeepProgressEvent, DeepRun, PlanDecision, ReportLength, ReportType
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import ConfigurationError, ResearchCrewError
from researchcrew.pipeline.conversation import ResearchReply
from researchcrew.runtime import Runtime, open_runtime
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool, ToolResult

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.client import ServiceClient
    from researchcrew.contracts.tables import AnswerTable
    from researchcrew.deep.export import ExportedReport
    from researchcrew.jobs.api import Jobs
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.store import MemoryStore
    from researchcrew.pipeline.stages import StructuredStage

logger = logging.getLogger(__name__)


class ResearchAssistant:
    """Ask research questions; get answers in which every claim cites its source.

    Every part can be overridden (tests, SDK users with their own services): ``tools`` replaces the four built-in
    sources, ``llm`` the configured model (``None`` in settings means extractive answers), ``knowledge_base`` and
    ``memory_store`` the embedded defaults.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        tools: Sequence[Tool] | None = None,
        llm: BaseLLM | None = None,
        knowledge_base: KnowledgeBase | None = None,
        memory_store: MemoryStore | None = None,
        remember: bool = True,
        service_url: str | None = None,
        api_key: str | None = None,
        structured: StructuredStage | None = None,
    ) -> None:
        """``service_url`` (``unix:///path/service.sock`` or ``http://host:port``, with ``api_key`` over HTTP): ask
        through that running service; the other arguments describe an in-process runtime and cannot be combined
        with it."""
        if service_url is not None and any(part is not None for part in (tools, llm, knowledge_base, memory_store)):
            raise ConfigurationError(
                "service_url asks a running service: tools, llm, knowledge_base and memory_store are the service's"
            )
        self._client: ServiceClient | None = None
        if service_url is not None:
            from researchcrew.client import ServiceClient

            self._client = ServiceClient(service_url, api_key=api_key)
        self.settings = settings or Settings()
        self._options: dict[str, Any] = {
            "tools": tools,
            "llm": llm,
            "knowledge_base": knowledge_base,
            "memory_store": memory_store,
            "remember": remember,
            "structured": structured,
        }
        self._runtime: Runtime | None = None
        self._jobs: Jobs | None = None
        self._runner: asyncio.Runner | None = None

    @property
    def runtime(self) -> Runtime:
        """The runtime this assistant stands on (opened lazily; reopened after ``aclose``)."""
        if self._client is not None:
            raise ConfigurationError(
                f"this assistant asks the service at {self._client.url}: ask, ask_sync and stream go there; for "
                "the other operations build a ResearchAssistant without service_url"
            )
        if self._runtime is None:
            self._runtime = open_runtime(self.settings, **self._options)
        return self._runtime

    @property
    def jobs(self) -> Jobs:
        """Batch research jobs on this assistant's runtime (``researchcrew.jobs.api.Jobs``): create, run now or
        on a schedule, follow, cancel, resume, export — each call names the user whose jobs they are."""
        if self._jobs is None or self._jobs.runtime is not self.runtime:
            from researchcrew.jobs.api import Jobs

            self._jobs = Jobs(self.runtime)
        return self._jobs

    # Lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open stores and build the pipeline (done on first ``ask``; call it to pay the start-up cost up front).
        Through a service: check that it answers."""
        if self._client is not None:
            await self._client.identity(timeout_s=10.0)
            return
        await self.runtime.stages()

    async def aclose(self) -> None:
        """Finish pending memory work and release resources (background job runs stop; they resume later)."""
        if self._client is not None:
            await self._client.aclose()
        if self._jobs is not None:
            jobs, self._jobs = self._jobs, None
            await jobs.aclose()
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            await runtime.aclose()

    async def flush_memory(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until the memory work of the answers given so far has finished (it runs in the background so that
        answers never wait for it). Returns False if ``timeout_s`` passed first; True at once without memory."""
        return await self.runtime.flush_memory(timeout_s)

    async def __aenter__(self) -> ResearchAssistant:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # A user's memory ----------------------------------------------------------------------------------------
    async def export_memory(self, user_id: str) -> dict[str, Any]:
        """Everything remembered about ``user_id`` (exchanges, entities, relationships, preferences, queued Zep
        writes), JSON-able — the SDK form of ``researchcrew memory export``."""
        self._require_memory()
        return await self.runtime.export_user(user_id)

    async def forget_memory(self, user_id: str) -> dict[str, int]:
        """Delete everything remembered about ``user_id``; with the Zep backend, the user is deleted in Zep too
        (queued in the same transaction, delivered by the outbox). Returns rows deleted per table."""
        self._require_memory()
        return (await self.runtime.forget_user(user_id)).deleted

    async def last_session(self, user_id: str) -> str | None:
        """The session of ``user_id``'s latest remembered exchange, to continue it (None: nothing remembered)."""
        self._require_memory()
        return await self.runtime.last_session(user_id)

    def _require_memory(self) -> None:
        if not self._options["remember"] and self._options["memory_store"] is None:
            raise ConfigurationError("this assistant has no memory store (it was built with remember=False)")

    # Asking ------------------------------------------------------------------------------------------------
    def request(
        self, query: str, *, user_id: str = "default", session_id: str = "default", **options: Any
    ) -> ResearchRequest:
        """The ``ResearchRequest`` that ``ask(query, ...)`` sends: the place where keyword arguments are checked."""
        try:
            return ResearchRequest.from_keywords(query, user_id=user_id, session_id=session_id, **options)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ConfigurationError(f"invalid option for ask(): {problems}") from error
        except ValueError as error:  # an unknown keyword
            raise ConfigurationError(str(error)) from error

    async def ask(
        self, query: str, *, user_id: str = "default", session_id: str = "default", **options: Any
    ) -> FinalResponse:
        """Research ``query`` and return the cited answer. See the module docstring for ``options``."""
        request = self.request(query, user_id=user_id, session_id=session_id, **options)
        if self._client is not None:
            return await self._client.ask(request)
        return await self.runtime.ask(request)

    async def ask_in_session(
        self, message: str, *, user_id: str = "default", session_id: str = "default", **options: Any
    ) -> FinalResponse | DeepRun:
        """A message of a session, taken as ``POST /v1/sessions/{id}/messages`` takes it: the answer to the clarifying
        questions of the session's paused deep run when it is one (the run continues to its next pause or its end;
        the ``DeepRun`` is returned), else ``ask`` (itself the reply to a quick answer's clarifying questions when
        one is open). The same conversation layer decides for both doors."""
        request = self.request(message, user_id=user_id, session_id=session_id, **options)
        turn = await self.runtime.conversation.turn(request)
        if isinstance(turn, ResearchReply):
            return await self.answer_clarification(turn.run_id, turn.answer, user_id=user_id)
        return await self.runtime.ask(request)

    def ask_sync(
        self, query: str, *, user_id: str = "default", session_id: str = "default", **options: Any
    ) -> FinalResponse:
        """``ask`` for synchronous code. All sync calls share one private event loop (the stores opened on it
        stay usable); inside async code use ``await ask(...)`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ResearchCrewError("ask_sync() was called inside a running event loop; use `await ask(...)`")
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self.ask(query, user_id=user_id, session_id=session_id, **options))

    def close(self) -> None:
        """Synchronous ``aclose`` for code that used ``ask_sync``."""
        if self._runner is not None:
            self._runner.run(self.aclose())
            self._runner.close()
            self._runner = None

    async def stream(
        self, query: str, *, user_id: str = "default", session_id: str = "default", **options: Any
    ) -> AsyncIterator[ProgressEvent | FinalResponse]:
        """Yield progress events as the stages run, then the answer (always last)."""
        request = self.request(query, user_id=user_id, session_id=session_id, **options)
        items = self._client.stream(request) if self._client is not None else self.runtime.stream(request)
        async for item in items:
            yield item

    async def search_knowledge_base(self, query: str, *, user_id: str = "default", num_results: int = 5) -> ToolResult:
        """Passages of the knowledge base for ``query`` with their sources, no answer written (``chunks``; a failed
        search is ``failure``). The MCP tool of the same name."""
        return await self.runtime.search_knowledge_base(query, user_id=user_id, num_results=num_results)

    # Deep research ------------------------------------------------------------------------------------------
    def deep_options(
        self,
        *,
        approve: bool = False,
        max_subquestions: int | None = None,
        research_deadline_s: float | None = None,
        token_budget: int | None = None,
        clarify: bool = True,
        follow_references: bool = True,
        length: ReportLength = "standard",
        report_type: ReportType = "report",
    ) -> DeepOptions:
        """The ``DeepOptions`` that ``research(...)`` sends (bad values fail fast, in one line)."""
        try:
            return DeepOptions(
                auto_approve=approve,
                max_subquestions=max_subquestions,
                deadline_s=research_deadline_s,
                token_budget=token_budget,
                clarify=clarify,
                follow_references=follow_references,
                length=length,
                report_type=report_type,
            )
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ConfigurationError(f"invalid option for research(): {problems}") from error

    async def research(
        self,
        question: str,
        *,
        user_id: str = "default",
        session_id: str = "default",
        approve: bool = False,
        max_subquestions: int | None = None,
        research_deadline_s: float | None = None,
        token_budget: int | None = None,
        clarify: bool = True,
        follow_references: bool = True,
        length: ReportLength = "standard",
        report_type: ReportType = "report",
        **options: Any,
    ) -> DeepRun:
        """Start a deep research run. It returns paused (``status == "awaiting_human_feedback"``) with clarifying
        questions or a plan to approve, or — with ``approve=True``, for batch jobs — completed with its report.
        ``length`` is brief, standard or detailed; ``report_type`` report, literature_review or comparison.
        ``research_deadline_s`` and ``token_budget`` are the whole run's; ``options`` are ``ask``'s."""
        request = self.request(question, user_id=user_id, session_id=session_id, **options)
        deep_options = self.deep_options(
            approve=approve,
            max_subquestions=max_subquestions,
            research_deadline_s=research_deadline_s,
            token_budget=token_budget,
            clarify=clarify,
            follow_references=follow_references,
            length=length,
            report_type=report_type,
        )
        return await (await self.runtime.deep_research()).research(request, deep_options)

    async def research_stream(
        self, question: str, *, user_id: str = "default", session_id: str = "default", **options: Any
    ) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        """``research`` as a stream: progress events (per phase and per sub-question), then the run."""
        deep_keys = (
            "approve",
            "max_subquestions",
            "research_deadline_s",
            "token_budget",
            "clarify",
            "follow_references",
            "length",
            "report_type",
        )
        deep_options = self.deep_options(**{key: options.pop(key) for key in deep_keys if key in options})
        request = self.request(question, user_id=user_id, session_id=session_id, **options)
        async for item in (await self.runtime.deep_research()).research_stream(request, deep_options):
            yield item

    async def answer_clarification(
        self, run_id: str, answer: str | ClarificationAnswer, *, user_id: str = "default", resume: bool = True
    ) -> DeepRun:
        """Reply to a paused run's clarifying questions ("just answer" keeps the question as asked) and, unless
        ``resume=False``, continue the run to its next pause or its end."""
        deep = await self.runtime.deep_research()
        run = await deep.answer_clarification(run_id, user_id=user_id, answer=answer)
        return await deep.resume_research(run_id, user_id=user_id) if resume else run

    async def decide_plan(
        self,
        run_id: str,
        decision: PlanDecision | None = None,
        *,
        user_id: str = "default",
        resume: bool = True,
    ) -> DeepRun:
        """Approve (``decision=None``), edit, reorder, cut or cancel a paused run's plan and, unless
        ``resume=False``, continue the run. ``PlanDecision.edits(run.plan, cut=[...], order=[...], reword={...},
        add=[...])`` builds a decision from edits."""
        deep = await self.runtime.deep_research()
        run = await deep.decide_plan(run_id, user_id=user_id, decision=decision or PlanDecision())
        return await deep.resume_research(run_id, user_id=user_id) if resume else run

    async def resume_research(self, run_id: str, *, user_id: str = "default") -> DeepRun:
        """Continue a paused run whose answer or decision was sent with ``resume=False`` (or by another process)."""
        return await (await self.runtime.deep_research()).resume_research(run_id, user_id=user_id)

    async def table(
        self, session_id: str, table_id: str, *, offset: int = 0, limit: int = 50, user_id: str = "default"
    ) -> AnswerTable:
        """Rows ``offset`` .. ``offset + limit`` of a structured answer's table (``FinalResponse.table.table_id``)
        in the user's session. Raises ``TableNotFoundError`` for an unknown table (or another user's)."""
        if offset < 0 or not 1 <= limit <= 10_000:
            raise ConfigurationError(f"offset must be >= 0 and limit 1-10000, got offset={offset}, limit={limit}")
        if self._client is not None:
            from researchcrew.contracts.tables import AnswerTable

            page = await self._client.table(user_id, session_id, table_id, offset=offset, limit=min(limit, 1_000))
            return AnswerTable.model_validate(page)
        stored = await self.runtime.answer_table(user_id, session_id, table_id)
        return stored.page(offset, limit)

    async def export_table(
        self, session_id: str, table_id: str, *, path: str | Path | None = None, user_id: str = "default"
    ) -> str:
        """All rows of a structured answer's table as CSV (guarded against spreadsheet formulas), written to
        ``path`` too when given. Raises ``TableNotFoundError`` for an unknown table (or another user's)."""
        from researchcrew.text.answer_tables import table_csv

        if self._client is not None:
            text = await self._client.table_csv(user_id, session_id, table_id)
        else:
            stored = await self.runtime.answer_table(user_id, session_id, table_id)
            text = table_csv(stored.columns, stored.rows)
        if path is not None:
            await asyncio.to_thread(Path(path).write_text, text, encoding="utf-8", newline="")
        return text

    async def get_research_run(self, run_id: str, *, user_id: str = "default") -> DeepRun:
        """A deep run as it is now."""
        return await (await self.runtime.deep_research()).get_research_run(run_id, user_id=user_id)

    async def cancel_research(self, run_id: str, *, user_id: str = "default") -> DeepRun:
        """Cancel a paused deep run."""
        return await (await self.runtime.deep_research()).cancel_research(run_id, user_id=user_id)

    async def export_report(
        self,
        run_id: str,
        format: str | None = None,
        *,
        path: str | Path | None = None,
        user_id: str = "default",
    ) -> ExportedReport:
        """A completed deep run's report as Markdown, HTML, PDF or DOCX (``format``: md, html, pdf, docx; or from
        ``path``'s extension), written to ``path`` when given. Its ``content``, ``media_type`` and ``file_name``
        are the export."""
        from researchcrew.deep.export import format_for

        chosen = format_for(path, format) if (format or path) else "md"
        exported = await (await self.runtime.deep_research()).export_report(run_id, user_id=user_id, format=chosen)
        if path is not None:
            exported.write(path)
        return exported
