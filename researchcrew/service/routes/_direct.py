"""The routes the service client uses (``researchcrew.client``): the SDK's ``ResearchAssistant(service_url=...)``
and every `researchcrew` command of this machine while a service runs for its data folder.

``GET /v1/service`` says which data folder the service owns (a command compares it with its own before it sends
anything). ``POST /v1/ask`` is ``Runtime.ask`` of one ``ResearchRequest`` — exactly what an in-process command or
``ResearchAssistant.ask`` does, with no chat session involved — answered as JSON, or as the server-sent events
``stream()`` yields with ``Accept: text/event-stream``. ``GET``/``DELETE /v1/memory`` export and forget the user's
own memory.

The ``/v1/kb/...`` routes (`kb stats`, `ingest`, `kb remove`, `kb reindex`) are served over the Unix socket only
(403 over TCP): ``ingest`` reads files *on the service's machine* and the others show or change the shared knowledge
base as a whole. The socket is its owner's (mode 0600, so only that user or root can connect) and the service runs
as that owner, so it reads only what the command's user could read themselves. Over HTTP, documents are uploaded.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import Field, StrictBool

from researchcrew.contracts._base import Contract, Identifier, RequestContract
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import ResearchCrewError
from researchcrew.jobs.contracts import RunInfo
from researchcrew.knowledge.collection import KnowledgeBaseStats, ReindexReport
from researchcrew.knowledge.ingest import DEFAULT_BATCH_SIZE, IngestReport
from researchcrew.knowledge.upgrade import UpgradeReport
from researchcrew.service._auth import CurrentUser, User
from researchcrew.service._problems import ApiProblem, problem_responses
from researchcrew.service._questions import (
    EVENT_STREAM,
    MessageRequest,
    answer_unless_disconnected,
    event_stream,
    service_problem,
    wants_event_stream,
)
from researchcrew.service._slots import question_slot
from researchcrew.service._state import Service
from researchcrew.service.routes._jobs import RunId, job_problems

router = APIRouter(prefix="/v1", tags=["client"], responses=problem_responses(400, 401, 413, 422, 429))
_OWNER_ONLY = problem_responses(403, 503)  # files of the service's machine, the shared knowledge base's upkeep


class ServiceIdentity(Contract):
    """Which data folder a service owns, and which process it is."""

    data_dir: str = Field(description="The service's data folder, resolved.")
    pid: int = Field(description="The service's process id.")
    version: str = Field(description="researchcrew's version in the service.")
    local: bool = Field(description="Whether this request came over the service's Unix socket.")


class DirectQuestion(MessageRequest):
    """A ``ResearchRequest`` without its user (the key's, or the local socket's ``X-Researchcrew-User``)."""

    session_id: Identifier = Field(default="default", description="The conversation the question belongs to.")
    continue_session: StrictBool = Field(
        default=False, description="Ask in the user's most recent session instead of session_id."
    )

    def to_request(self, *, user_id: str, session_id: str) -> ResearchRequest:
        fields = self.model_dump(exclude_unset=True, exclude={"session_id", "continue_session"})
        return ResearchRequest(user_id=user_id, session_id=session_id, **fields)


class IngestPaths(RequestContract):
    """`researchcrew ingest` of files on the service's machine (Unix socket only)."""

    paths: list[str] = Field(min_length=1, max_length=1000, description="Absolute files, folders or globs.")
    fields: list[str] = Field(default_factory=list, max_length=20, description="JSONL field mapping, NAME=SOURCE.")
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1, le=10_000, description="Documents per batch.")
    remove_missing: StrictBool = Field(default=True, description="Remove documents that disappeared from a file.")


@router.get("/service", response_model=ServiceIdentity, summary="Which data folder this service owns.")
async def identity(service: Service, user: CurrentUser) -> ServiceIdentity:
    from importlib.metadata import version

    return ServiceIdentity(
        data_dir=str(service.settings.data_dir.resolve()),
        pid=os.getpid(),
        version=version("researchcrew"),
        local=user.local,
    )


