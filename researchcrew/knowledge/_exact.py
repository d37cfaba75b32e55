"""Exact terms: a rare name or identifier of the query that a chunk contains word for word.

The fused relevance is scaled down by a query-level gate on the best dense cosine (``fusion.GATE_*``): when nothing
in the knowledge base is close to the query in meaning, it has nothing on it. A rare name is the exception the
small embedding model cannot see: "Who wrote QuickCheck?" is at cosine 0.28 from the one passage that says who
wrote QuickCheck (issue 20), because the model knows neither the name nor that the passage answers a "who"
question, while BM25 ranks that passage first by far. A chunk that contains a rare exact term of the query is
evidence that the knowledge base *has* something on it, so the gate does not apply to it (its relevance still
comes from the calibrated fused score).

A query word is an **exact term** of a chunk when the chunk contains it as a word (case-insensitive) and either
side writes it as a name or identifier: CamelCase ("QuickCheck"), capitalised inside a sentence ("by Koen
Claessen", "for Haskell"), ALL CAPS ("BRCA", "HTTP"), or with digits ("IL-6", "GPT4", "RFC9110"). So "who wrote
quickcheck" still matches "QuickCheck", while "testing" does not become a name because a heading starts with it.
The term is **rare** when at most ``RARE_DOCUMENTS`` documents of the candidate pool contain it: a name that half
the corpus mentions ("Python" in a corpus about Python) says nothing about this query in particular.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Set
from functools import lru_cache

RARE_DOCUMENTS = 3  # a term found in more documents of the candidate pool than this is not rare

_WORD = re.compile(r"\w(?:[\w]|-(?=\w))*", re.UNICODE)
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\n\"“(\[#>*-])\s*$")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_SHORT = 2  # words this short ("I", "a") are never names


def words(text: str) -> set[str]:
    """The words of ``text``, lowercased (hyphenated words kept whole)."""
    return set(_words(text))


@lru_cache(maxsize=4_096)
def _words(text: str) -> frozenset[str]:
    """``words``, remembered: every search reads the same candidate chunks again (issue 20 item 7)."""
    return frozenset(match.group().lower() for match in _WORD.finditer(text))


def name_forms(text: str, only: Set[str] | None = None) -> set[str]:
    """The words ``text`` writes as a name or identifier (module docstring), lowercased; with ``only``, just those
    of them (``name_forms(text) & only``)."""
    names = _name_forms(text)
    return set(names) if only is None else {name for name in names if name in only}


@lru_cache(maxsize=4_096)
def _name_forms(text: str) -> frozenset[str]:
    """``name_forms``, remembered per text: every search judges the same candidate chunks again, and judging each
    word of each chunk was most of a warm search's own time (issue 20 item 7)."""
    names: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group()
        if len(word) < _SHORT or word.isdigit():
            continue
        if (
            _CAMEL.search(word)
            or (any(c.isdigit() for c in word) and any(c.isalpha() for c in word))
            or (word.isupper() and sum(c.isalpha() for c in word) >= _SHORT)
            or (word[0].isupper() and not _SENTENCE_END.search(text[max(0, match.start() - 4) : match.start()]))
        ):
            names.add(word.lower())
    return frozenset(names)


def exact_terms(query: str, text: str, title: str = "") -> set[str]:
    """The query's words that the chunk (``title`` and ``text``) contains and that the query or the text writes as
    a name or identifier (not the title: Title Case capitalises every word)."""
    shared = _words(query) & (_words(text) | _words(title))
    if not shared:
        return set()
    named = set(shared & name_forms(query))
    rest = shared - named
    return named | name_forms(text, only=rest) if rest else named


def rare_exact_matches(query: str, chunks: Iterable[tuple[str, str, str, str]]) -> dict[str, set[str]]:
    """Of ``(key, document id, title, text)`` candidates, those holding a rare exact term of the query: key → the
    rare exact terms it holds."""
    terms_of: dict[str, set[str]] = {}
    documents: defaultdict[str, set[str]] = defaultdict(set)
    asked = _words(query)
    for key, document, title, text in chunks:
        found = exact_terms(query, text, title)
        if found:
            terms_of[key] = found
        for term in asked & (_words(text) | _words(title)):
            documents[term].add(document)
    rare = {key: {term for term in found if len(documents[term]) <= RARE_DOCUMENTS} for key, found in terms_of.items()}
    return {key: terms for key, terms in rare.items() if terms}
