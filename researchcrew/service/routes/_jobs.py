"""``/v1/jobs`` and ``/v1/runs``: batch research over HTTP, on the process's ``Jobs`` (``researchcrew.jobs.api``).

A user sees only their own jobs and runs: another user's id answers 404 exactly like an unknown one. Jobs are
created from JSON (questions inline, or a file's text) or from an upload (a raw ``text/csv``, ``text/plain`` or
``application/x-ndjson`` body, or ``multipart/form-data``); files are checked by the CLI's loaders, so a bad one
is a 422 naming each bad line, and a bad cron or time zone is a 422 too. ``POST /v1/jobs/{job}/runs`` starts a run
and answers 202 at once: it runs in this process (``jobs.concurrency`` questions at once) or, with ``redis.url``
set, on the workers. Results come as JSON, CSV, JSONL or a Markdown report (``?format=``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Request, Response
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from researchcrew.contracts._base import StorableInput
from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.errors import (
    JobError,
    MemoryStoreError,
)
from researchcrew.jobs.contracts import (
    MAX_NAME_CHARS,
    CreatedJob,
    JobInfo,
    QuestionOptions,
    QuestionResult,
    RunInfo,
)
from researchcrew.jobs.sources import LoadedQuestions, parse_questions
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import ApiProblem, problem_for, problem_responses
from researchcrew.service._state import Service, ServiceState
from researchcrew.service._uploads import MULTIPART, read_upload
from researchcrew.text.json_input import JsonInputError, read_json

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["jobs"], responses=problem_responses(400, 401, 413, 422, 429, 503))

JobRef = Annotated[str, Path(min_length=1, max_length=MAX_NAME_CHARS, description="The job's name or id.")]
RunId = Annotated[str, Path(min_length=1, max_length=64, description="The run's id.")]
MAX_FILE_CHARS = 50 * 1024 * 1024  # in practice a body is bounded by service.max_body_bytes (64 KiB by default)
MAX_INLINE_QUESTIONS = 200

RUN_COST_HEADER = "X-Researchcrew-Run-Cost-USD"
"""On every export: what the run cost in US dollars (six decimals), or ``unknown`` when any answer's price is
unknown (never 0). A JSONL export's lines are all results, so its run total travels here (and in the run itself)."""

MEDIA_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "md": "text/markdown; charset=utf-8",
}


@contextmanager
def job_problems() -> Iterator[None]:
    """The batch-job errors as HTTP problems (``problems.NAMED_PROBLEMS``; a store outage is 503 + Retry-After)."""
    try:
        yield
    except (JobError, MemoryStoreError) as error:
        raise problem_for(error) from None


class QuestionFile(StorableInput):
    """A question file's text, sent inside the JSON body."""

    model_config = ConfigDict(extra="forbid")

    filename: str = Field(
        min_length=5,
        max_length=255,
        pattern=r"(?i)^[^/\\]+\.(txt|csv|jsonl)$",
        description="Its name; the suffix says the format: .txt (one per line), .csv (a `question` column), .jsonl.",
    )
    content: str = Field(min_length=1, max_length=MAX_FILE_CHARS, description="The file's text (UTF-8).")


class JobCreate(StorableInput):
    """A new job: its questions (inline, or a file's text), defaults, schedule and webhook."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="Unique among your jobs.")
    questions: list[Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_INLINE_QUESTIONS,
        description=f"The questions, at most {MAX_INLINE_QUESTIONS} (more: give `file`, or upload it).",
    )
    file: QuestionFile | None = Field(default=None, description="A question file's text (or give `questions`).")
    options: QuestionOptions = Field(default_factory=QuestionOptions, description="Defaults of every question.")
    schedule: str | None = Field(
        default=None, min_length=1, max_length=120, description='Five-field cron, e.g. "0 6 * * MON" (None: by hand).'
    )
    timezone: str = Field(default="UTC", min_length=1, max_length=64, description="IANA time zone of the cron.")
    webhook_url: AnyHttpUrl | None = Field(default=None, description="Where each finished run is POSTed, signed.")
    remember: StrictBool = Field(default=False, description="Store each answer in your conversation memory.")

    @model_validator(mode="after")
    def _one_source(self) -> JobCreate:
        if (self.questions is None) == (self.file is None):
            raise ValueError("give either `questions` or `file`, not both and not neither")
        return self


class UploadQuery(StorableInput):
    """What goes with an uploaded question file (form fields of the same names override these; default options
    come as an `options` form field, a JSON object). Lengths keep the URL well within what servers accept."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS, description="The job's name.")
    filename: str | None = Field(default=None, max_length=255, description="The file's name (raw bodies).")
    schedule: str | None = Field(default=None, max_length=120, description="Five-field cron expression.")
    timezone: str = Field(default="UTC", min_length=1, max_length=64, description="IANA time zone of the cron.")
    webhook_url: str | None = Field(default=None, max_length=1000, description="Where finished runs are POSTed.")
    remember: StrictBool = Field(default=False, description="Store each answer in your conversation memory.")


