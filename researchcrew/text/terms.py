"""Content terms of short texts: what the extractive synthesizer and coverage metrics compare.

Deliberately small and fast (no model, no NLTK): lower-cased word tokens without stopwords, with a light suffix
stemmer so that "contradictions" meets "contradiction" and "studies" meets "study".
"""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")

_STOPWORDS_TEXT = """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves tell
    explain describe please give show know known according many much whether vs versus via using use used one
    two may might must shall yes get got
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

_SIBILANT_ES = re.compile(r"(?:[sxz]|ch|sh)es$")


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A light stem, the same for a word's common inflections: "studies"/"study" → "study", "boxes" → "box",
    "increased"/"increasing"/"increases" → "increas". Short words are left alone."""
    if len(word) <= 4 or word.isdigit():
        return word
    if word.endswith("ies"):
        word = word[:-3] + "y"
    elif _SIBILANT_ES.search(word):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif word.endswith("ing") and len(word) >= 7:
        word = word[:-3]
    elif word.endswith("ed") and len(word) >= 6:
        word = word[:-2]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def content_terms(text: str) -> list[str]:
    """Stemmed content words of ``text`` in order of first appearance, without stopwords and one-letter words."""
    kept = (stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS and (len(t) > 2 or t.isdigit()))
    return list(dict.fromkeys(kept))


@lru_cache(maxsize=2048)
def term_set(text: str) -> frozenset[str]:
    """The content terms of a whole text, cached: coverage metrics ask for the same chunks' terms repeatedly."""
    return frozenset(content_terms(text))


def query_topics(query: str, limit: int = 12) -> dict[str, str]:
    """The query's topics: stemmed term → the word as the user wrote it (for readable metric keys)."""
    topics: dict[str, str] = {}
    for token in tokens(query):
        if token in STOPWORDS or (len(token) < 3 and not token.isdigit()):
            continue
        topics.setdefault(stem(token), token)
        if len(topics) >= limit:
            break
    return topics
