"""The extractive synthesizer: an answer made of sentences quoted from the evidence, for when no LLM is configured.

No model is called. Sentences are scored by overlap with the query's content terms, the quality of their chunk
and a small lead-sentence bonus (plus a bonus for numbers in technical answers, and one for naming the aspect a
question asks for — "What are its limitations?" is answered by "... the main drawback ...", ``text.aspects``, in a
synonym or the singular); near-duplicates are skipped and
the rest picked by maximal marginal relevance (MMR, λ = 0.7 over Jaccard similarity of terms). Picked sentences
are grouped by source document into sections (concise answers: one section) and each one cites its chunk.
Disagreements found by the Evaluator are shown as perspectives: both claims quoted, each with its citation.
Which sources are first-hand depends on the question: conversation memory for a question about the conversation
("What did I ask before?"), every other source otherwise; the others are quoted only when these have nothing on topic.
A question about the user's own facts ("what is my project code?") that the user answered themself is answered by
quoting them, newest statement first — ``You said: "my project code is BLUEFALCON-7731".`` — and nothing else
(memory/statements.py); the assistant's earlier answers are never quoted as the user's words.

The answer is labelled ``answer_kind="extractive"`` and its text opens with a line saying so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE
from researchcrew.contracts.evaluator import ContradictionRecord, ScoredChunk
from researchcrew.contracts.query import ResponseFormat
from researchcrew.contracts.synthesizer import (
    AnswerDraft,
    DraftClaim,
    DraftSection,
    SynthesizerInput,
    SynthesizerOutput,
)
from researchcrew.memory.statements import personal_question, stated_answers
from researchcrew.pipeline._sources import document_key
from researchcrew.pipeline._support import user_statement
from researchcrew.pipeline.progress import report_text
from researchcrew.pipeline.synthesize._citations import clean_text
from researchcrew.pipeline.synthesize._rendering import answer_pieces
from researchcrew.pipeline.synthesize.finalize import finalize
from researchcrew.pipeline.synthesize.prompts import length_bounds
from researchcrew.text.aspects import asked_aspect, names_aspect
from researchcrew.text.questions import asks_about_the_conversation
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import content_terms, term_set

SENTENCE_BUDGET: dict[ResponseFormat, int] = {"concise": 3, "detailed": 8, "technical": 10}
MMR_LAMBDA = 0.7
# A sentence naming the aspect asked for (limitations, advantages, causes; ``text.aspects``) ranks ahead of those
# that only repeat the subject, scaled by how much of the subject its passage names.
ASPECT_BONUS = 0.5
DUPLICATE_SIMILARITY = 0.6
_SCAN_CHARS = 20_000  # sentences beyond this point of a chunk are not considered (speed bound for huge pages)
_MIN_WORDS, _MAX_WORDS = 5, 80

_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)")
_EMPHASIS = re.compile(r"\*\*|__|`+")
_BULLET = re.compile(r"^(?:[-*+•>]|\d{1,3}[.)])\s+")


@dataclass
class _Sentence:
    text: str
    number: int  # the chunk's citation number (1-based position in the evidence)
    position: int  # index of the sentence within its chunk
    terms: frozenset[str]
    score: float = 0.0
    on_aspect: bool = False  # names the aspect the question asks for, in a passage about its subject


def _paragraphs(content: str) -> list[str]:
    """Markdown-ish text as paragraphs: headings dropped, links reduced to their text, bullets kept apart."""
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in _LINK.sub(r"\1", content[:_SCAN_CHARS]).splitlines():
        line = _EMPHASIS.sub("", raw).strip()
        if not line or line.startswith("#") or set(line) <= set("-=*_|: "):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        bullet = _BULLET.match(line)
        if bullet:
            if current:
                paragraphs.append(" ".join(current))
            current = [line[bullet.end() :]]
            continue
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


def quotable_sentences(content: str) -> list[str]:
    """Sentences of a chunk that can be quoted: Markdown reduced to paragraphs, each cut by the one splitter
    (``text.sentences``), so a quote keeps its closing quotation mark and is not cut after "e.g." or "Fig."."""
    return [sentence for paragraph in _paragraphs(content) for sentence in split_sentences(paragraph)]


def _usable(sentence: str) -> bool:
    words = sentence.split()
    if not _MIN_WORDS <= len(words) <= _MAX_WORDS:
        return False
    letters = sum(map(str.isalpha, sentence))
    return letters >= 0.5 * len(sentence) and not sentence.endswith(":")


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


@lru_cache(maxsize=2048)
def analysed_sentences(content: str) -> tuple[tuple[int, str, frozenset[str], bool], ...]:
    """The usable sentences of a chunk as (position, text, terms, has_number), independent of the query and
    cached by content: knowledge-base chunks come back across questions, and this is most of the work."""
    analysed = []
    for position, raw in enumerate(quotable_sentences(content)):
        text = clean_text(raw)[0]  # the source's own [n] footnotes must not become citations
        if _usable(text):
            analysed.append((position, text, frozenset(content_terms(text)), any(ch.isdigit() for ch in text)))
    return tuple(analysed)


def _candidates(request: SynthesizerInput, evidence: Sequence[ScoredChunk]) -> list[_Sentence]:
    """Scored sentences to pick from, in tiers: on-topic sentences of first-hand sources; else any on-topic
    sentences; else anything (off-topic sentences only when nothing is on topic).

    For a question about the conversation ("What did I ask before?") conversation memory is the first-hand source.
    For any other question it is second-hand: a recalled exchange restates an earlier question and an answer whose
    sentences were quoted from sources that, when they are in the evidence again, should be cited themselves.
    Quoting the memory instead put "The user asked earlier: <the same question>" at the top of a repeated
    question's answer.
    """
    question = request.original_query.text
    query = frozenset(content_terms(question))
    aspect = asked_aspect(question)  # "limitations", "advantages", "causes": synonyms and the singular count
    technical = request.response_format == "technical"
    sentences: list[_Sentence] = []
    subject = query - aspect  # what the aspect is asked of ("mutation testing"); often only the passage names it
    for number, scored in enumerate(evidence, start=1):
        bonus = 0.0
        if aspect:
            around = term_set(f"{scored.chunk.title or ''} {scored.chunk.content}")
            bonus = ASPECT_BONUS * (len(subject & around) / len(subject) if subject else 1.0)
        for position, text, terms, has_number in analysed_sentences(scored.chunk.content):
            names = names_aspect(text, aspect)
            if names:  # in the sentence's words: "drawback" answers "limitations" (the asked stem only, for MMR)
                terms = terms | (query & aspect)
            overlap = _overlap(query, terms, asked=bool(aspect) and query.isdisjoint(aspect), names=names)
            score = 0.65 * overlap + 0.25 * scored.quality_score + 0.10 / (1 + position)
            if names:
                score += bonus  # it names what was asked for, in a passage about what it was asked of
            if technical and has_number:
                score += 0.1
            sentences.append(_Sentence(text, number, position, terms, score, on_aspect=names and bonus > 0))
    about_the_conversation = asks_about_the_conversation(request.original_query.text)
    first_hand = {
        number
        for number, scored in enumerate(evidence, start=1)
        if (scored.chunk.source_type == MEMORY_SOURCE_TYPE) == about_the_conversation
    }
    on_topic = [s for s in sentences if query & s.terms or s.on_aspect]
    tier = [s for s in on_topic if s.number in first_hand] or on_topic or sentences
    return sorted(tier, key=lambda s: s.score, reverse=True)[:60]


def _overlap(query: frozenset[str], terms: frozenset[str], *, asked: bool, names: bool) -> float:
    """Share of the query's terms a sentence holds; ``asked``: the question asks for an aspect without a term for
    it ("Why ...?"), which then counts as one more term, held when the sentence ``names`` it."""
    wanted = len(query) + asked
    return (len(query & terms) + (asked and names)) / wanted if wanted else 0.0


def _select(candidates: list[_Sentence], budget: int, max_words: int, avoid: list[frozenset[str]]) -> list[_Sentence]:
    """Greedy MMR: relevance minus similarity to what is already picked; near-duplicates never picked."""
    picked: list[_Sentence] = []
    words = 0
    pool = list(candidates)
    while pool and len(picked) < budget:
        best, best_value = None, float("-inf")
        for sentence in pool:
            similarity = max((_jaccard(sentence.terms, t) for t in [*avoid, *(p.terms for p in picked)]), default=0.0)
            if similarity >= DUPLICATE_SIMILARITY:
                continue
            value = MMR_LAMBDA * sentence.score - (1 - MMR_LAMBDA) * similarity
            if value > best_value:
                best, best_value = sentence, value
        if best is None:
            break
        pool.remove(best)
        length = len(best.text.split())
        if picked and words + length > max_words:
            continue
        picked.append(best)
        words += length
    return picked


def _heading(scored: ScoredChunk, number: int) -> str:
    chunk = scored.chunk
    return clean_text(chunk.title)[0] if chunk.title else f"{chunk.source_type} source {number}"


def _document_key(scored: ScoredChunk) -> str:
    return document_key(scored.chunk)  # one section per source document, as one citation per source


def perspective_sections(
    contradictions: Sequence[ContradictionRecord], evidence: Sequence[ScoredChunk]
) -> list[DraftSection]:
    numbers = {scored.chunk.chunk_id: n for n, scored in enumerate(evidence, start=1)}
    sections: list[DraftSection] = []
    for record in contradictions:
        first, second = numbers.get(record.chunk_id_a), numbers.get(record.chunk_id_b)
        if first is None or second is None:
            continue
        subject = clean_text(record.subject)[0] if record.subject else ""
        heading = f"Sources disagree: {subject}" if subject else "Sources disagree"
        for index, (claim, number) in enumerate(((record.claim_a, first), (record.claim_b, second))):
            text = clean_text(claim)[0]
            if not text:
                continue
            scored = evidence[number - 1]
            label = f"{_heading(scored, number)} ({scored.chunk.source_type})"
            sections.append(
                DraftSection(
                    heading=heading if index == 0 else "",
                    perspective=label,
                    claims=[DraftClaim(text=text, citations=[number])],
                )
            )
    return sections


MAX_STATED = 3


def stated_claims(question: str, evidence: Sequence[ScoredChunk]) -> list[DraftClaim]:
    """For a question about the user's own facts: the user's statements in the evidence that answer it, quoted and
    cited, newest first (an older, different statement follows as "Before that, ..."). Empty otherwise."""
    asked = personal_question(question)
    if asked is None:
        return []
    found: list[tuple[float, int, str]] = []
    for number, scored in enumerate(evidence, start=1):
        said = user_statement(scored.chunk)
        if said is None or not stated_answers(said, asked):
            continue
        when = scored.chunk.source_date.timestamp() if scored.chunk.source_date else 0.0
        found.append((when, number, clean_text(said)[0]))
    found.sort(key=lambda item: (-item[0], item[1]))
    claims: list[DraftClaim] = []
    quoted: set[str] = set()
    for _, number, said in found:
        if said.casefold() in quoted or len(claims) >= MAX_STATED:
            continue
        quoted.add(said.casefold())
        lead = "You said" if not claims else "Before that, you said"
        claims.append(DraftClaim(text=f'{lead}: "{said}".', citations=[number]))
    return claims


def extractive_draft(request: SynthesizerInput, evidence: Sequence[ScoredChunk]) -> AnswerDraft:
    """The extractive answer as a draft whose citations index ``evidence`` (validated like any other draft)."""
    stated = stated_claims(request.original_query.text, evidence)
    if stated:
        return AnswerDraft(sections=[DraftSection(heading="", perspective=None, claims=stated)])
    bounds = length_bounds(request)
    perspectives = perspective_sections(request.contradictions, evidence)
    avoid = [frozenset(content_terms(claim.text)) for section in perspectives for claim in section.claims]
    budget = SENTENCE_BUDGET[request.response_format]
    picked = _select(_candidates(request, evidence), budget, bounds.high, avoid)
    if not picked and not perspectives and evidence:
        # Nothing sentence-like (tables, fragments): quote the start of the best chunk rather than say nothing.
        text = clean_text(" ".join(evidence[0].chunk.content.split()[:60]))[0]
        picked = [_Sentence(text, 1, 0, frozenset(), 0.0)] if text else []
    sections: list[DraftSection] = []
    if request.response_format == "concise" or not request.include_sections:
        ordered = sorted(picked, key=lambda s: -s.score) if request.response_format == "concise" else picked
        sections.append(DraftSection(heading="", perspective=None, claims=[_claim(s) for s in ordered]))
    else:
        groups: dict[str, list[_Sentence]] = {}
        for sentence in picked:  # picked is best first, so groups are created best first
            groups.setdefault(_document_key(evidence[sentence.number - 1]), []).append(sentence)
        for members in groups.values():
            members.sort(key=lambda s: (s.number, s.position))
            first = members[0].number
            sections.append(
                DraftSection(
                    heading=_heading(evidence[first - 1], first), perspective=None, claims=[_claim(s) for s in members]
                )
            )
    if not request.include_sections:
        for section in perspectives:
            section.heading = ""
    return AnswerDraft(sections=[section for section in sections if section.claims] + perspectives)


def _claim(sentence: _Sentence) -> DraftClaim:
    return DraftClaim(text=sentence.text, citations=[sentence.number])


class ExtractiveSynthesizer:
    """Answers without an LLM. Also the Flow's fast fallback when the deadline leaves no time for a model."""

    def __init__(self, *, max_evidence: int = 20) -> None:
        self.max_evidence = max_evidence

    async def run(self, request: SynthesizerInput) -> SynthesizerOutput:
        return self.answer(request)

    def answer(self, request: SynthesizerInput, caveats: Sequence[str] = ()) -> SynthesizerOutput:
        """Synchronous core (pure CPU, a few milliseconds): draft, validate, score."""
        started = time.perf_counter()
        evidence = request.filtered_context.chunks[: self.max_evidence]
        draft = extractive_draft(request, evidence)
        output = finalize(request, evidence, draft, answer_kind="extractive", caveats=list(caveats), started=started)
        for piece in answer_pieces(output.final_response.sections, answer_kind="extractive"):
            report_text(piece, writer="extractive", mode="section")
        return output
