"""Does a passage *state* the answer to the question, or is it only about the same thing?

The embedding cosine and the passage-level word coverage (``pipeline.support``) measure whether a passage is on the
question's subject. A passage next to the answer scores as high as the answer itself: "What mutation score did the
checkout service reach?" matched "Our payment service reached a mutation score of 71%" at support 0.94, "When was
libFuzzer first released?" the passage saying what libFuzzer is, and SciFact claims whose papers were removed the
abstracts on the neighbouring finding (issue 20). What these have in common is that no one sentence holds what the
question asks: its specific words *and* an answer of the kind it asks for. So, per sentence of the passage (the
passage's title counts with every sentence: it often names the subject the sentence leaves out):

* **held** — the share of the question's content terms (stemmed) the sentence holds, each weighted by how specific
  it is among the evidence (``1 / (1 + the share of the other passages holding it)``): a word every passage has
  ("testing" in a testing corpus) says less about *this* passage than the one only it has ("checkout");
* **kind** — when the question asks for a kind of answer (who → a name, when → a date, how many → a number, where →
  a place, ``text.answer_type``), whether the sentence holds one the question does not already state; a sentence
  without it counts ``confidence.statement_type_penalty`` of its share (a missing cause only half as much: a reason
  is often given without a connective).

Only questions are checked, not claims ("Aspirin inhibits the production of PGE2."): an abstract supports a claim
across its sentences, and the abstracts next to a removed one share the claim's words as often as the real one does.
On SciFact the sentence check lifted the tune split's AUROC (0.739 → 0.750) and lowered the report split's
(0.774 → 0.744), so it does not generalise there and claims keep their support.

The passage's **statement** score is its best sentence's; a passage's support is multiplied by
``statement_floor + (1 − statement_floor) × min(1, statement / statement_full)`` (``ConfidenceSettings``;
``statement_floor`` 1 turns it off): a sentence holding ``statement_full`` of the weighted words, with the kind of
answer asked for, states the answer in full (a paraphrase rarely holds every word), and the passage keeps its
support; answer_min_support keeps its meaning. No model and no
second embedding pass: a few set operations per sentence, on sentences ``text.sentences`` already splits (cached).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE, ContextChunk
from researchcrew.settings import ConfidenceSettings
from researchcrew.text.answer_type import AnswerType, asked_types, holds_type
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import content_terms, term_set

_SCAN_CHARS = 6_000  # sentences beyond this point of a long page are not read (speed bound)
CAUSE_WEIGHT = 0.5  # a missing cause costs half what a missing name, date or number costs


@lru_cache(maxsize=4_096)
def _sentences(content: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The sentences of a passage with their terms, cached by content (passages come back across questions)."""
    found = [(s, frozenset(term_set(s))) for s in split_sentences(content[:_SCAN_CHARS]) if s.strip()]
    return tuple(found) or ((content[:_SCAN_CHARS], frozenset(term_set(content[:_SCAN_CHARS]))),)


def term_weights(question: str, chunks: Sequence[ContextChunk]) -> dict[str, float]:
    """Each content term of the question, weighted by how specific it is among ``chunks``: 1 / (1 + the share of
    the passages holding it). A term no passage holds weighs 1, one every passage holds 0.5."""
    wanted = list(dict.fromkeys(content_terms(question)))
    if not wanted:
        return {}
    texts = [term_set(f"{c.title or ''} {c.content}") for c in chunks if c.source_type != MEMORY_SOURCE_TYPE]
    total = len(texts) or 1
    return {term: 1.0 / (1.0 + sum(term in text for text in texts) / total) for term in wanted}


def statement_score(
    question: str,
    chunk: ContextChunk,
    weights: dict[str, float],
    settings: ConfidenceSettings,
    kinds: tuple[AnswerType, ...] | None = None,
) -> float:
    """How well the passage's best sentence states an answer to the question, in [0, 1] (module docstring)."""
    kinds = asked_types(question) if kinds is None else kinds
    total = sum(weights.values())
    title = frozenset(term_set(chunk.title or ""))
    best = 0.0
    for sentence, terms in _sentences(chunk.content):
        held = 1.0 if not total else sum(w for t, w in weights.items() if t in terms or t in title) / total
        if held <= best:
            continue  # the kind can only lower it
        best = max(best, held * kind_factor(sentence, kinds, question, settings))
    return best


def kind_factor(sentence: str, kinds: tuple[AnswerType, ...], question: str, settings: ConfidenceSettings) -> float:
    """1 when the sentence holds every kind of answer asked for; less for each it lacks."""
    factor = 1.0
    for kind in kinds:
        if not holds_type(sentence, kind, question):
            missing = 1.0 - settings.statement_type_penalty
            factor *= 1.0 - (CAUSE_WEIGHT * missing if kind == "cause" else missing)
    return factor


def is_question(text: str) -> bool:
    """A question (it ends with a question mark), not a claim to check ("Aspirin inhibits PGE2.")."""
    return text.rstrip().endswith("?")


def statement_factors(question: str, chunks: Sequence[ContextChunk], settings: ConfidenceSettings) -> dict[str, float]:
    """chunk id → what its support is multiplied by (1 for conversation memory, judged by its own rules, and
    when ``statement_floor`` is 1)."""
    floor = settings.statement_floor
    kinds = asked_types(question)
    if floor >= 1.0 or not (kinds or is_question(question)):
        return {chunk.chunk_id: 1.0 for chunk in chunks}
    weights = term_weights(question, chunks)
    factors: dict[str, float] = {}
    for chunk in chunks:
        if chunk.source_type == MEMORY_SOURCE_TYPE:
            factors[chunk.chunk_id] = 1.0
            continue
        score = min(1.0, statement_score(question, chunk, weights, settings, kinds) / settings.statement_full)
        factors[chunk.chunk_id] = floor + (1.0 - floor) * score
    return factors


__all__ = ["is_question", "kind_factor", "statement_factors", "statement_score", "term_weights"]
