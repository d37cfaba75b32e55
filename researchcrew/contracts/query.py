"""The user's question and preferences."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from researchcrew.contracts._base import Contract, Identifier, SourceType

ResponseFormat = Literal["concise", "detailed", "technical"]

MAX_QUERY_CHARS = 4_000  # the longest question researched; the guard refuses longer ones politely
MAX_RECORDED_CHARS = 100_000  # what a Query may hold at all, so that an oversized message can still be refused


class UserPreferences(Contract):
    """How a user likes answers. Learned over time by the Memory agent; any field can be given per question."""

    response_format: ResponseFormat = Field(default="detailed", description="Answer style.")
    preferred_sources: list[SourceType] = Field(
        default_factory=list, description="Source types to put first, in order of preference."
    )
    excluded_sources: list[SourceType] = Field(default_factory=list, description="Source types never to call.")
    max_response_length: int = Field(default=2000, ge=50, le=20_000, description="Upper bound on answer words.")
    min_response_length: int = Field(default=100, ge=0, le=20_000, description="Lower bound on answer words.")
    include_sections: bool = Field(default=True, description="Structure the answer into titled sections.")
    source_reputation: dict[str, float] = Field(
        default_factory=dict, description="Per-user overrides of source reputation, source type → [0, 1]."
    )


class Query(Contract):
    """A question as the system received it."""

    query_id: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Unique id of this question.")
    text: str = Field(
        max_length=MAX_RECORDED_CHARS,
        description="The question, as asked. Not validated for content here: the Flow's guard refuses empty, "
        f"oversized (> {MAX_QUERY_CHARS} characters) or incoherent questions with a polite reply.",
    )
    user_id: Identifier = Field(description="Who asked.")
    session_id: Identifier = Field(description="The conversation it belongs to.")
    asked_at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When it was asked (UTC).")
