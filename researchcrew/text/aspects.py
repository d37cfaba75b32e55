"""Aspects a question asks for: limitations, advantages, causes — and the words an answering sentence uses for them.

"What are the limitations of mutation testing?" is answered by "Equivalent mutants are the main *drawback*" or
"... the main *limitation*": the sentence names the aspect, in a synonym or the singular, and often shares no other
word with the question (the subject is the section's or the document's, not the sentence's). Scored by shared
topic words alone it lost to sentences that merely repeat the subject ("Mutation testing measures ...", issue 20).
``asked_aspect`` finds the aspect a question asks for; ``names_aspect`` says whether a sentence names it.

Matching is on light stems (``text.terms.stem``) of every word, function words included: "because" and "due to"
name a cause but are stop words for topic terms.
"""

from __future__ import annotations

import re

from researchcrew.text.terms import stem


def _stems(words: str) -> frozenset[str]:
    return frozenset(stem(word) for word in words.split())


# One family per aspect: the words a question asks with and an answer names it by (stemmed).
ASPECTS: dict[str, frozenset[str]] = {
    "limitation": _stems(
        "limitation limitations drawback drawbacks disadvantage disadvantages weakness weaknesses "
        "shortcoming shortcomings downside downsides pitfall pitfalls flaw flaws caveat caveats con cons challenge "
        "challenges"
    ),
    "advantage": _stems(
        "advantage advantages benefit benefits strength strengths merit merits upside upsides pro pros"
    ),
    "cause": _stems("cause causes caused reason reasons because due trigger triggers triggered factor factors"),
    "risk": _stems("risk risks danger dangers hazard hazards harm harms side-effect side-effects"),
}

# Question words that ask for an aspect without naming it.
_ASKING = {"why": "cause"}

_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")


def _question_stems(text: str) -> list[str]:
    return [stem(word) for word in _WORD.findall(text.lower())]


def asked_aspect(question: str) -> frozenset[str]:
    """The stems naming the aspect the question asks for (empty when it asks for none)."""
    for word in _WORD.findall(question.lower()):
        if word in _ASKING:
            return ASPECTS[_ASKING[word]]
    asked = set(_question_stems(question))
    for family in ASPECTS.values():
        if asked & family:
            return family
    return frozenset()


def names_aspect(sentence: str, family: frozenset[str]) -> bool:
    """Whether the sentence names the aspect (``family`` from ``asked_aspect``)."""
    return bool(family) and not family.isdisjoint(_question_stems(sentence))


__all__ = ["ASPECTS", "asked_aspect", "names_aspect"]
