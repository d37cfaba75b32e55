"""Asking a question over HTTP: the request body, cancellation when the client goes away, and the server-sent event
stream. Routes that ask questions (the native messages route, the OpenAI-compatible one) share these; the per-user
concurrency slot they hold while a question works is ``researchcrew.service._slots``.

Cancellation: the question runs as its own task. When the client disconnects, that task is cancelled, so no
source keeps searching for nobody. An answer that did complete was already handed to the Memory stage (which
stores it in the background, outside the request), so it is remembered even if it was never delivered.

The event stream (``text/event-stream``): ``stage`` (a stage started or finished), ``source`` (one source answered
or failed), ``text`` (the next piece of the answer) — each the same ``ProgressEvent`` the SDK's ``stream()`` yields,
as JSON — then ``response`` (the ``FinalResponse``), then ``done``. A failure sends ``error`` (a problem+json body)
and then ``done``. A comment line keeps a quiet stream open through proxies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import aclosing
from typing import Any, TypeVar

from fastapi import Request
from pydantic import Field

from researchcrew.contracts._base import RequestContract, SourceType
from researchcrew.contracts.progress import ProgressEvent
from researchcrew.contracts.request import MAX_DEADLINE_S, ResearchRequest, ResponseOptions, ToolOptions
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import ResearchCrewError
from researchcrew.service._problems import ApiProblem, problem_body, problem_for
from researchcrew.service._state import ServiceState
from researchcrew.service._streaming import cancel_and_wait, pump, sse
from researchcrew.service._throttle import QuestionSlot

logger = logging.getLogger(__name__)

T = TypeVar("T")
EVENT_STREAM = "text/event-stream"


class MessageRequest(RequestContract):
    """A question asked in a session, with the SDK's per-request options (a ``ResearchRequest`` without the user
    and the session: those come from the key and the URL)."""

    question: str = Field(
        min_length=1,
        max_length=20_000,
        pattern=r"\S",  # not blank: in the schema, so that clients (and the schema fuzzer) know it
        description="The question (not blank). Incoherent questions are answered with a polite refusal.",
    )
    preferred_sources: list[SourceType] | None = Field(
        default=None, description="Source types to put first, in order (rag, web, arxiv, memory)."
    )
    exclude_sources: list[SourceType] | None = Field(default=None, description="Source types not to search.")
    tool_options: ToolOptions = Field(
        default_factory=dict,
        description='Options for one source\'s tool, by source type, e.g. {"web": {"domains": ["arxiv.org"]}}.',
    )
    deadline_s: float | None = Field(
        default=None, gt=0, le=MAX_DEADLINE_S, description="Seconds for the whole run (default: the server's)."
    )
    response: ResponseOptions = Field(
        default_factory=ResponseOptions, description="How the answer should be written, for this question only."
    )

    def to_request(self, *, user_id: str, session_id: str) -> ResearchRequest:
        return ResearchRequest(user_id=user_id, session_id=session_id, **self.model_dump(exclude_unset=True))


def wants_event_stream(request: Request) -> bool:
    """True when the client asks for server-sent events (``Accept: text/event-stream``)."""
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == EVENT_STREAM for part in accept.split(","))


def track(service: ServiceState, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Run ``work`` as a task the service knows about (shutdown lets it finish within the grace period)."""
    task = asyncio.create_task(work)
    service.questions.add(task)
    task.add_done_callback(service.questions.discard)
    return task


async def answer_unless_disconnected(
    service: ServiceState, research: ResearchRequest, request: Request
) -> FinalResponse | None:
    """The answer, or None when the client went away first (the question is then cancelled)."""
    task = track(service, service.runtime.ask(research))
    watcher = asyncio.create_task(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            logger.info("client disconnected; cancelled the question of user %s", research.user_id)
        await cancel_and_wait(watcher, task)
    if task.cancelled():
        return None
    return _result(task)


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _result(task: asyncio.Task[FinalResponse]) -> FinalResponse:
    try:
        return task.result()
    except ResearchCrewError as error:
        raise service_problem(error) from error


def service_problem(error: ResearchCrewError) -> ApiProblem:
    """A failure of the service's own machinery (not of a source: those are reported in the answer)."""
    return problem_for(error, fallback="The question could not be answered")


async def event_stream(service: ServiceState, research: ResearchRequest, slot: QuestionSlot) -> AsyncIterator[bytes]:
    """The question's progress as server-sent events, then the answer, then ``done``. Closing the stream (the
    client went away) cancels the question; the slot is given back either way."""
    events: asyncio.Queue[ProgressEvent] = asyncio.Queue()
    task = track(service, service.runtime.ask(research, on_event=events.put_nowait))
    number = 0

    def render(event: ProgressEvent) -> bytes:
        nonlocal number
        number += 1
        return sse(event.kind, event.model_dump_json(exclude_none=True), number)

    def finish(done: asyncio.Task[FinalResponse]) -> Iterator[bytes]:
        try:
            response = _result(done)
        except ApiProblem as problem:
            body = problem_body(problem.status, problem.detail, kind=problem.kind)
            yield sse("error", body.model_dump_json(exclude_none=True))
        else:
            yield sse("response", response.model_dump_json(), number + 1)
        yield sse("done", "{}")

    chunks = pump(
        task,
        events,
        keep_alive_s=service.settings.service.keep_alive_s,
        render=render,
        finish=finish,
        on_close=slot.release,
        closed_early=f"event stream closed early; cancelled the question of user {research.user_id}",
    )
    async with aclosing(chunks):  # closing this stream closes the pump at once, not when it is collected
        async for chunk in chunks:
            yield chunk