class JobList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[JobInfo] = Field(description="Your jobs.")


class RunList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: list[RunInfo] = Field(description="The runs, newest first.")


class RunResults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: RunInfo = Field(description="The run.")
    results: list[QuestionResult] = Field(description="One result per question, in the job's order.")


class RunsQuery(StorableInput):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=500, description="At most this many, newest first.")


class ResultsQuery(StorableInput):
    model_config = ConfigDict(extra="forbid")

    format: Literal["json", "csv", "jsonl", "md"] = Field(
        default="json", description="json, csv (one row per question), jsonl, or md (a report)."
    )


_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            **{media: {"schema": {"type": "string"}} for media in ("text/csv", "text/plain", "application/x-ndjson")},
            MULTIPART: {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        **{key: {"type": "string"} for key in ("name", "schedule", "timezone", "webhook_url")},
                        "remember": {"type": "boolean"},
                        "options": {"type": "string", "description": "Default options, a JSON object."},
                    },
                }
            },
        },
    }
}


# Jobs -----------------------------------------------------------------------------------------------------------
@router.post("/jobs", status_code=201, response_model=CreatedJob, responses=problem_responses(409), summary="Create.")
async def create_job(service: Service, user: CurrentUser, body: Annotated[JobCreate, Body()]) -> CreatedJob:
    """Create a job from questions or a file's text. The webhook secret is shown here only."""
    with job_problems():
        if body.file is not None:
            limit = service.settings.jobs.max_questions
            questions: list[str] | LoadedQuestions = parse_questions(
                body.file.filename, body.file.content, max_questions=limit
            )
        else:
            questions = list(body.questions or [])
        return await service.jobs.create(
            user.user_id,
            name=body.name,
            questions=questions,
            options=body.options,
            schedule=body.schedule,
            timezone=body.timezone,
            webhook_url=str(body.webhook_url) if body.webhook_url is not None else None,
            remember=body.remember,
        )


@router.post(
    "/jobs/upload",
    status_code=201,
    response_model=CreatedJob,
    responses=problem_responses(409, 415),
    openapi_extra=_UPLOAD_BODY,
    summary="Create a job from an uploaded question file.",
)
async def upload_job(
    service: Service, user: CurrentUser, request: Request, query: Annotated[UploadQuery, Query()]
) -> CreatedJob:
    """The body is the file (`text/csv`, `text/plain`, `application/x-ndjson`) or a form with a `file` part;
    the job's name, schedule, ... are query parameters (or form fields)."""
    upload = await read_upload(request, filename=query.filename)
    fields = {key: value for key, value in upload.fields.items() if key != "options"}
    try:
        merged = UploadQuery.model_validate({**query.model_dump(exclude_unset=True), **fields})
    except ValidationError as error:
        raise ApiProblem(422, f"invalid form field: {_first(error)}", kind="invalid-request") from None
    if merged.name is None:
        raise ApiProblem(422, "Name the job: `?name=...` (or a `name` form field).", kind="invalid-request")
    options = _options(upload.fields.get("options"))
    with job_problems():
        loaded = parse_questions(upload.filename, upload.text, max_questions=service.settings.jobs.max_questions)
        return await service.jobs.create(
            user.user_id,
            name=merged.name,
            questions=loaded,
            options=options,
            schedule=merged.schedule,
            timezone=merged.timezone,
            webhook_url=merged.webhook_url,
            remember=merged.remember,
        )


@router.get("/jobs", response_model=JobList, summary="List your jobs.")
async def list_jobs(service: Service, user: CurrentUser) -> JobList:
    with job_problems():
        return JobList(jobs=await service.jobs.list(user.user_id))


