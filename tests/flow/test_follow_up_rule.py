"""The deterministic follow-up rule: a follow-up gets the previous subject; a stand-alone question passes unchanged.

Both directions are tested on real phrasings and with hypothesis: a false rewrite is worse than none."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.memory.records import SessionSummary, SessionTurn
from researchcrew.pipeline._guard import check_question
from researchcrew.pipeline.follow_up._rule import points_back, rule_rewrite
from researchcrew.pipeline.follow_up._subjects import looks_plural, possessive, question_subjects


def after(*questions: str) -> SessionSummary:
    """A session whose earlier turns asked ``questions`` (each already stand-alone)."""
    turns = [SessionTurn(question=q, standalone=q) for q in questions]
    return SessionSummary(user_id="ada", session_id="s1", turns=len(turns), recent=turns)


MT = "What is metamorphic testing?"
MT_LIMITS = "What are the limitations of metamorphic testing?"
BERT_GPT = "Compare BERT and GPT-2"
FLAKY = "What are flaky tests?"


@pytest.mark.parametrize(
    ("earlier", "question", "expected"),
    [
        # pronouns
        (MT, "What are its limitations?", "What are the limitations of metamorphic testing?"),
        (MT, "What's its main weakness?", "What's metamorphic testing's main weakness?"),
        (MT, "How does it work?", "How does metamorphic testing work?"),
        (MT, "Who invented it?", "Who invented metamorphic testing?"),
        (MT, "Is it better than property-based testing?", "Is metamorphic testing better than property-based testing?"),
        (MT, "Does it scale to large programs?", "Does metamorphic testing scale to large programs?"),
        (MT, "Is it used to test compilers?", "Is metamorphic testing used to test compilers?"),
        (MT, "It's used where?", "Metamorphic testing is used where?"),
        (MT, "compare it with fuzzing", "compare metamorphic testing with fuzzing"),  # the user's casing kept
        (FLAKY, "What causes them?", "What causes flaky tests?"),
        (FLAKY, "How do they affect CI pipelines?", "How do flaky tests affect CI pipelines?"),
        (BERT_GPT, "Which of them is faster?", "Which of BERT and GPT-2 is faster?"),
        (BERT_GPT, "What are their context sizes?", "What are the context sizes of BERT and GPT-2?"),
        # demonstratives
        (MT, "How does this approach compare to fuzzing?", "How does metamorphic testing compare to fuzzing?"),
        (MT, "How does that work?", "How does metamorphic testing work?"),
        (MT, "Who uses this?", "Who uses metamorphic testing?"),
        (MT, "Is this technique used in industry?", "Is metamorphic testing used in industry?"),
        (BERT_GPT, "Are these models open source?", "Are BERT and GPT-2 open source?"),
        # the former / the latter
        (BERT_GPT, "What is the latter's context size?", "What is GPT-2's context size?"),
        (BERT_GPT, "Who trained the former?", "Who trained BERT?"),
        # ellipsis
        (MT_LIMITS, "And in Python?", "What are the limitations of metamorphic testing in Python?"),
        (MT_LIMITS, "What about for machine learning models?", MT_LIMITS[:-1] + " for machine learning models?"),
        (MT_LIMITS, "What about flaky tests?", "What are the limitations of flaky tests?"),
        (MT_LIMITS, "Same for property-based testing?", "What are the limitations of property-based testing?"),
        # ... but after a plain "What is X?" the substitution would add nothing the user did not say
        (MT, "What about flaky tests?", None),
        (MT, "Same for property-based testing?", None),
        ("What is the GIL in Python?", "And in Java?", "What is the GIL in Java?"),
        ("What is the GIL in Python?", "Why does it exist?", "Why does the GIL in Python exist?"),
        ("What is attention in transformers?", "And in RNNs?", "What is attention in RNNs?"),
        ("How do I read a file in Python?", "And in Java?", "How do I read a file in Java?"),
        # a bare aspect, "tell me more"
        (MT, "What are the limitations?", "What are the limitations of metamorphic testing?"),
        (MT, "Any examples?", "Any examples of metamorphic testing?"),
        (BERT_GPT, "What are the main differences?", "What are the main differences between BERT and GPT-2?"),
        (MT, "Tell me more", "Tell me more about metamorphic testing"),
        # a chain: the earlier turn is itself a rewritten follow-up
        (MT_LIMITS, "How can they be overcome?", None),  # "they" ≠ the singular subject: not guessed
    ],
)
def test_a_follow_up_is_rewritten_from_the_previous_question(earlier: str, question: str, expected: str | None) -> None:
    result = rule_rewrite(question, after(earlier))
    if expected is None:
        assert not result.rewritten and result.question == question
        return
    assert result.rewritten, result.reason
    assert (result.question, result.method) == (expected, "rule")
    assert result.reason
    assert check_question(result.question).allowed


STAND_ALONE = [
    "What is property-based testing?",
    "How do transformers use attention heads?",
    "Is it possible to test machine learning models without an oracle?",
    "Is it true that larger batches train faster?",
    "How long does it take to train BERT on a single GPU?",
    "Would it be better to use RRF or weighted fusion?",
    "What is the role of AI in IT?",
    "Why is that?",  # points at a statement, not a subject: the rule does not guess (the LLM may)
    "Is that true?",
    "Who said that?",
    "What happened this year in NLP?",
    "Which model that was released in 2023 is the best?",
    "What are the limitations of property-based testing?",
    "Tell me about flaky tests in Android apps.",
    "Compare SciFact and FEVER",
    "What did the 2019 paper by Chen et al. find?",
    "And how does property-based testing find bugs?",
    "What about the GIL?",  # ellipsis with a new subject, but the earlier question had two subjects
    "",
    "   ",
    "?",
]


@pytest.mark.parametrize("question", STAND_ALONE)
def test_a_question_that_stands_alone_passes_unchanged(question: str) -> None:
    for earlier in (MT, MT_LIMITS, BERT_GPT, FLAKY):
        if question == "What about the GIL?" and earlier != BERT_GPT:
            continue  # after a one-subject question this is an ellipsis, tested above
        result = rule_rewrite(question, after(earlier))
        assert not result.rewritten, (earlier, question, result)
        assert result.question == question


def chain(*turns: tuple[str, str]) -> SessionSummary:
    """A session whose earlier turns were each asked as the first and researched as the second of a pair."""
    recent = [SessionTurn(question=asked, standalone=standalone) for asked, standalone in turns]
    return SessionSummary(user_id="ada", session_id="s1", turns=len(recent), recent=recent)


@pytest.mark.parametrize(
    ("first", "second", "third", "expected"),
    [
        (MT, ("What are its limitations?", MT_LIMITS), "And in Python?", MT_LIMITS[:-1] + " in Python?"),
        (
            FLAKY,
            ("How do they affect CI pipelines?", "How do flaky tests affect CI pipelines?"),
            "And in Android apps?",
            "How do flaky tests affect CI pipelines in Android apps?",
        ),
        # the subject moved on in the second turn: "it" is mutation testing now, not the first turn's subject
        (
            MT,
            ("And mutation testing?", "What is mutation testing?"),
            "Who invented it?",
            "Who invented mutation testing?",
        ),
    ],
)
def test_a_chain_of_follow_ups_resolves_against_the_last_stand_alone_question(
    first: str, second: tuple[str, str], third: str, expected: str
) -> None:
    """Three turns, the second a rewritten follow-up. Resolving the third against the first question, or against
    the second as asked, gives another question (or none): only the second's stand-alone form gives this one."""
    result = rule_rewrite(third, chain((first, first), second))
    assert result.rewritten, result.reason
    assert (result.question, result.method) == (expected, "rule")


