"""Terms: the one stemmer and the one stop-word list of every lexical comparison, and what texts are compared by.

The Evaluator compares claims, the extractive synthesizer and the coverage metrics compare content terms,
reformulation and entity extraction drop function words. They all stem with ``stem`` and all drop ``STOP_WORDS``
(English function words). Named vocabularies are added where a purpose needs them, each with its reason beside it:
``REQUEST_WORDS`` (how a question asks, dropped from queries), ``REPORTING_WORDS`` (how a claim is made, dropped
from claims), ``POSITION_WORDS`` (stop words in a question, content in a claim) and ``SEARCH_QUALIFIERS`` (kept in
a keyword search query: "not", "more", "before"). So:

* a **claim** (``content_words``, ``token_info``) keeps negation cues visible beside its content words;
* a **term** (``content_terms``, ``term_set``, ``query_topics``) is what the extractive synthesizer scores
  sentences by and the coverage metrics count.

``stem`` is a light inflectional stemmer (plurals, -ed, -ing, possessives): the forms of one word meet, different
words stay apart. Snowball English was measured in its place and not kept: it also merges derivations
("activated"/"activity" → "activ", "regional"/"region", "positivity"/"positively"), which on SciFact changed
the sentences the extractive synthesizer quotes in 145 of 240 answers, often for worse. BM25
(``knowledge/_analysis.py``) keeps Snowball and Lucene's 33 stop words: its analysis is part of the stored index
format (``ANALYZER_VERSION``), and there the recall of derivational merging is measured to help.

Deliberately small and fast (no model): this runs for every sentence of every piece of evidence.
"""

from __future__ import annotations

import re
from functools import lru_cache


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# English function words: pronouns, determiners, prepositions, conjunctions, auxiliaries, quantifiers, negations.
# They say how a sentence is built, not what it is about.
STOP_WORDS = _wordset(
    """a an the this that these those it its it's itself they them their theirs themselves there here we our ours
    ourselves us you your yours yourself yourselves he him his himself she her hers herself i my me mine myself
    of in on at to for from by with without into onto over under about up down out off via per vs versus as than
    then so such and or but if while whereas because since although though whether also both either each every all
    any some most more less much many few other another same own only just very too quite rather once again further
    now is are was were be been being am do does did done doing has have had having can could may might must shall
    should will would which who whom whose what when where why how not no never none nor neither cannot yes
    one two three"""
)

# Prepositions of time and place: grammar in a question ("the difference between X and Y"), but the claim itself in
# evidence ("risk fell after surgery" does not repeat "risk fell before surgery"), so claims keep them as content.
POSITION_WORDS = _wordset("above below before after between against during until through")

# How a question or request is phrased ("please explain", "what is known about", "the latest results"): not its
# topic. Dropped from queries (coverage topics, query terms, keyword rewrites), kept in evidence.
REQUEST_WORDS = _wordset(
    """tell explain describe please give show know known find want need according get got use used using
    latest recent"""
)

# How a claim is reported or hedged ("achieves", "reports", "evidence", "approximately"), not what it is about:
# two sources stating one fact in different words must still share their content words.
REPORTING_WORDS = _wordset(
    """achieve achieves achieved achieving reach reaches reached reaching score scores scored obtain obtains
    obtained get gets got report reports reported show shows showed shown demonstrate demonstrates demonstrated
    find finds found yield yields yielded attain attains attained measure measures measured observe observes
    observed give gives gave given provide provides provided result results resulted see seen note noted indicate
    indicates indicated suggest suggests suggested claim claims claimed state states stated evidence true false
    clear clearly study studies paper work approach method propose proposes proposed present presents presented
    new using use used uses based around approximately roughly nearly almost reportedly overall total value number
    rate level amount"""
)

# Lexical negation cues. "without" and "lack" are left out on purpose: "X improves Y without extra cost" is not
# the negation of "X improves Y".
NEGATION_CUES = _wordset("not no never none nor neither cannot nothing nobody nowhere hardly barely")
NEGATION_VERBS = frozenset({"fail", "fails", "failed", "failing"})  # "fails to improve"

# Words that change what a search finds ("not effective", "more susceptible", "before birth", "X over Y"): a
# keyword query keeps them, although as topics (coverage, sentence scoring) they are grammar.
SEARCH_QUALIFIERS = (
    NEGATION_CUES | POSITION_WORDS | _wordset("more most less least fewer few only without over under versus vs via")
)

QUERY_STOP_WORDS = STOP_WORDS | POSITION_WORDS | REQUEST_WORDS  # what a question's topics are compared without
SEARCH_STOP_WORDS = QUERY_STOP_WORDS - SEARCH_QUALIFIERS  # what a keyword search query is written without
CLAIM_STOP_WORDS = STOP_WORDS | REPORTING_WORDS  # what claims are compared without

# Two tokenizers, because the comparisons need different word boundaries: a claim splits compounds so that the
# "accuracy" of "top-1 accuracy" meets "accuracy" and keeps contractions whole so that "doesn't" is one negation;
# a term keeps compounds whole, so that "COVID-19" or "state-of-the-art" is one topic.
_CLAIM_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_TERM_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")

_SIBILANT_ES = re.compile(r"(?:[sxz]|ch|sh)es$")

