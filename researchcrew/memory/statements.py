"""What the user said about themself: statements of their own facts, and the questions that ask for them.

"my project code is BLUEFALCON-7731", then "what is my project code?": the earlier message is not research evidence
to be matched word by word against a research question, it is the user telling a fact about themself, and the
answer to the question is to quote it back. Rules, no model:

* a **personal question** asks for one of the user's own facts: "what is my X", "what's my X again", "when is our
  X", "what did I say my X was", "remind me of my X", "do you remember my X", "which X am I using", "what X do we
  use", "what's my name", "who am I", "what do you call me". Its *subject* is X's content terms; a subject of more
  than five words, or one about the conversation ("my last question"), makes it no personal question
  ("what is my risk of heart disease if I smoke?" is research);
* a **statement** is a clause of the user's own message that is not itself a question, in the first person:
  "my X is Y", "our X was Y", "Y is my X", "call me Z" / "I'm called Z" (subject: name), "I'm using Y for X",
  "we use Y as our X", "I use Y";
* a statement **answers** a personal question when both are about the same thing: the head of the question's
  subject (its last noun before any "of/for/…") is the head of the statement's (or one is a prefix of the other:
  "code"/"codename"), and every other term of the question's subject is in the statement's ("what is my dog's
  name?" is not answered by "call me Zed"). A question about what the user uses with a generic head ("which tool
  am I using?") is answered by any "I use" statement.

Only the user's own words are read here: an assistant's earlier answer is never a statement of the user's facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import content_terms

StatementKind = Literal["is", "name", "use"]

MAX_SUBJECT_WORDS = 5
MAX_VALUE_WORDS = 15
# Heads that ask "which thing" without naming it: any "I use Y" answers "which tool am I using?".
GENERIC_USE_HEADS = frozenset(content_terms("tool tools software app apps library framework stack service product"))
# Subjects that are about the conversation, which memory answers another way (tools/memory_recall.py).
_CONVERSATION_HEADS = frozenset(content_terms("question questions answer answers conversation chat session message"))

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})
_FILLER = re.compile(
    r"^(?:(?:so|and|ok|okay|hey|hi|hello|well|sorry|btw|by the way|quick question|one more thing|also)[,!:]?\s+"
    r"|remind\s+me[,:]\s+)+",
    re.IGNORECASE,
)
_WORD = r"[a-z0-9][\w'-]*"
_SUBJECT = rf"(?P<subject>{_WORD}(?:\s+{_WORD}){{0,{MAX_SUBJECT_WORDS - 1}}}?)"
_OWNER = r"(?:my|our)"
_TAIL = r"\s*(?:,?\s*(?:again|now|then|please|exactly|currently|today))*\s*[?.!]*\s*$"
_BE = r"(?:'s|\s+is|\s+are|\s+was|\s+were|\s+will\s+be)"
_USE_VERB = r"(?:using|use|used|chosen|chose|picked|working\s+with|going\s+with|settled\s+on|switched\s+to)"

_QUESTIONS: tuple[tuple[StatementKind, re.Pattern[str]], ...] = (
    ("is", re.compile(rf"^(?:what|which|who|when|where|how){_BE}\s+{_OWNER}\s+{_SUBJECT}{_TAIL}", re.I)),
    (
        "is",
        re.compile(
            rf"^what\s+(?:did|do|have)\s+(?:i|we)\s+(?:say|said|tell\s+you|told\s+you|mention|mentioned|write)\s+"
            rf"(?:that\s+)?{_OWNER}\s+{_SUBJECT}\s+(?:is|was|are|were|would\s+be){_TAIL}",
            re.I,
        ),
    ),
    (
        "is",
        re.compile(
            rf"^(?:(?:can|could|would)\s+you\s+|please\s+)?(?:remind\s+me\s+(?:of|about|what)|tell\s+me(?:\s+what)?"
            rf"|do\s+you\s+(?:remember|know|recall)(?:\s+what)?|what\s+about)\s+{_OWNER}\s+{_SUBJECT}"
            rf"(?:\s+(?:is|was|are|were))?{_TAIL}",
            re.I,
        ),
    ),
    (
        "use",
        re.compile(
            rf"^(?:what|which)\s+{_SUBJECT}\s+(?:am\s+i|are\s+we|do\s+i|do\s+we|did\s+i|did\s+we|have\s+i|have\s+we"
            rf"|was\s+i|were\s+we)\s+(?:been\s+|say\s+(?:i|we)(?:'m|'re|\s+am|\s+are|\s+was|\s+were)?\s+)?"
            rf"{_USE_VERB}{_TAIL}",
            re.I,
        ),
    ),
    ("use", re.compile(rf"^what\s+(?:am\s+i|are\s+we|do\s+i|do\s+we)\s+(?P<subject>){_USE_VERB}{_TAIL}", re.I)),
)
_NAME_QUESTION = re.compile(
    r"^(?:who\s+am\s+i|what\s+(?:do|should|did|will|would|can)\s+you\s+call\s+me|what\s+am\s+i\s+called"
    r"|how\s+(?:do|should)\s+you\s+address\s+me|do\s+you\s+(?:remember|know)\s+who\s+i\s+am)" + _TAIL,
    re.I,
)

_STATEMENT_SUBJECT = rf"(?P<subject>{_WORD}(?:\s+{_WORD}){{0,{MAX_SUBJECT_WORDS - 1}}}?)"
_STATEMENTS: tuple[tuple[StatementKind, re.Pattern[str]], ...] = (
    (
        "name",
        re.compile(
            r"\b(?:(?:you\s+(?:can|may)\s+)?call\s+me|i(?:'m|\s+am)\s+called|i\s+go\s+by)\s+(?P<value>\S.*)$", re.I
        ),
    ),
    ("is", re.compile(rf"\b{_OWNER}\s+{_STATEMENT_SUBJECT}(?:{_BE}|\s*[:=])\s+(?P<value>\S.*)$", re.I)),
    ("is", re.compile(rf"^(?P<value>\S.*?)\s+(?:is|are|was|will\s+be)\s+{_OWNER}\s+{_STATEMENT_SUBJECT}\s*$", re.I)),
    (
        "use",
        re.compile(
            r"\b(?:i|we)(?:'m|'re|'ve|\s+am|\s+are|\s+have)?\s+(?:(?:now|currently|still|just|mostly|mainly)\s+)?"
            rf"{_USE_VERB}\s+(?P<value>\S.*?)(?:\s+(?:for|as|in)\s+(?:my|our|the|a|an)?\s*{_STATEMENT_SUBJECT})?\s*$",
            re.I,
        ),
    ),
)
# A clause starts before these words after a comma or "and" ("My codename is X, what is Y?" is two clauses), and
# a parenthesis is one of its own: a reply to clarifying questions is stored as "<message> (<reply>)".
_CLAUSE_BREAK = re.compile(
    r"\s*;\s*|\s+\(|\)\s+|,?\s+and\s+(?=(?:my|our|i|i'm|we|we're|call)\b)"
    r"|,\s+(?=(?:and\s+)?(?:my|our|i|i'm|we|we're|call|what|which|who|when|where|why|how|can|could|would|please|"
    r"is|are|do|does|did)\b)",
    re.I,
)
_QUESTION_START = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|am|was|were|do|does|did|can|could|would|should|will|"
    r"shall|may|if|when|whether|unless|in\s+case)\b",
    re.I,
)
_PREPOSITION = re.compile(r"\s+(?:of|for|on|in|at|with|to|from|about)\s+", re.I)


@dataclass(frozen=True)
class Subject:
    """What a fact is about: its content terms (stemmed, in order) and its head (the term that names the thing)."""

    terms: tuple[str, ...]
    head: str | None

    @classmethod
    def of(cls, phrase: str) -> Subject:
        """ "project code" → head "code"; "name of my dog" → head "name" (the noun before the preposition)."""
        main = _PREPOSITION.split(phrase, maxsplit=1)[0]
        head_terms = content_terms(main)
        terms = tuple(dict.fromkeys([*head_terms, *content_terms(phrase)]))
        return cls(terms, head_terms[-1] if head_terms else (terms[-1] if terms else None))


NAME = Subject(("name",), "name")


@dataclass(frozen=True)
class PersonalQuestion:
    """A question asking for one of the user's own facts."""

    kind: StatementKind  # "use": which thing the user uses; else what their X is
    subject: Subject


