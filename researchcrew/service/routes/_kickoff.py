"""crewAI's deployed-crew API (``GET /inputs``, ``POST /kickoff``, ``GET /status/{kickoff_id}``) over one batch run,
so that clients written for a crew deployed on CrewAI AMP can call researchcrew unchanged (same Bearer keys).

The shapes follow crewAI's own OpenAPI description of that API, ``docs/enterprise-api.en.yaml`` in
crewAIInc/crewAI (published as https://docs.crewai.com/en/api-reference/): ``GET /inputs`` answers
``{"inputs": [names]}``; ``POST /kickoff`` takes ``{"inputs": {...}, "meta", "taskWebhookUrl", "stepWebhookUrl",
"crewWebhookUrl"}`` (and the newer ``"webhooks": {"url", "events", "realtime", "authentication"}`` object of the
webhook-streaming guide) and answers 200 ``{"kickoff_id": ...}``; ``GET /status/{kickoff_id}`` answers one of
``{"status": "running", "current_task", "progress": {"completed_tasks", "total_tasks"}}``,
``{"status": "completed", "result": {"output", "tasks": [{"task_id", "output", "agent", "execution_time"}]},
"execution_time"}`` or ``{"status": "error", "error", "execution_time"}`` — lower-case, those three only. A run that
is still queued reports ``running`` with no task done. Clients in the wild also read an upper-case ``state``
(``PENDING``, ``STARTED``, ``SUCCESS``, ``FAILURE``; not in the OpenAPI file), so it is sent alongside.

A kickoff is a one-off job (named ``kickoff-<id>``, listed with the user's jobs) of the question(s) in ``inputs``
— ``question`` or ``questions``, plus any ``ask()`` option by name — and one run of it, started as
``POST /v1/jobs/{job}/runs`` starts runs. ``crewWebhookUrl`` (or ``webhooks.url``) becomes the job's webhook: the
finished run is POSTed there signed and retried (``researchcrew.jobs.webhooks``), with the secret returned by the
kickoff; a URL the webhook address policy refuses (public addresses only, unless ``webhooks.allow`` says
otherwise) is a 422. Per-task and per-step webhooks (``taskWebhookUrl``, ``stepWebhookUrl``, ``webhooks.events``)
are accepted for compatibility and not called: a run reports once, when it ends.
"""

from __future__ import annotations

import logging
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from researchcrew.contracts._base import SourceType, StorableInput
from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.jobs.contracts import QuestionOptions, QuestionResult, RunInfo, crewai_state
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import ApiProblem, problem_responses
from researchcrew.service._state import Service
from researchcrew.service.routes._jobs import job_problems, start
from researchcrew.text.json_input import JsonInputError, read_json

logger = logging.getLogger(__name__)

router = APIRouter(tags=["crewAI deployment API"], responses=problem_responses(400, 401, 413, 422, 429, 503))

AGENT = "researchcrew"
CeleryState = Literal["PENDING", "STARTED", "SUCCESS", "FAILURE"]
_STATES: dict[str, CeleryState] = {
    "queued": "PENDING",
    "running": "STARTED",
    "completed": "SUCCESS",
    "partial": "SUCCESS",
    "failed": "FAILURE",
    "cancelled": "FAILURE",
}


QuestionText = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
QuestionList = Annotated[list[QuestionText], Field(min_length=1, max_length=100)]


