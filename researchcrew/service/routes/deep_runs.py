"""``/v1/deep-runs/{run_id}``: a deep research run of the user — look at it, answer its clarifying questions, decide
on its plan (approve, reword, reorder, cut, add), cancel it. A run is started by a session message with
``mode: "deep"`` (``ask_deep``, called by the messages route), and a session whose run waits for an answer to its
clarifying questions takes the user's next ordinary message as that answer (``pending_reply``).

After an answer or a decision the run resumes in the service: JSON callers get ``202`` and the working run (look it
up until it pauses again or finishes); with ``Accept: text/event-stream`` the rest of the run streams (see
``researchcrew.service.deep_runs`` for the events). Another user's run answers 404 exactly like an unknown id.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import StreamingResponse

from researchcrew.contracts.clarification import ClarificationAnswer
from researchcrew.contracts.deep import DeepOptions, DeepRun, PlanDecision
from researchcrew.deep.runner import DeepResearch
from researchcrew.errors import MemoryStoreError, ResearchCrewError
from researchcrew.service.auth import CurrentUser
from researchcrew.service.deep_runs import SegmentWork, SessionMessage, deep_problem, deep_research, take_deep_slot
from researchcrew.service.problems import ApiProblem, problem_responses
from researchcrew.service.questions import EVENT_STREAM, wants_event_stream
from researchcrew.service.state import Service, ServiceState

logger = logging.getLogger(__name__)

router = APIRouter(
    prefix="/v1/deep-runs", tags=["deep research"], responses=problem_responses(400, 401, 404, 413, 422, 429)
)

RunId = Annotated[str, Path(min_length=1, max_length=256, description="The deep run's id.")]
DEEP_EVENTS = (
    "server-sent events: `phase` (a deep phase started, finished or paused), `stage`, `source` and `text` (relayed "
    "from a sub-question's pipeline, with its `sub_question`) — each a DeepProgressEvent as JSON — then `run` (the "
    "DeepRun, paused or finished), then `done`; `error` (problem+json) on a failure"
)
DEEP_ACCEPTED: dict[int | str, dict[str, Any]] = {
    202: {
        "model": DeepRun,
        "description": "The deep run (JSON): paused for the user (`status: awaiting_human_feedback`, see `awaiting`), "
        "or working in the service (look it up with `GET /v1/deep-runs/{run_id}`).",
    },
}
_DEEP_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": f"With `Accept: text/event-stream`: {DEEP_EVENTS}.",
        "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
    },
}


def _problems(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """problem+json responses with this route's own descriptions."""
    docs = problem_responses(*described)
    for status, text in described.items():
        docs[status]["description"] = text
    return docs


_STATE_DOC = _problems(
    {
        409: "The run does not wait for this now (running, finished, or waiting for something else).",
        410: "The run's pause expired; start a new run.",
        503: "A store the service needs is not reachable.",
    }
)


def _accepted(run: DeepRun) -> Response:
    return Response(content=run.model_dump_json(), status_code=202, media_type="application/json")


