"""The kind of answer a question asks for (who → a name, when → a date, how many → a number, where → a place,
why → a cause) and whether a sentence holds one the question does not already state (issue 20)."""

from __future__ import annotations

import pytest

from researchcrew.text.answer_type import asked_types, holds_type


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("Who wrote QuickCheck?", ("person",)),
        ("Whose self-driving stack was tested in the simulator?", ("person",)),
        ("When did OSS-Fuzz start?", ("time",)),
        ("In which year was the protocol published?", ("time",)),
        ("How many Java classes were used to evaluate the tool?", ("quantity",)),
        ("On how many real services were the generators run?", ("quantity",)),
        ("What mutation score did the checkout service reach?", ("quantity",)),
        ("What share of flaky tests are caused by concurrency?", ("quantity",)),
        ("Where is most web testing research published?", ("place",)),
        ("Why is libFuzzer faster than forking a process per input?", ("cause",)),
        ("When was QuickCheck released and who wrote it?", ("time", "person")),
        # "when" inside a clause is a conjunction; "how many" after another question word is not the question
        ("What does the dilution constraint limit when designing pooling matrices?", ()),
        ("How do you know how many independent paths a white box test needs?", ()),
        ("Which programming languages push message passing over shared memory?", ()),
        ("Engineers who write tests first find fewer bugs.", ()),  # a claim: a relative "who" asks nothing
        ("Aspirin inhibits the production of PGE2.", ()),
    ],
)
def test_asked_types(question: str, kinds: tuple[str, ...]) -> None:
    assert asked_types(question) == kinds


@pytest.mark.parametrize(
    ("sentence", "kind", "question", "held"),
    [
        ("QuickCheck was written by Koen Claessen and John Hughes.", "person", "Who wrote QuickCheck?", True),
        ("American fuzzy lop was written by Zalewski.", "person", "Who wrote AFL?", True),
        ("The tool runs in the Maven build; the team adopted Stryker in 2021.", "person", "Who invented it?", False),
        ("Mutation testing seeds small faults into the code.", "person", "Who invented mutation testing?", False),
        ("QuickCheck, released in 1999 for Haskell, popularised the approach.", "time", "When was it released?", True),
        ("Quarantined tests are reported to their owners every Monday.", "time", "When are they reported?", True),
        ("libFuzzer is part of the LLVM project.", "time", "When was libFuzzer first released?", False),
        ("Our payment service reached a mutation score of 71%.", "quantity", "What score did it reach?", True),
        ("We compared ten tools.", "quantity", "How many tools were compared?", True),
        # a year is no count, and a number the question itself states is not its answer
        ("QuickCheck was released in 1999.", "quantity", "How many cases does QuickCheck generate?", False),
        ("Pooled testing with 100 tests was studied.", "quantity", "How accurate is testing with 100 tests?", False),
        ("Most papers appear at ICST.", "place", "Where is the research published?", True),
        ("It is faster because it runs in the same process.", "cause", "Why is it faster?", True),
        ("It runs in the same process.", "cause", "Why is it faster?", False),
    ],
)
def test_holds_type(sentence: str, kind: str, question: str, held: bool) -> None:
    assert holds_type(sentence, kind, question) is held  # type: ignore[arg-type]
