"""The Flow's first stage: decide whether a question can be researched at all, before any tool is called.

Seed 001's early-reject rule: an empty, oversized or incoherent input ends at once with a polite reply and no
retrieval, synthesis or memory work. The checks are deterministic and cheap (microseconds), so they run before
anything else; they are deliberately conservative — a short but real question ("BERT?") passes, and only input
that no search could sensibly answer is refused.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from researchcrew.contracts.query import MAX_QUERY_CHARS

RefusalKind = Literal["empty", "too_long", "incoherent"]

_WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*", re.UNICODE)
_VOWELS = set("aeiouyàáâäãåèéêëìíîïòóôöõùúûüýÿæœ")
# Control characters other than ordinary whitespace have no place in a question.
_CONTROL_OK = {"\n", "\r", "\t"}


@dataclass(frozen=True)
class GuardVerdict:
    """Whether the question may proceed; when not, why and what to tell the user."""

    allowed: bool
    kind: RefusalKind | None = None
    reason: str = ""
    reply: str = ""


ALLOWED = GuardVerdict(allowed=True)


def check_question(text: str) -> GuardVerdict:
    """Check a question before research. Never raises; the verdict carries a polite reply when it refuses."""
    stripped = text.strip()
    if not stripped:
        return _refuse("empty", "the question is empty", "Please ask a question — I received an empty message.")
    if len(stripped) > MAX_QUERY_CHARS:
        return _refuse(
            "too_long",
            f"the question has {len(stripped):,} characters (limit {MAX_QUERY_CHARS:,})",
            f"Your question is too long for me to research ({len(stripped):,} characters; the limit is "
            f"{MAX_QUERY_CHARS:,}). Could you shorten it to the essential question?",
        )
    reason = _incoherence(stripped)
    if reason:
        return _refuse(
            "incoherent",
            reason,
            "I could not make out a question in that message, so I did not search anything. "
            "Could you rephrase it in a sentence or a few keywords?",
        )
    return ALLOWED


def _refuse(kind: RefusalKind, reason: str, reply: str) -> GuardVerdict:
    return GuardVerdict(allowed=False, kind=kind, reason=reason, reply=reply)


def _incoherence(text: str) -> str | None:
    """Why ``text`` is not a researchable question, or None. Each rule targets one kind of noise."""
    if any(unicodedata.category(ch) == "Cc" and ch not in _CONTROL_OK for ch in text):
        return "the message contains control characters"
    words = _WORD.findall(text)
    if not words:
        return "the message contains no words"
    letters = sum(len(word) for word in words)
    visible = sum(1 for ch in text if not ch.isspace())
    if visible and letters / visible < 0.4:
        return "the message is mostly symbols or digits"
    if re.search(r"(.)\1{7,}", text):
        return "the message repeats one character many times"
    # Keyboard mash: long words without vowels ("sdfghjkl"), or most words unpronounceable.
    latin_words = [w.lower() for w in words if all(ch.isascii() for ch in w)]
    if latin_words:
        vowelless = [w for w in latin_words if len(w) >= 5 and not (set(w) & _VOWELS)]
        mashed = [w for w in latin_words if _looks_mashed(w)]
        long_words = [w for w in latin_words if len(w) >= 4]
        if long_words and (len(vowelless) + len(mashed)) / len(long_words) > 0.5:
            return "the message looks like random keystrokes"
    return None


def _looks_mashed(word: str) -> bool:
    """A word with a run of 5+ consonants, which English technical vocabulary almost never has."""
    if word.isupper() or len(word) < 6:
        return False  # acronyms and short words are fine
    return re.search(r"[bcdfghjklmnpqrstvwxz]{5,}", word) is not None
