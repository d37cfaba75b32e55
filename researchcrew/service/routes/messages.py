"""``POST /v1/sessions/{session_id}/messages``: ask a question in a session. The answer is the ``FinalResponse``
as JSON; with ``Accept: text/event-stream`` it is a stream of server-sent events instead (see
``researchcrew.service.questions``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import StreamingResponse

from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.service.auth import CurrentUser
from researchcrew.service.problems import ApiProblem, problem_responses
from researchcrew.service.questions import (
    EVENT_STREAM,
    MessageRequest,
    answer_unless_disconnected,
    event_stream,
    take_question_slot,
    wants_event_stream,
)
from researchcrew.service.state import Service

router = APIRouter(prefix="/v1/sessions", tags=["messages"], responses=problem_responses(400, 401, 404, 413, 422, 429))

_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer; or, with `Accept: text/event-stream`, server-sent events: `stage`, `source`, "
        "`text` (ProgressEvent JSON), then `response` (FinalResponse JSON), then `done`; `error` on a failure.",
        "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
    },
    503: {"description": "A store the service needs is not reachable."},
}


@router.post(
    "/{session_id}/messages",
    response_model=FinalResponse,
    responses={**_STREAM_DOC, **problem_responses(503)},
    summary="Ask a question in a session; JSON answer, or server-sent events.",
)
async def ask_in_session(
    service: Service,
    user: CurrentUser,
    session_id: Annotated[str, Path(min_length=1, max_length=256, description="The session's id.")],
    body: MessageRequest,
    request: Request,
) -> Response:
    if not await service.sessions.touch(user.user_id, session_id, question=body.question):
        raise ApiProblem(404, f"No session {session_id!r}.", kind="session-not-found")
    research = body.to_request(user_id=user.user_id, session_id=session_id)
    slot = await take_question_slot(service, user.user_id, research)
    if wants_event_stream(request):
        return StreamingResponse(
            event_stream(service, research, slot),
            media_type=EVENT_STREAM,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    try:
        answer = await answer_unless_disconnected(service, research, request)
    finally:
        await slot.release()
    if answer is None:  # nobody is listening any more
        return Response(status_code=499)
    return Response(content=answer.model_dump_json(), media_type="application/json")