def test_nothing_is_rewritten_without_an_earlier_exchange() -> None:
    assert rule_rewrite("What are its limitations?", None).question == "What are its limitations?"
    empty = SessionSummary(user_id="ada", session_id="s1")
    assert not rule_rewrite("What are its limitations?", empty).rewritten


def test_only_the_previous_turn_lends_its_subject() -> None:
    # The previous question has no subject the rule can name: an older subject is not borrowed.
    summary = after(MT, "How do I read a file in Python?")
    assert not rule_rewrite("What are its limitations?", summary).rewritten


def test_an_ambiguous_reference_rewrites_nothing_at_all() -> None:
    result = rule_rewrite("Is it faster than the latter?", after(BERT_GPT))
    assert not result.rewritten and "'it'" in result.reason


@pytest.mark.parametrize(
    ("question", "subjects"),
    [
        ("What is metamorphic testing?", ["metamorphic testing"]),
        ("What are the main limitations of metamorphic testing in practice", ["metamorphic testing in practice"]),
        ("Who invented the transformer architecture?", ["the transformer architecture"]),
        ("What is a Bloom filter?", ["Bloom filter"]),
        ("How does BM25 work?", ["BM25"]),
        ("Explain retrieval-augmented generation in simple terms", ["retrieval-augmented generation"]),
        ("What is the difference between BERT and GPT-2?", ["BERT", "GPT-2"]),
        ("Is RoBERTa better than BERT?", ["RoBERTa", "BERT"]),
        ("BM25 vs dense retrieval", ["BM25", "dense retrieval"]),
        ("Which companies use Milvus?", ["Milvus"]),
        ("What is the best way to test ML models?", []),
        ("How do I read a file in Python?", []),
        ("What is happening?", []),
        ("What is it?", []),
        ("Why?", []),
    ],
)
def test_the_subject_of_a_question(question: str, subjects: list[str]) -> None:
    assert question_subjects(question) == subjects


