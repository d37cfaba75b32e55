"""The Memory agent (seed 003, stage 4): remember an answered question after the answer has gone out.

``await agent.run(MemoryInput) -> MemoryOutput`` does six independent steps:

1. history — store the message pair (question as asked, answer) with its sources and citations (``add_exchange``);
2. session — fold the exchange into the session's rolling summary (``follow_up.session``), which the next
   question's follow-up rewrite reads; a refused question is left out;
3. entities — extract entities from the question and the answer and record each mention;
4. relationships — record the relations the extractor found (co-occurrence; typed ones with an LLM);
5. preferences — update the user's learned preferences from what this request asked for;
6. zep — when Zep is configured, enqueue the mirror write in the persisted outbox (a local insert).

A step that fails is logged and reported (``status="partial"``, ``error_message``) and the others still run;
``run`` never raises. ``remember_in_background`` is what the research Flow uses: it schedules ``run`` as a task and
returns at once, so memory never delays the answer; ``wait_idle``/``aclose`` flush pending work at shutdown.
``session_settled`` lets the next question of a session wait (briefly) until the summary holds this exchange.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import ValidationError

from researchcrew.contracts.memory import MemoryInput, MemoryOutput, MemoryStatus
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import MemoryStoreError
from researchcrew.memory.records import (
    EntityMention,
    EntityRelation,
    ExchangeRecord,
    SessionSummary,
    StoredPreferences,
)
from researchcrew.pipeline.follow_up._session import summary_after, turn_from_response
from researchcrew.pipeline.remember._entities import EntityExtractor, Extraction, RuleBasedExtractor
from researchcrew.pipeline.remember._entities_llm import LLMEntityExtractor, SupportsACall
from researchcrew.pipeline.remember._preferences import PreferenceLearner, PreferencePolicy, RequestSignals

if TYPE_CHECKING:
    # Only the Zep backend has an outbox worker; importing it here would load zep-python (and aiohttp) and the
    # store's migration machinery into every process that merely remembers locally (start-up time, issue 5).
    from researchcrew.memory.outbox import OutboxWorker

logger = logging.getLogger(__name__)

T = TypeVar("T")
STEPS = ("history", "session", "entities", "relationships", "preferences", "zep")


class MemoryAgentStore(Protocol):
    """The part of ``MemoryStore`` the agent uses."""

    async def add_exchange(
        self,
        *,
        user_id: str,
        session_id: str,
        query: Query,
        response: FinalResponse,
        context: dict[str, Any] | None = None,
    ) -> ExchangeRecord: ...

    async def record_entities(
        self, *, user_id: str, response_id: str, mentions: Sequence[EntityMention]
    ) -> tuple[int, int]: ...

    async def record_relationships(
        self, *, user_id: str, relations: Sequence[EntityRelation], response_id: str | None = None
    ) -> int: ...

    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]: ...

    async def update_preferences(
        self, *, user_id: str, update: Callable[[StoredPreferences], StoredPreferences]
    ) -> tuple[StoredPreferences, bool]: ...

    async def update_session_summary(
        self, *, user_id: str, session_id: str, update: Callable[[SessionSummary | None], SessionSummary]
    ) -> SessionSummary: ...


@dataclass
class _Outcome:
    """Which of the steps ran and why those that failed failed (a step fails once, at its first failure)."""

    ran: set[str] = field(default_factory=set)
    failures: dict[str, str] = field(default_factory=dict)

    def fail(self, step: str, reason: str) -> None:
        self.ran.add(step)
        self.failures.setdefault(step, reason)

    @property
    def status(self) -> MemoryStatus:
        if not self.failures:
            return "success"
        return "failed" if len(self.failures) == len(self.ran) else "partial"


class MemoryWriter:
    """Stores what one exchange taught us. See the module docstring."""

    def __init__(
        self,
        store: MemoryAgentStore,
        *,
        extractor: EntityExtractor | None = None,
        zep_outbox: OutboxWorker | None = None,
        llm: SupportsACall | None = None,
        preference_policy: PreferencePolicy | None = None,
        step_timeout_s: float = 30.0,
        max_background: int = 4,
    ) -> None:
        self.store = store
        if extractor is None:
            extractor = LLMEntityExtractor(llm) if llm is not None else RuleBasedExtractor()
        self.extractor = extractor
        self.zep_outbox = zep_outbox
        self.preferences = PreferenceLearner(store, preference_policy)
        self.step_timeout_s = step_timeout_s
        self._tasks: set[asyncio.Task[MemoryOutput]] = set()
        # Per (user, session): one event per background run whose session step has not finished yet.
        self._unsettled: dict[tuple[str, str], list[asyncio.Event]] = {}
        # Background runs beyond this wait their turn: under a burst, a few runs finish in their step budgets
        # instead of all of them sharing the store and the CPU and timing out together.
        self._slots = asyncio.Semaphore(max_background)

    # ---- the Flow's entry point ----------------------------------------------------------------------------------
    def remember_in_background(self, memory_input: MemoryInput) -> asyncio.Task[MemoryOutput]:
        """Schedule ``run`` and return at once (the answer must not wait for memory). The task never raises;
        its result is the ``MemoryOutput``. Keep no reference if you do not need it: the agent keeps one."""
        key = (memory_input.user_id, memory_input.session_id)
        settled = asyncio.Event()
        self._unsettled.setdefault(key, []).append(settled)
        task = asyncio.create_task(
            self._run_in_slot(memory_input, settled), name=f"remember:{memory_input.final_response.response_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._settle(key, settled))  # also when cancelled before it started
        return task

    async def _run_in_slot(self, memory_input: MemoryInput, settled: asyncio.Event) -> MemoryOutput:
        async with self._slots:
            return await self.run(memory_input, session_settled=settled)

    def _settle(self, key: tuple[str, str], settled: asyncio.Event) -> None:
        settled.set()
        waiting = self._unsettled.get(key, [])
        if settled in waiting:
            waiting.remove(settled)
        if not waiting:
            self._unsettled.pop(key, None)

    async def session_settled(self, user_id: str, session_id: str, timeout_s: float) -> bool:
        """Wait until the exchanges of this session scheduled so far are in its summary (or their session step
        failed). False if ``timeout_s`` passed first; True at once when nothing is pending."""
        events = list(self._unsettled.get((user_id, session_id), []))
        if not events:
            return True
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        _, pending = await asyncio.wait(waiters, timeout=timeout_s)
        for waiter in pending:
            waiter.cancel()
        return not pending

    @property
    def pending(self) -> int:
        return sum(not t.done() for t in self._tasks)

    async def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until every background task has finished; False if ``timeout_s`` passed first."""
        tasks = [t for t in self._tasks if not t.done()]
        if not tasks:
            return True
        _, still_running = await asyncio.wait(tasks, timeout=timeout_s)
        return not still_running

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Flush background work at shutdown: wait up to ``timeout_s``, then cancel what is left (logged)."""
        if await self.wait_idle(timeout_s):
            return
        leftover = [t for t in self._tasks if not t.done()]
        logger.error(  # each task is named after its response: say which exchanges are not remembered
            "memory: %d background task(s) still running after %s s; cancelling (%s)",
            len(leftover),
            timeout_s,
            ", ".join(sorted(t.get_name() for t in leftover)),
        )
        for task in leftover:
            task.cancel()
        await asyncio.gather(*leftover, return_exceptions=True)

    # ---- the work --------------------------------------------------------------------------------------------------
    async def run(self, memory_input: MemoryInput, *, session_settled: asyncio.Event | None = None) -> MemoryOutput:
        """Store the exchange, update the session's summary, its entities and relations, learn preferences, queue
        the Zep mirror. Never raises. ``session_settled`` is set once the summary step is over."""
        try:
            return await self._run(memory_input, session_settled)
        finally:
            if session_settled is not None:
                session_settled.set()

    async def _run(self, memory_input: MemoryInput, session_settled: asyncio.Event | None) -> MemoryOutput:
        started = time.perf_counter()
        user_id, session_id = memory_input.user_id, memory_input.session_id
        query, response = memory_input.query, memory_input.final_response
        signals = RequestSignals.from_context(memory_input.context)
        outcome = _Outcome()
        result: dict[str, Any] = {}

        record = await self._step(
            outcome,
            "history",
            lambda: self.store.add_exchange(
                user_id=user_id, session_id=session_id, query=query, response=response, context=memory_input.context
            ),
        )
        result["conversation_entry_added"] = record is not None

        if response.answer_kind != "refusal" and (record is None or record.created):
            turn = turn_from_response(response.model_copy(update={"query": query}))
            summary = await self._step(
                outcome,
                "session",
                lambda: self.store.update_session_summary(
                    user_id=user_id,
                    session_id=session_id,
                    update=lambda previous: summary_after(previous, turn, user_id=user_id, session_id=session_id),
                ),
            )
            result["session_summary_updated"] = summary is not None
        if session_settled is not None:
            session_settled.set()

        extraction = await self._step(
            outcome, "entities", lambda: self.extractor.extract([query.text, response.answer])
        )
        if extraction is not None:
            counts = await self._step(
                outcome,
                "entities",
                lambda: self.store.record_entities(
                    user_id=user_id, response_id=response.response_id, mentions=extraction.mentions
                ),
            )
            if counts is not None:
                result["entities_added"], result["entities_updated"] = counts
            added = await self._relationships(outcome, user_id, response.response_id, extraction)
            if added is not None:
                result["relationships_added"] = added
        else:
            outcome.fail("relationships", "skipped (no entities were extracted)")

        changed = await self._step(
            outcome,
            "preferences",
            lambda: self.preferences.observe(
                user_id=user_id,
                response_id=response.response_id,
                signals=signals,
                count=record is None or record.created,
            ),
        )
        result["preferences_updated"] = bool(changed)

        if self.zep_outbox is not None:
            outbox = self.zep_outbox
            await self._step(
                outcome,
                "zep",
                lambda: outbox.enqueue_turn(user_id=user_id, session_id=session_id, query=query, response=response),
            )

        output = MemoryOutput(
            status=outcome.status,
            error_message="; ".join(f"{step}: {reason}" for step, reason in outcome.failures.items())[:4_000] or None,
            execution_time_ms=(time.perf_counter() - started) * 1000,
            **result,
        )
        if outcome.failures:
            logger.warning("memory for response %s: %s (%s)", response.response_id, output.status, output.error_message)
        return output

    async def _relationships(self, outcome: _Outcome, user_id: str, response_id: str, found: Extraction) -> int | None:
        if not found.relations:
            outcome.ran.add("relationships")
            return 0
        return await self._step(
            outcome,
            "relationships",
            lambda: self.store.record_relationships(
                user_id=user_id, relations=found.relations, response_id=response_id
            ),
        )

    async def _step(self, outcome: _Outcome, name: str, work: Callable[[], Awaitable[T]]) -> T | None:
        """Run one step under the step timeout; a failure is logged and recorded, never raised."""
        outcome.ran.add(name)
        try:
            async with asyncio.timeout(self.step_timeout_s):
                return await work()
        except MemoryStoreError as error:  # includes ZepError
            reason = str(error)
        except TimeoutError:
            reason = f"did not finish within {self.step_timeout_s:g} s"
        except (ValidationError, ValueError) as error:
            reason = f"{type(error).__name__}: {error}"
        except Exception as error:  # the outermost guard of a step: a bug must not cost the other steps
            logger.exception("memory step %s raised unexpectedly", name)
            reason = f"internal error: {type(error).__name__}: {error}"
        outcome.fail(name, reason[:500])
        logger.warning("memory step %s failed: %s", name, reason)
        return None


__all__ = ["STEPS", "MemoryAgentStore", "MemoryWriter"]
