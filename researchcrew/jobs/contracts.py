"""The batch-job contracts: what a caller sends to create a job, and what every door reads back about jobs, runs
and results. Inputs reject unknown fields; every field is described, so the HTTP layer's OpenAPI schema is the
documentation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AnyHttpUrl, Field, field_validator, model_validator

from researchcrew.contracts._base import Contract, Identifier, RequestContract, SourceType
from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.query import MAX_QUERY_CHARS, ResponseFormat
from researchcrew.contracts.request import MAX_DEADLINE_S, ResearchRequest, ToolOptions
from researchcrew.contracts.synthesizer import ConfidenceLevel, FinalResponse
from researchcrew.jobs._schedule import check_cron, check_timezone
from researchcrew.redaction import public_text


def _shown(value: Any) -> Any:
    """A stored failure message as users may see it: no credential, no SQL (``researchcrew.redaction``)."""
    return public_text(value)[:4_000] if isinstance(value, str) else value


RunStatus = Literal["queued", "running", "completed", "partial", "failed", "cancelled"]
ItemStatus = Literal["pending", "running", "answered", "uncertain", "failed", "cancelled"]
RunTrigger = Literal["manual", "schedule", "catch_up"]
Executor = Literal["in_process", "queue"]
WebhookState = Literal["none", "pending", "delivered", "failed"]

FINISHED_RUN_STATUSES: frozenset[str] = frozenset({"completed", "partial", "failed", "cancelled"})
FINISHED_ITEM_STATUSES: frozenset[str] = frozenset({"answered", "uncertain", "failed", "cancelled"})
MAX_NAME_CHARS = 200


class QuestionOptions(RequestContract):
    """How questions are researched: the SDK's per-question ``ask()`` options. On a job they are the defaults;
    a JSONL line may override them for its own question. A field left unset keeps the user's preference."""

    preferred_sources: list[SourceType] | None = Field(default=None, description="Source types to search first.")
    exclude_sources: list[SourceType] | None = Field(default=None, description="Source types not to search.")
    tool_options: ToolOptions | None = Field(
        default=None, description='Options per source type, e.g. {"web": {"domains": ["arxiv.org"]}}.'
    )
    deadline_s: float | None = Field(
        default=None, gt=0, le=MAX_DEADLINE_S, description="Seconds for each question (default: the settings')."
    )
    response_format: ResponseFormat | None = Field(default=None, description="concise, detailed or technical.")
    max_response_length: int | None = Field(default=None, ge=50, le=20_000, description="Upper bound on words.")
    min_response_length: int | None = Field(default=None, ge=0, le=20_000, description="Lower bound on words.")
    include_sections: bool | None = Field(default=None, description="Structure answers into titled sections.")
    source_reputation: dict[str, float] | None = Field(
        default=None, description="Reputation overrides, source type → [0, 1]."
    )

    def given(self) -> dict[str, Any]:
        """The options that were set, by name (JSON-able)."""
        return self.model_dump(mode="json", exclude_none=True)

    def over(self, defaults: QuestionOptions) -> QuestionOptions:
        """These options laid over ``defaults`` (a field set here wins)."""
        return QuestionOptions.model_validate({**defaults.given(), **self.given()})

    def request(self, question: str, *, user_id: str, session_id: str) -> ResearchRequest:
        """The ``ResearchRequest`` one question is researched with (raises ``ValueError``/``ValidationError``)."""
        return ResearchRequest.from_keywords(question, user_id=user_id, session_id=session_id, **self.given())


class Schedule(RequestContract):
    """When a job runs by itself: a five-field cron expression read in a time zone."""

    cron: str = Field(
        min_length=1,
        max_length=120,
        description='Five-field cron expression (minute hour day-of-month month day-of-week), e.g. "0 6 * * MON".',
    )
    timezone: str = Field(default="UTC", min_length=1, max_length=64, description="IANA time zone of the cron.")

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        return check_cron(value)

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        return check_timezone(value)


class JobQuestion(RequestContract):
    """One question of a job, with what its source line added."""

    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The question.")
    options: QuestionOptions = Field(
        default_factory=QuestionOptions, description="Options for this question only (over the job's defaults)."
    )
    carried: dict[str, str] = Field(
        default_factory=dict, description="The other CSV columns of its row, carried into the results."
    )
    line: int | None = Field(default=None, ge=1, description="Line of the source file it came from.")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("the question is empty")
        return value


