"""Is the question too vague or too broad to answer well? Rules over the question's words (issue 20 item 4).

Clarifying questions are for questions that cannot be answered well *as asked* — not for answerable questions that
retrieval missed (those are reworded and the search widened first, see ``pipeline.flow``). The rules, in order; the
first that fires names the reason:

* **no_subject** (too vague) — nothing is asked about: no content word at all ("What is it?", "Why?", "Tell me more");
* **ambiguous_referent** (too vague) — the subject is a pronoun or "the method / the paper / the authors ..." and
  the question names at most one specific word besides ("What are its limitations?", "Who are the authors?",
  "How does it compare with QuickCheck?"). A
  follow-up in a session is rewritten into a stand-alone question before this check, so only referents without
  context are left here;
* **broad_request** (too broad) — asks for everything about a short subject ("Tell me everything about fuzzing",
  "What is known about X?", "Give me an overview of AI", "Information on testing");
* **bare_topic** (too vague) — a few words without a question or a request ("testing", "mutation testing"), unless
  a word says what is wanted ("QuickCheck release year");
* **generic_subject** (too vague) — a question whose only subject is one broad field word ("What is testing?",
  "How does software work?"), where a reader could not tell which of its many meanings is meant.

A *specific* word is a content word outside the broad vocabulary below (``GENERIC_WORDS``): a name, a method, a
technique ("QuickCheck", "metamorphic", "flaky"). One specific word is enough for a short precise question ("Who
wrote QuickCheck?") to count as clear. Questions about the user's own facts and about the conversation are never
vague: memory answers them.

Measured in ``benchmarks/clarification.py`` on a labelled set (``benchmarks/data/clarification_questions.jsonl``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from researchcrew.text.terms import QUERY_STOP_WORDS, term_words

VaguenessKind = Literal["too_vague", "too_broad"]


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


VaguenessRule = Literal["no_subject", "ambiguous_referent", "broad_request", "bare_topic", "generic_subject"]

_INTERROGATIVES = _wordset(
    "who whom whose when where why which what how is are was were do does did can could should would will has have "
    "had am"
)
_IMPERATIVES = _wordset(
    "explain describe compare contrast list summarize summarise define name give show find outline identify "
    "estimate calculate count"
)
_PRONOUNS = _wordset("it its it's itself this these those they them their theirs he she his her")
# Nouns that stand for something named earlier: "the method", "the paper", "this study".
_REFERENT_NOUNS = _wordset(
    "method methods approach approaches paper papers study studies tool tools technique techniques result results "
    "model models algorithm algorithms system systems dataset datasets author authors experiment experiments "
    "framework frameworks one ones article articles work thing things project proposal idea solution"
)
# Broad field words, aspect words ("limitations", "advantages") and verbs that say nothing about what is meant.
GENERIC_WORDS = _wordset(
    """testing test tests tested software research science sciences data method methods approach approaches technique
    techniques thing things stuff topic topics field fields area areas work works working paper papers study studies
    result results system systems model models tool tools technology technologies computer computers computing
    program programs programming code coding ai ml learning machine machines statistics statistic algorithm algorithms
    analysis problem problems question questions idea ideas information info everything anything something
    overview summary development engineering application applications security quality performance theory
    experiment experiments evaluation framework frameworks future trend trends state art basics basic history
    general new good bad best better important useful interesting main key different difference differences
    limitation limitations advantage advantages disadvantage disadvantages benefit benefits drawback drawbacks pros
    cons finding findings challenge challenges use uses example examples impact effect effects role purpose goal
    goals author authors way ways kind kinds type types part parts aspect aspects detail details fact facts
    happen happens mean means matter matters help helps make makes made go goes going exist exists
    big small large popular common current modern today nowadays people world thing everything lot lots
    one ones number think thoughts opinion opinions news update updates compare compared comparison differ
    versus"""
)
# Words that say what is wanted, so that a few words without a question still ask something ("X release year").
_INTENT_WORDS = _wordset(
    "year date when author authors inventor creator definition meaning number count size cost price release "
    "released version license licence name acronym formula value rate accuracy"
)
_BROAD = re.compile(
    r"\b(?:"
    r"(?:tell|teach|show)\s+me\s+(?:everything|all|anything|something|more|a\s+bit|a\s+little)?\s*(?:about|on|regarding)"
    r"|(?:everything|anything|all)\s+(?:there\s+is\s+to\s+know\s+)?(?:about|on|regarding)"
    r"|what\s+(?:is|do\s+(?:we|you)|does\s+anyone)\s+know(?:n)?\s+(?:about|on|of)"
    r"|what\s+can\s+you\s+(?:tell|say)\s+(?:me\s+)?(?:about|on)"
    r"|(?:an?\s+)?(?:overview|summary|introduction|rundown|primer|survey)\s+(?:of|on|about)"
    r"|(?:info|information|facts|details|stuff|anything)\s+(?:on|about|regarding)"
    r"|what(?:'s|\s+is)?\s+(?:new|happening|going\s+on)\s+(?:in|with)"
    r"|^what\s+about"
    r"|^(?:thoughts|ideas)\s+on"
    r")\b",
    re.IGNORECASE,
)
_BROAD_SUBJECT_WORDS = 3  # "tell me everything about X" is broad while X has at most this many content words
_BARE_TOPIC_WORDS = 4


@dataclass(frozen=True)
class Vagueness:
    """Why a question is too vague or too broad to answer well, and what it is about as far as it says."""

    kind: VaguenessKind
    rule: VaguenessRule
    subject: str  # the question's content words, in order ("" when it names nothing)

    @property
    def explanation(self) -> str:
        return _EXPLANATIONS[self.rule]


_EXPLANATIONS: dict[VaguenessRule, str] = {
    "no_subject": "it does not say what it is about",
    "ambiguous_referent": "it refers to something (“it”, “the method”, ...) without saying which",
    "broad_request": "it asks for everything about a broad subject, more than one answer can carry well",
    "bare_topic": "it names a topic but not what you want to know about it",
    "generic_subject": "its subject is a broad field with many meanings",
}


def _words(question: str) -> list[str]:
    return term_words(question.replace("’", "'"))


def content_words(question: str) -> list[str]:
    """The question's content words, in order: no stop words, no pronouns, no question words."""
    return [
        word
        for word in _words(question)
        if word not in QUERY_STOP_WORDS and word not in _PRONOUNS and word not in _INTERROGATIVES and len(word) > 1
    ]


