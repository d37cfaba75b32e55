"""``POST /v1/sessions/{session_id}/messages``: ask a question in a session. The answer is the ``FinalResponse``
as JSON; with ``Accept: text/event-stream`` it is a stream of server-sent events instead (see
``researchcrew.service.questions``). ``mode: "deep"`` starts a deep research run instead, and a message in a session
whose deep run waits for clarification answers it (``researchcrew.service.routes.deep_runs``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import StreamingResponse

from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.service.auth import CurrentUser
from researchcrew.service.deep_runs import SessionMessage
from researchcrew.service.problems import ApiProblem, problem_responses
from researchcrew.service.questions import (
    EVENT_STREAM,
    answer_unless_disconnected,
    event_stream,
    take_question_slot,
    wants_event_stream,
)
from researchcrew.service.routes import deep_runs
from researchcrew.service.state import Service

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
        return await deep_runs.ask_deep(service, user.user_id, session_id, body, request)
    waiting = await deep_runs.pending_reply(service, user.user_id, session_id, body)
    if waiting is not None:  # the session's deep run asked clarifying questions: this message answers them
        return await deep_runs.reply_in_session(service, user.user_id, session_id, waiting, body, request)
    research = body.to_request(user_id=user.user_id, session_id=session_id)
    slot = await take_question_slot(service, user.user_id, research)
    try:
        owned = await service.sessions.touch(user.user_id, session_id, question=body.question)
    except BaseException:
        await slot.release()
        raise
    if not owned:
        await slot.release()
        raise ApiProblem(404, f"No session {session_id!r}.", kind="session-not-found")
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
