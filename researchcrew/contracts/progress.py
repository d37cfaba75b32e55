"""Progress events a caller can consume while a question is researched (``ResearchAssistant.stream``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from researchcrew.contracts._base import Contract, NonNegativeMs

Stage = Literal[
    "guard",
    "rewrite",  # a follow-up made stand-alone; detail: rewritten, original, standalone, method, reason
    "retrieve",
    "evaluate",
    "confidence",
    "reformulate",
    "clarify",
    "synthesize",
    "validate",
    "remember",
    "respond",
]


class ProgressEvent(Contract):
    """One stage starting or finishing. ``detail`` holds counts and decisions (e.g. chunk counts, confidence)."""

    run_id: str = Field(description="Id of the research run (the Flow's state id).")
    stage: Stage = Field(description="The Flow stage.")
    status: Literal["started", "finished"] = Field(description="Whether the stage started or finished.")
    at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When (UTC).")
    elapsed_ms: NonNegativeMs = Field(description="Time since the run started, in milliseconds.")
    duration_ms: NonNegativeMs | None = Field(default=None, description="How long the stage took (finished only).")
    detail: dict[str, Any] = Field(default_factory=dict, description="Counts, decisions and reasons.")
