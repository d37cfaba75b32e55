"""``/v1/documents``: a team fills the knowledge base over HTTP (``researchcrew.knowledge.library``).

``POST /v1/documents`` takes ``multipart/form-data`` (one or more ``file`` parts, and ``collection``), a raw body
whose content type says the format (``?filename=`` names it), or JSON ``{"urls": [...], "collection": ...}``. Every
file is read by the loaders before anything is stored: a bad one answers 422 with the loader's reason (415 for a
type no loader reads), a large one 413, and nothing of the request is kept. Accepted documents answer 202 and are
ingested in the background; ``GET /v1/documents/{id}/events`` streams their progress. Who may see a document is
decided by ``knowledge.document_store.readable_by`` (its owner, and whoever reads its collection: the members of a
named shared one): any other user's document answers 404 like a missing one. Delete and reindex are the uploader's
and the collection owner's (``changeable_by``); another reader is answered 403.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from researchcrew.contracts._base import StorableInput
from researchcrew.errors import DocumentError, DocumentInputError, KnowledgeBaseError, MemoryStoreError
from researchcrew.knowledge.document_store import DocumentStatus, StoredDocument
from researchcrew.knowledge.intake import UploadedFile
from researchcrew.knowledge.library import DocumentEvent
from researchcrew.knowledge.url_fetch import fetch
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import ApiProblem, problem_for, problem_responses
from researchcrew.service._state import Service, ServiceState
from researchcrew.service._streaming import KEEP_ALIVE, sse
from researchcrew.service._uploads import MULTIPART, read_form
from researchcrew.text.json_input import JsonInputError, read_json

router = APIRouter(prefix="/v1", tags=["documents"], responses=problem_responses(400, 401, 413, 422, 429, 503))

DocumentId = Annotated[str, Path(min_length=1, max_length=64, description="The document's id.")]
RAW_SUFFIXES = {
    "application/pdf": ".pdf",
    "text/html": ".html",
    "text/markdown": ".md",
    "text/plain": ".txt",
    "application/x-ndjson": ".jsonl",
    "application/jsonl": ".jsonl",
}


class DocumentInfo(BaseModel):
    """A document of the knowledge base, as a user who may read it sees it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The document's id.")
    filename: str = Field(description="The file's name (citations of its passages show it).")
    collection: str = Field(description="The collection it belongs to (`user:<you>`: your private one).")
    owner: str = Field(description="Who added it.")
    format: str = Field(description="pdf, html, markdown, text or jsonl.")
    size_bytes: int = Field(description="The file's size.")
    source_url: str | None = Field(default=None, description="The URL it was fetched from.")
    status: DocumentStatus = Field(description="queued, ingesting, ready or failed.")
    error: str | None = Field(default=None, description="Why it failed (the loader's or the store's reason).")
    records: int = Field(description="Documents the loader found in it (pages of a PDF are one each; JSONL records).")
    chunks: int = Field(description="Its chunks in the knowledge base (once ready).")
    progress: DocumentEvent | None = Field(default=None, description="How far its ingestion is, while it runs.")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    may_change: bool = Field(
        description="Whether you may delete or reindex it: you added it, or it is in a collection you own "
        "(others' documents in a collection you share you may only read)."
    )


class DocumentList(BaseModel):
    documents: list[DocumentInfo]
    total: int = Field(description="Documents in all (with the status asked for).")
    limit: int
    offset: int
    next_offset: int | None = Field(description="The offset of the next page; None on the last one.")


class Accepted(BaseModel):
    documents: list[DocumentInfo] = Field(description="The documents accepted, queued for ingestion.")


class UrlRequest(StorableInput):
    """Documents to fetch from the web (through the address policy)."""

    model_config = ConfigDict(extra="forbid")

    urls: list[Annotated[str, Field(min_length=1, max_length=2048)]] = Field(min_length=1, max_length=1000)
    collection: str | None = Field(default=None, max_length=256, description="Default: your private collection.")


_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            MULTIPART: {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "A file (the part may repeat)."},
                        "collection": {"type": "string", "description": "Default: your private collection."},
                    },
                }
            },
            "application/json": {"schema": UrlRequest.model_json_schema()},
            **{media: {"schema": {"type": "string", "format": "binary"}} for media in RAW_SUFFIXES},
        },
    }
}


def info(service: ServiceState, document: StoredDocument, *, may_change: bool) -> DocumentInfo:
    progress = service.library.progress(document) if document.status == "ingesting" else None
    fields = document.model_dump(exclude={"source_keys", "sha256"})
    return DocumentInfo(**fields, progress=progress, may_change=may_change)


@contextmanager
def document_problems(subject: str = "") -> Iterator[None]:
    try:
        yield
    except DocumentInputError as error:
        if error.unsupported:
            raise ApiProblem(415, str(error), kind="unsupported-document") from None
        raise problem_for(error, subject=subject) from None
    except (DocumentError, MemoryStoreError, KnowledgeBaseError) as error:
        raise problem_for(error, subject=subject) from None


