"""Conversation memory in the assistant's words is never evidence (issue 20, item 2): the Evaluator removes it
before anything is compared, so it is never one side of a disagreement, never counted, never cited; what the user
said (their statement of a fact, their earlier questions for a question about the conversation) stays evidence."""

from __future__ import annotations

import pytest

from researchcrew.contracts.chunks import is_evidence
from researchcrew.pipeline.evaluate._evaluator import Evaluator
from researchcrew.pipeline.evaluate.contradictions import detect_contradictions
from tests.evaluator.factories import chunk, request

TRIAL = "In a randomised trial of 4,000 adults, daily aspirin reduced the risk of heart attack by 30% over five years."
EARLIER_ANSWER = TRIAL.replace("30%", "5%")  # what the assistant answered before, from a source since corrected


def _earlier_answer(**metadata: object) -> object:
    return chunk("memory:r1", EARLIER_ANSWER, source_type="memory", metadata=dict(metadata))


@pytest.mark.parametrize(
    "metadata",
    [
        {},  # speaker unknown: counts as the assistant's
        {"speaker": "assistant"},
        {"speaker": "assistant", "recalled_as": "conversation"},
        {"speaker": "user", "recalled_as": "earlier_question"},  # the user's question beside a research question
    ],
)
def test_memory_that_is_not_the_users_evidence_is_removed_and_never_compared(metadata: dict[str, object]) -> None:
    source = chunk("trial", TRIAL, url="https://example.org/trial")
    memory = _earlier_answer(**metadata)
    output = Evaluator().evaluate(request([source, memory], quality_threshold=0.0))  # type: ignore[list-item]

    assert [scored.chunk.chunk_id for scored in output.filtered_context.chunks] == ["trial"]
    assert [(r.chunk_id, r.reason) for r in output.removal_rationale] == [("memory:r1", "not_evidence")]
    assert output.contradictions_found == []
    assert detect_contradictions([source, memory], tolerance=0.05, limit=5) == []  # type: ignore[list-item]


@pytest.mark.parametrize("recalled_as", ["user_statement", "conversation"])
def test_what_the_user_said_stays_evidence(recalled_as: str) -> None:
    said = _earlier_answer(speaker="user", recalled_as=recalled_as)
    assert is_evidence(said)  # type: ignore[arg-type]
    output = Evaluator().evaluate(request([said], quality_threshold=0.0))  # type: ignore[list-item]
    assert [scored.chunk.chunk_id for scored in output.filtered_context.chunks] == ["memory:r1"]


def test_every_other_source_is_evidence() -> None:
    assert all(is_evidence(chunk("c", TRIAL, source_type=kind)) for kind in ("rag", "web", "arxiv", "custom"))
