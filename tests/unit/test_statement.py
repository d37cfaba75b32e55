"""Issue 20: a passage on the question's subject that does not *state* its answer must not support it as if it did.
Near-miss questions ("Who invented mutation testing?", "When was libFuzzer first released?", "How many test cases
does QuickCheck generate by default?") were answered at confidence 0.6–0.9 from the passage on their subject, and
claims whose papers were removed from the passage on the neighbouring finding. Support now also asks whether one
sentence holds the question's specific words and the kind of answer asked for (pipeline/_statement.py)."""

from __future__ import annotations

from typing import Any

import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.pipeline._statement import statement_factors, term_weights
from researchcrew.pipeline._support import EmbeddingSupport
from researchcrew.settings import ConfidenceSettings

SETTINGS = ConfidenceSettings()


def _chunk(chunk_id: str, question: str, text: str, *, title: str = "", dense: float = 0.6) -> ContextChunk:
    metadata: dict[str, Any] = {"query": question, "scores": {"dense": dense}}
    return ContextChunk(
        chunk_id=chunk_id,
        source_type="rag",
        content=text,
        semantic_relevance=0.8,
        title=title,
        metadata=metadata,
        tool_name="rag_search",
    )


class _NoModel:
    """Knowledge-base hits carry their search cosine: the check must not embed anything (no second pass)."""

    def embed_query(self, text: str) -> Any:
        raise AssertionError("not expected")

    embed_documents = embed_query


async def _support(question: str, chunks: list[ContextChunk], **settings: float) -> dict[str, float]:
    scorer = EmbeddingSupport(_NoModel(), ConfidenceSettings(**settings))  # type: ignore[arg-type]
    return {chunk_id: support.score for chunk_id, support in (await scorer(question, chunks)).items()}


@pytest.mark.parametrize(
    ("question", "passage"),
    [
        # who → a name: the passage on the subject names nobody
        (
            "Who invented mutation testing?",
            "Mutation testing measures how good a test suite is by seeding small faults, called mutants, into the "
            "code and checking whether the tests notice them.",
        ),
        # when → a date: the passage has one, but not in the sentence about libFuzzer
        (
            "When was libFuzzer first released?",
            "libFuzzer is part of the LLVM project and runs the target in the same process, which makes it much "
            "faster than forking a new process for every input. Google's OSS-Fuzz service started in 2016.",
        ),
        # how many → a count: a year is not one
        (
            "How many test cases does QuickCheck generate by default?",
            "QuickCheck, released in 1999 for Haskell by Koen Claessen and John Hughes, popularised the approach.",
        ),
    ],
)
async def test_a_passage_without_the_kind_of_answer_asked_for_is_not_enough_to_answer(
    question: str, passage: str
) -> None:
    chunk = _chunk("near:0", question, passage)
    checked = await _support(question, [chunk])
    unchecked = await _support(question, [chunk], statement_floor=1.0)
    assert unchecked["near:0"] >= SETTINGS.answer_min_support  # before: answered from it
    assert checked["near:0"] < SETTINGS.answer_min_support  # now: not enough to answer


async def test_the_passage_stating_the_answer_still_answers_and_ranks_first() -> None:
    question = "When was QuickCheck released and who wrote it?"
    answer = _chunk(
        "qc:0",
        question,
        "Property-based testing checks general properties. QuickCheck, released in 1999 for Haskell by Koen "
        "Claessen and John Hughes, popularised the approach.",
    )
    about = _chunk("qc:1", question, "QuickCheck generates random inputs and shrinks a failing one.", dense=0.62)
    checked = await _support(question, [answer, about])
    unchecked = await _support(question, [answer, about], statement_floor=1.0)
    assert checked["qc:0"] >= SETTINGS.answer_min_support
    assert checked["qc:0"] > checked["qc:1"]
    assert checked["qc:1"] < unchecked["qc:1"]  # no date, no name: on the subject, not the answer


async def test_a_question_is_supported_by_the_passage_holding_its_specific_words_not_the_neighbouring_one() -> None:
    question = "Does taking 400mg of alpha-tocopheryl acetate help to prevent prostate cancer?"
    gold = _chunk(
        "gold:0",
        question,
        "Daily supplementation with 400mg alpha-tocopheryl acetate reduced the incidence of prostate cancer by a "
        "third among smokers.",
        title="Alpha-tocopheryl acetate and prostate cancer prevention",
        dense=0.63,
    )
    neighbour = _chunk(
        "near:0",
        question,
        "Androgens play a critical role in the growth of prostate cancer. We aim to identify androgen regulated "
        "micro-RNAs that help to prevent progression.",
        title="Androgen regulation of micro-RNAs in prostate cancer",
        dense=0.63,
    )
    factors = statement_factors(question, [gold, neighbour], SETTINGS)
    assert factors["gold:0"] > factors["near:0"]
    checked = await _support(question, [gold, neighbour])
    unchecked = await _support(question, [gold, neighbour], statement_floor=1.0)
    assert unchecked["near:0"] >= SETTINGS.answer_min_support  # before: the neighbour alone would answer
    assert checked["near:0"] < SETTINGS.answer_min_support <= checked["gold:0"]


def test_a_claim_is_not_checked_sentence_by_sentence() -> None:
    claim = "Taking 400mg of alpha-tocopheryl acetate helps to prevent prostate cancer."
    neighbour = _chunk("near:0", claim, "Androgens play a critical role in the growth of prostate cancer.")
    assert statement_factors(claim, [neighbour], SETTINGS) == {"near:0": 1.0}
    assert statement_factors("Who wrote it", [neighbour], SETTINGS)["near:0"] < 1.0  # a question, even without "?"


def test_a_word_every_passage_holds_weighs_less_than_one_only_a_few_hold() -> None:
    question = "What mutation score did the checkout service reach?"
    chunks = [
        _chunk("a", question, "The payment service reached a mutation score of 71%."),
        _chunk("b", question, "Mutation score is the share of killed mutants."),
        _chunk("c", question, "The checkout service is written in Go; mutation testing runs nightly."),
    ]
    weights = term_weights(question, chunks)
    assert weights["mutation"] == pytest.approx(1 / (1 + 3 / 3))
    assert weights["checkout"] == pytest.approx(1 / (1 + 1 / 3))
    assert weights["checkout"] > weights["mutation"]


def test_memory_and_a_disabled_check_are_left_alone() -> None:
    question = "Who invented mutation testing?"
    memory = ContextChunk(
        chunk_id="m", source_type="memory", content="You said: I like mutation testing.", semantic_relevance=0.9
    )
    passage = _chunk("p", question, "Mutation testing seeds faults.")
    assert statement_factors(question, [memory, passage], SETTINGS)["m"] == 1.0
    assert statement_factors(question, [passage], ConfidenceSettings(statement_floor=1.0)) == {"p": 1.0}
