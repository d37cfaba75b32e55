"""One error shape for every failure: RFC 9457 problem details (``application/problem+json``).

Routes raise ``ApiProblem(status, detail)``; the handlers installed by ``install_problem_handlers`` turn it, FastAPI's
validation errors, Starlette's HTTP errors (unknown route, wrong method) and any unexpected exception into the same
body: ``type``, ``title``, ``status``, ``detail`` (plus ``errors`` for invalid fields). A response never carries a
stack trace, a request's input values or key material; an unexpected exception is logged with its traceback under
an id the response names. Status codes are chosen here and in the routes, nowhere else.

Every detail goes through ``researchcrew.redaction.public_text`` (no password, token or SQL leaves in one), and a
store that cannot be reached is one mapping, ``store_problem``, wherever it surfaces (a route, a dependency such as
the API-key check, a stream): 503 with ``Retry-After``, whose detail names the store and never the driver's words.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from researchcrew.errors import (
    CollectionConflictError,
    CollectionError,
    CollectionForbiddenError,
    CollectionNotFoundError,
    ConfigurationError,
    DeepResearchError,
    DeepRunExpiredError,
    DeepRunForbiddenError,
    DeepRunNotFoundError,
    DocumentForbiddenError,
    DocumentInputError,
    DocumentNotFoundError,
    DocumentQuotaError,
    DocumentTooLargeError,
    JobConflictError,
    JobInputError,
    JobNotFoundError,
    KnowledgeBaseError,
    MemoryStoreError,
    PlanDecisionError,
    QueueUnavailableError,
    ResearchCrewError,
    TableNotFoundError,
)
from researchcrew.redaction import public_text

logger = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://researchcrew.dev/problems/"
STORE_RETRY_AFTER_S = 5  # what a 503 for a store outage asks clients to wait


class FieldProblem(BaseModel):
    """One invalid field of a request."""

    model_config = ConfigDict(extra="forbid")

    location: str = Field(description="Where the field is, e.g. `body.question` or `query.limit`.")
    message: str = Field(description="What is wrong with it.")


class Problem(BaseModel):
    """What went wrong, in the shape of RFC 9457 (problem details for HTTP APIs)."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="A URI naming the kind of problem.")
    title: str = Field(description="A short summary of the kind of problem (the HTTP status phrase).")
    status: int = Field(ge=400, le=599, description="The HTTP status code.")
    detail: str = Field(description="What went wrong this time, and what to do about it.")
    errors: list[FieldProblem] | None = Field(default=None, description="For 422: each invalid field.")


class ApiProblem(Exception):
    """Raised by routes and dependencies; answered as a problem+json response."""

    def __init__(
        self, status: int, detail: str, *, headers: Mapping[str, str] | None = None, kind: str | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})
        self.kind = kind


def problem_body(
    status: int, detail: str, *, kind: str | None = None, errors: list[FieldProblem] | None = None
) -> Problem:
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    slug = kind or phrase.lower().replace(" ", "-").replace("'", "")
    if errors:
        errors = [FieldProblem(location=e.location, message=public_text(e.message)) for e in errors]
    safe = public_text(detail)
    return Problem(type=PROBLEM_TYPE_BASE + slug, title=phrase, status=status, detail=safe, errors=errors)


def problem_response(
    status: int,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    kind: str | None = None,
    errors: list[FieldProblem] | None = None,
) -> JSONResponse:
    body = problem_body(status, detail, kind=kind, errors=errors)
    return JSONResponse(
        body.model_dump(mode="json", exclude_none=True),
        status_code=status,
        headers=dict(headers or {}),
        media_type=PROBLEM_MEDIA_TYPE,
    )


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for these statuses, each a problem+json body."""
    described = {
        400: "The request body cannot be read (not UTF-8 JSON).",
        401: "No valid API key (send `Authorization: Bearer <key>`).",
        404: "No such resource for this user (another user's session answers exactly like a missing one).",
        413: "The request body is larger than the service accepts.",
        422: "A field of the request is invalid.",
        429: "Too many requests or too many questions running; retry after the `Retry-After` seconds.",
        503: "The service is starting, stopping or cannot reach a store it needs.",
    }
    return {
        status: {
            "model": Problem,
            "description": described.get(status, HTTPStatus(status).phrase),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc) or "request"


async def _api_problem(_: Request, exc: ApiProblem) -> JSONResponse:
    return problem_response(exc.status, exc.detail, headers=exc.headers, kind=exc.kind)


async def _validation_problem(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [FieldProblem(location=_location(e.get("loc", ())), message=str(e.get("msg", ""))) for e in exc.errors()]
    summary = "; ".join(f"{e.location}: {e.message}" for e in errors[:5])
    return problem_response(422, f"invalid request: {summary}", kind="invalid-request", errors=errors)


async def _http_problem(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    detail = exc.detail if isinstance(exc.detail, str) and exc.detail else HTTPStatus(exc.status_code).phrase
    return problem_response(exc.status_code, detail, headers=exc.headers)


async def _unexpected_problem(request: Request, exc: Exception) -> JSONResponse:
    incident = uuid.uuid4().hex[:12]
    logger.error("unexpected error %s on %s %s", incident, request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, f"The service failed unexpectedly; the error is logged as {incident}.", kind="internal-error"
    )


def store_problem(error: BaseException) -> ApiProblem | None:
    """The 503 (with ``Retry-After``) for a store the service cannot use, or None when ``error`` is not one: the
    memory store (``MemoryStoreError``, or a database/connection failure that escaped its guards), the knowledge
    base, the job queue. The detail names the store; the driver's message is logged, never answered."""
    from researchcrew.db.failures import is_outage

    headers = {"Retry-After": str(STORE_RETRY_AFTER_S)}
    if isinstance(error, MemoryStoreError) or (isinstance(error, SQLAlchemyError) and is_outage(error)):
        detail = "The memory store is not reachable; retry shortly."
        return ApiProblem(503, detail, headers=headers, kind="memory-unavailable")
    if isinstance(error, KnowledgeBaseError):
        detail = "The knowledge base is not reachable; retry shortly."
        return ApiProblem(503, detail, headers=headers, kind="knowledge-unavailable")
    if isinstance(error, QueueUnavailableError):
        detail = "The job queue (Redis) is not reachable; retry shortly, or ask an operator to check it."
        return ApiProblem(503, detail, headers=headers, kind="jobs-unavailable")
    if isinstance(error, (ConnectionError, TimeoutError)):
        detail = "A store the service needs is not reachable; retry shortly."
        return ApiProblem(503, detail, headers=headers, kind="store-unavailable")
    return None


