"""The kind of answer a question asks for, and whether a sentence holds one: who → a name, when → a date, how many →
a number, where → a place or venue, why → a cause.

A passage can be about everything a question names and still not answer it: "Who invented mutation testing?" is
not answered by "Mutation testing measures how good a test suite is ...", nor "When was libFuzzer first released?"
by "libFuzzer is part of the LLVM project ...", nor "How many test cases does QuickCheck generate by default?" by
"QuickCheck, released in 1999 ...", because none of these sentences holds a name, a date or a count (issue 20:
near-miss questions were answered at confidence 0.6–0.9 from the passage on their subject). ``asked_types`` reads
the kinds a question asks for (a question can ask two: "When was QuickCheck released and who wrote it?");
``holds_type`` says whether a sentence holds an answer of one kind, apart from what the question itself says.

Everything is surface form, no model: a name is two capitalised words in a row that the question does not use
("Koen Claessen", "Baidu Apollo") or a capitalised word after "by"; a date is a year, a month, a weekday or a
recurring period ("every Monday", "nightly"); a number is digits or a number word that is not a year the
question did not ask about; a cause is a causal connective ("because", "due to", "so that", "leads to"). "Why"
is the loosest: an answer to it often names the reason without a connective ("... poses a challenge in terms of
explainability"), so callers weigh a missing cause less than a missing name, date or number.
"""

from __future__ import annotations

import re
from typing import Literal

AnswerType = Literal["person", "time", "quantity", "place", "cause"]

# A question word opens the question or one of its clauses ("..., and who wrote it?"), after at most a preposition
# ("On how many services ...?"); "when" inside a clause is a conjunction ("What does X limit when designing Y?").
_LEAD = r"(?:^\W*|[,;:]\s*|\b(?:and|or|but)\s+)(?:(?:on|in|for|from|to|by|at|with|of|since|until|after)\s+)?"
_MEASURE = (
    r"share|percentage|proportion|fraction|number|score|rate|accuracy|size|amount|ratio|speed-?up|recall|precision|"
    r"f1|auc|coverage|cost|price|percent"
)
_QUESTION_PATTERNS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    (
        "quantity",
        re.compile(
            _LEAD + r"(?:how\s+(?:many|much|long|large|big|small|fast|slow|often|far|old|accurate|precise)\b"
            rf"|(?:what|which)\s+(?:[\w-]+\s+){{0,2}}(?:{_MEASURE})\b)",
            re.IGNORECASE,
        ),
    ),
    (
        "time",
        re.compile(
            _LEAD + r"(?:when\b|(?:what|which)\s+(?:year|month|date|day|decade|century)\b|since\s+when\b)",
            re.IGNORECASE,
        ),
    ),
    ("person", re.compile(_LEAD + r"(?:who(?:se|m)?\b|by\s+whom\b)", re.IGNORECASE)),
    (
        "place",
        re.compile(
            _LEAD + r"(?:where\b|(?:which|what)\s+(?:country|city|venue|conference|journal|company)\b)",
            re.IGNORECASE,
        ),
    ),
    ("cause", re.compile(_LEAD + r"(?:why\b|for\s+what\s+reason\b|what\s+(?:causes|caused)\b)", re.IGNORECASE)),
)
_RELATIVE_WHO = re.compile(r"\b(?:\w+s|people|those|one|anyone|someone|persons?|users?|engineers?)\s+who\b", re.I)

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday weekend"
_TIME = re.compile(
    r"\b(?:1[5-9]\d\d|20\d\d)s?\b"
    rf"|\b(?:{'|'.join(_MONTHS.split())})\b\.?"
    rf"|\b(?:{'|'.join(_WEEKDAYS.split())})s?\b"
    r"|\b(?:daily|weekly|monthly|yearly|annually|nightly|hourly|quarterly)\b"
    r"|\b(?:every|each|per|once\s+a)\s+(?:day|week|month|year|night|morning|evening|hour|quarter|sprint|release)\b"
    r"|\b(?:\d+(?:st|nd|rd|th)|first|second|third|fourth|last)\s+(?:quarter|half|century|decade)\b"
    r"|\b(?:century|decade|ago)\b",
    re.IGNORECASE,
)
_YEAR = re.compile(r"^(?:1[5-9]\d\d|20\d\d)s?$")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NUMBER_WORDS = _wordset(
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred hundreds thousand thousands "
    "million millions billion billions dozen dozens half twice double triple tripled doubled quadrupled "
    "percent majority minority"
)
_TOKEN = re.compile(r"[^\W_][\w.,%'\-/]*[^\W_%]%?|[^\W_]", re.UNICODE)
_CAPITALISED = re.compile(r"^[A-Z][\w\-'.]*$")
_CAUSE = re.compile(
    r"\b(?:because|since|due\s+to|owing\s+to|thanks\s+to|as\s+a\s+result|so\s+that|in\s+order\s+to|therefore|"
    r"thus|hence|consequently|lead(?:s|ing)?\s+to|led\s+to|result(?:s|ed|ing)?\s+(?:in|from)|caus(?:e|es|ed|ing)|"
    r"reason|explain(?:s|ed)?|driven\s+by|stem(?:s|med)?\s+from|which\s+makes|makes?\s+it|allow(?:s|ed)?|"
    r"enabl(?:e|es|ed)|rather\s+than|instead\s+of|avoid(?:s|ing)?|so\s+as\s+to)\b",
    re.IGNORECASE,
)
_FUNCTION = _wordset(
    "the a an this that these those it its in on at of for to by with from and or but we our they their he she "
    "his her i as is are was were be if when while after before since however although"
)


