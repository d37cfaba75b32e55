"""``POST /v1/sessions/{session_id}/messages``: ask a question in a session. The answer is the ``FinalResponse``
as JSON; with ``Accept: text/event-stream`` it is a stream of server-sent events instead (see
``researchcrew.service._questions``). ``mode: "deep"`` starts a deep research run instead
(``researchcrew.service.routes._deep_runs``). Whether an ordinary message answers something waiting in the session —
a deep run's clarifying questions (the run resumes: 202), a quick answer's (the original question is answered,
narrowed by the reply) — is decided by the conversation layer (``researchcrew.pipeline.conversation``), as for every
other door."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import StreamingResponse

from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import ResearchCrewError
from researchcrew.pipeline.conversation import ResearchReply
from researchcrew.service._auth import CurrentUser
from researchcrew.service._deep_runs import SessionMessage
from researchcrew.service._problems import problem_responses
from researchcrew.service._questions import (
    EVENT_STREAM,
    answer_unless_disconnected,
    event_stream,
    service_problem,
    wants_event_stream,
)
from researchcrew.service._slots import question_slot
from researchcrew.service._state import Service
from researchcrew.service.routes import _deep_runs as deep_runs

router = APIRouter(prefix="/v1/sessions", tags=["messages"], responses=problem_responses(400, 401, 404, 413, 422, 429))

_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer; or, with `Accept: text/event-stream`, server-sent events: `stage`, `source`, "
        "`text` (ProgressEvent JSON), then `response` (FinalResponse JSON), then `done`; `error` on a failure. "
        f'With `mode: "deep"` (or answering a deep run\'s clarifying questions), {deep_runs.DEEP_EVENTS}.',
        "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
    },
    503: {"description": "A store the service needs is not reachable."},
}


@router.post(
    "/{session_id}/messages",
    response_model=FinalResponse,
    responses={**_STREAM_DOC, **deep_runs.DEEP_ACCEPTED, **problem_responses(409, 503)},
    summary="Ask a question in a session; JSON answer, or server-sent events.",
)
async def ask_in_session(
    service: Service,
    user: CurrentUser,
    session_id: Annotated[str, Path(min_length=1, max_length=256, description="The session's id.")],
    body: SessionMessage,
    request: Request,
) -> Response:
    if body.mode == "deep":
        return await deep_runs.research_in_session(service, user.user_id, session_id, body, request)
    research = body.to_request(user_id=user.user_id, session_id=session_id)
    try:
        turn = await service.runtime.conversation.turn(research)
    except ResearchCrewError as error:
        raise service_problem(error) from error
    if isinstance(turn, ResearchReply):  # the session's deep run asked clarifying questions: this message answers them
        return await deep_runs.answer_clarification_in_session(service, user.user_id, session_id, turn, request)
    deadline = research.deadline_s or service.settings.retrieval.run_deadline_s
    async with question_slot(
        service, user.user_id, lease_s=deadline, session_id=session_id, question=body.question
    ) as slot:
        if wants_event_stream(request):
            return StreamingResponse(
                event_stream(service, research, slot.hand_over()),
                media_type=EVENT_STREAM,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answer = await answer_unless_disconnected(service, research, request)
    if answer is None:  # nobody is listening any more
        return Response(status_code=499)
    return Response(content=answer.model_dump_json(), media_type="application/json")
