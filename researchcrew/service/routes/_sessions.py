"""``/v1/sessions``: a user's conversations: create, list, read (the exchanges with answers, citations and source
reports), rename, delete. Another user's session answers 404 exactly like one that does not exist."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Query, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from researchcrew.contracts._base import StorableInput
from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.synthesizer import Citation
from researchcrew.memory.records import ExchangeRecord
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import ApiProblem, problem_responses
from researchcrew.service._state import Service
from researchcrew.service.chat_sessions import MAX_TITLE_CHARS, ChatSession

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=problem_responses(400, 401, 413, 422, 429))

SessionId = Annotated[str, Field(min_length=1, max_length=256, description="The session's id.")]


class SessionCreate(StorableInput):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(
        default="", max_length=MAX_TITLE_CHARS, description="A title; empty: the first question's opening."
    )


class SessionRename(StorableInput):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, description="The new title.")


class SessionList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sessions: list[ChatSession] = Field(description="The user's sessions, most recently used first.")


class Exchange(BaseModel):
    """One question of a session and its answer, as stored."""

    model_config = ConfigDict(extra="forbid")

    response_id: str = Field(description="The answer's id.")
    question: str = Field(description="The question as asked.")
    answer: str = Field(description="The answer text (Markdown) with [n] citation markers.")
    answer_kind: str = Field(description="generated, extractive, uncertainty or refusal.")
    confidence: float = Field(description="The answer's overall confidence, 0-1.")
    asked_at: datetime = Field(description="When it was asked (UTC).")
    answered_at: datetime = Field(description="When it was answered (UTC).")
    citations: list[Citation] = Field(description="The numbered sources the answer cites.")
    source_reports: list[SourceReport] = Field(description="What each source did: used, or failed and why.")


class SessionDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session: ChatSession = Field(description="The session.")
    exchanges: list[Exchange] = Field(description="Its latest exchanges, oldest first.")


def _not_found(session_id: str) -> ApiProblem:
    return ApiProblem(404, f"No session {session_id!r}.", kind="session-not-found")


@router.post("", status_code=201, response_model=ChatSession, summary="Create a session.")
async def create_session(
    service: Service, user: CurrentUser, body: Annotated[SessionCreate | None, Body()] = None
) -> ChatSession:
    return await service.sessions.create(user.user_id, title=(body or SessionCreate()).title)


class ListQuery(StorableInput):
    """Paging of the session list (unknown parameters are refused, like unknown body fields)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=200, description="At most this many.")
    offset: int = Field(default=0, ge=0, le=1_000_000, description="Skip this many.")


class ReadQuery(StorableInput):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=100, ge=1, le=1000, description="The latest this many exchanges.")


@router.get("", response_model=SessionList, summary="List your sessions, most recently used first.")
async def list_sessions(service: Service, user: CurrentUser, query: Annotated[ListQuery, Query()]) -> SessionList:
    sessions = await service.sessions.list_sessions(user.user_id, limit=query.limit, offset=query.offset)
    return SessionList(sessions=sessions)


@router.get(
    "/{session_id}",
    response_model=SessionDetail,
    responses=problem_responses(404),
    summary="Read a session: its exchanges with answers, citations and source reports.",
)
async def read_session(
    service: Service,
    user: CurrentUser,
    session_id: SessionId,
    query: Annotated[ReadQuery, Query()],
) -> SessionDetail:
    session = await service.sessions.get(user.user_id, session_id)
    if session is None:
        raise _not_found(session_id)
    records = await service.sessions.exchanges_of(user.user_id, session_id, limit=query.limit)
    return SessionDetail(session=session, exchanges=[_exchange(record) for record in records])


@router.patch("/{session_id}", response_model=ChatSession, responses=problem_responses(404), summary="Rename.")
async def rename_session(
    service: Service, user: CurrentUser, session_id: SessionId, body: SessionRename
) -> ChatSession:
    session = await service.sessions.rename(user.user_id, session_id, body.title)
    if session is None:
        raise _not_found(session_id)
    return session


@router.delete(
    "/{session_id}",
    status_code=204,
    response_class=Response,
    responses=problem_responses(404),
    summary="Delete a session and its exchanges.",
)
async def delete_session(service: Service, user: CurrentUser, session_id: SessionId) -> Response:
    await service.runtime.flush_memory(timeout_s=5.0)  # an answer still being stored must not outlive its session
    if not await service.sessions.delete(user.user_id, session_id):
        raise _not_found(session_id)
    return Response(status_code=204)


def _exchange(record: ExchangeRecord) -> Exchange:
    return Exchange(
        response_id=record.response_id,
        question=record.question,
        answer=record.answer,
        answer_kind=record.answer_kind,
        confidence=record.confidence,
        asked_at=record.asked_at,
        answered_at=record.answered_at,
        citations=_valid(Citation, record.citations),
        source_reports=_valid(SourceReport, record.source_reports),
    )


def _valid(model: type[M], items: list[dict[str, Any]]) -> list[M]:
    """Stored JSON as contracts; an item an older release stored differently is skipped (and logged)."""
    valid: list[M] = []
    for item in items:
        try:
            valid.append(model.model_validate(item))
        except ValidationError as error:
            logger.warning("skipping a stored %s that no longer validates: %s", model.__name__, error)
    return valid
