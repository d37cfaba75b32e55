"""The Memory agent's input and output (seed 003, "Memory Agent")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from researchcrew.contracts._base import Contract, Identifier, NonNegativeMs
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse

MemoryStatus = Literal["success", "partial", "failed"]


class MemoryInput(Contract):
    query: Query = Field(description="The question asked.")
    final_response: FinalResponse = Field(description="The answer given.")
    session_id: Identifier = Field(description="The conversation.")
    user_id: Identifier = Field(description="Whose memory this goes into.")
    context: dict[str, Any] | None = Field(default=None, description="Additional context to store with the turn.")


class MemoryOutput(Contract):
    status: MemoryStatus = Field(description="success, partial (some steps failed) or failed.")
    entities_added: int = Field(default=0, ge=0, description="New entities recorded.")
    entities_updated: int = Field(default=0, ge=0, description="Existing entities mentioned again.")
    relationships_added: int = Field(default=0, ge=0, description="New relationships recorded.")
    conversation_entry_added: bool = Field(default=False, description="Whether the message pair was stored.")
    preferences_updated: bool = Field(default=False, description="Whether the user's preferences changed.")
    session_summary_updated: bool = Field(
        default=False,
        description="Whether the session's rolling summary (what follow-ups are rewritten from) was updated.",
    )
    error_message: str | None = Field(default=None, description="What failed, when something did.")
    execution_time_ms: NonNegativeMs = Field(default=0.0, description="Wall time in milliseconds.")
