"""What a caller asks for: one ``ResearchRequest``, built by every door (SDK, CLI, HTTP, batch jobs) and carried
unchanged into the research Flow.

Response preferences here are only the ones the caller gave *for this question*; the Flow lays them over the
user's learned preferences, and the Memory stage learns from them (an explicit choice says more than a default).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import AfterValidator, Field, GetJsonSchemaHandler, StrictBool, field_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from researchcrew.contracts._base import Identifier, RequestContract, SourceType, SourceTypeKey
from researchcrew.contracts.query import MAX_QUERY_CHARS, MAX_RECORDED_CHARS, ResponseFormat, UserPreferences

MAX_DEADLINE_S = 600.0


class ResponseOptions(RequestContract):
    """How this one answer should be written. A field left unset keeps the user's learned preference."""

    response_format: ResponseFormat | None = Field(
        default=None, description="Answer style: concise, detailed or technical."
    )
    max_response_length: int | None = Field(default=None, ge=50, le=20_000, description="Upper bound on answer words.")
    min_response_length: int | None = Field(default=None, ge=0, le=20_000, description="Lower bound on answer words.")
    include_sections: StrictBool | None = Field(default=None, description="Structure the answer into titled sections.")
    source_reputation: dict[str, float] | None = Field(
        default=None, description="Reputation overrides for this question, source type → [0, 1]."
    )

    def given(self) -> dict[str, Any]:
        """The options the caller set, by name."""
        return {name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None}

    def applied_to(self, preferences: UserPreferences) -> UserPreferences:
        """``preferences`` with this question's options laid over them."""
        return UserPreferences.model_validate({**preferences.model_dump(), **self.given()})


# Who asks is the request's own user and session: a tool option naming another would search as someone else (another
# user's private documents, another user's memory).
RESERVED_TOOL_OPTIONS = frozenset({"user_id", "session_id"})


def check_tool_options(value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool options by source type, refused when one names the user or session a source searches as."""
    for source, options in value.items():
        named = sorted(RESERVED_TOOL_OPTIONS & set(options))
        if named:
            raise ValueError(
                f"tool_options[{source!r}] may not set {', '.join(named)}: a source always searches as the user "
                "who asks, in their session"
            )
    return value


class _KeysAreSourceTypes:
    """The schema of a dict keyed by source type says so: pydantic lists the key pattern as ``patternProperties``,
    which leaves every other key allowed; ``additionalProperties: false`` makes the pattern the only way in."""

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["additionalProperties"] = False
        return json_schema


# Keyed by source type, as the retriever's input is: a key no source type can be ("½0", "Web") is the caller's 422 at
# the door, not a 500 when the pipeline builds the retriever's input (the schema fuzz found that).
ToolOptions = Annotated[dict[SourceTypeKey, dict[str, Any]], AfterValidator(check_tool_options), _KeysAreSourceTypes()]


class ResearchRequest(RequestContract):
    """One research question and everything the caller chose about how it is researched and answered."""

    question: str = Field(
        description="The question, as asked. Its content is checked by the Flow's guard, which refuses empty, "
        f"oversized (> {MAX_QUERY_CHARS} characters) or incoherent questions with a polite reply instead of an error."
    )
    user_id: Identifier = Field(default="default", description="Whose memory the question uses and adds to.")
    session_id: Identifier = Field(default="default", description="The conversation it belongs to.")
    preferred_sources: list[SourceType] | None = Field(
        default=None, description="Source types to put first, in order (rag, web, arxiv, memory, or a custom tool's)."
    )
    exclude_sources: list[SourceType] | None = Field(default=None, description="Source types not to search.")
    tool_options: ToolOptions = Field(
        default_factory=dict,
        description='Options for one source\'s tool, by source type, e.g. {"web": {"domains": ["arxiv.org"]}}.',
    )
    deadline_s: float | None = Field(
        default=None, gt=0, le=MAX_DEADLINE_S, description="Seconds for the whole run (default: the settings')."
    )
    response: ResponseOptions = Field(
        default_factory=ResponseOptions, description="How the answer should be written, for this question only."
    )

    @field_validator("question", mode="before")
    @classmethod
    def _bounded_record(cls, value: object) -> object:
        # An oversized question is refused politely by the guard; only its first part is kept for the record.
        return value[:MAX_RECORDED_CHARS] if isinstance(value, str) else value

    @classmethod
    def from_keywords(cls, question: str, *, user_id: str, session_id: str, **keywords: Any) -> ResearchRequest:
        """The SDK's ``ask(question, **keywords)`` form: routing options and response options side by side.
        An unknown keyword raises ``ValueError`` naming it, the closest valid name, and every valid name."""
        check_keywords(keywords)
        response = {name: keywords.pop(name) for name in list(keywords) if name in ResponseOptions.model_fields}
        return cls(question=question, user_id=user_id, session_id=session_id, response=response, **keywords)

    def explicit_choices(self) -> dict[str, Any]:
        """What the caller chose on purpose (format, sources), for preference learning."""
        choices: dict[str, Any] = {}
        if self.response.response_format is not None:
            choices["response_format"] = self.response.response_format
        if self.preferred_sources:
            choices["preferred_sources"] = list(self.preferred_sources)
        if self.exclude_sources:
            choices["exclude_sources"] = list(self.exclude_sources)
        return choices


def keyword_names() -> list[str]:
    """The keywords ``ask()`` takes besides the question, user and session, each once, sorted."""
    routing = set(ResearchRequest.model_fields) - {"question", "user_id", "session_id", "response"}
    return sorted(routing | set(ResponseOptions.model_fields))


def check_keywords(keywords: dict[str, Any]) -> None:
    """Fail fast on keywords ``ask()`` does not take, with a suggestion and the valid names."""
    valid = keyword_names()
    unknown = sorted(set(keywords) - set(valid))
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1)
        if close:
            hints.append(f"{name!r} → did you mean {close[0]!r}?")
    hint = f" ({'; '.join(hints)})" if hints else ""
    raise ValueError(f"unknown option(s) {unknown} for ask(){hint}; valid options: {', '.join(valid)}")