class JobSpec(RequestContract):
    """What a caller sends to create a job."""

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="Unique name among the owner's jobs.")
    questions: list[JobQuestion] = Field(min_length=1, description="The questions, in order.")
    columns: list[str] = Field(default_factory=list, description="Names of the carried CSV columns, in order.")
    source: str = Field(default="inline", max_length=1024, description="Where the questions came from.")
    options: QuestionOptions = Field(
        default_factory=QuestionOptions, description="Default options for every question of the job."
    )
    schedule: Schedule | None = Field(default=None, description="When the job runs by itself (None: only by hand).")
    webhook_url: AnyHttpUrl | None = Field(
        default=None, description="Where a JSON summary of each finished run is POSTed, signed with HMAC-SHA256."
    )
    remember: bool = Field(
        default=False,
        description="Store each answer in the owner's conversation memory. Off by default: a scheduled job would "
        "otherwise cite its own earlier answers as evidence, and a large batch would crowd the owner's recall.",
    )

    @field_validator("name")
    @classmethod
    def _clean_name(cls, value: str) -> str:
        value = value.strip()
        if not value or any(ord(character) < 32 for character in value):
            raise ValueError("a job name must be non-empty and on one line")
        return value

    @model_validator(mode="after")
    def _requests_are_valid(self) -> JobSpec:
        """Every question must make a valid request with its options over the job's (caught before storing)."""
        for position, question in enumerate(self.questions, start=1):
            where = f"line {question.line}" if question.line else f"question {position}"
            try:
                question.options.over(self.options).request(question.question, user_id="check", session_id="check")
            except ValueError as error:  # pydantic's ValidationError is a ValueError
                raise ValueError(f"{where}: {_one_line(error)}") from None
        return self


class JobInfo(Contract):
    """A stored job, as its owner sees it (the webhook secret is shown once, at creation)."""

    id: str = Field(description="The job's id.")
    owner: Identifier = Field(description="The user who owns it.")
    name: str = Field(description="Its name, unique among the owner's jobs.")
    created_at: datetime = Field(description="When it was created (UTC).")
    source: str = Field(description="Where its questions came from.")
    question_count: int = Field(ge=0, description="How many questions it holds.")
    columns: list[str] = Field(description="The carried CSV columns, in order.")
    options: QuestionOptions = Field(description="Default options of its questions.")
    schedule: Schedule | None = Field(description="Its schedule, if any.")
    next_run_at: datetime | None = Field(description="The next schedule slot (UTC), if scheduled.")
    webhook_url: str | None = Field(description="Where finished runs are reported, if anywhere.")
    remember: bool = Field(description="Whether answers are stored in the owner's memory.")


class CreatedJob(Contract):
    """A new job, and the secret its webhooks are signed with (only ever shown here)."""

    job: JobInfo = Field(description="The job.")
    webhook_secret: str | None = Field(description="HMAC-SHA256 key of its webhook signatures (None: no webhook).")


class RunCounts(Contract):
    """How a run's questions stand."""

    total: int = Field(ge=0, description="Questions in the run.")
    pending: int = Field(default=0, ge=0, description="Not started yet.")
    running: int = Field(default=0, ge=0, description="Being researched now.")
    answered: int = Field(default=0, ge=0, description="Answered with evidence.")
    uncertain: int = Field(default=0, ge=0, description="Researched, but the evidence was not enough to answer.")
    failed: int = Field(default=0, ge=0, description="Failed for good (see each result's reason).")
    cancelled: int = Field(default=0, ge=0, description="Not researched because the run was cancelled.")

    @property
    def finished(self) -> int:
        return self.answered + self.uncertain + self.failed + self.cancelled


class SourceFailureCount(Contract):
    """How often one source failed in a run, and why."""

    source: str = Field(description="The source type.")
    kind: str = Field(description="The failure kind (timeout, unreachable, http_error, ...).")
    count: int = Field(ge=1, description="Questions in which it failed that way.")
    example: str = Field(description="One of the failure messages.")


