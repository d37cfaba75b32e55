"""The deterministic follow-up rule: carry the previous question's subject into a question that only points at it.

The subject comes from the previous turn's stand-alone question (``subjects.question_subjects``), so chains of
follow-ups resolve: "What is metamorphic testing?" → "What are its limitations?" (→ "What are the limitations of
metamorphic testing?") → "And in Python?" (→ "What are the limitations of metamorphic testing in Python?").

What is rewritten, in this order:

1. ellipsis — "And in Python?", "What about for images?" append the phrase to the previous question (replacing a
   trailing phrase with the same preposition); "What about flaky tests?", "Same for BERT?" put the new phrase in
   place of the previous subject;
2. references — "it"/"its" (a single subject), "they"/"them"/"their" (a plural one, or two), "this"/"that" as the
   subject ("How does this work?", "Who invented that?") or with a stand-in noun ("this method", "these
   approaches"), "the former"/"the latter" (exactly two subjects);
3. a bare aspect — "What are the limitations?", "Any examples?" get "of <subject>"; "Tell me more" gets "about
   <subject>".

And what is not, because a false rewrite is worse than none: a question with its own subject and no pointing word;
"it" that points at nothing ("Is it possible to ...", "it takes ... to", "worth it", the acronym "IT"); "this"/"that"
standing for a statement ("Why is that?", "Is that true?", "Who said that?"); a pointing word whose antecedent is
missing or ambiguous ("it" after a comparison of two things) — then nothing at all is rewritten, not half of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.memory.records import SessionSummary
from researchcrew.pipeline._guard import check_question
from researchcrew.pipeline.follow_up._base import Rewrite, unchanged
from researchcrew.pipeline.follow_up._subjects import (
    clean_phrase,
    join_subjects,
    looks_plural,
    possessive,
    question_subjects,
)
from researchcrew.pipeline.follow_up._words import (
    ASPECT_WORDS,
    AUXILIARIES,
    DEMONSTRATIVES,
    FILLER_WORDS,
    OBJECT_VERBS,
    PREPOSITIONS,
    REFERRING_WORDS,
    STAND_IN_NOUNS,
    SUBJECT_VERBS,
    SUBORDINATORS,
    VAGUE_WORDS,
    WH_WORDS,
    word_list,
)
from researchcrew.text.terms import content_terms

MAX_REWRITABLE_CHARS = 500  # a longer message is not a terse follow-up
MAX_ELLIPSIS_WORDS = 6
_FLAGS = re.IGNORECASE
_TOKEN = re.compile(r"[^\W_][\w'’\-\.+#]*[\w+#]|[^\W_]", re.UNICODE)
_END = re.compile(r"[\s?!.…]*$")

_PARTICIPLE = r"(?![\w\-]*(?:ed|en)\b)"  # "is it used to ..." points at something; "is it possible to ..." does not
_EXPLETIVE_IT = re.compile(
    r"\bit(?:\s+|\s*['’])(?:is|s|was|seems|seemed|appears|would\s+be|will\s+be|might\s+be|could\s+be|may\s+be|"
    rf"has\s+been|makes\s+sense)(?:\s+{_PARTICIPLE}[\w\-]+){{0,3}}?\s+(?:to|that|whether|if|when)\b"
    r"|\b(?:is|was|isn['’]?t|wasn['’]?t)\s+it\s+(?:" + _PARTICIPLE + r"[\w\-]+\s+){1,3}?(?:to|that|whether|if)\b"
    r"|\b(?:would|will|could|might|can|should|does|did|do)\s+it\s+(?:be|make\s+sense|matter|help)\s+"
    r"(?:[\w\-]+\s+){0,3}?(?:to|that|whether|if)\b"
    r"|\b(?:would|will|could|might|can|should)\s+it\s+be\s+(?:[\w\-]+\s+){0,2}?(?:to|that|whether|if)\b"
    r"|\bit\s+(?:takes?|took)\b(?:\s+[\w\-]+){0,4}?\s+to\b|\b(?:does|did|will|would)\s+it\s+take\b(?:\s+[\w\-]+){0,5}?"
    r"\s+to\b|\bit\s+depends\b|\bwhat\s+time\s+is\s+it\b|\bit\s+(?:rains?|snows?)\b",
    _FLAGS,
)
_ELLIPSIS = re.compile(
    r"^(?:(?:and|but|also|so|ok|okay|well)\b[,]?\s+)*(?P<kw>what\s+about|how\s+about|what\s+of|and|also|"
    r"(?:the\s+)?same\s+(?:for|with|in|about))\s+(?P<rest>.+)$",
    _FLAGS,
)
_MORE = re.compile(
    r"^(?:(?:and|ok|okay|so)\b[,]?\s+)?(?:(?:can|could)\s+you\s+)?(?:please\s+)?(?:tell\s+me\s+more|more\s+(?:details|"
    r"detail|info|information)|go\s+on|elaborate|explain\s+(?:more|further|in\s+more\s+detail))(?:\s+please)?$",
    _FLAGS,
)
_COPULA_OWNER = re.compile(
    r"^(?P<head>(?:what|which|who|how\s+\w+)\s+(?:is|are|was|were)\s+)(?P<owner>its|their)\s+"
    r"(?P<np>[\w\-]+(?:\s+[\w\-]+){0,3}?)(?P<tail>\s+(?:in|for|with|on|under|during|at|by|compared|when)\b.*)?$",
    _FLAGS,
)


@dataclass(frozen=True)
class _Word:
    start: int
    end: int
    text: str

    @property
    def lower(self) -> str:
        return self.text.lower().replace("’", "'")


def _words(text: str) -> list[_Word]:
    return [_Word(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]


def _body_and_end(text: str) -> tuple[str, str]:
    """The question without its end punctuation, and that punctuation ("" when there was none)."""
    match = _END.search(text)
    end = "".join(match.group().split()) if match else ""
    body = text[: match.start()] if match else text
    return body.rstrip(), end


def _finish(question: str, text: str, reason: str) -> Rewrite:
    """The rewrite, when it is usable and adds something: "What about flaky tests?" after "What is X?" would
    become "What are flaky tests?" — no word the user did not already give, so the question is left as asked."""
    text = " ".join(text.split())
    if question[:1].isupper() and text[:1].islower():
        text = text[0].upper() + text[1:]
    if text == question.strip() or len(text) > MAX_QUERY_CHARS or not check_question(text).allowed:
        return unchanged(question, "the rule produced no usable rewrite")
    if not set(content_terms(text)) - set(content_terms(question)):
        return unchanged(question, "the rewrite would add nothing to the question")
    return Rewrite(question=text, method="rule", reason=reason)


def rule_rewrite(question: str, summary: SessionSummary | None) -> Rewrite:
    """The question with the previous turn's subject carried in, or unchanged (see the module docstring)."""
    previous = summary.last_turn if summary is not None else None
    if previous is None:
        return unchanged(question, "no earlier exchange in this session")
    text = question.strip()
    if not text or len(text) > MAX_REWRITABLE_CHARS or "\n" in text:
        return unchanged(question, "not a short one-line question")
    earlier = previous.standalone or previous.question
    subjects = question_subjects(earlier)
    for attempt in (_ellipsis, _references, _bare_aspect):
        result = attempt(question, text, earlier, subjects)
        if result is not None:
            return result
    return unchanged(question, "the question does not point back at the conversation")