async def _files(
    service: ServiceState, request: Request, filename: str | None
) -> tuple[list[UploadedFile], str | None]:
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";")[0].strip().lower()
    body = await request.body()
    limits = service.settings.documents
    if media_type == MULTIPART:
        parts, fields = read_form(content_type, body)
        files = [
            UploadedFile(filename=part.filename or _raw_name(None, part.media_type), content=part.content)
            for part in parts
        ]
        collection = fields.get("collection") or None
    elif media_type == "application/json":
        try:
            parsed = UrlRequest.model_validate(read_json(body))
        except JsonInputError as error:
            raise ApiProblem(400, f"The body is not JSON: {error}") from None
        except ValidationError as error:  # answered like any invalid body: a 422 naming each field
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in error.errors()]) from None
        if len(parsed.urls) > limits.max_files_per_request:
            raise ApiProblem(422, f"At most {limits.max_files_per_request} URLs per request.")
        with document_problems():
            files = list(await asyncio.gather(*(fetch(url, service.settings) for url in parsed.urls)))
        collection = parsed.collection
    elif media_type in RAW_SUFFIXES or media_type == "application/octet-stream":
        files = [UploadedFile(filename=_raw_name(filename, media_type), content=body)]
        collection = request.query_params.get("collection") or None
    else:
        accepted = ", ".join([MULTIPART, "application/json (URLs)", *RAW_SUFFIXES])
        raise ApiProblem(415, f"Send the document as one of {accepted}, not {media_type or 'no content type'}.")
    if not files:
        raise ApiProblem(422, "The form has no 'file' part.")
    if len(files) > limits.max_files_per_request:
        raise ApiProblem(422, f"At most {limits.max_files_per_request} files per request.")
    return files, collection


def _raw_name(filename: str | None, media_type: str) -> str:
    suffix = RAW_SUFFIXES.get(media_type, "")
    if filename:
        return filename if suffix == "" or filename.lower().endswith(suffix) else filename + suffix
    return f"document{suffix or '.txt'}"


@router.post(
    "/documents",
    status_code=202,
    response_model=Accepted,
    responses=problem_responses(403, 409, 415),
    openapi_extra=_UPLOAD_BODY,
    summary="Add documents (files or URLs)",
)
async def add_documents(
    service: Service,
    user: CurrentUser,
    request: Request,
    filename: Annotated[str | None, Query(max_length=255, description="A raw body's file name.")] = None,
) -> Accepted:
    files, collection = await _files(service, request, filename)
    with document_problems():
        stored = await service.library.add(user.user_id, files, collection)
    return Accepted(documents=[info(service, document, may_change=True) for document in stored])  # the uploader's


@router.get(
    "/documents",
    response_model=DocumentList,
    summary="The documents you may read (yours, and those of your collections), newest first",
)
async def list_documents(
    service: Service,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    status: DocumentStatus | None = None,
) -> DocumentList:
    with document_problems():
        documents, total = await service.library.store.list_readable(
            user.user_id, limit=limit, offset=offset, status=status
        )
        changeable = await service.library.store.changeable_among(user.user_id, [d.id for d in documents])
    following = offset + len(documents)
    return DocumentList(
        documents=[info(service, document, may_change=document.id in changeable) for document in documents],
        total=total,
        limit=limit,
        offset=offset,
        next_offset=following if following < total else None,
    )


@router.get(
    "/documents/{document_id}",
    response_model=DocumentInfo,
    responses=problem_responses(404),
    summary="One document and its status",
)
async def read_document(service: Service, user: CurrentUser, document_id: DocumentId) -> DocumentInfo:
    with document_problems(document_id):
        document = await service.library.store.get_for(user.user_id, document_id)
        changeable = await service.library.store.changeable_among(user.user_id, [document.id])
        return info(service, document, may_change=document.id in changeable)


@router.delete(
    "/documents/{document_id}",
    status_code=204,
    responses=problem_responses(403, 404),
    summary="Delete a document and its chunks (its uploader, or its collection's owner)",
)
async def delete_document(service: Service, user: CurrentUser, document_id: DocumentId) -> Response:
    with document_problems(document_id):
        await service.library.delete(user.user_id, document_id)
    return Response(status_code=204)


@router.post(
    "/documents/{document_id}/reindex",
    status_code=202,
    response_model=DocumentInfo,
    responses=problem_responses(403, 404),
    summary="Ingest it again (its uploader, or its collection's owner)",
)
async def reindex_document(service: Service, user: CurrentUser, document_id: DocumentId) -> DocumentInfo:
    with document_problems(document_id):
        return info(service, await service.library.reindex(user.user_id, document_id), may_change=True)


@router.get(
    "/documents/{document_id}/events",
    responses={200: {"content": {"text/event-stream": {}}}, **problem_responses(404)},
    summary="Its ingestion progress as server-sent events",
)
async def document_events(service: Service, user: CurrentUser, document_id: DocumentId) -> StreamingResponse:
    """``event: progress`` with a ``DocumentEvent`` each time it moves; the stream ends with ready, failed or
    deleted."""
    library = service.library
    queue = library.subscribe(document_id)
    try:
        with document_problems(document_id):
            first = library.progress(await library.store.get_for(user.user_id, document_id))
    except BaseException:
        library.unsubscribe(document_id, queue)
        raise

    async def stream() -> AsyncIterator[bytes]:
        try:
            event = first
            yield sse("progress", event.model_dump_json())
            while not event.final:
                try:
                    event = await asyncio.wait_for(queue.get(), service.settings.service.keep_alive_s)
                except TimeoutError:
                    yield KEEP_ALIVE
                    continue
                yield sse("progress", event.model_dump_json())
        finally:
            library.unsubscribe(document_id, queue)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
