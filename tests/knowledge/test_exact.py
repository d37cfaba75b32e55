"""Exact terms (knowledge/_exact.py): which words are names or identifiers, and which of them are rare."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.knowledge._exact import RARE_DOCUMENTS, exact_terms, name_forms, rare_exact_matches

SENTENCE = "QuickCheck, released in 1999 for Haskell by Koen Claessen and John Hughes, popularised the approach."


def test_names_and_identifiers_are_recognised_and_sentence_openings_are_not() -> None:
    assert name_forms(SENTENCE) >= {"quickcheck", "haskell", "koen", "claessen", "john", "hughes"}
    assert "released" not in name_forms(SENTENCE) and "1999" not in name_forms(SENTENCE)
    assert name_forms("Testing matters. Generators produce inputs.") == set()
    assert name_forms("we measured IL-6 and BRCA1 in HTTP logs with GPT4") == {"il-6", "brca1", "http", "gpt4"}
    assert name_forms("# Limitations\n\nEquivalent mutants are the main limitation") == set()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Who wrote QuickCheck?", {"quickcheck"}),
        ("who wrote quickcheck", {"quickcheck"}),  # the text writes it as a name
        ("who is koen claessen", {"koen", "claessen"}),
        ("Which language was it released for?", set()),  # ordinary words are not exact terms
    ],
)
def test_exact_terms_are_the_query_words_either_side_writes_as_names(query: str, expected: set[str]) -> None:
    assert exact_terms(query, SENTENCE) == expected


def test_a_title_in_title_case_makes_no_names() -> None:
    assert exact_terms("what is hypothesis testing", "We study tests.", "Hypothesis Testing for Channels") == set()


def test_a_name_many_documents_hold_is_not_rare() -> None:
    many = [(f"c{i}", f"d{i}", "", f"Code written in Python number {i}.") for i in range(RARE_DOCUMENTS + 1)]
    assert rare_exact_matches("Who wrote Python?", many) == {}
    few = many[:RARE_DOCUMENTS]
    assert set(rare_exact_matches("Who wrote Python?", few)) == {"c0", "c1", "c2"}


@given(st.text(max_size=200), st.text(max_size=200))
def test_exact_terms_are_query_words_the_text_holds(query: str, text: str) -> None:
    found = exact_terms(query, text)
    assert all(term in query.lower() and term in text.lower() for term in found)