def points_back(question: str) -> bool:
    """Whether a question may point back at the conversation — a pointing word that is not idiomatic ("it" in
    "is it possible to"), an ellipsis ("And in Python?"), a bare aspect ("What are the limitations?"), "Tell me
    more", or a very short question. Broader than what the rule resolves: it decides whether the LLM is asked at
    all, so a question with its own subject and nothing pointing back costs no call and cannot be rewritten."""
    text = question.strip()
    if not text or len(text) > MAX_REWRITABLE_CHARS or "\n" in text:
        return False
    body = _body_and_end(text)[0]
    if _ELLIPSIS.match(body) or _MORE.match(body):
        return True
    words = _words(text)
    expletive = _EXPLETIVE_IT.search(text) is not None
    for index, word in enumerate(words):
        before = words[index - 1].lower if index else None
        after = words[index + 1] if index + 1 < len(words) else None
        if _reference_kind(word, before, after, text, expletive) is not None:
            return True
        if word.lower in DEMONSTRATIVES:
            next_word = after.lower if after is not None else None
            if next_word is None or next_word in AUXILIARIES or before is None or before in AUXILIARIES | WH_WORDS:
                return True  # "Why is that?", "Is that true?", "That sounds slow, why?"
    skipped = FILLER_WORDS | WH_WORDS | AUXILIARIES
    content = [word for word in words if word.lower not in skipped]
    if content and all(word.lower in ASPECT_WORDS or word.lower in VAGUE_WORDS for word in content):
        return True
    return not content  # "Why?", "How so?"


