"""Sentences and their content words, for comparing claims across chunks.

Deliberately small and deterministic: a regex sentence splitter that survives decimals and common abbreviations,
lower-cased word tokens, a crude suffix stripper (so "improves", "improved" and "improving" meet), and a stop
list that also drops reporting verbs and hedges ("achieves", "reports", "evidence"), which say how a claim is
made rather than what it is about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_SENTENCE_CHARS = 600

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*[-*•#]|\s*\d+[.)]\s)")
_ABBREVIATIONS = re.compile(
    r"\b(?:e\.g|i\.e|et al|etc|vs|cf|fig|figs|eq|eqs|sec|approx|ca|dr|mr|prof)\.$", re.IGNORECASE
)
_TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _wordset(
    """a an the this that these those it its it's they them their there here we our us you your he she his her i
    my me of in on at to for from by with without into onto over under about as than then so such and or but if
    while whereas because since although though also both either each every all any some most more less much many
    few other another same own only just very too quite rather is are was were be been being am do does did done
    doing has have had having can could may might must shall should will would which who whom whose what when
    where why how not no never none nor neither cannot
    achieve achieves achieved achieving reach reaches reached reaching score scores scored obtain obtains obtained
    get gets got report reports reported show shows showed shown demonstrate demonstrates demonstrated find finds
    found yield yields yielded attain attains attained measure measures measured observe observes observed
    give gives gave given provide provides provided result results resulted see seen note noted indicate
    indicates indicated suggest suggests suggested claim claims claimed state states stated evidence true false
    clear clearly study studies paper work approach method propose proposes proposed present presents presented
    new using use used uses based around approximately roughly nearly almost about up down out one two three
    reportedly overall total value number rate level amount"""
)

# Lexical negation cues. "without" and "lack" are left out on purpose: "X improves Y without extra cost" is not
# the negation of "X improves Y".
NEGATION_CUES = _wordset("not no never none nor neither cannot nothing nobody nowhere hardly barely")
NEGATION_VERBS = frozenset({"fail", "fails", "failed", "failing"})  # "fails to improve"


@dataclass(frozen=True)
class Sentence:
    """One sentence of one chunk."""

    chunk_index: int
    text: str


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after . ! ? before a capital or digit, at blank lines and list items."""
    pieces: list[str] = []
    pending = ""
    for part in _SENTENCE_END.split(text):
        candidate = (pending + " " + part).strip() if pending else part.strip()
        if _ABBREVIATIONS.search(candidate[-12:]):
            pending = candidate  # "e.g. Foo": the split was inside a sentence
            continue
        pending = ""
        if candidate:
            pieces.append(" ".join(candidate.split())[:MAX_SENTENCE_CHARS])
    if pending:
        pieces.append(" ".join(pending.split())[:MAX_SENTENCE_CHARS])
    return pieces


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; "doesn't" stays one token so its negation is visible."""
    return _TOKEN.findall(text.lower().replace("’", "'"))


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A crude suffix stripper: enough for inflections of one word to meet, not a linguistic stemmer."""
    if word.endswith("'s"):
        word = word[:-2]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def is_negation(token: str) -> bool:
    return token in NEGATION_CUES or token in NEGATION_VERBS or token.endswith("n't")


def is_content(token: str) -> bool:
    return token not in STOPWORDS and not is_negation(token) and not token.isdigit()


@lru_cache(maxsize=65_536)
def token_info(token: str) -> tuple[str, bool]:
    """(stem if a content word else "", whether it is a negation cue), cached: vocabularies repeat a lot."""
    return (stem(token) if is_content(token) else ""), is_negation(token)


def content_words(text: str) -> list[tuple[str, str]]:
    """(stem, word) of each content word in order: no stop words, no negation cues, no bare numbers."""
    return [(info[0], t) for t in tokens(text) if (info := token_info(t))[0]]
