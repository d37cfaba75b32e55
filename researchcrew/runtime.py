"""One runtime per process: everything researchcrew opens, opened lazily, closed once, in order.

Every door (the SDK's ``ResearchAssistant``, each CLI command, the HTTP service, batch workers) stands on a
``Runtime`` instead of opening stores by hand::

    async with open_runtime(settings) as runtime:
        answer = await runtime.ask(ResearchRequest(question="What is metamorphic testing?", user_id="ada"))

    async with open_runtime(settings) as runtime:          # a command that needs only the knowledge base
        stats = await asyncio.to_thread((await runtime.knowledge_base()).stats)

Nothing is opened until asked for, so ``kb stats`` pays neither for crewAI nor for the memory store. What the
pipeline needs (``stages()``) is opened together: the embedding model is loaded once and shared, and the memory
store and the knowledge base start side by side (each costs about a second). ``aclose()`` releases everything in
the order that loses nothing: pending memory writes first, then the Zep outbox worker (its queue is persisted),
the Zep client, the LLM's HTTP clients, the memory store, the knowledge base.

Deep research runs (plan, research, follow references, report, quality check) stand on the same runtime:
``await runtime.deep_research()`` gives their API (``researchcrew.deep.runner.DeepResearch``). Whether a message
answers something waiting in its session (a quick answer's clarifying questions, a paused deep run's) is decided by
``runtime.conversation`` (``researchcrew.pipeline.conversation``), the same for every door.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from researchcrew.contracts import FinalResponse, ProgressEvent, UserPreferences
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import ConfigurationError
from researchcrew.pipeline.conversation import Conversation, RunsOfUser, TableCommand
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool, ToolResult

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.contracts.cost import AnswerCost
    from researchcrew.contracts.deep import DeepReport
    from researchcrew.contracts.follow_up import TokenCount
    from researchcrew.contracts.tables import AnswerTable, TableRow
    from researchcrew.deep.runner import DeepResearch, DeepResources
    from researchcrew.embedding.embedder import Embedder
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.outbox import OutboxWorker
    from researchcrew.memory.records import StoredAnswerTable
    from researchcrew.memory.store import MemoryStore
    from researchcrew.memory.usage_ledger import UsageKind, UsageLedger
    from researchcrew.memory.zep import ZepMemory
    from researchcrew.pipeline.remember.writer import MemoryWriter
    from researchcrew.pipeline.stages import ResearchStages, StructuredStage
    from researchcrew.tools.health import SourceHealth
    from researchcrew.tools.limits import SharedLimits

logger = logging.getLogger(__name__)

_NOT_BUILT: Any = object()  # a lazily built value that may legitimately be None (no LLM configured)
# A memory store that could not be opened is tried again at most this often (by the next question after it).
MEMORY_RETRY_S = 30.0


@dataclass(frozen=True)
class ForgetReport:
    """What forgetting a user did: rows deleted per table, and what happened in Zep (None without Zep)."""

    deleted: dict[str, int]
    zep: str | None = None  # "deleted", "queued: <why>", or None when Zep is not the memory backend


class Runtime:
    """The resources of one process and the pipeline built on them. Build it with ``open_runtime``."""

    def __init__(
        self,
        settings: Settings,
        *,
        tools: Sequence[Tool] | None = None,
        llm: BaseLLM | None = None,
        knowledge_base: KnowledgeBase | None = None,
        memory_store: MemoryStore | None = None,
        remember: bool = True,
        structured: StructuredStage | None = None,
    ) -> None:
        from researchcrew.llm import quiet_crewai

        quiet_crewai()  # before anything imports crewAI (an LLM, deep research; the quick Flow does not)
        self.settings = settings
        self.remember = remember
        self._given_tools = list(tools) if tools is not None else None
        self._llm: BaseLLM | None = llm if llm is not None else _NOT_BUILT
        self._owns_llm = llm is None
        self._knowledge_base = knowledge_base
        self._owns_knowledge_base = knowledge_base is None
        self._memory_store = memory_store
        self._owns_memory_store = memory_store is None
        self._zep: ZepMemory | None = None
        self._outbox_worker: OutboxWorker | None = None
        self._memory_writer: MemoryWriter | None = None
        self._stages: ResearchStages | None = None
        self._limits: SharedLimits | None = None
        self._health: SourceHealth | None = None
        self._tools: list[Tool] | None = None
        self._usage_ledger: UsageLedger | None = None
        self._deep: DeepResearch | None = None
        self._structured = structured  # issue 22: the route choice and structured answers (None: retrieval only)
        # What each message of a session is (a reply to a waiting question, or new), for every door.
        self.conversation = Conversation(
            history=lambda: self._memory_store, research_runs=self._research_runs, tables=lambda: self._memory_store
        )
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        # Why the memory store could not be opened (None: it is open, or not needed); answers come back without
        # memory meanwhile, and opening is tried again after MEMORY_RETRY_S.
        self._memory_failure: str | None = None
        self._memory_retry_at = 0.0

    # Resources, each opened on first use ----------------------------------------------------------------------
    def llm(self) -> BaseLLM | None:
        """The configured LLM (None: answers are extractive and nothing is sent anywhere)."""
        if self._llm is _NOT_BUILT:
            from researchcrew.llm import build_llm

            self._llm = build_llm(self.settings.llm)
        return self._llm

    async def knowledge_base(self) -> KnowledgeBase:
        """The knowledge base (Milvus Lite file or server). It connects on its first operation; a store failure
        raises ``KnowledgeBaseError`` there, with one line saying what went wrong."""
        async with self._lock("knowledge_base"):
            self._check_open()
            if self._knowledge_base is None:
                from researchcrew.knowledge.collection import KnowledgeBase

                if self.settings.milvus.uri is None:
                    self.settings.ensure_data_dir()
                self._knowledge_base = KnowledgeBase(self.settings, embedder=await self._embedder_if_loaded())
            return self._knowledge_base

    async def memory_store(self) -> MemoryStore:
        """The memory store (SQLite file or PostgreSQL), migrated to the newest schema. Raises
        ``MemoryStoreError`` (one line, password masked) when it cannot be opened within
        ``memory.connect_timeout_s``, ``ConfigurationError`` when its URL or data folder is unusable."""
        async with self._lock("memory_store"):
            self._check_open()
            if self._memory_store is None:
                from researchcrew.memory.store import MemoryStore

                embedder = await self._embedder_if_loaded()
                self._memory_store = await MemoryStore.from_settings(self.settings, embedder=embedder)
            return self._memory_store

    async def _memory_store_or_none(self) -> MemoryStore | None:
        """The memory store for the pipeline, or None when it cannot be reached. Memory being down degrades like an
        unreachable knowledge base: the answer comes back, memory is reported as a failed source, and the answer
        says the exchange was not remembered. Configuration mistakes still fail (they will not heal by waiting)."""
        from researchcrew.errors import MemoryStoreError

        try:
            store = await self.memory_store()
        except MemoryStoreError as error:
            self._memory_failure = str(error)
            self._memory_retry_at = time.monotonic() + MEMORY_RETRY_S
            logger.warning("memory store unavailable, answering without memory: %s", error)
            return None
        self._memory_failure = None
        return store

    async def zep(self) -> ZepMemory | None:
        """The Zep client when Zep is the memory backend, else None. Misconfigured Zep is a ConfigurationError."""
        if self.settings.memory.backend != "zep":
            return None
        async with self._lock("zep"):
            if self._zep is None:
                from researchcrew.memory.zep import ZepError, ZepMemory

                try:
                    self._zep = ZepMemory(self.settings.zep)
                except ZepError as error:
                    raise ConfigurationError(f"memory.backend is 'zep' but {error.message}") from error
            return self._zep

    async def outbox_worker(self) -> OutboxWorker | None:
        """The background worker that mirrors memory writes to Zep (started on first use), or None without Zep."""
        zep = await self.zep()
        if zep is None:
            return None
        store = await self.memory_store()
        async with self._lock("outbox"):
            if self._outbox_worker is None:
                from researchcrew.memory.outbox import OutboxWorker

                self._outbox_worker = OutboxWorker(store, zep)
                self._outbox_worker.start()
            return self._outbox_worker

    def shared_limits(self) -> SharedLimits:
        """The limits shared with other processes through Redis (arXiv pacing, Firecrawl cap); per process
        without ``redis.url``. Its Redis clients connect on first use."""
        if self._limits is None:
            from researchcrew.tools.limits import SharedLimits

            self._limits = SharedLimits(self.settings)
        return self._limits

    def source_health(self) -> SourceHealth:
        """Which sources are backing off after a recent failure (``tools/health.py``): this process's, and shared
        with every process using the same Redis when ``redis.url`` is set."""
        if self._health is None:
            from researchcrew.tools.health import SourceHealth

            self._health = SourceHealth(
                self.settings.health,
                client=self.shared_limits().async_client(),
                key_prefix=self.settings.redis.key_prefix,
            )
        return self._health

    async def _connected_knowledge_base(self) -> KnowledgeBase:
        """The knowledge base, connected now (Milvus Lite starts, the collection loads: about a second, paid at
        start-up rather than by the first question). An unreachable one is not fatal: its RAG source retries per
        question and reports the failure meanwhile."""
        from researchcrew.errors import KnowledgeBaseError

        knowledge_base = await self.knowledge_base()
        try:
            await asyncio.to_thread(lambda: knowledge_base.store.client)
        except KnowledgeBaseError as error:
            logger.warning("knowledge base not reachable at start-up: %s", error)
        return knowledge_base

    async def stages(self) -> ResearchStages:
        """The research pipeline: tools, agents and the policies between them, built once."""
        async with self._lock("stages"):
            self._check_open()
            if (
                self._stages is not None
                and self._memory_failure is not None
                and time.monotonic() >= self._memory_retry_at
            ):
                self._stages = None  # the memory store was down: try it again (the rest is reused as it is)
            if self._stages is None:
                self._stages = await self._build_stages()
            return self._stages

    async def _build_stages(self) -> ResearchStages:
        import importlib

        from researchcrew.pipeline.assemble import assemble_stages, default_structured_stage, default_tools

        # The pipeline's modules (their pydantic models) take a moment to import: import them off the event loop
        # now, or the first question blocks every other coroutine of the process that long.
        await asyncio.to_thread(importlib.import_module, "researchcrew.pipeline.flow")

        needs_store = self._memory_store is None and (self.remember or self._given_tools is None)
        needs_knowledge_base = self._given_tools is None and self._knowledge_base is None
        embedder = await asyncio.to_thread(self._load_shared_embedder)
        if needs_store or needs_knowledge_base:
            opening: list[Coroutine[Any, Any, object]] = [self._memory_store_or_none()] if needs_store else []
            opening += [self._connected_knowledge_base()] if needs_knowledge_base else []
            outcomes = await asyncio.gather(*opening, return_exceptions=True)
            failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
            if failures:  # release what did open, so a failed start leaks nothing even without aclose()
                await self._close_stores()
                raise failures[0]
        store = self._memory_store
        zep = await self.zep() if store is not None else None
        tools = self._given_tools
        if tools is None:
            tools = default_tools(
                self.settings,
                knowledge_base=await self.knowledge_base(),
                memory_store=store,
                zep=zep,
                limits=self.shared_limits(),
                memory_unavailable=self._memory_failure,
            )
        self._tools = list(tools)
        llm = self.llm()
        if self.remember and store is not None:
            from researchcrew.pipeline.remember.writer import MemoryWriter

            self._memory_writer = MemoryWriter(store, llm=llm, zep_outbox=await self.outbox_worker())
        structured = self._structured
        if structured is None and self._given_tools is None:  # the built-in sources: their knowledge base's annotations
            structured = default_structured_stage(
                self.settings, knowledge_base=await self.knowledge_base(), memory_store=store, llm=llm
            )
        stages = assemble_stages(
            self.settings,
            tools=tools,
            llm=llm,
            memory_writer=self._memory_writer,
            embedder=embedder,
            memory_unavailable=self._memory_failure if self.remember else None,
            memory_store=store,
            health=self.source_health(),
            structured=structured,
            save_table=self._save_answer_table,
        )
        if llm is not None:  # the price table loads once, here, not in the first answer
            await asyncio.to_thread(stages.pricing.warm)
        return stages

    # The question pipeline ------------------------------------------------------------------------------------
    async def ask(
        self,
        request: ResearchRequest,
        *,
        on_event: Callable[[ProgressEvent], None] | None = None,
        remember: bool = True,
        clarify: bool = True,
    ) -> FinalResponse:
        """Research one question and return the cited answer (never raises for what a source or the evidence
        did; raises ``ConfigurationError`` when the pipeline cannot be built). ``remember=False`` keeps this one
        answer out of memory (batch jobs do, unless the job asks otherwise).

        The answer may be clarifying questions instead (``answer_kind == "clarification"``: nothing found, or far
        more than one answer can carry); the next question of the same session is then taken as the reply ("just
        answer" answers the original question as asked), and its answer asks nothing more — ``self.conversation``
        (``researchcrew.pipeline.conversation``) decides that, as it does for every door. ``clarify=False`` always
        answers."""
        import dataclasses

        from researchcrew.pipeline.flow import run_question

        stages = await self.stages()
        started_at = time.monotonic()  # the run's budget covers this door's own work too (not building the stages)
        if not remember:
            stages = dataclasses.replace(stages, remember=_remember_nothing)
        turn = await self.conversation.quick_turn(request, clarify=clarify)
        if isinstance(turn, TableCommand):  # "show the rest" / "export that table": read from the session's table
            return await self.conversation.table_reply(turn)
        request = turn.request
        preferences = request.response.applied_to(await self.learned_preferences(request.user_id))
        response = await run_question(
            stages,
            request,
            preferences=preferences,
            on_event=on_event,
            allow_clarification=turn.allow_clarification,
            started_at=started_at,
        )
        self.conversation.answered(request, response)
        await self.record_usage(
            request.user_id, "answer", response.response_id, response.token_usage.total, response.cost
        )
        return response

    async def usage_ledger(self) -> UsageLedger | None:
        """What each answer spent, per user (in the memory database); None for a runtime without one
        (``remember=False`` and no store given). Raises ``MemoryStoreError`` when the database cannot be opened."""
        if self._memory_store is None and not self.remember:
            return None
        if self._usage_ledger is None:
            from researchcrew.memory.usage_ledger import UsageLedger

            self._usage_ledger = UsageLedger((await self.memory_store()).engine)
        return self._usage_ledger

    async def record_usage(
        self, user_id: str, kind: UsageKind, response_id: str, tokens: TokenCount, cost: AnswerCost
    ) -> None:
        """Write what an answer or a deep run spent to the usage ledger. Never fails the answer: a database that
        cannot take the row now is logged (the answer has been given; only the usage view misses it)."""
        from sqlalchemy.exc import SQLAlchemyError

        from researchcrew.errors import MemoryStoreError

        try:
            ledger = await self.usage_ledger()
            if ledger is None:
                return
            await ledger.record(user_id=user_id, kind=kind, response_id=response_id, tokens=tokens, cost=cost)
        except (MemoryStoreError, SQLAlchemyError, OSError) as error:
            logger.warning("the usage of answer %s was not recorded: %s", response_id, type(error).__name__)

    async def stream(self, request: ResearchRequest) -> AsyncIterator[ProgressEvent | FinalResponse]:
        """Progress events as the stages run, then the answer (always last). Closing the iterator early cancels
        the question."""
        from researchcrew.pipeline.progress import events_then_result

        async def answer(on_event: Callable[[ProgressEvent], None]) -> FinalResponse:
            return await self.ask(request, on_event=on_event)

        async for item in events_then_result(answer):
            yield item

    async def search_knowledge_base(self, query: str, *, user_id: str = "default", num_results: int = 5) -> ToolResult:
        """Passages of the knowledge base that match ``query``, with their sources, and no answer written: the
        knowledge-base source the pipeline searches (``source_type == "rag"``), called as the Retriever calls it.
        A failed search is data (``ToolResult.failure``); a runtime without a knowledge-base source, or an empty
        query, raises ``ConfigurationError``."""
        if not query.strip():
            raise ConfigurationError("the query is empty: say what to look for")
        if not 1 <= num_results <= 100:
            raise ConfigurationError(f"num_results must be between 1 and 100, got {num_results}")
        await self.stages()
        sources = [tool for tool in self._tools or [] if tool.source_type == "rag"]
        if not sources:
            raise ConfigurationError("no knowledge-base source is configured (the tools given have no 'rag' source)")
        timeout = sources[0].timeout_s or self.settings.retrieval.timeout_per_source_s
        return await sources[0].search(query, timeout=timeout, num_results=num_results, user_id=user_id)

    async def _save_answer_table(
        self,
        *,
        user_id: str,
        session_id: str,
        response_id: str,
        question: str,
        table: AnswerTable,
        rows: Sequence[TableRow],
    ) -> None:
        """A structured answer's result set, persisted with its session in the memory database (opened if this
        runtime has not opened it yet: paging a table needs it even when nothing is remembered)."""
        store = await self.memory_store()
        await store.save_answer_table(
            user_id=user_id, session_id=session_id, response_id=response_id, question=question, table=table, rows=rows
        )

    async def answer_table(self, user_id: str, session_id: str, table_id: str) -> StoredAnswerTable:
        """The whole result set of a structured answer of the user's session (issue 22): ``page`` gives any slice.
        Raises ``TableNotFoundError`` for an unknown table, or another user's or another session's."""
        from researchcrew.errors import TableNotFoundError

        table = await (await self.memory_store()).answer_table(
            user_id=user_id, session_id=session_id, table_id=table_id
        )
        if table is None:
            raise TableNotFoundError(f"no table {table_id!r} in session {session_id!r}")
        return table

    async def last_session(self, user_id: str) -> str | None:
        """The session of ``user_id``'s latest remembered exchange (None: nothing remembered yet)."""
        return await (await self.memory_store()).last_session(user_id=user_id)

    async def learned_preferences(self, user_id: str) -> UserPreferences:
        """What the Memory stage has learned about how ``user_id`` likes answers (defaults without a store, or
        when the store cannot answer now: a question is never refused for want of its preferences)."""
        from researchcrew.errors import MemoryStoreError

        if self._memory_store is None:
            return UserPreferences()
        try:
            return (await self._memory_store.get_preferences(user_id=user_id)).preferences
        except MemoryStoreError as error:
            logger.warning("learned preferences of %s unavailable, using defaults: %s", user_id, error)
            return UserPreferences()

    async def flush_memory(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until the memory work of the answers given so far has finished. False if ``timeout_s`` passed
        first; True at once when nothing is remembered."""
        if self._memory_writer is None:
            return True
        return await self._memory_writer.wait_idle(timeout_s)

    # Deep research -------------------------------------------------------------------------------------------------
    async def deep_research(self) -> DeepResearch:
        """The deep research API on this runtime. Paused runs live in the memory database (any process with the
        same database can resume them); a runtime without a memory store (``remember=False``) keeps them in this
        process only."""
        from researchcrew.deep.persistence import DeepRuns, InProcessDeepRuns
        from researchcrew.deep.runner import DeepResearch
        from researchcrew.deep.store import DeepRunStore

        stages = await self.stages()
        async with self._lock("deep"):
            if self._deep is None:
                has_store = self._memory_store is not None or self.remember
                runs: DeepRuns = DeepRunStore((await self.memory_store()).engine) if has_store else InProcessDeepRuns()

                async def preferences(request: ResearchRequest) -> UserPreferences:
                    return request.response.applied_to(await self.learned_preferences(request.user_id))

                async def record_run(request: ResearchRequest, run_id: str, report: DeepReport) -> None:
                    from researchcrew.contracts.follow_up import TokenCount

                    budget = report.budget  # every LLM call of the run, not only its sub-questions' answers
                    tokens = TokenCount.of(budget.prompt_tokens, budget.completion_tokens)
                    await self.record_usage(request.user_id, "deep_run", run_id, tokens, budget.cost)

                self._deep = DeepResearch(
                    settings=self.settings,
                    runs=runs,
                    open_resources=self._deep_resources,
                    preferences=preferences,
                    remember=stages.remember if self._memory_writer is not None else None,
                    on_finished=record_run,
                )
            return self._deep

    async def _research_runs(self) -> RunsOfUser | None:
        """The deep-run store, for the conversation to find a run waiting in a session: the deep research API's
        when it is built, else the memory database's repository read directly. Building the API for this would
        import crewAI (its Flow) and build the stages, on every service's first ordinary message: seconds of a
        start for a question whose answer is almost always "none waits". Without a memory store, runs live only in
        this process's deep research API: none was started before it is built, so none waits."""
        if self._deep is not None:
            return self._deep.runs
        if self._memory_store is None and not self.remember:
            return None
        from researchcrew.deep.store import DeepRunStore

        return DeepRunStore((await self.memory_store()).engine)

    @asynccontextmanager
    async def _deep_resources(self) -> AsyncIterator[DeepResources]:
        """What one working segment of a deep run runs on. Its own LLM when the runtime builds the LLM from
        settings (so the run's token count is its own), else the one given; stages built on that LLM."""
        from researchcrew.deep.runner import DeepResources
        from researchcrew.llm import build_llm
        from researchcrew.pipeline.assemble import assemble_stages

        await self.stages()
        tools = list(self._tools or [])
        owned = self._owns_llm and self.settings.llm.model is not None
        llm = build_llm(self.settings.llm) if owned else self.llm()
        try:
            stages = assemble_stages(
                self.settings, tools=tools, llm=llm, memory_writer=None, health=self.source_health()
            )
            yield DeepResources(stages=stages, tools=tools, llm=llm)
        finally:
            if owned and llm is not None:
                await _release_llm(llm)

    # A user's memory ------------------------------------------------------------------------------------------
    async def export_user(self, user_id: str) -> dict[str, Any]:
        """Everything remembered about ``user_id``, JSON-able."""
        return await (await self.memory_store()).export_user(user_id=user_id)

    async def forget_user(self, user_id: str, *, deliver_within_s: float | None = None) -> ForgetReport:
        """Delete everything remembered about ``user_id``. With the Zep backend the user is deleted in Zep too:
        queued in the same transaction as the local delete, then delivered by the outbox; with
        ``deliver_within_s`` this waits that long for the delivery and says whether it happened."""
        store = await self.memory_store()
        await self.flush_memory()  # an exchange still being stored must not reappear after forgetting
        if self.settings.memory.backend != "zep":
            return ForgetReport(await store.forget_user(user_id=user_id))
        from researchcrew.memory.outbox import forget_write

        deleted = await store.forget_user(user_id=user_id, then_enqueue=[forget_write(user_id)])
        try:
            worker = await self.outbox_worker()
        except ConfigurationError as error:
            return ForgetReport(deleted, f"queued: {error}")
        if worker is None:  # not reachable: the backend is zep
            raise RuntimeError("the Zep outbox was not started")
        worker.wake()
        if deliver_within_s is None:
            return ForgetReport(deleted, "queued")
        return ForgetReport(deleted, await _zep_deletion_outcome(store, worker, user_id, deliver_within_s))

    # Lifecycle ------------------------------------------------------------------------------------------------
    async def aclose(self, *, memory_flush_s: float = 10.0) -> None:
        """Release everything, in the order that loses nothing. Idempotent. Memory writes still running get up to
        ``memory_flush_s`` to finish (the service gives them its shutdown grace); what is left then is cancelled."""
        self._closed = True
        if self._memory_writer is not None:
            await self._memory_writer.aclose(timeout_s=memory_flush_s)
            self._memory_writer = None
        if self._outbox_worker is not None:  # after the agent: its last writes are queued, delivered later
            await self._outbox_worker.stop()
            self._outbox_worker = None
        if self._zep is not None:
            await self._zep.aclose()
            self._zep = None
        if self._owns_llm and self._llm is not _NOT_BUILT and self._llm is not None:
            await _release_llm(self._llm)
        self._llm = _NOT_BUILT if self._owns_llm else self._llm
        if self._limits is not None:
            limits, self._limits = self._limits, None
            await limits.aclose()
        await self._close_built_tools()
        await self._close_stores()
        self._stages = None
        self._deep = None

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # Helpers --------------------------------------------------------------------------------------------------
    async def _close_built_tools(self) -> None:
        """Close the sources this runtime built (arXiv's HTTP session, a crewAI source's threads); given tools are
        the caller's to close."""
        built = self._tools if self._given_tools is None else None
        self._tools = None
        for tool in built or []:
            close = getattr(tool, "close", None)
            if close is None:
                continue
            try:
                outcome = close()
                if inspect.isawaitable(outcome):
                    await outcome
            except (OSError, RuntimeError) as error:  # already closed, or bound to a finished loop
                logger.debug("closing %s: %s", tool.name, error)

    async def _close_stores(self) -> None:
        """Close the memory store and the knowledge base this runtime opened (given ones stay open)."""
        if self._memory_store is not None and self._owns_memory_store:
            store, self._memory_store = self._memory_store, None
            await store.close()
        if self._knowledge_base is not None and self._owns_knowledge_base:
            knowledge_base, self._knowledge_base = self._knowledge_base, None
            await asyncio.to_thread(knowledge_base.close)

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError("this runtime was closed; open a new one")

    def _load_shared_embedder(self) -> Embedder | None:
        """Load the process-wide embedding model now, so the first question does not wait for it; the knowledge
        base and memory recall share it. None when it cannot be loaded: each part then reports the missing model
        itself, per question, as a failed source."""
        from researchcrew.embedding.embedder import get_embedder
        from researchcrew.errors import ModelUnavailableError

        try:
            return get_embedder(self.settings)
        except ModelUnavailableError as error:
            logger.warning("embedding model unavailable (%s); knowledge base and memory recall will report it", error)
            return None

    async def _embedder_if_loaded(self) -> Embedder | None:
        """The shared model when it is already in memory (``get_embedder`` caches it per process); else None, and
        the part that needs it loads it on first use."""
        from researchcrew.embedding.embedder import loaded_embedder

        return loaded_embedder(self.settings)


def _remember_nothing(_: object) -> bool:
    return False


def open_runtime(
    settings: Settings | None = None,
    *,
    tools: Sequence[Tool] | None = None,
    llm: BaseLLM | None = None,
    knowledge_base: KnowledgeBase | None = None,
    memory_store: MemoryStore | None = None,
    remember: bool = True,
    structured: StructuredStage | None = None,
) -> Runtime:
    """The runtime for ``settings`` (default: from the environment). Nothing is opened yet.

    Overrides, for tests and SDK users with their own services: ``tools`` replaces the built-in sources (then the
    knowledge base is not opened), ``llm`` the configured model, ``knowledge_base`` and ``memory_store`` the
    embedded defaults (given ones are not closed by ``aclose``). ``remember=False`` stores nothing. ``structured``
    answers structured questions from annotations (issue 22; None: normal retrieval only).
    """
    return Runtime(
        settings or Settings(),
        tools=tools,
        llm=llm,
        knowledge_base=knowledge_base,
        memory_store=memory_store,
        remember=remember,
        structured=structured,
    )


async def _zep_deletion_outcome(store: MemoryStore, worker: OutboxWorker, user_id: str, timeout_s: float) -> str:
    """Deliver the queued Zep deletion now: "deleted", or why it is still queued."""
    from researchcrew.memory.outbox import ZEP_DELETE_USER

    await worker.drain(timeout_s=timeout_s)
    queued = [item for item in (await store.export_user(user_id=user_id))["outbox"] if item["kind"] == ZEP_DELETE_USER]
    if queued and all(item["delivered_at"] for item in queued):
        return "deleted"
    errors = [item["last_error"] for item in queued if item["last_error"]]
    return f"queued: Zep: {errors[-1]}" if errors else "queued: Zep did not answer in time"


async def _release_llm(llm: BaseLLM) -> None:
    """Close the HTTP clients of an LLM the runtime built. crewAI's providers keep an ``openai``/``httpx`` client
    pair open for the LLM's lifetime and offer no close method; left open, their pooled sockets outlive the
    runtime (and surface later as ResourceWarnings). Attribute names are those of crewAI 1.15's providers."""
    for name in ("_client", "_async_client"):
        client = getattr(llm, name, None)
        close = getattr(client, "close", None)
        if close is None:
            continue
        try:
            result = close()
            if asyncio.iscoroutine(result):
                await result
        except (OSError, RuntimeError) as error:  # a client already closed or bound to a finished loop
            logger.debug("closing the LLM's %s failed: %s", name, error)
