"""The vagueness detector (issue 20 item 4): questions too vague or too broad to answer well are told from clear
ones, including short precise questions that must never be called vague."""

from __future__ import annotations

import pytest

from researchcrew.pipeline._vagueness import vagueness


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("testing", "bare_topic"),
        ("mutation testing", "bare_topic"),
        ("What is it?", "no_subject"),
        ("Tell me more.", "no_subject"),
        ("What are its limitations?", "ambiguous_referent"),
        ("Who are the authors?", "ambiguous_referent"),
        ("How does it compare with QuickCheck?", "ambiguous_referent"),
        ("Tell me everything about fuzzing.", "broad_request"),
        ("What is known about the screening method?", "broad_request"),
        ("Give me an overview of AI.", "broad_request"),
        ("What is testing?", "generic_subject"),
        ("How does software work?", "generic_subject"),
    ],
)
def test_vague_and_broad_questions_are_recognised(text: str, rule: str) -> None:
    found = vagueness(text)
    assert found is not None and found.rule == rule
    assert found.kind == ("too_broad" if rule == "broad_request" else "too_vague")


@pytest.mark.parametrize(
    "text",
    [
        "Who wrote QuickCheck?",
        "When was QuickCheck released?",
        "Who wrote QuickCheck and when was it released?",
        "QuickCheck release year",
        "What is metamorphic testing?",
        "What is software testing?",
        "Define equivalent mutants.",
        "How does pooled testing work?",
        "What is the capital of Australia?",
        "What is my project code?",  # the user's own fact: memory answers it
        "What did I ask about flaky tests before?",  # about the conversation
    ],
)
def test_clear_questions_are_not_called_vague(text: str) -> None:
    assert vagueness(text) is None
