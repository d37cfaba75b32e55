"""What a stand-alone question is about: the phrase a later "it", "they" or "What about ...?" points back to.

``question_subjects("What are the limitations of metamorphic testing?") == ["metamorphic testing"]`` and
``question_subjects("Compare BERT and GPT-2") == ["BERT", "GPT-2"]``. Recognised shapes: definitions ("What is X?",
"Who was X?", "Explain X", "Tell me about X"), aspects ("the limitations of X", "X's accuracy"), mechanisms
("How does X work?"), origins and users ("Who invented X?", "Which companies use X?") and comparisons ("Compare X
and Y", "X vs Y", "the difference between X and Y", "Is X faster than Y?").

It is deliberately narrow: when no shape matches, or the phrase found is vague ("the best way to ...", "this"),
there is no subject, and the follow-up rule rewrites nothing — a false rewrite is worse than none.
"""

from __future__ import annotations

import re

from researchcrew.pipeline.follow_up._words import (
    ASPECT_WORDS,
    REFERRING_WORDS,
    VAGUE_WORDS,
    WH_WORDS,
    word_list,
)

MAX_SUBJECT_WORDS = 8
_FLAGS = re.IGNORECASE
_LEAD_FILLERS = re.compile(
    r"^(?:(?:and|but|so|also|ok|okay|well|now|then|please|hi|hello)\b[,]?\s+)+|^(?:(?:can|could|would)\s+you\s+"
    r"(?:please\s+)?)",
    _FLAGS,
)
_TRAILERS = re.compile(
    r"\s+(?:used\s+for|good\s+for|known\s+for|based\s+on|about|exactly|really|actually|nowadays|today|now|"
    r"in\s+(?:simple|plain)\s+(?:terms|words|english)|in\s+(?:a\s+)?nutshell|briefly|in\s+short|in\s+detail)$",
    _FLAGS,
)
_DETERMINER = re.compile(r"^(?:a|an|some|any)\s+", _FLAGS)  # "the" stays: "the GIL", "the former"
_ASPECT_OF = re.compile(
    r"^(?:the\s+)?(?:(?:main|key|major|common|biggest|typical|current|known|most\s+\w+|\w+est)\s+)*"
    r"(?P<aspect>[\w\-]+)\s+(?:of|for|behind|in)\s+(?P<rest>.+)$",
    _FLAGS,
)
_POSSESSIVE_ASPECT = re.compile(r"^(?P<owner>.+?)(?:'s|’s|')\s+(?P<aspect>[\w\-]+)$", _FLAGS)

_VERBS = (
    "work|works|compare|differ|scale|perform|function|operate|help|fail|learn|handle|improve|relate|behave|"
    "generalize|generalise|converge|run|apply|affect|cope|deal|interact|evolve|start|begin|end"
)
_ACTIONS = (
    "invented|introduced|proposed|created|developed|coined|discovered|designed|wrote|published|maintains|"
    "maintain|uses|use|implemented|implements|pioneered|popularized|popularised|funds|funded|owns|built|builds"
)
_COMPARATIVE = r"(?:better|worse|faster|slower|cheaper|safer|simpler|more\s+\w+|less\s+\w+|\w+er)"

# (pattern, groups): each pattern is tried on the question without its end punctuation, in this order.
_SHAPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (
        re.compile(
            r"^(?:what|where)\s+(?:is|are|'s|’s)\s+the\s+differences?\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>.+)$", _FLAGS
        ),
        ("a", "b"),
    ),
    (
        re.compile(
            r"^(?:how|in\s+what\s+way)\s+(?:does|do|is|are)\s+(?P<a>.+?)\s+(?:differ|different)\s+from\s+(?P<b>.+)$",
            _FLAGS,
        ),
        ("a", "b"),
    ),
    (re.compile(r"^(?:compare|contrast)\s+(?P<a>.+?)\s+(?:and|with|to|vs\.?|versus)\s+(?P<b>.+)$", _FLAGS), ("a", "b")),
    (re.compile(rf"^(?:is|are|was|were)\s+(?P<a>.+?)\s+{_COMPARATIVE}\s+than\s+(?P<b>.+)$", _FLAGS), ("a", "b")),
    (
        re.compile(r"^(?:which\s+is\s+\w+\W*\s+)?(?P<a>[^,;:?]+?)\s+(?:vs\.?|versus)\s+(?P<b>[^,;:?]+)$", _FLAGS),
        ("a", "b"),
    ),
    (re.compile(r"^(?:what|who)\s*(?:is|are|was|were|'s|’s)\s+(?P<np>.+)$", _FLAGS), ("np",)),
    (
        re.compile(
            r"^(?:explain|describe|define|summari[sz]e|introduce|overview(?:\s+of)?|tell\s+me\s+(?:more\s+)?about|"
            r"what\s+do\s+you\s+know\s+about|give\s+(?:me\s+)?an?\s+(?:overview|introduction|summary|definition)\s+of)"
            r"\s+(?P<np>.+)$",
            _FLAGS,
        ),
        ("np",),
    ),
    (
        re.compile(
            rf"^how\s+(?:does|do|did|is|are|can|could|would|should|will)\s+(?P<np>.+?)\s+(?:{_VERBS})\b.*$", _FLAGS
        ),
        ("np",),
    ),
    (re.compile(rf"^(?:who|which\s+[\w\-]+|what\s+[\w\-]+)\s+(?:{_ACTIONS})\s+(?P<np>.+)$", _FLAGS), ("np",)),
    (
        re.compile(
            r"^(?:list|name|give|what\s+are|which\s+are)\s+.*?\b(?P<aspect>[\w\-]+)\s+of\s+(?P<np>[^,;:?]+)$", _FLAGS
        ),
        ("np",),
    ),
)


