"""``ResearchAssistant``: the SDK entry point. Builds the tools and agents from ``Settings`` (or takes the ones you
pass), runs each question through the ResearchFlow, and owns the resources that outlive one question (the
knowledge base connection, the memory store, the background memory work).

    async with ResearchAssistant() as assistant:
        answer = await assistant.ask("What is retrieval-augmented generation?", user_id="ada", session_id="s1")

    assistant = ResearchAssistant(settings=Settings(data_dir="/tmp/rc"))
    answer = assistant.ask_sync("...")         # from synchronous code; reuses one private event loop
    assistant.close()

Every keyword argument of ``ask`` beyond the routing ones is a ``UserPreferences`` field for this question only
(``response_format="concise"``, ``max_response_length=300``, ...); unknown ones fail fast with the valid names.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from researchcrew.contracts import FinalResponse, ProgressEvent, Query, UserPreferences
from researchcrew.errors import ConfigurationError, ResearchCrewError
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.store import MemoryStore
    from researchcrew.pipeline.stages import ResearchStages

logger = logging.getLogger(__name__)

_ROUTING_KEYWORDS = ("preferred_sources", "exclude_sources", "tool_options", "deadline_s")


def _quiet_crewai() -> None:
    """crewAI sends telemetry and traces unless told not to; researchcrew never does (set before crewAI is
    imported, also when no LLM is configured: the Flow itself is crewAI). Models load from local files only."""
    from researchcrew.llm import quiet_crewai

    quiet_crewai()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


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
    ) -> None:
        _quiet_crewai()
        self.settings = settings or Settings()
        self._given_tools = list(tools) if tools is not None else None
        self._llm = llm
        self._knowledge_base = knowledge_base
        self._memory_store = memory_store
        self._owns_memory_store = memory_store is None
        self._owns_knowledge_base = knowledge_base is None
        self._remember = remember
        self._stages: ResearchStages | None = None
        self._memory_agent: Any = None
        self._outbox_worker: Any = None
        self._zep: Any = None
        self._start_lock = asyncio.Lock()
        self._runner: asyncio.Runner | None = None

    # Lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open stores and build agents (done on first ``ask``; call it to pay the start-up cost up front)."""
        async with self._start_lock:
            if self._stages is None:
                from researchcrew.pipeline.assemble import build_stages

                built = await build_stages(
                    self.settings, tools=self._given_tools, llm=self._llm, knowledge_base=self._knowledge_base,
                    memory_store=self._memory_store, remember=self._remember,
                )
                self._stages = built.stages
                self._memory_store = built.memory_store
                self._knowledge_base = built.knowledge_base
                self._memory_agent = built.memory_agent
                self._outbox_worker = built.outbox_worker
                self._zep = built.zep

    async def aclose(self) -> None:
        """Finish pending memory work and release resources."""
        if self._memory_agent is not None:
            await self._memory_agent.aclose()
            self._memory_agent = None
        if self._outbox_worker is not None:  # after the agent: its last writes are queued, delivered later
            await self._outbox_worker.stop()
            self._outbox_worker = None
        if self._zep is not None:
            await self._zep.aclose()
            self._zep = None
        if self._stages is not None and self._stages.llm is not None and self._llm is None:
            await _release_llm(self._stages.llm)  # built from settings here, so closed here
        if self._memory_store is not None and self._owns_memory_store:
            await self._memory_store.close()
            self._memory_store = None
        if self._knowledge_base is not None and self._owns_knowledge_base:
            await asyncio.to_thread(self._knowledge_base.close)
            self._knowledge_base = None
        self._stages = None

    async def flush_memory(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until the memory work of the answers given so far has finished (it runs in the background so that
        answers never wait for it). Returns False if ``timeout_s`` passed first; True at once without memory."""
        if self._memory_agent is None:
            return True
        finished: bool = await self._memory_agent.wait_idle(timeout_s)
        return finished

    # A user's memory ----------------------------------------------------------------------------------------
    async def export_memory(self, user_id: str) -> dict[str, Any]:
        """Everything remembered about ``user_id`` (exchanges, entities, relationships, preferences, queued Zep
        writes), JSON-able — the SDK form of ``researchcrew memory export``."""
        return await (await self._require_memory_store()).export_user(user_id=user_id)

    async def forget_memory(self, user_id: str) -> dict[str, int]:
        """Delete everything remembered about ``user_id``; with the Zep backend, the user is deleted in Zep too
        (queued in the same transaction, delivered by the outbox). Returns rows deleted per table."""
        store = await self._require_memory_store()
        await self.flush_memory()  # an exchange still being stored must not reappear after forgetting
        if self._outbox_worker is None:
            return await store.forget_user(user_id=user_id)
        from researchcrew.memory.outbox import forget_write

        counts = await store.forget_user(user_id=user_id, then_enqueue=[forget_write(user_id)])
        self._outbox_worker.wake()
        return counts

    async def _require_memory_store(self) -> MemoryStore:
        await self.start()
        if self._memory_store is None:
            raise ConfigurationError("this assistant has no memory store (it was built with remember=False)")
        return self._memory_store

    async def __aenter__(self) -> ResearchAssistant:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    # Asking ------------------------------------------------------------------------------------------------
    async def ask(self, query: str, *, user_id: str = "default", session_id: str = "default",
                  **options: Any) -> FinalResponse:
        """Research ``query`` and return the cited answer. See the module docstring for ``options``."""
        return await self._ask(query, user_id, session_id, options, on_event=None)

    def ask_sync(self, query: str, *, user_id: str = "default", session_id: str = "default",
                 **options: Any) -> FinalResponse:
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

    async def stream(self, query: str, *, user_id: str = "default", session_id: str = "default",
                     **options: Any) -> AsyncIterator[ProgressEvent | FinalResponse]:
        """Yield progress events as the stages run, then the answer (always last)."""
        events: asyncio.Queue[ProgressEvent] = asyncio.Queue()
        task = asyncio.create_task(self._ask(query, user_id, session_id, options, on_event=events.put_nowait))
        try:
            while not task.done() or not events.empty():
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            yield task.result()
        finally:
            if not task.done():
                task.cancel()

    async def _ask(self, query: str, user_id: str, session_id: str, options: dict[str, Any],
                   on_event: Callable[[ProgressEvent], None] | None) -> FinalResponse:
        from researchcrew.pipeline.flow import run_question

        routing = {key: options.pop(key) for key in _ROUTING_KEYWORDS if key in options}
        _check_option_names(options)  # a misspelt option fails before any store is opened
        await self.start()
        if self._stages is None:  # start() failed half-way
            raise ConfigurationError("the assistant could not start; see the log")
        question = _question(query, user_id, session_id)
        preferences = await self._preferences_for(user_id, options)
        # What the user asked for explicitly (not what was inferred): the memory agent learns preferences from it.
        explicit = {key: value for key, value in options.items() if key == "response_format"}
        for key in ("preferred_sources", "exclude_sources"):
            if routing.get(key):
                explicit[key] = list(routing[key])
        return await run_question(
            self._stages, question, preferences=preferences,
            preferred_sources=routing.get("preferred_sources"), exclude_sources=routing.get("exclude_sources"),
            tool_options=routing.get("tool_options"), explicit_request=explicit, deadline_s=routing.get("deadline_s"),
            on_event=on_event,
        )

    async def _preferences_for(self, user_id: str, overrides: dict[str, Any]) -> UserPreferences:
        """The user's learned preferences (when a memory store is open), with this question's overrides."""
        _check_option_names(overrides)
        base = UserPreferences()
        if self._memory_store is not None:
            base = (await self._memory_store.get_preferences(user_id=user_id)).preferences
        try:
            return UserPreferences.model_validate({**base.model_dump(), **overrides})
        except ValidationError as error:
            raise ConfigurationError(f"invalid option for ask(): {error}") from error


async def _release_llm(llm: BaseLLM) -> None:
    """Close the HTTP clients of an LLM the assistant built. crewAI's providers keep an ``openai``/``httpx`` client
    pair open for the LLM's lifetime and offer no close method; left open, their pooled sockets outlive the
    assistant (and surface later as ResourceWarnings). Attribute names are those of crewAI 1.15's providers."""
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


def _check_option_names(options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(UserPreferences.model_fields))
    if unknown:
        valid = ", ".join(sorted([*UserPreferences.model_fields, *_ROUTING_KEYWORDS]))
        raise ConfigurationError(f"unknown option(s) {unknown} for ask(); valid options: {valid}")


def _question(text: str, user_id: str, session_id: str) -> Query:
    """A Query for the Flow; its guard, not validation, refuses empty or oversized questions (politely)."""
    from researchcrew.contracts.query import MAX_RECORDED_CHARS

    try:
        return Query(text=text[:MAX_RECORDED_CHARS], user_id=user_id, session_id=session_id)
    except ValidationError as error:
        raise ConfigurationError(f"invalid question: {error}") from error