def specific_words(question: str) -> list[str]:
    """Content words outside the broad vocabulary: names, methods, techniques."""
    return [word for word in content_words(question) if word not in GENERIC_WORDS and not word.isdigit()]


def _has_referent(words: list[str]) -> bool:
    for index, word in enumerate(words):
        if word in _PRONOUNS:
            return True
        determiner = word in ("the", "this", "that", "these", "those")
        if determiner and index + 1 < len(words) and words[index + 1] in _REFERENT_NOUNS:
            return True
        if word == "that" and (index + 1 == len(words) or words[index - 1] in ("is", "does", "about", "was")):
            return True
    return False


def _exempt(question: str) -> bool:
    """Questions memory answers: the user's own facts, and the conversation itself."""
    from researchcrew.memory.statements import personal_question
    from researchcrew.text.questions import asks_about_the_conversation

    return personal_question(question) is not None or asks_about_the_conversation(question)


def vagueness(question: str) -> Vagueness | None:
    """Why ``question`` is too vague or too broad to answer well, or None when it is clear enough to answer."""
    text = " ".join(question.split())
    if not text or _exempt(text):
        return None
    words = _words(text)
    content = content_words(text)
    specific = specific_words(text)
    subject = " ".join(content)
    if not content:
        return Vagueness("too_vague", "no_subject", subject)
    if _has_referent(words) and len(specific) < 2:
        # A pronoun or "the method" with at most one other word to go on: "How does it compare with QuickCheck?",
        # "What dataset did they use?" — the referent is still unresolved.
        return Vagueness("too_vague", "ambiguous_referent", subject)
    if _BROAD.search(text) and len(content) <= _BROAD_SUBJECT_WORDS:
        return Vagueness("too_broad", "broad_request", subject)
    asks = (bool(words) and (words[0] in _INTERROGATIVES or words[0] in _IMPERATIVES)) or text.endswith("?")
    if not asks and len(words) <= _BARE_TOPIC_WORDS and not (specific and _INTENT_WORDS & set(words)):
        return Vagueness("too_vague", "bare_topic", subject)
    subject_nouns = [word for word in content if word not in _GENERIC_VERBS]
    if not specific and len(subject_nouns) <= 1:
        return Vagueness("too_vague", "generic_subject", subject)
    return None


# Generic words that are verbs or adjectives, not a subject ("How does testing *work*?" has one subject: testing).
_GENERIC_VERBS = _wordset(
    "work works working happen happens mean means matter matters help helps make makes made go goes going exist "
    "exists good bad best better important useful interesting new main key different big small large popular common "
    "current modern use uses think compare compared differ"
)


__all__ = [
    "GENERIC_WORDS",
    "Vagueness",
    "VaguenessKind",
    "VaguenessRule",
    "content_words",
    "specific_words",
    "vagueness",
]