@dataclass(frozen=True)
class _Named:
    """How one kind of named error is answered: its status, its problem kind, and its detail (the error's own words
    when None; else a template of ``{error}`` and ``{subject}``, the id the request named)."""

    errors: tuple[type[ResearchCrewError], ...]
    status: int
    kind: str
    detail: str | None = None


# The one table from named errors to statuses (first match wins, so a subclass comes before its base). Store outages
# come before it (``store_problem``); an error in no row is a 500 that names only its type.
NAMED_PROBLEMS: tuple[_Named, ...] = (
    # Another user's run is answered exactly like an unknown one.
    _Named(
        (DeepRunNotFoundError, DeepRunForbiddenError),
        404,
        "deep-run-not-found",
        "No deep run {subject!r}: check the id, or start a new run.",
    ),
    _Named((DeepRunExpiredError,), 410, "deep-run-expired"),
    _Named((PlanDecisionError,), 422, "invalid-plan-decision"),
    _Named((DeepResearchError,), 409, "deep-run-conflict"),  # DeepRunStateError and later kinds: the state forbids it
    _Named((JobNotFoundError,), 404, "job-not-found"),
    _Named((JobInputError,), 422, "invalid-job"),
    _Named((JobConflictError,), 409, "job-conflict"),
    _Named((CollectionNotFoundError,), 404, "collection-not-found"),
    _Named((CollectionForbiddenError,), 403, "collection-forbidden"),
    _Named((CollectionConflictError,), 409, "collection-exists"),
    _Named((CollectionError,), 422, "invalid-collection"),
    _Named((DocumentNotFoundError,), 404, "document-not-found", "No document {subject!r}: check the id."),
    _Named((DocumentTooLargeError,), 413, "document-too-large"),
    _Named((DocumentQuotaError,), 409, "document-quota"),
    _Named((DocumentForbiddenError,), 403, "collection-forbidden"),
    _Named((DocumentInputError,), 422, "invalid-document"),
    _Named((TableNotFoundError,), 404, "table-not-found", "No table {subject!r} in this session: check the ids."),
    _Named((ConfigurationError,), 500, "misconfigured", "The service is misconfigured: {error}"),
)


def problem_for(
    error: BaseException, *, subject: str = "", fallback: str = "The request could not be completed"
) -> ApiProblem:
    """The problem answering ``error``: a store outage (503 + Retry-After), a row of ``NAMED_PROBLEMS``, else a
    500 that names only the error's type (``fallback: TypeName``). ``subject`` is the id the request named."""
    outage = store_problem(error)
    if outage is not None:
        logger.warning("a request failed on a store: %s: %s", type(error).__name__, error)
        return outage
    for named in NAMED_PROBLEMS:
        if isinstance(error, named.errors):
            detail = str(error) if named.detail is None else named.detail.format(error=error, subject=subject)
            return ApiProblem(named.status, detail, kind=named.kind)
    return ApiProblem(500, f"{fallback}: {type(error).__name__}", kind="internal-error")


async def _named_problem(request: Request, exc: Exception) -> JSONResponse:
    """A named error no route turned into a problem itself: the table's answer; an unknown kind is logged with its
    traceback like any unexpected error."""
    problem = problem_for(exc)
    if problem.status >= 500 and problem.kind == "internal-error":
        return await _unexpected_problem(request, exc)
    return await _api_problem(request, problem)


async def _store_problem(request: Request, exc: Exception) -> JSONResponse:
    problem = store_problem(exc)
    if problem is None:
        return await _unexpected_problem(request, exc)
    logger.warning("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    return await _api_problem(request, problem)


def install_problem_handlers(app: FastAPI) -> None:
    # Starlette types handlers as taking any Exception; each of these is registered for its own class only.
    app.add_exception_handler(ApiProblem, cast(Any, _api_problem))
    app.add_exception_handler(ResearchCrewError, _named_problem)
    for store_error in (MemoryStoreError, KnowledgeBaseError, QueueUnavailableError, SQLAlchemyError, OSError):
        app.add_exception_handler(store_error, _store_problem)
    app.add_exception_handler(RequestValidationError, cast(Any, _validation_problem))
    app.add_exception_handler(StarletteHTTPException, cast(Any, _http_problem))
    app.add_exception_handler(Exception, _unexpected_problem)