class KickoffInputs(QuestionOptions):
    """The crew's inputs: the question (or questions) and, optionally, any ``ask()`` option by name."""

    question: str | None = Field(default=None, min_length=1, max_length=MAX_QUERY_CHARS, description="The question.")
    questions: QuestionList | None = Field(default=None, description="Several questions (at most 100), one run.")

    # crewAI's inputs are strings: a list may come as JSON or comma-separated (``questions``: one per line), an
    # object as JSON. The schema says so (``json_schema_input_type``); anything else is left to validation.
    @field_validator("questions", mode="before", json_schema_input_type=QuestionList | str | None)
    @classmethod
    def _questions_from_text(cls, value: Any) -> Any:
        return _list(value, "\n")

    @field_validator(
        "preferred_sources", "exclude_sources", mode="before", json_schema_input_type=list[SourceType] | str | None
    )
    @classmethod
    def _sources_from_text(cls, value: Any) -> Any:
        return _list(value, ",")

    @field_validator(
        "tool_options", "source_reputation", mode="before", json_schema_input_type=dict[str, Any] | str | None
    )
    @classmethod
    def _object_from_text(cls, value: Any) -> Any:
        return _json(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_of(self) -> KickoffInputs:
        if (self.question is None) == (self.questions is None):
            raise ValueError("give `question` or `questions` (one of them)")
        return self


def _list(value: Any, separator: str) -> Any:
    if not isinstance(value, str):
        return value
    if value.lstrip().startswith("["):
        return _json(value)
    return [item.strip() for item in value.split(separator) if item.strip()]


def _json(text: str) -> Any:
    try:
        return read_json(text)
    except JsonInputError as error:
        if error.column is None:  # too deep or too long: say so, not just "expected a list"
            raise ValueError(error.reason) from None
        return text  # not JSON: validation then says what type was expected


class KickoffWebhooks(StorableInput):
    """crewAI's webhook-streaming object: ``url`` gets the finished run; event streaming is not offered."""

    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl | None = Field(default=None, description="Where the finished run is POSTed.")
    events: list[Annotated[str, Field(max_length=100)]] = Field(
        default_factory=list, max_length=100, description="Accepted, not streamed."
    )
    realtime: StrictBool = Field(default=False, description="Accepted, not used.")
    authentication: dict[str, Any] | None = Field(default=None, description="Accepted, not used (runs are signed).")


class KickoffRequest(StorableInput):
    """``POST /kickoff``'s body, as crewAI defines it."""

    model_config = ConfigDict(extra="forbid")

    inputs: KickoffInputs = Field(description="`question` or `questions`, and options; see GET /inputs.")
    meta: dict[str, Any] | None = Field(default=None, description="Caller metadata (accepted, not stored).")
    taskWebhookUrl: AnyHttpUrl | None = Field(default=None, description="Accepted, not called (no task events).")
    stepWebhookUrl: AnyHttpUrl | None = Field(default=None, description="Accepted, not called (no step events).")
    crewWebhookUrl: AnyHttpUrl | None = Field(
        default=None, description="Where the finished run is POSTed (signed, retried)."
    )
    webhooks: KickoffWebhooks | None = Field(default=None, description="crewAI's webhook-streaming object.")


class KickoffStarted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kickoff_id: str = Field(description="The run's id: poll GET /status/{kickoff_id}.")
    webhook_secret: str | None = Field(
        default=None, description="HMAC-SHA256 key of the completion webhook's signature (only with a webhook)."
    )


class InputNames(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(description="The input names: `question` (or `questions`), then the optional options.")


class KickoffProgress(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completed_tasks: int = Field(ge=0, description="Questions finished.")
    total_tasks: int = Field(ge=0, description="Questions in the run.")


class TaskResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="`question-<n>` (0-based position).")
    output: str = Field(description="The answer (Markdown, with [n] citations), or why there is none.")
    agent: str = Field(description="Who answered.")
    execution_time: float = Field(ge=0, description="Seconds spent on it.")


class KickoffResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    output: str = Field(description="The answer; for several questions, each under its question.")
    tasks: list[TaskResult] = Field(description="One per question.")


class KickoffStatus(BaseModel):
    """One of crewAI's three status shapes (fields of the other shapes are left out)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["running", "completed", "error"] = Field(description="crewAI's status name.")
    state: CeleryState = Field(description="The same, as the upper-case state AMP responses also carry.")
    current_task: str | None = Field(default=None, description="running: the question being researched.")
    progress: KickoffProgress | None = Field(default=None, description="running: how far it is.")
    result: KickoffResult | None = Field(default=None, description="completed: the answers.")
    error: str | None = Field(default=None, description="error: what went wrong.")
    execution_time: float | None = Field(default=None, ge=0, description="Seconds from start to end.")


@router.get("/inputs", response_model=InputNames, summary="crewAI: the inputs a kickoff takes.")
async def inputs(user: CurrentUser) -> InputNames:
    return InputNames(inputs=["question", *QuestionOptions.model_fields])


@router.post(
    "/kickoff",
    response_model=KickoffStarted,
    response_model_exclude_none=True,
    summary="crewAI: research the question(s) of `inputs` as one run; poll GET /status/{kickoff_id}.",
)
async def kickoff(service: Service, user: CurrentUser, body: KickoffRequest) -> KickoffStarted:
    given = body.inputs
    questions = [given.question] if given.question is not None else list(given.questions or [])
    options = QuestionOptions.model_validate(given.model_dump(exclude={"question", "questions"}, exclude_none=True))
    webhook = body.crewWebhookUrl or (body.webhooks.url if body.webhooks is not None else None)
    if webhook is not None:
        _check_webhook(service, "crewWebhookUrl" if body.crewWebhookUrl else "webhooks.url", str(webhook))
    if body.taskWebhookUrl or body.stepWebhookUrl or (body.webhooks is not None and body.webhooks.events):
        logger.info("kickoff for %s: task/step webhooks and event streaming are not offered", user.user_id)
    with job_problems():
        created = await service.jobs.create(
            user.user_id,
            name=f"kickoff-{uuid.uuid4().hex[:12]}",
            questions=questions,
            options=options,
            webhook_url=str(webhook) if webhook is not None else None,
        )
    try:
        run = await start(service, user.user_id, created.job.id)
    except ApiProblem:
        with job_problems():
            await service.jobs.remove(user.user_id, created.job.id)  # no orphan job for a run that never started
        raise
    return KickoffStarted(kickoff_id=run.id, webhook_secret=created.webhook_secret)


def _check_webhook(service: Service, field: str, url: str) -> None:
    """A completion webhook the address policy refuses is a 422 naming the field (delivery checks again)."""
    from researchcrew.jobs.webhooks import webhook_policy
    from researchcrew.net.address_policy import AddressRefused

    try:
        webhook_policy(service.settings).check_url(url)
    except AddressRefused as refused:
        raise ApiProblem(422, f"{field}: {refused}", kind="invalid-request") from None


@router.get(
    "/status/{kickoff_id}",
    response_model=KickoffStatus,
    response_model_exclude_none=True,
    responses=problem_responses(404),
    summary="crewAI: a kickoff's status (running, completed with the result, or error).",
)
async def status(
    service: Service,
    user: CurrentUser,
    kickoff_id: Annotated[str, Path(min_length=1, max_length=64, description="The kickoff's id.")],
) -> KickoffStatus:
    with job_problems():
        run = await service.jobs.status(user.user_id, kickoff_id)
        results = await service.jobs.results(user.user_id, kickoff_id) if run.status != "queued" else []
    return kickoff_status(run, results)


def kickoff_status(run: RunInfo, results: list[QuestionResult]) -> KickoffStatus:
    """A run as crewAI's status response."""
    name = crewai_state(run.status)
    state = _STATES[run.status]
    elapsed = _seconds(run)
    if name == "running":
        current = next((result.question for result in results if result.status == "running"), None)
        progress = KickoffProgress(completed_tasks=run.counts.finished, total_tasks=run.counts.total)
        return KickoffStatus(status="running", state=state, current_task=current, progress=progress)
    if name == "error":
        return KickoffStatus(status="error", state=state, error=_error(run, results), execution_time=elapsed)
    tasks = [
        TaskResult(
            task_id=f"question-{result.index}",
            output=_output(result),
            agent=AGENT,
            execution_time=_item_seconds(result),
        )
        for result in results
    ]
    if len(results) == 1:
        output = tasks[0].output
    else:
        output = "\n\n".join(
            f"## {result.question}\n\n{task.output}" for result, task in zip(results, tasks, strict=True)
        )
    return KickoffStatus(
        status="completed", state=state, result=KickoffResult(output=output, tasks=tasks), execution_time=elapsed
    )


def _output(result: QuestionResult) -> str:
    if result.response is not None:
        return result.response.answer
    if result.failure is not None:
        return f"No answer ({result.failure.kind}): {result.failure.message}"
    return f"No answer ({result.status})."


def _error(run: RunInfo, results: list[QuestionResult]) -> str:
    if run.status == "cancelled":
        return "The run was cancelled."
    reasons = [f"{r.question}: {r.failure.message}" for r in results if r.failure is not None]
    return "; ".join(reasons[:5]) or f"The run {run.status}."


def _seconds(run: RunInfo) -> float | None:
    if run.started_at is None or run.finished_at is None:
        return None
    return max(0.0, (run.finished_at - run.started_at).total_seconds())


def _item_seconds(result: QuestionResult) -> float:
    if result.started_at is None or result.finished_at is None:
        return 0.0
    return max(0.0, (result.finished_at - result.started_at).total_seconds())