# ---- 1. ellipsis ------------------------------------------------------------------------------------------------


def _ellipsis(question: str, text: str, earlier: str, subjects: list[str]) -> Rewrite | None:
    match = _ELLIPSIS.match(_body_and_end(text)[0])
    if match is None:
        return None
    rest = match.group("rest").strip(" ,;:")
    words = [word.lower() for word in word_list(rest)]
    if not words or len(words) > MAX_ELLIPSIS_WORDS or any(w in WH_WORDS or w in REFERRING_WORDS for w in words):
        return None
    earlier_body, earlier_end = _body_and_end(earlier)
    keyword = " ".join(match.group("kw").lower().split())
    if words[0] in PREPOSITIONS or words[0] in SUBORDINATORS:
        if keyword.endswith(("for", "with", "in", "about")) and "same" in keyword:
            return None  # "same for in Python" is not a sentence
        return _finish(
            question,
            _with_modifier(earlier_body, rest, words[0]) + earlier_end,
            f"'{rest}' added to the previous question",
        )
    if any(word in AUXILIARIES for word in words):
        return None  # "And is it fast?" is a question of its own (references may still resolve it)
    if len(subjects) != 1 or clean_phrase(rest) is None:
        return None
    replaced = _replace_subject(earlier_body, subjects[0], rest)
    if replaced is None:
        return None
    return _finish(question, replaced + earlier_end, f"'{rest}' in place of '{subjects[0]}' in the previous question")


def _with_modifier(earlier: str, modifier: str, preposition: str) -> str:
    """``earlier`` with ``modifier`` ("in Python"): a short trailing phrase with the same preposition is replaced
    ("... in Java" → "... in Python"), otherwise the modifier is appended."""
    found = list(re.finditer(rf"\s{re.escape(preposition)}\s", earlier, _FLAGS))
    if found:
        tail = earlier[found[-1].start() :]
        if len(word_list(tail)) <= 4:
            return f"{earlier[: found[-1].start()]} {modifier}"
    return f"{earlier} {modifier}"


def _replace_subject(earlier: str, subject: str, new: str) -> str | None:
    pattern = re.compile(rf"(?<![\w\-]){re.escape(subject)}(?![\w\-])", _FLAGS)
    if not pattern.search(earlier):
        return None
    replaced = pattern.sub(lambda _: new, earlier)
    if looks_plural(new) != looks_plural(subject):  # "What is X?" → "What are flaky tests?"
        singular, plural = ("is", "are") if looks_plural(new) else ("are", "is")
        replaced = re.sub(
            rf"\b{singular}(\s+(?:the\s+|a\s+|an\s+)?){re.escape(new)}",
            rf"{plural}\1{new}",
            replaced,
            count=1,
            flags=_FLAGS,
        )
    return replaced


# ---- 2. references ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str
    what: str


def _references(question: str, text: str, earlier: str, subjects: list[str]) -> Rewrite | None:
    words = _words(text)
    if not any(
        word.lower in REFERRING_WORDS or word.lower in ("former", "latter", "latter's", "former's") for word in words
    ):
        return None
    expletive = _EXPLETIVE_IT.search(text) is not None
    edits: list[_Edit] = []
    unresolved: list[str] = []
    for index, word in enumerate(words):
        before = words[index - 1].lower if index else None
        after = words[index + 1] if index + 1 < len(words) else None
        kind = _reference_kind(word, before, after, text, expletive)
        if kind is None:
            continue
        edit = _resolve(kind, word, after, subjects, text)
        if edit is None:
            unresolved.append(word.text)
        else:
            edits.append(edit)
    if unresolved:
        return unchanged(question, f"cannot tell what {', '.join(repr(w) for w in unresolved)} refers to")
    if not edits:
        return None
    copula = _COPULA_OWNER.match(_body_and_end(text)[0])
    if copula is not None and len(edits) == 1 and edits[0].start == copula.start("owner"):
        owner = (
            join_subjects(subjects) if copula.group("owner").lower() == "their" or len(subjects) > 1 else subjects[0]
        )
        body = f"{copula.group('head')}the {copula.group('np')} of {owner}{copula.group('tail') or ''}"
        return _finish(question, body + _body_and_end(text)[1], f"'{copula.group('owner')}' → {owner}")
    rewritten = text
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        rewritten = rewritten[: edit.start] + edit.text + rewritten[edit.end :]
    reason = "; ".join(dict.fromkeys(edit.what for edit in edits))
    return _finish(question, rewritten, reason)