@router.get("/jobs/{job}", response_model=JobInfo, responses=problem_responses(404), summary="Read a job.")
async def read_job(service: Service, user: CurrentUser, job: JobRef) -> JobInfo:
    with job_problems():
        return await service.jobs.get(user.user_id, job)


@router.delete(
    "/jobs/{job}",
    status_code=204,
    response_class=Response,
    responses=problem_responses(404),
    summary="Delete a job, its runs and results.",
)
async def delete_job(service: Service, user: CurrentUser, job: JobRef) -> Response:
    with job_problems():
        await service.jobs.remove(user.user_id, job)
    return Response(status_code=204)


# Runs -----------------------------------------------------------------------------------------------------------
@router.post(
    "/jobs/{job}/runs",
    status_code=202,
    response_model=RunInfo,
    responses=problem_responses(404),
    summary="Start a run now (202: it runs in the background; poll GET /v1/runs/{id}).",
)
async def start_run(service: Service, user: CurrentUser, job: JobRef, response: Response) -> RunInfo:
    run = await start(service, user.user_id, job)
    response.headers["Location"] = f"/v1/runs/{run.id}"
    return run


async def start(service: ServiceState, user_id: str, job: str) -> RunInfo:
    """Start a run of ``job``: in this process, or on the workers when Redis is configured (``Jobs.start``)."""
    with job_problems():
        return await service.jobs.start(user_id, job, executor="auto")


@router.get("/jobs/{job}/runs", response_model=RunList, responses=problem_responses(404), summary="A job's runs.")
async def list_runs(service: Service, user: CurrentUser, job: JobRef, query: Annotated[RunsQuery, Query()]) -> RunList:
    with job_problems():
        return RunList(runs=await service.jobs.runs(user.user_id, job, limit=query.limit))


@router.get("/runs/{run_id}", response_model=RunInfo, responses=problem_responses(404), summary="A run's status.")
async def read_run(service: Service, user: CurrentUser, run_id: RunId) -> RunInfo:
    with job_problems():
        return await service.jobs.status(user.user_id, run_id)


@router.post(
    "/runs/{run_id}/cancel",
    response_model=RunInfo,
    responses=problem_responses(404, 409),
    summary="Cancel a run: questions not started are not researched (409 when it has finished).",
)
async def cancel_run(service: Service, user: CurrentUser, run_id: RunId) -> RunInfo:
    with job_problems():
        return await service.jobs.cancel(user.user_id, run_id)


@router.get(
    "/runs/{run_id}/results",
    response_model=RunResults,
    responses={
        **problem_responses(404),
        200: {
            "description": "The results: JSON, or with `format` csv, jsonl or md the export in that media type.",
            "content": {media.split(";")[0]: {"schema": {"type": "string"}} for media in MEDIA_TYPES.values()},
            "headers": {
                RUN_COST_HEADER: {
                    "description": "With csv, jsonl or md: what the run cost in US dollars, or `unknown`.",
                    "schema": {"type": "string"},
                }
            },
        },
    },
    summary="A run's results as JSON, CSV, JSONL or a Markdown report.",
)
async def run_results(
    service: Service, user: CurrentUser, run_id: RunId, query: Annotated[ResultsQuery, Query()]
) -> Response:
    with job_problems():
        if query.format == "json":
            run = await service.jobs.status(user.user_id, run_id)
            results = await service.jobs.results(user.user_id, run_id)
            body = RunResults(run=run, results=results).model_dump_json()
            return Response(content=body, media_type="application/json")
        text = await service.jobs.export(user.user_id, run_id, query.format)
        run = await service.jobs.status(user.user_id, run_id)
    headers = {
        "Content-Disposition": f'inline; filename="run-{run_id}.{query.format}"',
        RUN_COST_HEADER: "unknown" if run.cost.usd is None else f"{run.cost.usd:.6f}",
    }
    return Response(content=text, media_type=MEDIA_TYPES[query.format], headers=headers)


def _options(raw: str | None) -> QuestionOptions:
    if raw is None or not raw.strip():
        return QuestionOptions()
    try:
        return QuestionOptions.model_validate(read_json(raw))
    except JsonInputError as error:
        raise ApiProblem(422, f"options: {error}", kind="invalid-job") from None
    except ValidationError as error:
        raise ApiProblem(422, f"options: {_first(error)}", kind="invalid-job") from None


def _first(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in error.errors()[:5])
