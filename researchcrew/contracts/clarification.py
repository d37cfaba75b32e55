"""Clarifying questions (seed 002 phase 1, seed 004): asked instead of an answer when the question is too vague or
too broad to answer well (quick answers), or when the evidence is empty or far more than one answer can carry (the
deep run), and the user's reply to them.

A ``ClarificationRequest`` says what was searched, what was found (counts per source) and 1–3 concrete ways to
narrow the question (time range, sub-topic, source kind, other terms). The quick mode returns it inside a
``FinalResponse`` whose ``answer_kind`` is ``"clarification"``; the deep mode pauses on it. The user can always
reply "just answer".
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, StrictBool

from researchcrew.contracts._base import Contract, RequestContract

ClarificationReason = Literal["no_evidence", "too_many_matches", "too_vague", "too_broad"]
ClarificationFacet = Literal["terms", "sub_topic", "time_range", "source_kind"]

# A reply that declines to narrow the question: "just answer", "answer anyway", "go ahead", "skip", "no preference".
_JUST_ANSWER = re.compile(
    r"^\W*(?:(?:please|ok(?:ay)?|no|nah|just|simply)[\s,]+)*"
    r"(?:answer(?:\s+(?:it|anyway|now|with\s+what\s+you\s+(?:have|found)))?|go\s+ahead|proceed|continue|skip(?:\s+it)?|"
    r"no\s+preference|doesn'?t\s+matter|don'?t\s+care|anything|whatever|all\s+of\s+(?:it|them))\W*$",
    re.IGNORECASE,
)


def is_just_answer(text: str) -> bool:
    """Whether a reply to clarifying questions declines to narrow the question ("just answer", "go ahead", ...)."""
    return _JUST_ANSWER.match(text.strip()) is not None


class ClarifyingQuestion(Contract):
    """One targeted question and concrete choices the evidence suggests."""

    facet: ClarificationFacet = Field(
        description="What the question narrows: terms (other words), sub_topic, time_range or source_kind."
    )
    question: str = Field(min_length=1, max_length=500, description="The question, as shown to the user.")
    options: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="Concrete choices read from the evidence (sub-topics, periods, source kinds), best first.",
    )


class ClarificationRequest(Contract):
    """Why the assistant asks instead of answering, what it searched and found, and what it asks."""

    reason: ClarificationReason = Field(
        description="too_vague: the question does not say clearly enough what it asks (a bare topic, a referent "
        "without context, nothing asked about); too_broad: it asks for everything about a broad subject (the quick "
        "answer asks only for these two: a miss on a clear question is searched again, reworded and widened, "
        "instead); no_evidence: nothing was found; too_many_matches: far more matches than one answer can carry "
        "(the deep run's clarify phase)."
    )
    question: str = Field(max_length=4_000, description="The user's question the clarification is about.")
    searched: list[str] = Field(default_factory=list, description="The query texts sent to the sources, in order.")
    found: dict[str, int] = Field(
        default_factory=dict,
        description="Matches per source type (the knowledge base counts passages above its floor).",
    )
    total_matches: int = Field(default=0, ge=0, description="All matches, over every source.")
    failed_sources: list[str] = Field(
        default_factory=list, description="Sources that could not be searched, each with the reason."
    )
    questions: list[ClarifyingQuestion] = Field(
        min_length=1, max_length=3, description="1–3 targeted questions, most useful first."
    )
    message: str = Field(min_length=1, max_length=8_000, description="The whole clarification as shown to the user.")
    written_by: Literal["rules", "llm"] = Field(
        default="rules", description="rules: built from the evidence without a model; llm: worded by the model."
    )


class ClarificationAnswer(RequestContract):
    """The user's reply to a clarification: narrowing words, or "just answer"."""

    answer: str = Field(default="", max_length=2_000, description="The reply, e.g. 'flaky tests, since 2019'.")
    just_answer: StrictBool = Field(default=False, description="Answer the question as it was, without narrowing it.")

    @property
    def declines(self) -> bool:
        """True when the reply asks for an answer without narrowing (flag, empty reply, or "just answer")."""
        return self.just_answer or not self.answer.strip() or is_just_answer(self.answer)

    @classmethod
    def from_feedback(cls, feedback: str) -> ClarificationAnswer:
        """The reply a paused run was resumed with: this model's JSON, or the reply as plain text."""
        text = feedback.strip()
        return cls.model_validate_json(text) if text.startswith("{") else cls(answer=text[:2_000])


__all__ = [
    "ClarificationAnswer",
    "ClarificationFacet",
    "ClarificationReason",
    "ClarificationRequest",
    "ClarifyingQuestion",
    "is_just_answer",
]