def _reference_kind(word: _Word, before: str | None, after: _Word | None, text: str, expletive: bool) -> str | None:
    """What a word refers with, or None when it does not point at the conversation's subject."""
    lower = word.lower
    if lower in ("it", "it's"):
        if word.text == "IT" and not text.isupper():
            return None  # information technology
        if expletive or before == "worth":
            return None
        return lower
    if lower in ("its", "they", "them", "their"):
        return lower
    if lower in ("former", "latter", "former's", "latter's"):
        return lower if before == "the" else None
    if lower in DEMONSTRATIVES:
        next_word = after.lower if after is not None else None
        if next_word in STAND_IN_NOUNS:
            return f"{lower}+noun"
        subject_position = (
            before is None or before in AUXILIARIES or before in WH_WORDS
        ) and next_word in SUBJECT_VERBS
        object_position = next_word is None and before in OBJECT_VERBS
        if subject_position or object_position:
            return lower
    return None


def _resolve(kind: str, word: _Word, after: _Word | None, subjects: list[str], text: str) -> _Edit | None:
    """The replacement for one reference, or None when its antecedent is missing or ambiguous."""
    plural_antecedent = len(subjects) >= 2 or (len(subjects) == 1 and looks_plural(subjects[0]))
    single = subjects[0] if len(subjects) == 1 else None
    joined = join_subjects(subjects) if subjects else None
    if kind in ("it", "this", "that"):
        return _Edit(word.start, word.end, single, f"'{word.text}' → {single}") if single else None
    if kind == "it's":
        return _Edit(word.start, word.end, f"{single} is", f"'{word.text}' → {single}") if single else None
    if kind == "its":
        return _Edit(word.start, word.end, possessive(single), f"'{word.text}' → {single}") if single else None
    if kind in ("they", "them", "these", "those"):
        if not plural_antecedent or joined is None:
            return None
        return _Edit(word.start, word.end, joined, f"'{word.text}' → {joined}")
    if kind == "their":
        if not plural_antecedent or joined is None:
            return None
        owner = (
            " and ".join(possessive(subject) for subject in subjects) if len(subjects) > 1 else possessive(subjects[0])
        )
        return _Edit(word.start, word.end, owner, f"'{word.text}' → {joined}")
    if kind.endswith("+noun") and after is not None:
        demonstrative = kind.split("+")[0]
        plural = demonstrative in ("these", "those")
        target = (joined if plural_antecedent else None) if plural else single
        if target is None:
            return None
        return _Edit(word.start, after.end, target, f"'{text[word.start : after.end]}' → {target}")
    if kind in ("former", "latter", "former's", "latter's"):
        if len(subjects) != 2:
            return None
        target = subjects[0] if kind.startswith("former") else subjects[1]
        start = text.lower().rfind("the", 0, word.start)
        replacement = possessive(target) if kind.endswith("'s") else target
        return _Edit(start, word.end, replacement, f"'the {word.text}' → {target}")
    return None


# ---- 3. a bare aspect -------------------------------------------------------------------------------------------


def _bare_aspect(question: str, text: str, earlier: str, subjects: list[str]) -> Rewrite | None:
    if not subjects:
        return None
    body, end = _body_and_end(text)
    owner = join_subjects(subjects)
    if _MORE.match(body):
        return _finish(question, f"Tell me more about {owner}{end}", f"more about {owner}")
    skipped = FILLER_WORDS | WH_WORDS | AUXILIARIES
    content = [word for word in _words(body) if word.lower not in skipped]
    aspects = [word for word in content if word.lower in ASPECT_WORDS]
    if not aspects or any(word.lower not in ASPECT_WORDS and word.lower not in VAGUE_WORDS for word in content):
        return None
    last = aspects[-1]
    link = "between" if last.lower in ("difference", "differences", "similarity", "similarities") else "of"
    if link == "between" and len(subjects) < 2:
        return None
    rewritten = f"{body[: last.end]} {link} {owner}{body[last.end :]}{end}"
    return _finish(question, rewritten, f"'{last.text}' of {owner}")
