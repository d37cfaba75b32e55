"""The one stemmer and stop-word list, and what claims and terms make of them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.pipeline.reformulate import expanded_query, keyword_query
from researchcrew.pipeline.remember._entities import find_entities
from researchcrew.text.terms import (
    CLAIM_STOP_WORDS,
    POSITION_WORDS,
    QUERY_STOP_WORDS,
    REPORTING_WORDS,
    REQUEST_WORDS,
    STOP_WORDS,
    content_terms,
    content_words,
    query_topics,
    stem,
    token_info,
)


@pytest.mark.parametrize(
    "forms",
    [
        ("improves", "improved", "improving", "improve"),
        ("studies", "study"),
        ("boxes", "box"),
        ("contradictions", "contradiction"),
        ("increased", "increasing", "increases"),
        ("model's", "models", "model"),
        ("patients", "patient", "patient's"),
        ("wrote", "written", "writes", "write", "writing"),
        ("built", "builds", "build"),
        ("began", "begun", "begins", "begin"),
        ("shown", "shows", "showed", "show"),
    ],
)
def test_the_inflections_of_a_word_meet(forms: tuple[str, ...]) -> None:
    assert len({stem(form) for form in forms}) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [("activated", "activity"), ("regional", "region"), ("positivity", "positively"), ("news", "new")],
)
def test_different_words_stay_apart(a: str, b: str) -> None:
    """Derivations are not merged (the reason Snowball is not used here; see text.terms)."""
    assert stem(a) != stem(b)


@pytest.mark.parametrize("word", ["wrote", "written", "taught", "understood", "hidden", "met", "led", "ran"])
def test_an_irregular_form_never_grows(word: str) -> None:
    """``stem`` never grows a word, irregular forms included: "met" stays "met" rather than become "meet"."""
    assert len(stem(word)) <= len(word)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz'0123456789-", max_size=20))
def test_stem_never_fails_and_never_grows(word: str) -> None:
    assert len(stem(word)) <= len(word)


def test_the_vocabularies_are_built_on_one_stop_list() -> None:
    assert STOP_WORDS <= QUERY_STOP_WORDS and STOP_WORDS <= CLAIM_STOP_WORDS
    assert QUERY_STOP_WORDS == STOP_WORDS | POSITION_WORDS | REQUEST_WORDS
    assert CLAIM_STOP_WORDS == STOP_WORDS | REPORTING_WORDS
    assert not POSITION_WORDS & CLAIM_STOP_WORDS, "in a claim, 'before' and 'after' are content"


def test_claims_and_terms_differ_only_by_purpose() -> None:
    claim = "The vaccine reportedly reduced risk after surgery"
    assert [word for _, word in content_words(claim)] == ["vaccine", "reduced", "risk", "after", "surgery"]
    assert content_terms(claim) == [stem(w) for w in ("vaccine", "reportedly", "reduced", "risk", "surgery")]
    assert token_info("doesn't") == ("", True) and token_info("fails") == ("", True)
    topics = query_topics("Please explain the latest results between BM25 and SPLADE")
    assert list(topics.values()) == ["results", "bm25", "splade"]


def test_reformulation_and_entities_use_the_same_list() -> None:
    assert keyword_query("Please tell me what is known about the latest dense retrievers") == "dense retrievers"
    # a term already in the query, in another inflection, is not added again
    expanded = expanded_query("dense retriever", ["Dense retrievers beat sparse ones.", "Retrievers and sparse agree."])
    assert expanded.split()[:2] == ["dense", "retriever"] and "retrievers" not in expanded
    assert expanded.split()[2] == "sparse"
    names = {found.name for found in find_entities("We compare it with Not Global Atheroma Burden scores.")}
    assert names == {"Global Atheroma Burden"}, "function words are trimmed from the ends of a name"