class RunInfo(Contract):
    """A run and where it stands."""

    id: str = Field(description="The run's id.")
    job_id: str = Field(description="Its job's id.")
    job_name: str = Field(description="Its job's name.")
    owner: Identifier = Field(description="The user who owns the job.")
    trigger: RunTrigger = Field(description="manual, schedule, or catch_up (a missed slot run late, once).")
    slot_at: datetime | None = Field(description="The schedule slot it ran for (UTC), if scheduled.")
    executor: Executor = Field(description="in_process, or queue (Redis-backed workers).")
    status: RunStatus = Field(description="queued, running, completed, partial, failed or cancelled.")
    created_at: datetime = Field(description="When it was created (UTC).")
    started_at: datetime | None = Field(description="When its first question started.")
    finished_at: datetime | None = Field(description="When its last question ended.")
    cancel_requested: bool = Field(description="Whether cancelling it was asked for.")
    counts: RunCounts = Field(description="Its questions by state.")
    source_failures: list[SourceFailureCount] = Field(description="Failed sources, by source and kind.")
    webhook_state: WebhookState = Field(description="none, pending, delivered or failed.")
    webhook_error: str | None = Field(description="Why the last webhook delivery failed, if it did.")
    cost: AnswerCost = Field(
        default_factory=AnswerCost,
        description="What the run's researched questions cost together, in US dollars (the sum of their answers' "
        "`cost`): `usd` is None (price unknown, never 0) when any answer's price is unknown, exactly 0 when no LLM "
        "was called. Questions still open add to it as they finish.",
    )

    @field_validator("webhook_error", mode="before")
    @classmethod
    def _safe_webhook_error(cls, value: Any) -> Any:
        return _shown(value)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_RUN_STATUSES


class ItemFailure(Contract):
    """Why a question failed for good."""

    kind: Literal[
        "sources_failed", "knowledge_base_unavailable", "no_sources", "refused", "invalid_request", "error", "cancelled"
    ] = Field(
        description="sources_failed: every source failed; knowledge_base_unavailable: the knowledge base could not "
        "be opened (held by another process, server down), whatever else answered; no_sources: none was searched; "
        "refused: the question "
        "was refused by the guard; invalid_request: its options are wrong; error: an unexpected error; "
        "cancelled: the run was cancelled before it started."
    )
    message: str = Field(max_length=4_000, description="What went wrong, for a person (no credential, no SQL).")

    @field_validator("message", mode="before")
    @classmethod
    def _safe_message(cls, value: Any) -> Any:
        return _shown(value)


class QuestionResult(Contract):
    """The one stored result of one question of a run."""

    index: int = Field(ge=0, description="Position of the question in the job (0-based).")
    question: str = Field(description="The question.")
    carried: dict[str, Any] = Field(description="The other CSV columns of its row.")
    status: ItemStatus = Field(description="pending, running, answered, uncertain, failed or cancelled.")
    attempts: int = Field(ge=0, description="How many times it was started (retries and takeovers included).")
    confidence_level: ConfidenceLevel | None = Field(description="The answer's confidence band.")
    citation_count: int = Field(ge=0, description="How many sources the answer cites.")
    sources_used: list[str] = Field(description="Source types that contributed evidence.")
    sources_failed: list[dict[str, str]] = Field(description='Failed sources: {"source", "kind", "message"}.')
    response: FinalResponse | None = Field(description="The full answer, once researched.")
    failure: ItemFailure | None = Field(description="Why it failed, if it did.")
    started_at: datetime | None = Field(description="When it (last) started.")
    finished_at: datetime | None = Field(description="When it ended.")
    answered_by: str | None = Field(default=None, description="The process (host:pid) that stored the result.")


def crewai_state(status: RunStatus) -> Literal["running", "completed", "error"]:
    """A run's status in the names crewAI's deployed-crew API uses for a kickoff (for ``GET /status/{id}``): the
    three of its OpenAPI file (``docs/enterprise-api.en.yaml`` in crewAIInc/crewAI), so a queued run is running."""
    if status in ("queued", "running"):
        return "running"
    if status in ("completed", "partial"):
        return "completed"
    return "error"


def _one_line(error: Exception) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in errors())
    return str(error).splitlines()[0] if str(error) else type(error).__name__