def _strip_end(text: str) -> str:
    return text.strip().rstrip("?!.…").strip()


def _looks_like_subject(phrase: str) -> bool:
    words = word_list(phrase)
    if not words or len(words) > MAX_SUBJECT_WORDS:
        return False
    lowered = [word.lower() for word in words]
    if any(word in REFERRING_WORDS or word in WH_WORDS for word in lowered):
        return False
    if " to " in f" {phrase.lower()} ":  # "the best way to test X" is an action, not a thing
        return False
    return any(word not in VAGUE_WORDS and word not in ASPECT_WORDS for word in lowered)


def clean_phrase(phrase: str) -> str | None:
    """A noun phrase as a subject: end punctuation, "a"/"an" and trailing fillers off ("the" is kept: it reads
    right where the subject is put back); "the limitations of X" → X, "X's accuracy" → X. None when what is left
    is not a usable subject."""
    text = _strip_end(phrase).strip(" ,;:\"'“”()")
    for _ in range(3):  # "the main limitations of the attention mechanism in transformers" peels in steps
        before = text
        text = _TRAILERS.sub("", text)
        text = _DETERMINER.sub("", text)
        aspect_of = _ASPECT_OF.match(text)
        if aspect_of and aspect_of.group("aspect").lower() in ASPECT_WORDS:
            text = aspect_of.group("rest")
        possessive = _POSSESSIVE_ASPECT.match(text)
        if possessive and possessive.group("aspect").lower() in ASPECT_WORDS:
            text = possessive.group("owner")
        text = _strip_end(text)
        if text == before:
            break
    text = " ".join(text.split())
    return text if _looks_like_subject(text) else None


def question_subjects(question: str) -> list[str]:
    """The subject(s) of a stand-alone question: one phrase, two for a comparison, none when unsure."""
    text = _LEAD_FILLERS.sub("", _strip_end(question))
    if not text or "\n" in text:
        return []
    for pattern, groups in _SHAPES:
        match = pattern.match(text)
        if match is None:
            continue
        found = [clean_phrase(match.group(group)) for group in groups]
        subjects = [subject for subject in found if subject]
        if len(subjects) == len(groups):
            return subjects
        return []  # the shape matched but its phrase is vague: do not guess from another shape
    return []


def looks_plural(phrase: str) -> bool:
    """Whether a subject reads as plural ("flaky tests", "BERT and GPT-2"); mass nouns in -ics, -ss, -us, -is and
    acronyms count as singular."""
    words = word_list(phrase)
    if not words:
        return False
    if any(word.lower() == "and" for word in words):
        return True
    last = words[-1]
    if last.isupper() or len(last) < 3:
        return False
    lowered = last.lower()
    if lowered.endswith(("ss", "us", "is", "ics", "ness")):
        return False
    return lowered.endswith("s") or lowered in {"data", "people", "criteria", "phenomena", "children"}


def possessive(phrase: str) -> str:
    """``phrase`` as an owner: "BERT's", "metamorphic testing's", "flaky tests'"."""
    return f"{phrase}'" if phrase.endswith("s") and looks_plural(phrase) else f"{phrase}'s"


def join_subjects(subjects: list[str]) -> str:
    return " and ".join(subjects) if len(subjects) <= 2 else ", ".join(subjects[:-1]) + " and " + subjects[-1]
