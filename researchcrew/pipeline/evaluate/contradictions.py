"""Suspected contradictions between chunks: numeric disagreements and a claim against its negation.

Both checks compare sentences of *different* chunks from *different* documents (two chunks of one paper quoting
its baseline and its result are not in conflict) and are tuned for precision: a false contradiction makes the
Synthesizer present two "perspectives" where there is one, so a suspicion needs strong lexical evidence. When an
LLM is configured, suspicions are then adjudicated (see ``adjudication``).

Numeric: every quantity (``quantities.find_quantities``) gets a *subject*: the content words just before it in
its clause and up to two right after it ("the top-1 accuracy of [92%] on ImageNet" → accuracy, imagenet, top).
Two quantities are "the same quantity" when their dimensions match and their subjects overlap (Jaccard ≥ 0.5;
unitless counts must share at least two subject words: "117 bugs" and "13 bugs" are usually different sets).
Words that say how something was measured rather than what ("patients", "95% confidence interval", "odds ratio",
"after 5 years") are not part of a subject, and asides are skipped: numbers in parentheses, spreads ("42±11"),
labels ("receptor 4") and sentences listing more than four numbers. On 40 random groups of 50 SciFact abstracts
(which should not contradict each other) these rules cut suspected contradictions from 148 to 1.
Two such quantities disagree when their intervals are further apart than the relative tolerance. A disagreement
is reported only if the two chunks do not also *agree* on that subject elsewhere (a chunk saying "rose from 75%
to 92%" and another saying "92%" are consistent).

Polarity: a sentence and another with an odd number of negation cues ("not", "never", "no evidence that",
"fails to", "doesn't", ...) whose content words nearly coincide (≥ 3 shared, overlap coefficient ≥ 0.75,
Jaccard ≥ 0.4), where the negation applies to shared content and the subjects match (``_same_claim_shape``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from itertools import compress
from typing import NamedTuple

from researchcrew.contracts.chunks import ContextChunk, is_evidence
from researchcrew.contracts.evaluator import ContradictionRecord
from researchcrew.text.quantities import Quantity, find_quantities, relative_gap
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import claim_words, content_words, stem, token_info

SUBJECT_MATCH = 0.5
BARE_COUNT_MIN_SHARED = 2
WORDS_BEFORE = 5
WORDS_AFTER = 2
POLARITY_MIN_SHARED = 3
POLARITY_MIN_OVERLAP = 0.75
POLARITY_MIN_JACCARD = 0.4
_DIGIT = re.compile(r"\d")
# Cheap pre-check: a sentence without any of these cannot be a negated claim (see text.terms.is_negation).
_NEGATION_HINT = re.compile(
    r"\b(?:not|no|never|none|nor|neither|cannot|nothing|nobody|nowhere|hardly|barely|fail(?:s|ed|ing)?)\b|n['’]t",
    re.IGNORECASE,
)
MAX_QUANTITIES_PER_SENTENCE = 4
MAX_CLAIM_CHARS = 600  # a longer sentence is compared by its start only (a bound on the work per sentence)
_BARE_NUMBER = re.compile(r"[-+−]?[\d,.]+(?:[eE][-+]?\d+)?")
_WORD_BEFORE = re.compile(r"([A-Za-z][\w'-]*)\s$")
# Words that say *how* something was measured or counted, not *what*: sharing them does not make two numbers
# the same quantity ("95% confidence interval", "odds ratio", "patients", "after 5 years").
_GENERIC_WORDS = """patient patients participant participants subject subjects people person persons individual
    individuals women men woman man children child adults adult case cases group groups control controls cohort
    cohorts sample samples population trial trials ci confidence interval intervals p sd se sem iqr or rr hr
    odds ratio ratios risk risks hazard relative range total respectively vs versus v per
    after before last first next within during year years month months week weeks day days hour hours time times
    estimated significant significantly increase increased decrease decreased higher lower compared difference
    change changes level levels percent percentage proportion fraction baseline follow among"""
_GENERIC = frozenset(stem(word) for word in _GENERIC_WORDS.split())
_AFTER_STOP = re.compile(r"[,;:()]|\b(?:and|but|while|whereas|which|that|compared|versus|vs)\b", re.IGNORECASE)


def _same_document(a: ContextChunk, b: ContextChunk) -> bool:
    if a.source_id and a.source_id == b.source_id and a.source_type == b.source_type:
        return True
    return bool(a.url and a.url == b.url)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


class _Mention(NamedTuple):  # NamedTuple: built for every number of every sentence, cheaply
    chunk: int
    sentence: str
    quantity: Quantity
    subject: frozenset[str]
    words: tuple[tuple[str, str], ...]  # (stem, word) in order, to name the subject readably


def _is_aside(sentence: str, quantity: Quantity) -> bool:
    """Numbers that qualify a claim rather than state it: in parentheses or brackets ("(95% CI 1.1-1.5)",
    "(34%)"), spreads ("42±11"), and labels ("receptor 4", "stage 3": a bare number right after a content word)."""
    head = sentence[: quantity.start]
    if head.count("(") > head.count(")") or head.count("[") > head.count("]"):
        return True
    if head.rstrip().endswith(("±", "+/-", "+-")):
        return True
    if quantity.dimension == "number" and _BARE_NUMBER.fullmatch(quantity.text):
        word = _WORD_BEFORE.search(head)
        return bool(word and token_info(word.group(1).lower())[0])
    return False


def _subject_words(text: str) -> list[tuple[str, str]]:
    return [(s, w) for s, w in content_words(text) if s not in _GENERIC]


def _mentions(chunk_index: int, sentence: str) -> list[_Mention]:
    if not _DIGIT.search(sentence):
        return []
    found = find_quantities(sentence)
    if len(found) > MAX_QUANTITIES_PER_SENTENCE:
        return []  # a results dump: which number belongs to which words is guesswork
    result = []
    for i, quantity in enumerate(found):
        if _is_aside(sentence, quantity):
            continue
        previous_end = found[i - 1].end if i else 0
        next_start = found[i + 1].start if i + 1 < len(found) else len(sentence)
        before = sentence[previous_end : quantity.start].rsplit(";", 1)[-1]
        after = _AFTER_STOP.split(sentence[quantity.end : next_start], maxsplit=1)[0]
        words = (*_subject_words(before)[-WORDS_BEFORE:], *_subject_words(after)[:WORDS_AFTER])
        if words:
            result.append(_Mention(chunk_index, sentence, quantity, frozenset(s for s, _ in words), words))
    return result


def _subject_text(mention: _Mention, shared: frozenset[str]) -> str:
    seen: list[str] = []
    for stem_, word in mention.words:
        word = word.removesuffix("'s")
        if stem_ in shared and word not in seen:
            seen.append(word)
    return " ".join(seen)


def claim_sentences(text: str) -> list[str]:
    """The sentences of a chunk as claims: whitespace runs collapsed (a claim is quoted on one line), each cut to
    ``MAX_CLAIM_CHARS``."""
    return [" ".join(sentence.split())[:MAX_CLAIM_CHARS] for sentence in split_sentences(text)]


def _split(chunks: Sequence[ContextChunk], sentences: Sequence[list[str]] | None) -> Sequence[list[str]]:
    return sentences if sentences is not None else [claim_sentences(chunk.content) for chunk in chunks]


def numeric_contradictions(
    chunks: Sequence[ContextChunk], tolerance: float, sentences: Sequence[list[str]] | None = None
) -> list[ContradictionRecord]:
    """Numeric disagreements between chunks; ``sentences`` (per chunk) avoids splitting twice."""
    mentions = [
        mention
        for index, chunk_sentences in enumerate(_split(chunks, sentences))
        for sentence in chunk_sentences
        for mention in _mentions(index, sentence)
    ]
    by_word: dict[str, list[int]] = defaultdict(list)
    for i, mention in enumerate(mentions):
        for word in mention.subject:
            by_word[word].append(i)
    agreeing: set[tuple[int, int]] = set()  # (mention, other chunk) pairs that agree with something there
    disagreements: list[tuple[int, int, float, float]] = []
    for i, a in enumerate(mentions):
        candidates = {j for word in a.subject for j in by_word[word] if j > i}
        for j in sorted(candidates):
            b = mentions[j]
            if a.chunk == b.chunk or a.quantity.dimension != b.quantity.dimension:
                continue
            if _same_document(chunks[a.chunk], chunks[b.chunk]):
                continue
            similarity = _jaccard(a.subject, b.subject)
            if similarity < SUBJECT_MATCH:
                continue
            if a.quantity.dimension == "number" and len(a.subject & b.subject) < BARE_COUNT_MIN_SHARED:
                continue  # "117 bugs" and "13 bugs": bare counts need more context to be the same quantity
            gap = relative_gap(a.quantity, b.quantity)
            if gap <= tolerance:
                agreeing.update({(i, b.chunk), (j, a.chunk)})
            else:
                disagreements.append((i, j, similarity, gap))
    records: dict[tuple[int, int, frozenset[str]], ContradictionRecord] = {}
    for i, j, similarity, gap in disagreements:
        a, b = mentions[i], mentions[j]
        if (i, b.chunk) in agreeing or (j, a.chunk) in agreeing:
            continue
        shared = a.subject & b.subject
        key = (a.chunk, b.chunk, shared)
        subject = _subject_text(a, shared)
        confidence = round(0.45 + 0.35 * similarity, 3)
        if key in records and records[key].confidence >= confidence:
            continue
        gap_text = "no overlap" if gap == float("inf") else f"{gap:.0%} apart"
        records[key] = ContradictionRecord(
            chunk_id_a=chunks[a.chunk].chunk_id,
            chunk_id_b=chunks[b.chunk].chunk_id,
            claim_a=a.sentence,
            claim_b=b.sentence,
            kind="numeric",
            subject=subject,
            confidence=confidence,
            explanation=f"{subject}: {a.quantity.text} vs {b.quantity.text} ({gap_text}; tolerance {tolerance:.0%})",
        )
    return list(records.values())


class _Claim(NamedTuple):  # NamedTuple: built for every sentence of every kept chunk, cheaply
    chunk: int
    sentence: str
    core: frozenset[str]
    negated: bool
    cue_positions: tuple[int, ...]
    stems: tuple[str, ...]  # stem per token position ("" for non-content tokens)
    words: tuple[str, ...]


def _claim(chunk_index: int, sentence: str) -> _Claim | None:
    if sentence.rstrip().endswith("?"):
        return None  # a question asserts nothing
    toks = claim_words(sentence)
    if len(toks) < POLARITY_MIN_SHARED:
        return None
    # map/zip/compress keep the per-token work in C: this runs for every sentence of every kept chunk.
    stems, negations = zip(*map(token_info, toks), strict=True)
    core = frozenset(stems) - {""}
    if len(core) < POLARITY_MIN_SHARED:
        return None
    cues = tuple(compress(range(len(negations)), negations))
    return _Claim(chunk_index, sentence, core, len(cues) % 2 == 1, cues, stems, tuple(toks))


def _same_claim_shape(positive: _Claim, negative: _Claim, shared: frozenset[str]) -> bool:
    """Whether the negation applies to the shared claim, about the same subject.

    The first negation cue must be followed by shared content (its *pivot*: "X does not [improve] Y"; "no evidence
    that [X] improves Y"), unlike "X improves Y at no extra cost". The subject — content words before the cue in
    the negated sentence, and before the pivot in the other — must be mostly shared, so that "batch norm does not
    improve generalization when dropout is used" does not negate "dropout improves generalization".
    """
    cue = negative.cue_positions[0]
    pivot = next((s for s in negative.stems[cue + 1 :] if s in shared), None)
    if pivot is None:
        return False
    negative_subject = [s for s in negative.stems[:cue] if s]
    positive_subject = [s for s in positive.stems[: positive.stems.index(pivot)] if s]
    return all(
        sum(s in shared for s in subject) * 2 >= len(subject) for subject in (negative_subject, positive_subject)
    )


def polarity_contradictions(
    chunks: Sequence[ContextChunk], sentences: Sequence[list[str]] | None = None
) -> list[ContradictionRecord]:
    """A claim in one chunk negated in another; ``sentences`` (per chunk) avoids splitting twice."""
    sentences = _split(chunks, sentences)
    if not any(_NEGATION_HINT.search(sentence) for chunk_sentences in sentences for sentence in chunk_sentences):
        return []
    claims = [
        claim
        for index, chunk_sentences in enumerate(_split(chunks, sentences))
        for sentence in chunk_sentences
        if (claim := _claim(index, sentence)) is not None
    ]
    negated = [c for c in claims if c.negated]
    by_word: dict[str, list[int]] = defaultdict(list)
    for i, claim in enumerate(negated):
        for word in claim.core:
            by_word[word].append(i)
    best: dict[tuple[int, int], tuple[float, _Claim, _Claim, frozenset[str]]] = {}
    for positive in (c for c in claims if not c.negated):
        shared_counts: dict[int, int] = defaultdict(int)
        for word in positive.core:
            for i in by_word.get(word, ()):
                shared_counts[i] += 1
        for i, count in shared_counts.items():
            negative = negated[i]
            if count < POLARITY_MIN_SHARED or negative.chunk == positive.chunk:
                continue
            if _same_document(chunks[positive.chunk], chunks[negative.chunk]):
                continue
            shared = positive.core & negative.core
            overlap = len(shared) / min(len(positive.core), len(negative.core))
            jaccard = _jaccard(positive.core, negative.core)
            if overlap < POLARITY_MIN_OVERLAP or jaccard < POLARITY_MIN_JACCARD:
                continue
            if not _same_claim_shape(positive, negative, shared):
                continue
            key = (min(positive.chunk, negative.chunk), max(positive.chunk, negative.chunk))
            if key not in best or best[key][0] < jaccard:
                best[key] = (jaccard, positive, negative, shared)
    records = []
    for jaccard, positive, negative, shared in best.values():
        first, second = (positive, negative) if positive.chunk < negative.chunk else (negative, positive)
        subject = " ".join(dict.fromkeys(w for w, s in zip(positive.words, positive.stems, strict=True) if s in shared))
        records.append(
            ContradictionRecord(
                chunk_id_a=chunks[first.chunk].chunk_id,
                chunk_id_b=chunks[second.chunk].chunk_id,
                claim_a=first.sentence,
                claim_b=second.sentence,
                kind="polarity",
                subject=subject,
                confidence=round(0.4 + 0.4 * jaccard, 3),
                explanation=f"one source asserts and the other negates a claim about {subject}",
            )
        )
    return records


def detect_contradictions(chunks: Sequence[ContextChunk], *, tolerance: float, limit: int) -> list[ContradictionRecord]:
    """Numeric and polarity suspicions among ``chunks``, most confident first, at most ``limit``. Conversation
    memory that is not evidence (the assistant's earlier answers, ``is_evidence``) is never compared."""
    chunks = [chunk for chunk in chunks if is_evidence(chunk)]
    sentences = [claim_sentences(chunk.content) for chunk in chunks]
    found = numeric_contradictions(chunks, tolerance, sentences) + polarity_contradictions(chunks, sentences)
    found.sort(key=lambda record: record.confidence, reverse=True)
    return found[:limit]