@router.post(
    "/ask",
    response_model=None,
    responses={200: {"content": {EVENT_STREAM: {"schema": {"type": "string"}}}}, **problem_responses(404, 503)},
    summary="Research one question (as ResearchAssistant.ask); JSON answer, or server-sent events.",
)
async def ask(service: Service, user: CurrentUser, body: DirectQuestion, request: Request) -> Response:
    session_id = body.session_id
    if body.continue_session:
        try:
            last = await service.runtime.last_session(user.user_id)
        except ResearchCrewError as error:
            raise service_problem(error) from error
        if last is None:
            raise ApiProblem(
                404,
                f"user {user.user_id!r} has no earlier session to continue; ask without --continue to start one",
                kind="no-session",
            )
        session_id = last
    research = body.to_request(user_id=user.user_id, session_id=session_id)
    deadline = research.deadline_s or service.settings.retrieval.run_deadline_s
    async with question_slot(service, user.user_id, lease_s=deadline) as slot:
        if wants_event_stream(request):
            return StreamingResponse(
                event_stream(service, research, slot.hand_over()),
                media_type=EVENT_STREAM,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answer = await answer_unless_disconnected(service, research, request)
    if answer is None:
        return Response(status_code=499)
    return Response(content=answer.model_dump_json(), media_type="application/json")


@router.get(
    "/kb/stats",
    response_model=KnowledgeBaseStats,
    responses=_OWNER_ONLY,
    summary="What the knowledge base holds (Unix socket only).",
)
async def kb_stats(service: Service, user: CurrentUser) -> KnowledgeBaseStats:
    _owner_only(user, "The knowledge base's statistics (its sources' paths)")
    try:
        base = await service.runtime.knowledge_base()
        return await asyncio.to_thread(base.stats)
    except ResearchCrewError as error:
        raise service_problem(error) from error


@router.post("/kb/ingest", response_model=IngestReport, responses=problem_responses(403), summary="Ingest local paths.")
async def kb_ingest(service: Service, user: CurrentUser, body: IngestPaths) -> IngestReport:
    _owner_only(user, "Ingesting paths on the server")
    from researchcrew.knowledge.loaders import FieldMapError, parse_field_map

    try:
        field_map = parse_field_map(tuple(body.fields))
    except FieldMapError as error:
        raise ApiProblem(422, str(error)) from error
    try:
        base = await service.runtime.knowledge_base()
        report: IngestReport = await asyncio.to_thread(
            base.ingest,
            body.paths,
            field_map=field_map,
            batch_size=body.batch_size,
            progress=False,
            remove_missing=body.remove_missing,
        )
    except ResearchCrewError as error:
        raise service_problem(error) from error
    return report


class ForgetOutcome(Contract):
    """What `forget` deleted: row counts per table, and the deletion in Zep (when Zep is the backend)."""

    user_id: str = Field(description="The user whose memory was deleted.")
    deleted: dict[str, int] = Field(description="Rows deleted, by table.")
    zep: str | None = Field(description="deleted, queued (with the reason), or null without Zep.")


@router.get("/memory", summary="Everything stored about you, as `researchcrew memory export` prints it.")
async def export_memory(service: Service, user: CurrentUser) -> dict[str, Any]:
    try:
        return await service.runtime.export_user(user.user_id)
    except ResearchCrewError as error:
        raise service_problem(error) from error


@router.delete("/memory", response_model=ForgetOutcome, summary="Delete everything stored about you.")
async def forget_memory(service: Service, user: CurrentUser) -> ForgetOutcome:
    try:
        report = await service.runtime.forget_user(user.user_id, deliver_within_s=2 * service.settings.zep.timeout_s)
    except ResearchCrewError as error:
        raise service_problem(error) from error
    return ForgetOutcome(user_id=user.user_id, deleted=report.deleted, zep=report.zep)


class RemoveDocuments(RequestContract):
    """`researchcrew kb remove`: documents by source key or document id (Unix socket only)."""

    source_keys: list[str] = Field(default_factory=list, max_length=100_000, description="Source keys as stored.")
    doc_ids: list[str] = Field(default_factory=list, max_length=100_000, description="Document ids.")


class Removed(Contract):
    chunks_removed: int = Field(ge=0, description="Chunks removed.")


def _owner_only(user: User, what: str) -> None:
    """Files of the service's machine and maintenance of the shared knowledge base: its owner, over the socket."""
    if not user.local:
        raise ApiProblem(403, f"{what} is for the local socket only.", kind="forbidden")


@router.get(
    "/kb/documents", responses=_OWNER_ONLY, summary="Every stored source key and its document id (Unix socket only)."
)
async def kb_documents(service: Service, user: CurrentUser) -> dict[str, str]:
    _owner_only(user, "Listing the knowledge base's documents")
    try:
        base = await service.runtime.knowledge_base()
        return await asyncio.to_thread(base.document_index)
    except ResearchCrewError as error:
        raise service_problem(error) from error


@router.post(
    "/kb/remove", response_model=Removed, responses=_OWNER_ONLY, summary="Remove documents (Unix socket only)."
)
async def kb_remove(service: Service, user: CurrentUser, body: RemoveDocuments) -> Removed:
    _owner_only(user, "Removing documents")
    try:
        base = await service.runtime.knowledge_base()
        removed = await asyncio.to_thread(base.remove, source_keys=body.source_keys, doc_ids=body.doc_ids)
    except ResearchCrewError as error:
        raise service_problem(error) from error
    return Removed(chunks_removed=removed)


class ReindexResult(ReindexReport):
    """What `kb reindex` did: the keyword text re-analysed, after the collections upgrade when one was due."""

    collections_upgrade: UpgradeReport = Field(description="The upgrade to document collections.")


@router.post(
    "/kb/reindex",
    response_model=ReindexResult,
    responses=_OWNER_ONLY,
    summary="Upgrade the knowledge base and re-analyse keyword text (Unix socket only).",
)
async def kb_reindex(service: Service, user: CurrentUser) -> ReindexResult:
    from researchcrew.knowledge.upgrade import upgrade_and_reindex

    _owner_only(user, "Reindexing")
    try:
        base = await service.runtime.knowledge_base()
        upgrade, report = await asyncio.to_thread(upgrade_and_reindex, base)
    except ResearchCrewError as error:
        raise service_problem(error) from error
    return ReindexResult(**report.model_dump(), collections_upgrade=upgrade)


@router.post(
    "/runs/{run_id}/resume",
    status_code=202,
    response_model=RunInfo,
    responses=problem_responses(404),
    summary="Continue a run whose process stopped, in the service (stored answers are not repeated).",
)
async def resume_run(service: Service, user: CurrentUser, run_id: RunId) -> RunInfo:
    with job_problems():
        run = await service.jobs.status(user.user_id, run_id)  # another user's run answers 404 like an unknown one
        if run.executor == "queue":
            return await service.jobs.resume(user.user_id, run_id)  # sent to the workers again
        service.jobs.run_in_background(run_id)
        return await service.jobs.status(user.user_id, run_id)
