"""Exact terms are found as before at a fraction of the cost (issue 20 item 7): ``exact_terms`` judges only the words
the query and the chunk share, and the words of a chunk are remembered from one search to the next. The answers
are those of the implementation that judged every word of every candidate on every search."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from researchcrew.data import demo_corpus_path
from researchcrew.knowledge import _exact as exact
from researchcrew.knowledge._exact import exact_terms, name_forms, rare_exact_matches
from researchcrew.knowledge.loaders import load_file

_WORD = re.compile(r"\w(?:[\w]|-(?=\w))*", re.UNICODE)


def _words_before(text: str) -> set[str]:
    return {match.group().lower() for match in _WORD.finditer(text)}


def _exact_terms_before(query: str, text: str, title: str = "") -> set[str]:
    shared = _words_before(query) & (_words_before(text) | _words_before(title))
    if not shared:
        return set()
    return shared & (name_forms(query) | name_forms(text))


QUERIES = [
    "Who wrote QuickCheck?",
    "who is koen claessen",
    "What is metamorphic testing?",
    "How is BERT used for test generation with GPT4 and IL-6?",
    "What causes flaky tests in Python projects?",
    "Which tools generate Python test cases in the SBFT competition?",
    "How are smart contracts for Ethereum tested?",
    "What is Rao's score test?",
    "What is the frequency of hot Jupiters in transit surveys?",
    "testing",
]


def test_exact_terms_over_the_demo_corpus_are_what_judging_every_word_gave() -> None:
    documents = load_file(demo_corpus_path()).documents
    assert len(documents) > 50
    for query in QUERIES:
        chunks = [(d.source_key, d.doc_id, d.title or "", d.text) for d in documents]
        for _, _, title, text in chunks:
            assert exact_terms(query, text, title) == _exact_terms_before(query, text, title), (query, title)
        before: dict[str, set[str]] = {}
        documents_of: dict[str, set[str]] = {}
        for key, document, title, text in chunks:
            found = _exact_terms_before(query, text, title)
            if found:
                before[key] = found
            for term in _words_before(query) & (_words_before(text) | _words_before(title)):
                documents_of.setdefault(term, set()).add(document)
        rare = {k: {t for t in v if len(documents_of[t]) <= exact.RARE_DOCUMENTS} for k, v in before.items()}
        assert rare_exact_matches(query, chunks) == {k: v for k, v in rare.items() if v}, query


@given(
    st.text(alphabet="abcQCK1- .,", max_size=40),
    st.text(alphabet="abcQCK1- .,\n#", max_size=120),
    st.text(alphabet="abcQCK ", max_size=20),
)
def test_exact_terms_equal_judging_every_word(query: str, text: str, title: str) -> None:
    assert exact_terms(query, text, title) == _exact_terms_before(query, text, title)
    shared = _words_before(query) & _words_before(text)
    assert name_forms(text, only=shared) == name_forms(text) & shared