def test_plural_and_possessive_forms() -> None:
    assert looks_plural("flaky tests") and looks_plural("BERT and GPT-2")
    assert not looks_plural("metamorphic testing") and not looks_plural("robotics") and not looks_plural("GANS")
    assert possessive("BERT") == "BERT's" and possessive("flaky tests") == "flaky tests'"
    assert possessive("analysis") == "analysis's"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What are its limitations?", True),
        ("And in Python?", True),
        ("Why is that?", True),
        ("What are the limitations?", True),
        ("Why?", True),
        ("Tell me more", True),
        ("What is property-based testing?", False),
        ("Is it possible to test ML models without an oracle?", False),
        ("How long does it take to train BERT?", False),
        ("Is it true that larger batches train faster?", False),
        ("What is the role of AI in IT?", False),
    ],
)
def test_points_back_decides_whether_the_llm_is_asked(question: str, expected: bool) -> None:
    assert points_back(question) is expected


# ---- properties --------------------------------------------------------------------------------------------------

_TOPICS = st.sampled_from(
    [
        "property-based testing",
        "BM25",
        "dense retrieval",
        "the SciFact dataset",
        "mutation testing",
        "Milvus",
        "graph neural networks",
        "CRISPR",
        "Rust's borrow checker",
        "the Python GIL",
    ]
)
_TEMPLATES = st.sampled_from(
    [
        "What is {t}?",
        "How does {t} work?",
        "Who invented {t}?",
        "What are the limitations of {t}?",
        "Explain {t}",
        "Is {t} used in industry?",
        "Why is {t} popular?",
        "Compare {t} and {u}",
        "How is {t} different from {u}?",
        "Is it possible to use {t} for {u}?",
        "Is it true that {t} beats {u}?",
        "How long does it take to learn {t}?",
        "What did the first paper on {t} report?",
        "tell me about {t} in 2024",
    ]
)
_EARLIER = st.sampled_from([MT, MT_LIMITS, BERT_GPT, FLAKY, "How do I read a file in Python?"])


@settings(max_examples=300, deadline=None)
@given(template=_TEMPLATES, topic=_TOPICS, other=_TOPICS, earlier=_EARLIER)
def test_property_questions_with_their_own_subject_are_never_rewritten(
    template: str, topic: str, other: str, earlier: str
) -> None:
    question = template.format(t=topic, u=other)
    result = rule_rewrite(question, after(earlier))
    assert not result.rewritten, (earlier, question, result)
    assert result.question == question


_FOLLOW_UPS = st.sampled_from(
    [
        "What are its limitations?",
        "How does it work?",
        "Who invented it?",
        "Is it used in industry?",
        "What are the limitations?",
        "Any examples?",
        "And in Python?",
        "What about for large programs?",
        "How does this approach compare to fuzzing?",
    ]
)


@settings(max_examples=200, deadline=None)
@given(follow_up=_FOLLOW_UPS, topic=_TOPICS)
def test_property_a_resolved_follow_up_names_the_subject_and_stands_alone(follow_up: str, topic: str) -> None:
    earlier = f"What is {topic}?"
    subject = question_subjects(earlier)[0]
    result = rule_rewrite(follow_up, after(earlier))
    assert result.rewritten, (earlier, follow_up, result)
    assert subject.lower() in result.question.lower()
    assert check_question(result.question).allowed
    # Once resolved, the question points back at nothing the rule would resolve again.
    again = rule_rewrite(result.question, after(earlier))
    assert not again.rewritten, (result.question, again)


@settings(max_examples=300, deadline=None)
@given(question=st.text(max_size=200), earlier=st.text(max_size=200))
def test_property_any_text_is_handled_without_raising(question: str, earlier: str) -> None:
    result = rule_rewrite(question, after(earlier) if earlier.strip() else None)
    if result.rewritten:
        assert result.question != question and check_question(result.question).allowed
    else:
        assert result.question == question
    points_back(question)
    question_subjects(earlier)
