"""Deep research over HTTP: the message body's ``mode``, the mapping of the runner's named errors to problems, and
the working segments of a run (start, or resume after the user's answer or decision) run in this process.

A segment runs as a task the service tracks (shutdown lets it finish within the grace period; a resumed run that is
cut off goes back to its pause) and holds one of the user's question slots while it works. JSON callers get ``202``
and the run: a start waits for the first pause (or, with ``auto_approve``, only until the run exists), a resume
returns once the run is working again; the rest happens in the service and ``GET /v1/deep-runs/{id}`` shows it.

The event stream (``text/event-stream``) follows the quick answer's (``researchcrew.service._questions``): ``phase``
(a deep phase started, finished or paused: clarify, plan, research, references, report, quality, respond), and,
relayed from a sub-question's pipeline with its ``sub_question`` number, ``stage``, ``source`` and ``text`` — each a
``DeepProgressEvent`` as JSON — then ``run`` (the ``DeepRun``, paused or finished), then ``done``. A failure sends
``error`` (a problem+json body) and then ``done``. Closing the stream stops the segment (a resumed run goes back to
its pause, as the runner documents).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import Field

from researchcrew.contracts.deep import DeepOptions, DeepProgressEvent, DeepRun
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import (
    DeepResearchError,
    ResearchCrewError,
)
from researchcrew.service._problems import ApiProblem, problem_body, problem_for
from researchcrew.service._questions import MessageRequest, service_problem, track
from researchcrew.service._state import ServiceState
from researchcrew.service._streaming import cancel_and_wait, pump, sse
from researchcrew.service._throttle import QuestionSlot

if TYPE_CHECKING:  # imported by the runtime when a deep run is asked for: its Flow brings in crewAI
    from researchcrew.deep.runner import DeepResearch

logger = logging.getLogger(__name__)

OnEvent = Callable[[DeepProgressEvent], None]
Segment = Callable[[OnEvent], Coroutine[Any, Any, DeepRun]]


class SessionMessage(MessageRequest):
    """A message of a session: a quick answer (the default) or a deep research run (``mode: "deep"``)."""

    mode: Literal["quick", "deep"] = Field(
        default="quick",
        description="quick: one cited answer (200). deep: a deep research run (202 with the run): clarifying "
        "questions, a plan to approve, one report.",
    )
    deep: DeepOptions | None = Field(
        default=None, description='Options of the deep run (with mode "deep"; a quick answer ignores them).'
    )

    def to_request(self, *, user_id: str, session_id: str) -> ResearchRequest:
        fields = self.model_dump(exclude_unset=True, exclude={"mode", "deep"})
        return ResearchRequest(user_id=user_id, session_id=session_id, **fields)


def deep_problem(error: ResearchCrewError, run_id: str) -> ApiProblem:
    """The problem for a failure of a deep run operation (``problems.NAMED_PROBLEMS``; another user's run is
    answered like an unknown one)."""
    return problem_for(error, subject=run_id, fallback="The question could not be answered")


async def deep_research(service: ServiceState) -> DeepResearch:
    try:
        return await service.runtime.deep_research()
    except ResearchCrewError as error:
        raise service_problem(error) from error


class SegmentWork:
    """One working segment of a run, started as a tracked task. Its events are queued for a stream (``streaming``);
    the slot is given back at its end."""

    def __init__(
        self, service: ServiceState, segment: Segment, slot: QuestionSlot, *, run_id: str | None, streaming: bool
    ) -> None:
        self.events: asyncio.Queue[DeepProgressEvent] = asyncio.Queue()
        self.run_id = run_id
        self.streaming = streaming
        self.started = asyncio.Event()
        self.task = track(service, self._run(segment, slot))
        self.task.add_done_callback(_log_failure)

    def _on_event(self, event: DeepProgressEvent) -> None:
        self.run_id = event.run_id
        self.started.set()
        if self.streaming:
            self.events.put_nowait(event)

    async def _run(self, segment: Segment, slot: QuestionSlot) -> DeepRun:
        try:
            return await segment(self._on_event)
        finally:
            with anyio.CancelScope(shield=True):
                await slot.release()

    def result(self) -> DeepRun:
        try:
            return self.task.result()
        except ResearchCrewError as error:
            raise deep_problem(error, self.run_id or "") from error

    async def until_started(self, deep: DeepResearch, user_id: str) -> DeepRun:
        """The run once it is working (its first event), or its result if the segment ended first."""
        waiter = asyncio.ensure_future(self.started.wait())
        try:
            await asyncio.wait({waiter, self.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waiter)
        if self.task.done() or self.run_id is None:
            return await self.until_done()
        return await deep.get_research_run(self.run_id, user_id=user_id)

    async def until_done(self) -> DeepRun:
        await asyncio.wait({self.task})
        return self.result()

    def stream(self, keep_alive_s: float) -> AsyncIterator[bytes]:
        """The segment's events as server-sent events, then the run, then ``done``. Closing it stops the segment."""
        number = 0

        def render(event: DeepProgressEvent) -> bytes:
            nonlocal number
            number += 1
            return sse(event_name(event), event.model_dump_json(exclude_none=True), number)

        def finish(_: asyncio.Task[DeepRun]) -> Iterator[bytes]:
            try:
                run = self.result()
            except ApiProblem as problem:
                body = problem_body(problem.status, problem.detail, kind=problem.kind)
                yield sse("error", body.model_dump_json(exclude_none=True))
            else:
                yield sse("run", run.model_dump_json(), number + 1)
            yield sse("done", "{}")

        return pump(
            self.task,
            self.events,
            keep_alive_s=keep_alive_s,
            render=render,
            finish=finish,
            closed_early="deep run event stream closed early; stopped the working segment",
        )


def event_name(event: DeepProgressEvent) -> str:
    """``phase`` for the run's own phases; ``stage``/``source``/``text`` for what a sub-question's pipeline relays."""
    if event.stage_event is not None:
        return event.stage_event.kind
    if event.status in ("source", "text"):
        return event.status
    return "phase"


def _log_failure(task: asyncio.Task[DeepRun]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None and not isinstance(error, DeepResearchError):
        logger.error("a deep run's working segment failed", exc_info=error)
