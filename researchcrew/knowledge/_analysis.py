"""Text analysis for BM25, done in the client so that Milvus Lite and a Milvus server rank the same way.

Milvus Lite's analyzer is only ``\\w+`` + lowercase (it silently ignores stemmer and stop-word filters), so the
analysis happens here: lowercase, word tokens of two or more characters, English stop words removed, Snowball
English stemming (PyStemmer), and one more token for every hyphenated compound with its parts joined ("IL-6" →
``il`` and ``il6``), so that "IL-6" and "IL6" match. The result, a space-separated string of stems, goes into the
BM25 input field, whose Milvus analyzer is then an identity. Queries go through the same function.
``ANALYZER_VERSION`` is recorded in the collection, so an index built with other analysis is detected instead of
silently mis-ranked. What each step is worth on SciFact: benchmarks/README.md.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

ANALYZER_VERSION = "snowball-en-2"  # 2: joined hyphenated compounds

# Not the pipeline's stemmer and stop list (``text.terms``): this analysis is the stored index format, versioned by
# ANALYZER_VERSION, and must not change when the lexical comparisons of the pipeline do.

# The 33 stop words of Lucene's English analyzer (the set bm25s uses too). A short list on purpose: longer ones
# remove words like "between", "above" or "only" that carry meaning in scientific claims.
ENGLISH_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_COMPOUND = re.compile(r"(?u)\w+(?:-\w+)+")


class Analyzer:
    """Lowercase → word tokens (+ joined hyphenated compounds) → stop words out → Snowball English stems."""

    def __init__(
        self, *, stem: bool = True, stop_words: frozenset[str] = ENGLISH_STOP_WORDS, join_compounds: bool = True
    ) -> None:
        self._stop_words = stop_words
        self._join_compounds = join_compounds
        self._lock = threading.Lock()
        self._stemmer = None
        if stem:
            import Stemmer

            self._stemmer = Stemmer.Stemmer("english")

    def tokens(self, text: str) -> list[str]:
        lowered = text.lower()
        joined = [c.replace("-", "") for c in _COMPOUND.findall(lowered)] if self._join_compounds else []
        words = [word for word in (*_TOKEN.findall(lowered), *joined) if word not in self._stop_words]
        if self._stemmer is None:
            return words
        with self._lock:  # a PyStemmer object keeps a cache and is not thread-safe
            return list(self._stemmer.stemWords(words))

    def analyze(self, text: str) -> str:
        """The analysed form stored in (and searched against) the BM25 field."""
        return " ".join(self.tokens(text))


@lru_cache(maxsize=1)
def default_analyzer() -> Analyzer:
    return Analyzer()