# Irregular past forms meet their verb: "Who wrote AFL?" is answered by "AFL, written by Michal Zalewski", "When was
# it built?" by "they build". Only forms whose verb stems no longer than the form itself (``stem`` never grows a
# word) and that are not also another common word ("found" founds companies, "left" is a side, "lay"/"saw"/"felt"
# are nouns and verbs of their own).
_IRREGULAR = {
    form: verb
    for verb, forms in {
        "write": ("wrote", "written"),
        "build": ("built",),
        "make": ("made",),
        "give": ("gave", "given"),
        "take": ("took", "taken"),
        "choose": ("chose", "chosen"),
        "draw": ("drew", "drawn"),
        "grow": ("grew", "grown"),
        "know": ("knew", "known"),
        "show": ("shown",),
        "begin": ("began", "begun"),
        "bring": ("brought",),
        "think": ("thought",),
        "seek": ("sought",),
        "teach": ("taught",),
        "catch": ("caught",),
        "hold": ("held",),
        "win": ("won",),
        "run": ("ran",),
        "rise": ("rose", "risen"),
        "fall": ("fell", "fallen"),
        "drive": ("drove", "driven"),
        "break": ("broke", "broken"),
        "speak": ("spoke", "spoken"),
        "freeze": ("froze", "frozen"),
        "hide": ("hidden",),
        "forget": ("forgot", "forgotten"),
        "understand": ("understood",),
        "sell": ("sold",),
        "tell": ("told",),
        "send": ("sent",),
        "spend": ("spent",),
        "lose": ("lost",),
        "pay": ("paid",),
        "mean": ("meant",),
        "keep": ("kept",),
        "become": ("became",),
        "prove": ("proven",),
    }.items()
    for form in forms
}


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A light stem of a lower-cased word, the same for its common inflections: "studies"/"study" → "study",
    "boxes" → "box", "increased"/"increasing"/"increases" → "increas", "model's" → "model", "wrote"/"written"/
    "writes" → "writ". Words of four letters or fewer and numbers are left alone. Cached: vocabularies repeat a
    lot."""
    if word.endswith("'s"):
        word = word[:-2]
    word = _IRREGULAR.get(word, word)
    if len(word) <= 4 or word.isdigit():
        return word
    if word.endswith("ies"):
        word = word[:-3] + "y"
    elif _SIBILANT_ES.search(word):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif word.endswith("ing") and len(word) >= 7:
        word = word[:-3]
    elif word.endswith("ed") and len(word) >= 6:
        word = word[:-2]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def claim_words(text: str) -> list[str]:
    """Lower-cased word tokens of a claim; compounds split, contractions whole ("doesn't" is one token)."""
    return _CLAIM_WORD.findall(text.lower().replace("’", "'"))


def term_words(text: str) -> list[str]:
    """Lower-cased word tokens of a text to compare by topic; hyphenated compounds whole ("covid-19")."""
    return _TERM_WORD.findall(text.lower())


def is_negation(token: str) -> bool:
    """Whether a claim token negates what follows it ("not", "never", "fails", "doesn't")."""
    return token in NEGATION_CUES or token in NEGATION_VERBS or token.endswith("n't")


# ---- claims (the Evaluator) ----------------------------------------------------------------------------------


def is_claim_content(token: str) -> bool:
    """A claim token that carries content: no stop word, no reporting word, no negation cue, no bare number."""
    return token not in CLAIM_STOP_WORDS and not is_negation(token) and not token.isdigit()


@lru_cache(maxsize=65_536)
def token_info(token: str) -> tuple[str, bool]:
    """(stem if a content word else "", whether it is a negation cue), cached: vocabularies repeat a lot."""
    return (stem(token) if is_claim_content(token) else ""), is_negation(token)


def content_words(text: str) -> list[tuple[str, str]]:
    """(stem, word) of each content word of a claim in order: no stop words, no negation cues, no bare numbers."""
    return [(info[0], t) for t in claim_words(text) if (info := token_info(t))[0]]


# ---- terms (the extractive synthesizer and the coverage metrics) ----------------------------------------------


def _is_term(token: str) -> bool:
    return token not in QUERY_STOP_WORDS and (len(token) > 2 or token.isdigit())


def content_terms(text: str) -> list[str]:
    """Stemmed content words of ``text`` in order of first appearance, without stop words and one- or two-letter
    words."""
    stop = QUERY_STOP_WORDS  # the test inlined: this runs for every sentence of every piece of evidence
    return list(dict.fromkeys(stem(t) for t in term_words(text) if t not in stop and (len(t) > 2 or t.isdigit())))


@lru_cache(maxsize=2048)
def term_set(text: str) -> frozenset[str]:
    """The content terms of a whole text, cached: coverage metrics ask for the same chunks' terms repeatedly."""
    return frozenset(content_terms(text))


def query_topics(query: str, limit: int = 12) -> dict[str, str]:
    """The query's topics: stemmed term → the word as the user wrote it (for readable metric keys)."""
    topics: dict[str, str] = {}
    for token in term_words(query):
        if not _is_term(token):
            continue
        topics.setdefault(stem(token), token)
        if len(topics) >= limit:
            break
    return topics


__all__ = [
    "CLAIM_STOP_WORDS",
    "NEGATION_CUES",
    "NEGATION_VERBS",
    "POSITION_WORDS",
    "QUERY_STOP_WORDS",
    "REPORTING_WORDS",
    "REQUEST_WORDS",
    "SEARCH_QUALIFIERS",
    "SEARCH_STOP_WORDS",
    "STOP_WORDS",
    "claim_words",
    "content_terms",
    "content_words",
    "is_claim_content",
    "is_negation",
    "query_topics",
    "stem",
    "term_set",
    "term_words",
    "token_info",
]