@dataclass(frozen=True)
class Statement:
    """A fact the user stated about themself, as they said it."""

    text: str  # the clause, as the user wrote it (trailing punctuation dropped)
    kind: StatementKind
    subject: Subject
    value: str


def _normal(text: str) -> str:
    return " ".join(text.translate(_APOSTROPHES).split())


def personal_question(question: str) -> PersonalQuestion | None:
    """The fact a question asks about the user, or None when it asks something else."""
    text = _FILLER.sub("", _normal(question))
    if _NAME_QUESTION.match(text):
        return PersonalQuestion("is", NAME)
    for kind, pattern in _QUESTIONS:
        match = pattern.match(text)
        if match is None:
            continue
        subject = Subject.of(match.group("subject") or "")
        if subject.head is None and kind != "use":
            continue
        if subject.head in _CONVERSATION_HEADS:
            return None
        return PersonalQuestion(kind, subject)
    return None


def _clauses(message: str) -> list[str]:
    clauses: list[str] = []
    for sentence in split_sentences(_normal(message)):
        clauses.extend(part.strip() for part in _CLAUSE_BREAK.split(sentence) if part and part.strip())
    return clauses


def _is_question(clause: str) -> bool:
    return clause.rstrip().endswith("?") or _QUESTION_START.match(clause) is not None


