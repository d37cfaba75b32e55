"""``POST /v1/chat/completions`` and ``GET /v1/models``: researchcrew as a "model" for any OpenAI client.

A chat completion researches the conversation's last user message in the session the conversation maps to
(``conversation``), with the same key, limits, cancellation and memory as ``POST /v1/sessions/{id}/messages``. A
completion is always a quick answer: whether the message replies to the session's quick clarification is decided by
``researchcrew.pipeline.conversation`` (in ``Runtime.ask``), as for every door; a deep run's clarifying questions are
answered through the session messages route or ``/v1/deep-runs``. The
answer is OpenAI's ``chat.completion``: the content is the cited answer in Markdown with its numbered references,
``usage`` counts the language model's tokens, and ``researchcrew`` carries the structured citations and what each
source did.

Streamed (``stream: true``), progress comes first, one line per source answering or failing, as
``delta.reasoning_content`` (chat front-ends show it apart from the answer, as a model's thinking), then the answer
as ``delta.content``, then the chunk that finishes it (with ``researchcrew``), the usage chunk when asked for, and
``data: [DONE]``. The answer is sent once it has been validated: an OpenAI stream can only append, and the text a
writer streams may still lose a claim whose citation fails validation, or be replaced by the extractive answer,
while a front-end keeps whatever content it received as the assistant's turn. A failure after the stream started
is sent as ``data: {"error": {...}}``, which the OpenAI SDK raises as ``APIError``.

The models are one research assistant in four answer styles: ``researchcrew`` (the user's learned style),
``researchcrew-concise``, ``researchcrew-detailed`` and ``researchcrew-technical``, so a front-end's model picker
chooses the style.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from researchcrew.contracts.progress import ProgressEvent
from researchcrew.contracts.query import ResponseFormat
from researchcrew.contracts.request import ResearchRequest, ResponseOptions
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import ResearchCrewError
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import problem_responses
from researchcrew.service._questions import (
    EVENT_STREAM,
    answer_unless_disconnected,
    service_problem,
    track,
)
from researchcrew.service._slots import question_slot
from researchcrew.service._state import Service, ServiceState
from researchcrew.service._streaming import pump
from researchcrew.service._throttle import QuestionSlot
from researchcrew.service.openai_compat._content import (
    content_pieces,
    progress_line,
    render_content,
    standalone_of,
    usage_of,
)
from researchcrew.service.openai_compat._conversation import (
    SessionSource,
    first_user_text,
    question_of,
    session_of,
)
from researchcrew.service.openai_compat._errors import OpenAIError, OpenAIRoute, unsupported
from researchcrew.service.openai_compat._schema import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    Delta,
    ErrorBody,
    ModelCard,
    ModelList,
    ResearchDetails,
    ResearchOptions,
)

logger = logging.getLogger(__name__)

MODELS: dict[str, tuple[ResponseFormat | None, str]] = {
    "researchcrew": (None, "Cited research answers in the style the user's history has taught it."),
    "researchcrew-concise": ("concise", "Cited research answers, short."),
    "researchcrew-detailed": ("detailed", "Cited research answers, in titled sections."),
    "researchcrew-technical": ("technical", "Cited research answers with technical detail."),
}
WORDS_PER_TOKEN = 0.75  # English prose: about three words for four tokens
_STARTED = int(time.time())
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "A parameter is invalid or asks for something researchcrew cannot give (`error.param` names it).",
        401: "No valid API key (send `Authorization: Bearer <key>`).",
        404: "No such model.",
        429: "Too many requests or questions running; retry after `Retry-After` seconds.",
        503: "The service is starting, stopping or cannot reach a store it needs.",
    }.items()
}
_ERRORS.update(problem_responses(413))  # the body limit answers before any route reads the body: problem+json

router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIRoute, responses=_ERRORS)


@router.get("/models", response_model=ModelList, summary="The models (answer styles) an OpenAI client can ask for.")
async def list_models(user: CurrentUser) -> ModelList:
    return ModelList(data=[_card(model) for model in MODELS])


@router.get("/models/{model}", response_model=ModelCard, summary="One model.")
async def read_model(
    user: CurrentUser, model: Annotated[str, Path(max_length=256, description="A model id.")]
) -> ModelCard:
    _check_model(model)
    return _card(model)


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    summary="Research the conversation's last user message; an OpenAI chat completion, or a stream of chunks.",
    responses={
        200: {
            "description": "The answer; with `stream: true`, server-sent `chat.completion.chunk`s ending in `[DONE]`.",
            "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
        }
    },
)
async def chat_completions(
    service: Service,
    user: CurrentUser,
    body: ChatCompletionRequest,
    request: Request,
    chat_id: Annotated[
        str | None,
        Header(alias="X-OpenWebUI-Chat-Id", max_length=256, description="Open WebUI's chat id: the session to use."),
    ] = None,
) -> Response:
    _check_model(body.model)
    _refuse_unsupported(body)
    question = question_of(body)
    session_id, chosen_by = session_of(body, user_id=user.user_id, chat_id_header=chat_id)
    research = _research_request(body, question=question, user_id=user.user_id, session_id=session_id)
    try:
        made = await service.sessions.ensure(user.user_id, session_id, first_question=first_user_text(body))
        if not made:  # a session made now is already titled and up to date
            await service.sessions.touch(user.user_id, session_id, question=question)
    except ResearchCrewError as error:
        raise OpenAIError.from_problem(service_problem(error)) from error
    answer = _Answer(body.model, session_id, chosen_by, question)
    deadline = research.deadline_s or service.settings.retrieval.run_deadline_s
    async with question_slot(service, user.user_id, lease_s=deadline) as slot:  # the session was touched above
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(
                _stream(service, research, slot.hand_over(), answer, include_usage=include_usage),
                media_type=EVENT_STREAM,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        response = await answer_unless_disconnected(service, research, request)  # ApiProblem on a store failure
    if response is None:  # the client went away; nobody reads this
        return Response(status_code=499)
    return JSONResponse(answer.completion(response).model_dump(mode="json"))


# ---- helpers ----------------------------------------------------------------------------------------------------


def _card(model: str) -> ModelCard:
    return ModelCard(id=model, created=_STARTED, description=MODELS[model][1])


def _check_model(model: str) -> None:
    if model not in MODELS:
        raise OpenAIError(
            404,
            f"The model {model!r} does not exist; the models are {', '.join(MODELS)} (GET /v1/models).",
            param="model",
            code="model_not_found",
        )


def _refuse_unsupported(body: ChatCompletionRequest) -> None:
    if body.n not in (None, 1):
        raise unsupported("n", "researchcrew researches one answer per request; send n=1 or leave it out.")
    if body.logprobs or body.top_logprobs:
        raise unsupported("logprobs", "Researched answers have no token log probabilities.")
    if body.response_format is not None and body.response_format.get("type", "text") != "text":
        raise unsupported("response_format", 'Answers are cited Markdown; only {"type": "text"} is supported.')
    if body.audio is not None or set(body.modalities or ()) - {"text"}:
        raise unsupported("modalities", "Answers are text only.")
    for name, choice in (("tool_choice", body.tool_choice), ("function_call", body.function_call)):
        if choice is not None and choice not in ("none", "auto"):
            raise unsupported(name, "researchcrew never calls a client's tools; use 'auto' or 'none'.")


def _research_request(body: ChatCompletionRequest, *, question: str, user_id: str, session_id: str) -> ResearchRequest:
    options = body.researchcrew or ResearchOptions()
    style = options.response.model_dump(exclude_unset=True)
    model_format = MODELS[body.model][0]
    if model_format is not None:
        style.setdefault("response_format", model_format)
    tokens = body.max_completion_tokens or body.max_tokens
    if tokens is not None and "max_response_length" not in style:
        words = max(50, min(20_000, int(tokens * WORDS_PER_TOKEN)))
        style["max_response_length"] = words
        style.setdefault("min_response_length", min(words, 100))
    longest, shortest = style.get("max_response_length"), style.get("min_response_length")
    if longest is not None and shortest is not None and shortest > longest:
        raise OpenAIError(
            400,
            f"min_response_length ({shortest}) is larger than max_response_length ({longest}).",
            param="researchcrew.response.min_response_length",
        )
    routing = options.model_dump(exclude_unset=True, exclude={"response"})
    return ResearchRequest(
        question=question,
        user_id=user_id,
        session_id=session_id,
        response=ResponseOptions(**style),
        **routing,
    )


class _Answer:
    """The OpenAI objects of one answer: ids and times shared by every chunk, the conversion of the answer."""

    def __init__(self, model: str, session_id: str, chosen_by: SessionSource, question: str) -> None:
        self.model = model
        self.session_id = session_id
        self.chosen_by: SessionSource = chosen_by
        self.question = question
        self.stream_id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())

    def details(self, response: FinalResponse) -> ResearchDetails:
        return ResearchDetails(
            session_id=self.session_id,
            session_source=self.chosen_by,
            response_id=response.response_id,
            question=self.question,
            answer_kind=response.answer_kind,
            confidence=response.confidence,
            confidence_level=response.confidence_level,
            citations=response.citations,
            source_reports=response.source_reports,
            caveats=response.caveats,
            partial=response.partial,
            standalone_question=standalone_of(response),
        )

    def completion(self, response: FinalResponse) -> ChatCompletion:
        return ChatCompletion(
            id="chatcmpl-" + response.response_id,
            created=int(response.created_at.timestamp()),
            model=self.model,
            choices=[Choice(message=AssistantMessage(content=render_content(response)))],
            usage=usage_of(response),
            researchcrew=self.details(response),
        )

    def chunk(self, delta: Delta | None = None, **fields: Any) -> bytes:
        choices = [ChunkChoice(delta=delta or Delta(), **fields)]
        return self._send(
            ChatCompletionChunk(id=self.stream_id, created=self.created, model=self.model, choices=choices)
        )

    def finish(self, response: FinalResponse) -> bytes:
        chunk = ChatCompletionChunk(
            id=self.stream_id,
            created=self.created,
            model=self.model,
            choices=[ChunkChoice(delta=Delta(), finish_reason="stop")],
            researchcrew=self.details(response),
        )
        return self._send(chunk)

    def usage(self, response: FinalResponse) -> bytes:
        chunk = ChatCompletionChunk(
            id=self.stream_id, created=self.created, model=self.model, choices=[], usage=usage_of(response)
        )
        return self._send(chunk)

    @staticmethod
    def _send(chunk: ChatCompletionChunk) -> bytes:
        data = chunk.model_dump(mode="json")
        for key in ("usage", "researchcrew"):
            if data[key] is None:
                del data[key]
        for choice in data["choices"]:
            choice["delta"] = {key: value for key, value in choice["delta"].items() if value is not None}
        return _data(json.dumps(data, ensure_ascii=False))


def _data(payload: str) -> bytes:
    return f"data: {payload}\n\n".encode()


async def _stream(
    service: ServiceState, research: ResearchRequest, slot: QuestionSlot, answer: _Answer, *, include_usage: bool
) -> AsyncIterator[bytes]:
    """The answer as OpenAI chunks: progress as reasoning, then the validated answer, then ``[DONE]``. Closing the
    stream (the client went away) cancels the question; the slot is given back either way."""
    events: asyncio.Queue[ProgressEvent] = asyncio.Queue()
    task = track(service, service.runtime.ask(research, on_event=events.put_nowait))

    def render(event: ProgressEvent) -> bytes | None:
        line = progress_line(event)
        return answer.chunk(Delta(reasoning_content=line + "\n")) if line else None

    def finish(done: asyncio.Task[FinalResponse]) -> Iterator[bytes]:
        try:
            response = done.result()
        except ResearchCrewError as error:
            problem = service_problem(error)
            yield _data(OpenAIError.from_problem(problem).body().model_dump_json())
        except Exception as error:  # the outermost guard of a stream already under way: report, never hang up mute
            incident = uuid.uuid4().hex[:12]
            logger.error("unexpected error %s in a chat completion stream", incident, exc_info=error)
            failure = OpenAIError(500, f"The answer failed unexpectedly; the error is logged as {incident}.")
            yield _data(failure.body().model_dump_json())
        else:
            for piece in content_pieces(render_content(response)):
                yield answer.chunk(Delta(content=piece))
            yield answer.finish(response)
            if include_usage:
                yield answer.usage(response)
        yield _data("[DONE]")

    chunks = pump(
        task,
        events,
        keep_alive_s=service.settings.service.keep_alive_s,
        render=render,
        finish=finish,
        opening=[answer.chunk(Delta(role="assistant"))],
        on_close=slot.release,
        closed_early=f"chat completion stream closed early; cancelled the question of user {research.user_id}",
    )
    async with aclosing(chunks):  # closing this stream closes the pump at once, not when it is collected
        async for chunk in chunks:
            yield chunk