def asked_types(question: str) -> tuple[AnswerType, ...]:
    """The kinds of answer ``question`` asks for, in a fixed order (empty for "what"/"which" questions and claims:
    those ask for no particular form)."""
    text = _RELATIVE_WHO.sub(" ", question)
    return tuple(kind for kind, pattern in _QUESTION_PATTERNS if pattern.search(text))


def _words(text: str) -> list[str]:
    return [token.rstrip(".,") for token in _TOKEN.findall(text)]


def _is_number(token: str) -> bool:
    cleaned = token.replace(",", "").rstrip("%").lstrip("~<>≈")
    return bool(cleaned) and (any(c.isdigit() for c in cleaned) and sum(c.isalpha() for c in cleaned) <= 1)


def holds_type(sentence: str, kind: AnswerType, question: str = "") -> bool:
    """Whether ``sentence`` holds an answer of ``kind`` that the question does not already state."""
    asked = {word.lower() for word in _words(question)}
    if kind == "time":
        return any(match.group().lower().rstrip(".s") not in asked for match in _TIME.finditer(sentence))
    if kind == "quantity":
        wants_year = "year" in asked or "when" in asked
        for token in _words(sentence):
            lowered = token.lower()
            if lowered in asked:
                continue
            if _is_number(token) and (wants_year or not _YEAR.match(token)):
                return True
            if lowered in _NUMBER_WORDS:
                return True
        return False
    if kind == "cause":
        return bool(_CAUSE.search(sentence))
    return _holds_name(sentence, asked, person=kind == "person")


def _holds_name(sentence: str, asked: set[str], *, person: bool) -> bool:
    """A name the question does not use: two capitalised words in a row (a person, an organisation and its product)
    or, for a person, a capitalised word after "by"; for a place, any capitalised word inside the sentence."""
    tokens = _words(sentence)
    run = 0
    for index, token in enumerate(tokens):
        name = (
            index > 0
            and bool(_CAPITALISED.match(token))
            and token.lower() not in asked
            and token.lower() not in _FUNCTION
        )
        if name and not person:
            return True
        if name and index > 1 and tokens[index - 1].lower() == "by":
            return True
        run = run + 1 if name else 0
        if run >= 2:
            return True
    return "et al" in sentence


__all__ = ["AnswerType", "asked_types", "holds_type"]