def _streaming(work: SegmentWork, service: ServiceState) -> StreamingResponse:
    return StreamingResponse(
        work.stream(service.settings.service.keep_alive_s),
        media_type=EVENT_STREAM,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def ask_deep(
    service: ServiceState, user_id: str, session_id: str, body: SessionMessage, request: Request
) -> Response:
    """Start a deep run for the session's message: 202 with the run at its first pause (with ``auto_approve``: as
    soon as it works), or its events."""
    research = body.to_request(user_id=user_id, session_id=session_id)
    options = body.deep or DeepOptions()
    deep = await deep_research(service)
    slot = await take_deep_slot(service, user_id, options.deadline_s)
    try:
        owned = await service.sessions.touch(user_id, session_id, question=body.question)
    except BaseException:
        await slot.release()
        raise
    if not owned:
        await slot.release()
        raise ApiProblem(404, f"No session {session_id!r}.", kind="session-not-found")
    streaming = wants_event_stream(request)
    work = SegmentWork(
        service,
        lambda on_event: deep.start(research, options, on_event=on_event),
        slot,
        run_id=None,
        streaming=streaming,
    )
    if streaming:
        return _streaming(work, service)
    run = await (work.until_started(deep, user_id) if options.auto_approve else work.until_done())
    return _accepted(run)


async def pending_reply(service: ServiceState, user_id: str, session_id: str, body: SessionMessage) -> DeepRun | None:
    """The session's deep run that takes this quick message as the answer to its clarifying questions, if any (a
    message that is a new question of its own is left alone, as in quick mode)."""
    from researchcrew.pipeline.clarify import looks_like_new_question

    if body.mode != "quick":
        return None
    try:
        deep = await service.runtime.deep_research()
        run = await deep.awaiting_clarification(user_id=user_id, session_id=session_id)
    except MemoryStoreError as error:  # the quick answer does not need it: answer as if no run waited
        logger.warning("could not look for a deep run waiting in session %s: %s", session_id, error)
        return None
    if run is None or looks_like_new_question(body.question, run.question):
        return None
    return run


async def reply_in_session(
    service: ServiceState, user_id: str, session_id: str, run: DeepRun, body: SessionMessage, request: Request
) -> Response:
    """The message answers the run's clarifying questions; the run resumes."""
    if not await service.sessions.touch(user_id, session_id, question=body.question):
        raise ApiProblem(404, f"No session {session_id!r}.", kind="session-not-found")
    deep = await deep_research(service)
    return await _continue(
        service,
        deep,
        user_id,
        run.run_id,
        request,
        lambda: deep.answer_clarification(run.run_id, user_id=user_id, answer=body.question),
    )


async def _continue(
    service: ServiceState,
    deep: DeepResearch,
    user_id: str,
    run_id: str,
    request: Request,
    submit: Callable[[], Awaitable[DeepRun]] | None,
) -> Response:
    """Store the user's answer or decision (checked by the runner; ``submit``), then resume the run in the service.
    Without ``submit``: resume a run whose answer was stored but whose resuming never finished (a restart)."""
    slot = await take_deep_slot(service, user_id, None)  # first: a stored decision must find a slot to resume in
    try:
        if submit is not None:
            await submit()
        else:
            await deep.check_resumable(run_id, user_id=user_id)
    except ResearchCrewError as error:
        await slot.release()
        raise deep_problem(error, run_id) from error
    except BaseException:
        await slot.release()
        raise
    streaming = wants_event_stream(request)
    work = SegmentWork(
        service,
        lambda on_event: deep.resume(run_id, user_id=user_id, on_event=on_event),
        slot,
        run_id=run_id,
        streaming=streaming,
    )
    if streaming:
        return _streaming(work, service)
    return _accepted(await work.until_started(deep, user_id))


@router.get(
    "/{run_id}",
    response_model=DeepRun,
    responses=problem_responses(503),
    summary="A deep run: its status, what it waits for (clarification or plan_approval), or its report.",
)
async def get_deep_run(service: Service, user: CurrentUser, run_id: RunId) -> DeepRun:
    deep = await deep_research(service)
    try:
        return await deep.get(run_id, user_id=user.user_id)
    except ResearchCrewError as error:
        raise deep_problem(error, run_id) from error


@router.post(
    "/{run_id}/clarification",
    status_code=202,
    response_model=DeepRun,
    responses={**DEEP_ACCEPTED, **_DEEP_STREAM, **_STATE_DOC},
    summary='Answer a paused run\'s clarifying questions (or "just answer"); the run resumes.',
)
async def answer_clarification(
    service: Service, user: CurrentUser, run_id: RunId, body: ClarificationAnswer, request: Request
) -> Response:
    deep = await deep_research(service)
    return await _continue(
        service,
        deep,
        user.user_id,
        run_id,
        request,
        lambda: deep.answer_clarification(run_id, user_id=user.user_id, answer=body),
    )


@router.post(
    "/{run_id}/plan",
    status_code=202,
    response_model=DeepRun,
    responses={**DEEP_ACCEPTED, **_DEEP_STREAM, **_STATE_DOC},
    summary="Decide on a paused run's plan: approve it, reword, reorder, cut or add items, or cancel; the run resumes.",
)
async def decide_plan(
    service: Service, user: CurrentUser, run_id: RunId, body: PlanDecision, request: Request
) -> Response:
    deep = await deep_research(service)
    return await _continue(
        service,
        deep,
        user.user_id,
        run_id,
        request,
        lambda: deep.decide_plan(run_id, user_id=user.user_id, decision=body),
    )


@router.post(
    "/{run_id}/resume",
    status_code=202,
    response_model=DeepRun,
    responses={**DEEP_ACCEPTED, **_DEEP_STREAM, **_STATE_DOC},
    summary="Resume a run whose answer or plan decision is stored but which is not working (the service restarted).",
)
async def resume_deep_run(service: Service, user: CurrentUser, run_id: RunId, request: Request) -> Response:
    """The decision routes resume the run themselves; this one is for the run left behind by a stopped service
    (its answer stored, its lease run out). A run that is working, finished or still waiting for the user: 409."""
    deep = await deep_research(service)
    return await _continue(service, deep, user.user_id, run_id, request, None)


@router.post(
    "/{run_id}/cancel",
    response_model=DeepRun,
    responses=_STATE_DOC,
    summary="Cancel a paused run.",
)
async def cancel_deep_run(service: Service, user: CurrentUser, run_id: RunId) -> DeepRun:
    deep = await deep_research(service)
    try:
        return await deep.cancel(run_id, user_id=user.user_id)
    except ResearchCrewError as error:
        raise deep_problem(error, run_id) from error