def statements(message: str) -> list[Statement]:
    """The facts a message of the user states about themself, in the order said. Questions state nothing."""
    found: list[Statement] = []
    for clause in _clauses(message):
        if _is_question(clause):
            continue
        text = clause.strip(" .!,;:()")
        for kind, pattern in _STATEMENTS:
            match = pattern.search(text)
            if match is None:
                continue
            value = match.group("value").strip(" .!,;:\"'")
            if not value or len(value.split()) > MAX_VALUE_WORDS or _QUESTION_START.match(value):
                continue
            subject = NAME if kind == "name" else Subject.of(match.groupdict().get("subject") or "")
            if kind == "is" and subject.head is None:
                continue
            found.append(Statement(text, kind, subject, value))
            break
    return found


def _same_term(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= 4 and long.startswith(short)


def answers(statement: Statement, question: PersonalQuestion) -> bool:
    """Whether a statement of the user gives the fact a personal question asks for (module docstring)."""
    wanted = question.subject
    if question.kind == "use" and (wanted.head is None or wanted.head in GENERIC_USE_HEADS):
        return statement.kind == "use"
    if wanted.head is None or statement.subject.head is None:
        return False
    if not _same_term(wanted.head, statement.subject.head):
        return False
    stated = statement.subject.terms
    return all(any(_same_term(term, other) for other in stated) for term in wanted.terms)


def stated_answers(message: str, question: str | PersonalQuestion) -> list[Statement]:
    """The statements of ``message`` (the user's own words) that answer ``question``."""
    asked = personal_question(question) if isinstance(question, str) else question
    if asked is None:
        return []
    return [statement for statement in statements(message) if answers(statement, asked)]


__all__ = [
    "NAME",
    "PersonalQuestion",
    "Statement",
    "StatementKind",
    "Subject",
    "answers",
    "personal_question",
    "stated_answers",
    "statements",
]
