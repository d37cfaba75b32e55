"""The plan: proposed by rule or by the model (with the rules as fallback), and changed by the user's decision —
approve, cut, reorder, reword, add, cancel — or refused, in one line, when the decision makes no sense."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.contracts.deep import PlanChoice, PlanDecision, PlanItem, ResearchPlan
from researchcrew.deep._plan import apply_decision, llm_plan, read_decision, rule_plan, topic_of
from researchcrew.errors import PlanDecisionError
from researchcrew.pipeline.clarify import EvidenceSummary
from researchcrew.testing import FakeLLM


def plan(*questions: str, max_items: int = 5) -> ResearchPlan:
    items = [PlanItem(id=number, question=text) for number, text in enumerate(questions, start=1)]
    return ResearchPlan(question="Q?", items=items, max_items=max_items)


PLAN = plan("What is A?", "How is B measured?", "What limits C?")


def summary(**fields: object) -> EvidenceSummary:
    values: dict[str, object] = {
        "question": "q",
        "searched": ("q",),
        "found": {"rag": 40},
        "total_matches": 40,
        "answered": ("rag",),
        "failed": (),
        "sub_topics": (("metamorphic testing", 6), ("mutation testing", 3)),
        "years": (2012, 2016, 2019, 2021, 2023, 2024),
    }
    values.update(fields)
    return EvidenceSummary(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("What is known about testing ML systems?", "testing ML systems"),
        ("Tell me about flaky tests", "flaky tests"),
        ("How do transformers use attention?", "transformers use attention"),
        ("What are the state-of-the-art fuzzers? (since 2020)", "state-of-the-art fuzzers"),
    ],
)
def test_topic_of_strips_the_question_words(question: str, topic: str) -> None:
    assert topic_of(question) == topic


def test_without_evidence_the_rule_plan_asks_the_topic_from_a_few_angles_and_never_a_date() -> None:
    """The evidence summary's phrases and years are not asked about as such (issue 21: "What is known about earlier
    question in ...", "since 2026"); with no probe evidence to derive facets from, the plan asks a few angles."""
    proposed = rule_plan("What is known about testing ML systems?", summary(), max_items=8)
    texts = [item.question for item in proposed.items]
    assert proposed.written_by == "rules" and len(texts) == 4
    assert texts[0] == "What does testing ML systems cover, and how is it defined?"
    assert not any("known about" in text or "since" in text or "metamorphic" in text for text in texts)
    assert [item.id for item in proposed.items] == list(range(1, 5))
    short = rule_plan("What is known about testing ML systems?", summary(), max_items=2)
    assert len(short.items) == 2


def test_rule_plan_carries_the_users_focus_into_every_sub_question() -> None:
    proposed = rule_plan("What is known about fuzzing?", None, max_items=4, focus="embedded systems, since 2019")
    assert all(item.question.endswith("(embedded systems, since 2019)?") for item in proposed.items)


async def test_the_model_proposes_the_plan_and_the_rules_take_over_when_it_fails() -> None:
    reply = (
        "Here it is:\n```json\n"
        + json.dumps(
            {
                "sub_questions": [
                    {"question": "What is X?", "rationale": "basics"},
                    {"question": "what is x?"},
                    {"question": "Why Y?"},
                ]
            }
        )
        + "\n```"
    )
    llm = FakeLLM([reply, "no JSON at all", RuntimeError("provider down")])
    proposed = await llm_plan(llm, "Q?", None, [], max_items=5)
    assert proposed.written_by == "llm"
    assert [item.question for item in proposed.items] == ["What is X?", "Why Y?"]  # the repeat dropped
    assert "<<<QUESTION>>>" in llm.calls[0].messages[1]["content"]
    for _ in range(2):
        fallback = await llm_plan(llm, "What is known about fuzzing?", None, [], max_items=3)
        assert fallback.written_by == "rules" and len(fallback.items) == 3


@pytest.mark.parametrize("cap", [1, 3, 4])
async def test_a_model_proposing_more_than_the_cap_gets_exactly_the_first_cap_sub_questions(cap: int) -> None:
    """Seven proposals, one a repeat of the first (a repeat takes no place under the cap): the first ``cap``
    distinct ones are kept, in the model's order, and the plan says its cap."""
    proposals = ["What is A?", "what is a?", "What is B?", "What is C?", "What is D?", "What is E?", "What is F?"]
    reply = json.dumps({"sub_questions": [{"question": text} for text in proposals]})
    proposed = await llm_plan(FakeLLM([reply]), "Q?", None, [], max_items=cap)
    assert proposed.written_by == "llm"
    distinct = ["What is A?", "What is B?", "What is C?", "What is D?", "What is E?", "What is F?"]
    assert [item.question for item in proposed.items] == distinct[:cap]
    assert [item.id for item in proposed.items] == list(range(1, cap + 1))
    assert proposed.max_items == cap


def test_approve_keeps_the_plan_and_cancel_ends_it() -> None:
    assert apply_decision(PLAN, PlanDecision()) == PLAN
    assert apply_decision(PLAN, PlanDecision(action="cancel")) is None
    assert read_decision("") == PlanDecision()
    assert read_decision('{"action": "cancel"}').action == "cancel"


def test_edits_cut_reorder_reword_and_add() -> None:
    decision = PlanDecision.edits(PLAN, cut=[2], order=[3], reword={1: "What exactly is A?"}, add=["Who uses D?"])
    approved = apply_decision(PLAN, decision)
    assert approved is not None
    assert [(item.id, item.question) for item in approved.items] == [
        (3, "What limits C?"),
        (1, "What exactly is A?"),
        (4, "Who uses D?"),
    ]


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (PlanDecision(items=[]), "leaves no sub-question"),
        (PlanDecision(items=[PlanChoice(id=9)]), "item 9, which the plan does not have"),
        (PlanDecision(items=[PlanChoice(id=1), PlanChoice(id=1)]), "item 1 is listed twice"),
        (PlanDecision(items=[PlanChoice(id=2, question="   ")]), "the edit of item 2 empties it"),
        (PlanDecision(items=[PlanChoice(question="")]), "adds a sub-question but gives no text"),
        (PlanDecision(items=[PlanChoice(id=1), PlanChoice(question="what is a?")]), "appears twice"),
        (
            PlanDecision(
                items=[PlanChoice(id=n) for n in (1, 2, 3)] + [PlanChoice(question=f"New {n}?") for n in range(3)]
            ),
            "at most 5 are allowed",
        ),
    ],
)
def test_bad_decisions_are_refused_with_one_clear_line(decision: PlanDecision, message: str) -> None:
    with pytest.raises(PlanDecisionError, match=message):
        apply_decision(PLAN, decision)


def test_a_plan_cannot_be_empty_or_too_long() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ResearchPlan(question="Q", items=[], max_items=3)
    with pytest.raises(ValueError, match="at most 1 are allowed"):
        plan("A?", "B?", max_items=1)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.builds(
            PlanChoice,
            id=st.one_of(st.none(), st.integers(min_value=1, max_value=5)),
            question=st.one_of(st.none(), st.sampled_from(["", " ", "What is new?", "What is A?", "How?"])),
        ),
        max_size=8,
    )
)
def test_any_decision_gives_a_valid_plan_or_a_plan_decision_error(choices: list[PlanChoice]) -> None:
    try:
        approved = apply_decision(PLAN, PlanDecision(items=choices))
    except PlanDecisionError:
        return
    assert approved is not None
    assert 1 <= len(approved.items) <= PLAN.max_items
    assert len({item.id for item in approved.items}) == len(approved.items)
    assert all(item.question.strip() for item in approved.items)
