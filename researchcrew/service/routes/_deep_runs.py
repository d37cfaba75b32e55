"""``/v1/deep-runs/{run_id}``: a deep research run of the user — look at it, answer its clarifying questions, decide
on its plan (approve, reword, reorder, cut, add), cancel it, download its report (``/report?format=md|html|pdf|docx``,
409 until the run is completed). A run is started by a session message with
``mode: "deep"`` (``research_in_session``, called by the messages route), or outside any chat session by ``POST
/v1/deep-runs`` (as ``DeepResearch.research``: what `researchcrew research` sends to the data folder's running
service, the way `ask` sends ``POST /v1/ask``), and a session whose run waits for an answer
to its clarifying questions takes the user's next ordinary message as that answer when the conversation layer
(``researchcrew.pipeline.conversation``) says it is one (``answer_clarification_in_session``).

After an answer or a decision the run resumes in the service: JSON callers get ``202`` and the working run (look it
up until it pauses again or finishes); with ``Accept: text/event-stream`` the rest of the run streams (see
``researchcrew.service._deep_runs`` for the events). Another user's run answers 404 exactly like an unknown id.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import Field

from researchcrew.contracts._base import Identifier
from researchcrew.contracts.clarification import ClarificationAnswer
from researchcrew.contracts.deep import DeepOptions, DeepRun, ExportFormat, PlanDecision
from researchcrew.contracts.request import ResearchRequest
from researchcrew.deep.export import MEDIA_TYPES
from researchcrew.errors import ResearchCrewError
from researchcrew.pipeline.conversation import ResearchReply
from researchcrew.service._auth import CurrentUser
from researchcrew.service._deep_runs import SegmentWork, SessionMessage, deep_problem, deep_research
from researchcrew.service._problems import problem_responses
from researchcrew.service._questions import EVENT_STREAM, MessageRequest, wants_event_stream
from researchcrew.service._slots import question_slot
from researchcrew.service._state import Service, ServiceState

if TYPE_CHECKING:  # imported by the runtime when a deep run is asked for: its Flow brings in crewAI
    from researchcrew.deep.runner import DeepResearch

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


class DeepQuestion(MessageRequest):
    """A deep run started outside a chat session: a ``ResearchRequest`` without its user (the key's, or the local
    socket's ``X-Researchcrew-User``), and the run's options."""

    session_id: Identifier = Field(
        default="default", description="The conversation the run belongs to (its memory); no chat session is made."
    )
    deep: DeepOptions = Field(default_factory=DeepOptions, description="Options of the run.")

    def research_request(self, *, user_id: str) -> ResearchRequest:
        fields = self.model_dump(exclude_unset=True, exclude={"session_id", "deep"})
        return ResearchRequest(user_id=user_id, session_id=self.session_id, **fields)


@router.post(
    "",
    status_code=202,
    response_model=DeepRun,
    responses={**DEEP_ACCEPTED, **_DEEP_STREAM, **_problems({503: "A store the service needs is not reachable."})},
    summary="Start a deep research run (as DeepResearch.research), outside any chat session.",
)
async def research(service: Service, user: CurrentUser, body: DeepQuestion, request: Request) -> Response:
    """202 with the run at its first pause (with ``auto_approve``: as soon as it works), or its events; the user's
    question slot is held while it works, as for a session's deep message."""
    question = body.research_request(user_id=user.user_id)
    deep = await deep_research(service)
    lease_s = body.deep.deadline_s or service.settings.deep.deadline_s
    async with question_slot(service, user.user_id, lease_s=lease_s) as slot:
        streaming = wants_event_stream(request)
        work = SegmentWork(
            service,
            lambda on_event: deep.research(question, body.deep, on_event=on_event),
            slot.hand_over(),
            run_id=None,
            streaming=streaming,
        )
    if streaming:
        return _streaming(work, service)
    run = await (work.until_started(deep, user.user_id) if body.deep.auto_approve else work.until_done())
    return _accepted(run)


async def research_in_session(
    service: ServiceState, user_id: str, session_id: str, body: SessionMessage, request: Request
) -> Response:
    """Start a deep run for the session's message: 202 with the run at its first pause (with ``auto_approve``: as
    soon as it works), or its events."""
    research = body.to_request(user_id=user_id, session_id=session_id)
    options = body.deep or DeepOptions()
    deep = await deep_research(service)
    lease_s = options.deadline_s or service.settings.deep.deadline_s
    async with question_slot(service, user_id, lease_s=lease_s, session_id=session_id, question=body.question) as slot:
        streaming = wants_event_stream(request)
        work = SegmentWork(
            service,
            lambda on_event: deep.research(research, options, on_event=on_event),
            slot.hand_over(),
            run_id=None,
            streaming=streaming,
        )
    if streaming:
        return _streaming(work, service)
    run = await (work.until_started(deep, user_id) if options.auto_approve else work.until_done())
    return _accepted(run)


async def answer_clarification_in_session(
    service: ServiceState, user_id: str, session_id: str, reply: ResearchReply, request: Request
) -> Response:
    """The session's message answers its deep run's clarifying questions (the conversation layer said so); the run
    resumes."""
    deep = await deep_research(service)
    return await _continue(
        service,
        deep,
        user_id,
        reply.run_id,
        request,
        lambda: deep.answer_clarification(reply.run_id, user_id=user_id, answer=reply.answer),
        session=(session_id, reply.answer),
    )


async def _continue(
    service: ServiceState,
    deep: DeepResearch,
    user_id: str,
    run_id: str,
    request: Request,
    submit: Callable[[], Awaitable[DeepRun]] | None,
    *,
    session: tuple[str, str] | None = None,
) -> Response:
    """Store the user's answer or decision (checked by the runner; ``submit``), then resume the run in the service.
    Without ``submit``: resume a run whose answer was stored but whose resuming never finished (a restart). With
    ``session`` (its id and the message), the message came in that session, which is touched."""
    session_id, question = session or (None, None)
    # The slot first: a stored decision must find a slot to resume in.
    async with question_slot(
        service, user_id, lease_s=service.settings.deep.deadline_s, session_id=session_id, question=question
    ) as slot:
        try:
            if submit is not None:
                await submit()
            else:
                await deep.check_resumable(run_id, user_id=user_id)
        except ResearchCrewError as error:
            raise deep_problem(error, run_id) from error
        streaming = wants_event_stream(request)
        work = SegmentWork(
            service,
            lambda on_event: deep.resume_research(run_id, user_id=user_id, on_event=on_event),
            slot.hand_over(),
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
async def get_research_run(service: Service, user: CurrentUser, run_id: RunId) -> DeepRun:
    deep = await deep_research(service)
    try:
        return await deep.get_research_run(run_id, user_id=user.user_id)
    except ResearchCrewError as error:
        raise deep_problem(error, run_id) from error


_EXPORT_CONTENT: dict[str, dict[str, Any]] = {
    media_type.split(";")[0]: {"schema": {"type": "string", "format": "binary"}} for media_type in MEDIA_TYPES.values()
}


@router.get(
    "/{run_id}/report",
    response_class=Response,
    responses={
        200: {
            "description": "The report as a file (Content-Disposition: attachment, with a safe file name).",
            "content": _EXPORT_CONTENT,
        },
        **_problems(
            {
                409: "The run is not completed: it has no report to export yet (or will not have one).",
                503: "A store the service needs is not reachable.",
            }
        ),
    },
    summary="A completed run's report as Markdown, HTML, PDF or DOCX, with numbered citations and references.",
)
async def export_report(
    service: Service,
    user: CurrentUser,
    run_id: RunId,
    format: Annotated[ExportFormat, Query(description="md, html, pdf or docx.")] = "md",
) -> Response:
    deep = await deep_research(service)
    try:
        exported = await deep.export_report(run_id, user_id=user.user_id, format=format)
    except ResearchCrewError as error:
        raise deep_problem(error, run_id) from error
    return Response(
        content=exported.content,
        media_type=exported.media_type,
        headers={
            "Content-Disposition": f'attachment; filename="{exported.file_name}"',
            "Cache-Control": "private, no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )


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
async def resume_research(service: Service, user: CurrentUser, run_id: RunId, request: Request) -> Response:
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
async def cancel_research(service: Service, user: CurrentUser, run_id: RunId) -> DeepRun:
    deep = await deep_research(service)
    try:
        return await deep.cancel_research(run_id, user_id=user.user_id)
    except ResearchCrewError as error:
        raise deep_problem(error, run_id) from error
