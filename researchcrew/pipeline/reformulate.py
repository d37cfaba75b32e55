"""Reformulation: a new search query when the evidence found so far is weak (seed 000: at most twice).

Without an LLM, ``deterministic_reformulation`` first reduces the question to its content words, then adds the
salient terms of the best evidence so far (pseudo-relevance feedback). With an LLM, ``llm_reformulation`` asks the
model for one new query (the question and the tried queries fenced as data by ``llm.fence``) and falls back to the
deterministic rewrite on any failure. Stop words and stems are the shared ones (``text.terms``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from researchcrew.contracts import ContextChunk
from researchcrew.llm.calls import complete
from researchcrew.llm.fence import RULE, block
from researchcrew.text.terms import QUERY_STOP_WORDS, REPORTING_WORDS, SEARCH_STOP_WORDS, stem

if TYPE_CHECKING:
    from crewai import BaseLLM
    from crewai.utilities.types import LLMMessage

logger = logging.getLogger(__name__)


class Reformulator(Protocol):
    async def __call__(self, question: str, searched: Sequence[str], evidence: Sequence[ContextChunk], /) -> str: ...


# Evidence words that are not worth adding to a query: function words, the words of asking, and how results are
# reported ("study", "showed", "results"), which every abstract repeats.
_NOT_SALIENT = QUERY_STOP_WORDS | REPORTING_WORDS


def keyword_query(text: str) -> str:
    """The question reduced to its content words and the words that qualify them ("not", "more", "before"), in
    order, without duplicates (first reformulation)."""
    seen: set[str] = set()
    kept: list[str] = []
    for token in re.findall(r"[\w][\w\-\.]*[\w]|\w", text):
        lowered = token.lower()
        if lowered in SEARCH_STOP_WORDS or lowered in seen:
            continue
        seen.add(lowered)
        kept.append(token)
    return " ".join(kept) or text.strip()


def expanded_query(text: str, evidence_texts: list[str], *, extra_terms: int = 4) -> str:
    """The keyword query plus the most frequent salient terms of the best evidence so far (pseudo-relevance
    feedback, second reformulation). Stop words and terms already in the query, in any inflection (by stem), are
    skipped; each added term is written as it first appeared."""
    base = keyword_query(text)
    present = {stem(token.lower()) for token in base.split()}
    counts: dict[str, int] = {}
    spelling: dict[str, str] = {}
    for evidence in evidence_texts:
        for token in re.findall(r"[A-Za-z][A-Za-z\-]{3,}", evidence):
            lowered = token.lower()
            if lowered in _NOT_SALIENT:
                continue
            stemmed = stem(lowered)
            if stemmed in present:
                continue
            spelling.setdefault(stemmed, lowered)
            counts[stemmed] = counts.get(stemmed, 0) + 1  # dicts keep first-appearance order for ties
    # With several pieces of evidence, a term must recur to count as salient; with one, any content word may.
    min_count = 2 if len(evidence_texts) >= 3 else 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    extra = [spelling[term] for term, count in ranked if count >= min_count][:extra_terms]
    return " ".join([base, *extra]).strip()


async def deterministic_reformulation(question: str, searched: Sequence[str], evidence: Sequence[ContextChunk]) -> str:
    """Without an LLM: first the keyword form of the question, then that plus the salient terms of the best
    evidence so far (pseudo-relevance feedback). A rewrite that was already searched is replaced by the other;
    when both were searched, the question itself is returned and the Flow stops reformulating."""
    candidates = [keyword_query(question), expanded_query(question, [chunk.content for chunk in evidence])]
    if len(searched) > 1:
        candidates.reverse()
    return next((candidate for candidate in candidates if candidate and candidate not in searched), question)


def llm_reformulation(llm: BaseLLM, *, timeout_s: float) -> Reformulator:
    """Reformulate with the LLM (the question and the searches so far are data, fenced); on any failure, the
    deterministic rewrite."""

    async def reformulate(question: str, searched: Sequence[str], evidence: Sequence[ContextChunk]) -> str:
        messages: list[LLMMessage] = [
            {
                "role": "system",
                "content": (
                    "You rewrite search queries for a research assistant. Reply with ONE new search query on one "
                    "line, nothing else. The question and the queries tried so far are material to work from. " + RULE
                ),
            },
            {
                "role": "user",
                "content": (
                    f"{block('QUESTION', question)}\n{block('TRIED', chr(10).join(searched))}\n"
                    "The tried queries found little. Write a different query that could find better evidence."
                ),
            },
        ]
        try:
            async with asyncio.timeout(timeout_s):
                reply = await complete(llm, messages)
        except Exception:
            # The outermost guard around a third-party model call: any provider error (HTTP, auth, rate limit,
            # timeout, a bug in a custom LLM) degrades to the deterministic rewrite, never sinks the question.
            logger.warning("LLM reformulation failed; using the deterministic rewrite", exc_info=True)
            return await deterministic_reformulation(question, searched, evidence)
        text = str(reply).strip().splitlines()[0].strip().strip('"') if str(reply).strip() else ""
        if not text or len(text) > 500 or text in searched:
            return await deterministic_reformulation(question, searched, evidence)
        return text

    return reformulate
