"""Progress events a caller can consume while a question is researched (``ResearchAssistant.stream``, the HTTP
service's server-sent events).

Three kinds, told apart by ``status``:

* ``started`` / ``finished``: a stage of the Flow starts or ends (``detail`` holds counts and decisions);
* ``source``: one source answered or failed, as it happened (``source`` is its report: status, chunk count,
  latency, and for a failure its kind and reason); sources that were excluded are reported as ``skipped``;
* ``text``: the next piece of the answer as it is written (``text``): section by section for extractive answers,
  token by token when the LLM streams. ``detail.mode`` is ``section`` or ``token``; ``detail.reset`` is true when a
  new writer starts over (the LLM's answer could not be used and the extractive one follows). The streamed text
  is a preview: the final ``FinalResponse.answer`` is the validated, cited answer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from researchcrew.contracts._base import Contract, NonNegativeMs
from researchcrew.contracts.chunks import SourceReport

Stage = Literal[
    "guard",
    "rewrite",  # a follow-up made stand-alone; detail: rewritten, original, standalone, method, reason
    "route",  # issue 22: the route chosen (structured, hybrid, long_text); detail: route, intent, reason, rows
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
ProgressStatus = Literal["started", "finished", "source", "text"]


class ProgressEvent(Contract):
    """One step of a run: a stage starting or finishing, a source answering or failing, or a piece of the answer."""

    run_id: str = Field(description="Id of the research run (the Flow's state id).")
    stage: Stage = Field(description="The Flow stage (retrieve for source events, synthesize for text events).")
    status: ProgressStatus = Field(
        description="started/finished: the stage; source: one source answered or failed (see `source`); text: "
        "the next piece of the answer as it is written (see `text`)."
    )
    at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When (UTC).")
    elapsed_ms: NonNegativeMs = Field(description="Time since the run started, in milliseconds.")
    duration_ms: NonNegativeMs | None = Field(default=None, description="How long the stage took (finished only).")
    detail: dict[str, Any] = Field(default_factory=dict, description="Counts, decisions and reasons.")
    source: SourceReport | None = Field(
        default=None, description="For `source` events: what the source did (failure kind and reason included)."
    )
    text: str | None = Field(default=None, description="For `text` events: the next piece of the answer (Markdown).")

    @model_validator(mode="after")
    def _payload_matches_status(self) -> ProgressEvent:
        if (self.source is not None) != (self.status == "source"):
            raise ValueError("`source` is set exactly on source events")
        if (self.text is not None) != (self.status == "text"):
            raise ValueError("`text` is set exactly on text events")
        return self

    @property
    def kind(self) -> Literal["stage", "source", "text"]:
        """``stage`` for started/finished, else the status itself (the server-sent event's name)."""
        if self.status == "source":
            return "source"
        if self.status == "text":
            return "text"
        return "stage"
