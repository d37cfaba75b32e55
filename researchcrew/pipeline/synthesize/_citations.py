"""Citation markers and citation validation, run in code after synthesis.

An answer may only cite evidence that was given to the synthesizer. Validation:

* reads citation numbers from each claim (its ``citations`` list and any markers in its text: ``[1]``,
  ``[1, 2]``, ``[1-3]``, and common LLM variants ``【1】``, ``【1†source】``, ``[^1]``, ``[source 2]``);
* drops numbers that point to no given chunk and counts them (``CitationStats.removed``);
* removes a claim left with no valid citation (``claims_removed``), or in ``flag`` mode keeps it marked
  unsupported (``claims_flagged``) — it is never passed through as if supported;
* optionally trims the answer to a word budget at claim boundaries;
* renumbers the surviving citations densely in order of first use, one number per source document (passages of
  one document are one ``Citation`` with several locations, ``pipeline.sources``), and builds each from its chunks.

Square brackets are reserved for citation markers in rendered answers: brackets inside claim text become
parentheses, so no text can smuggle in a marker that validation did not produce.

Two entry points: ``validate_draft`` checks a fresh ``AnswerDraft`` whose numbers index the evidence list given to
the LLM; ``validate_citations`` re-checks a finished ``FinalResponse`` (numbers index its ``citations``) against
the evidence the Flow holds, and is idempotent.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE, ContextChunk
from researchcrew.contracts.evaluator import ScoredChunk
from researchcrew.contracts.synthesizer import (
    NO_ANSWER_KINDS,
    AnswerDraft,
    AnswerSection,
    Citation,
    CitationStats,
    CitedPassage,
    Claim,
    FinalResponse,
)
from researchcrew.pipeline._sources import combined_location, document_key, file_name, passage_location, source_label
from researchcrew.pipeline.synthesize._rendering import render_answer

logger = logging.getLogger(__name__)

ValidationMode = Literal["remove", "flag"]

_MAX_RANGE = 50  # [1-500] is not a citation anyone meant; only its end points are kept (and checked)
_NUMBER = r"\^?\s*\d{1,6}(?:\s*[-‐‑–—]\s*\d{1,6})?"
_LABEL = r"(?:(?:source|src|ref|reference|chunk|evidence|doc|document|citation|cite)s?\s*[#:.]?\s*)?"
MARKER_RE = re.compile(
    r"[\[【［]\s*(?:\^\s*)?" + _LABEL + _NUMBER + r"(?:\s*[,;]\s*" + _LABEL + _NUMBER + r")*"
    r"\s*(?:†[^\]】］\n]{0,40})?[\]】］]",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(r"(\d{1,6})(?:\s*[-‐‑–—]\s*(\d{1,6}))?")
_BRACKETS = str.maketrans({"[": "(", "]": ")", "【": "(", "】": ")", "［": "(", "］": ")"})


@dataclass(frozen=True)
class Marker:
    """One citation marker found in text: where it is and the numbers it names, in order."""

    start: int
    end: int
    numbers: tuple[int, ...]


def _numbers_in(marker_text: str) -> tuple[int, ...]:
    numbers: list[int] = []
    for match in _NUMBER_RE.finditer(marker_text):
        low = int(match.group(1))
        if match.group(2) is None:
            numbers.append(low)
            continue
        high = int(match.group(2))
        low, high = min(low, high), max(low, high)
        numbers.extend(range(low, high + 1) if high - low <= _MAX_RANGE else (low, high))
    return tuple(numbers)


def find_markers(text: str) -> list[Marker]:
    """Every citation marker in ``text``, left to right."""
    return [Marker(m.start(), m.end(), _numbers_in(m.group())) for m in MARKER_RE.finditer(text)]


def strip_markers(text: str) -> tuple[str, list[int]]:
    """``text`` without citation markers, and the numbers they named in order of appearance.

    Repeats until no marker is left, because removing one can join its neighbours into a new one
    (``[[1]2]`` → ``[2]``).
    """
    numbers: list[int] = []
    while markers := find_markers(text):
        pieces: list[str] = []
        position = 0
        for marker in markers:
            pieces.append(text[position : marker.start])
            numbers.extend(marker.numbers)
            position = marker.end
        pieces.append(text[position:])
        text = "".join(pieces)
    return text, numbers


def clean_text(text: str) -> tuple[str, list[int]]:
    """Claim or heading text ready to render: markers removed (numbers returned), brackets neutralised,
    whitespace collapsed, and the space a removed marker leaves before punctuation closed up."""
    stripped, numbers = strip_markers(text)
    cleaned = " ".join(stripped.translate(_BRACKETS).split())
    cleaned = re.sub(r"\s+([.,;:!?])", r"\1", cleaned)
    return cleaned, numbers


def _snippet(chunk: ContextChunk) -> str:
    snippet = " ".join(chunk.content.split())
    return snippet[:299].rstrip() + "…" if len(snippet) > 300 else snippet


def _position(chunk: ContextChunk) -> tuple[int, int]:
    page, position = chunk.metadata.get("page"), chunk.metadata.get("position")
    return (page if type(page) is int else 0, position if type(position) is int else 0)


def citation_for(number: int, chunk: ContextChunk | Sequence[ContextChunk]) -> Citation:
    """The numbered citation of one source: one evidence chunk, or several passages of the same document (one
    citation with several locations, see ``pipeline.sources``), with what a reader needs to find it."""
    passages = [chunk] if isinstance(chunk, ContextChunk) else list(chunk)
    if not passages:
        raise ValueError("a citation needs at least one passage")
    from_memory = passages[0].source_type == MEMORY_SOURCE_TYPE
    if len(passages) > 1 and not from_memory:
        passages.sort(key=_position)  # document order: page, then position
    first = passages[0]
    if from_memory:
        location = memory_location(first.metadata)
    elif len(passages) == 1:
        location = passage_location(first.metadata)
    else:
        location = combined_location(passage.metadata for passage in passages)
    return Citation(
        number=number,
        chunk_id=first.chunk_id,
        source_type=first.source_type,
        title=first.title,
        url=first.url,
        source_id=first.source_id,
        source_date=first.source_date,
        authors=list(first.authors),
        snippet=_snippet(first),
        location=location[:600] if location else None,
        passages=[
            CitedPassage(
                chunk_id=passage.chunk_id,
                location=memory_location(passage.metadata) if from_memory else passage_location(passage.metadata),
                snippet=_snippet(passage),
            )
            for passage in passages
        ],
        file_name=(file_name(first) or "")[:1_000] or None,
        label=(source_label(first) or "")[:4_000] or None,
    )


def memory_location(metadata: Mapping[str, object]) -> str | None:
    """Which conversation a recalled exchange comes from, from a memory chunk's metadata (tools/memory_recall.py).

    A person reading the Sources list cannot use the stored answer's id; "earlier in this conversation" tells them
    where to look. The user's own statement of a fact is cited as theirs: "you said, earlier in this conversation".
    """
    if metadata.get("origin") == "entity_graph":
        return "entities from your earlier conversations"
    said = "you said, " if metadata.get("recalled_as") == "user_statement" else ""
    same_session = metadata.get("same_session")
    if same_session is True:
        return said + "earlier in this conversation"
    if same_session is False:
        session_id = metadata.get("session_id")
        named = f" (session {session_id})" if isinstance(session_id, str) and session_id.strip() else ""
        return said + ("in an earlier conversation" if said else "an earlier conversation") + named
    return None


def as_context_chunks(chunks: Iterable[ContextChunk | ScoredChunk]) -> list[ContextChunk]:
    return [item.chunk if isinstance(item, ScoredChunk) else item for item in chunks]


@dataclass
class ValidatedAnswer:
    """Sections whose every claim cites given evidence, the densely numbered citations, and the counts."""

    sections: list[AnswerSection]
    citations: list[Citation]
    stats: CitationStats
    trimmed_claims: int = 0
    cited_chunk_ids: list[str] = field(default_factory=list)


@dataclass
class _PendingClaim:
    text: str
    keys: list[str]  # chunk ids of valid citations, in the claim's order
    confidence: float | None
    flagged: bool


@dataclass
class _PendingSection:
    heading: str
    perspective: str | None
    claims: list[_PendingClaim]


def _unique(values: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(values))


def _resolve(
    numbers: list[int], lookup: dict[int, list[str]], mode: ValidationMode, stats: CitationStats
) -> tuple[list[str], bool] | None:
    """Valid chunk ids for a claim's numbers and whether it is flagged; None when the claim must go."""
    keys: list[str] = []
    for number in _unique(numbers):
        found = lookup.get(number)
        if not found:
            stats.removed += 1
            continue
        keys.extend(key for key in found if key not in keys)
    if keys:
        return keys, False
    if mode == "flag":
        return [], True
    stats.claims_removed += 1
    return None


def validate_draft(
    draft: AnswerDraft,
    given_chunks: Sequence[ContextChunk | ScoredChunk],
    *,
    mode: ValidationMode = "remove",
    max_words: int | None = None,
) -> ValidatedAnswer:
    """Check a fresh draft whose citation numbers [n] index ``given_chunks`` (1-based, the order of the prompt)."""
    chunks = as_context_chunks(given_chunks)
    lookup = {number: [chunk.chunk_id] for number, chunk in enumerate(chunks, start=1)}
    stats = CitationStats()
    pending: list[_PendingSection] = []
    for section in draft.sections:
        claims: list[_PendingClaim] = []
        for claim in section.claims:
            text, inline = clean_text(claim.text)
            if not text:
                continue  # nothing left to say: a bare marker is not a claim
            resolved = _resolve([*claim.citations, *inline], lookup, mode, stats)
            if resolved is not None:
                claims.append(_PendingClaim(text, resolved[0], None, resolved[1]))
        pending.append(_PendingSection(clean_text(section.heading)[0], _clean_label(section.perspective), claims))
    return _assemble(pending, chunks, stats, max_words)


def validate_citations(
    response: FinalResponse,
    given_chunks: Sequence[ContextChunk | ScoredChunk],
    *,
    mode: ValidationMode = "remove",
    max_words: int | None = None,
) -> FinalResponse:
    """Re-check a finished answer against the evidence that was given: the Flow's "validate citations" stage.

    A citation is valid when its number is listed in ``response.citations`` and its chunks (one per cited passage)
    are among ``given_chunks``; passages that are not are dropped from it. Counts of removed citations and claims
    add to those already in ``response.citation_stats``; ``valid`` and ``claims_flagged`` describe the returned
    answer. Applying it twice changes nothing the second time. Answers that claim nothing (uncertainty, refusal,
    clarification) are returned unchanged.
    """
    if response.answer_kind in NO_ANSWER_KINDS:
        return response
    chunks = as_context_chunks(given_chunks)
    given_ids = {chunk.chunk_id for chunk in chunks}
    lookup = {c.number: [i for i in c.chunk_ids if i in given_ids] for c in response.citations}
    stats = CitationStats()
    pending: list[_PendingSection] = []
    for section in response.sections:
        claims: list[_PendingClaim] = []
        for claim in section.claims:
            text, inline = clean_text(claim.text)
            if not text:
                continue
            resolved = _resolve([*claim.citations, *inline], lookup, mode, stats)
            if resolved is not None:
                claims.append(_PendingClaim(text, resolved[0], claim.confidence, resolved[1] or claim.flagged))
        pending.append(_PendingSection(clean_text(section.heading)[0], _clean_label(section.perspective), claims))
    validated = _assemble(pending, chunks, stats, max_words)
    previous = response.citation_stats
    validated.stats.removed += previous.removed
    validated.stats.claims_removed += previous.claims_removed
    if validated.stats.removed > previous.removed or validated.stats.claims_removed > previous.claims_removed:
        logger.warning(
            "citation validation removed %d citation(s) and %d claim(s) from answer %s",
            validated.stats.removed - previous.removed,
            validated.stats.claims_removed - previous.claims_removed,
            response.response_id,
        )
    return response.model_copy(
        update={
            "sections": validated.sections,
            "citations": validated.citations,
            "citation_stats": validated.stats,
            "answer": render_answer(validated.sections, answer_kind=response.answer_kind),
        }
    )


def _clean_label(label: str | None) -> str | None:
    if label is None:
        return None
    cleaned = clean_text(label)[0]
    return cleaned or None


def _assemble(
    pending: list[_PendingSection], chunks: list[ContextChunk], stats: CitationStats, max_words: int | None
) -> ValidatedAnswer:
    trimmed = _trim(pending, max_words) if max_words is not None else 0
    by_id: dict[str, ContextChunk] = {}
    for chunk in chunks:
        by_id.setdefault(chunk.chunk_id, chunk)
    # One source, one citation: passages of the same document share a number (numbered in order of first use).
    numbers: dict[str, int] = {}
    passages: dict[str, list[str]] = {}
    sections: list[AnswerSection] = []
    for section in pending:
        claims: list[Claim] = []
        for claim in section.claims:
            cited: list[int] = []
            for key in claim.keys:
                document = document_key(by_id[key])
                number = numbers.setdefault(document, len(numbers) + 1)
                if key not in passages.setdefault(document, []):
                    passages[document].append(key)
                if number not in cited:
                    cited.append(number)
            stats.valid += len(cited)
            stats.claims_flagged += int(claim.flagged)
            claims.append(Claim(text=claim.text, citations=cited, confidence=claim.confidence, flagged=claim.flagged))
        if claims:
            sections.append(AnswerSection(heading=section.heading, perspective=section.perspective, claims=claims))
    citations = [
        citation_for(number, [by_id[key] for key in passages[document]]) for document, number in numbers.items()
    ]
    cited_ids = [key for document in numbers for key in passages[document]]
    return ValidatedAnswer(sections, citations, stats, trimmed, cited_ids)


def _words(text: str) -> int:
    return len(text.split())


def _trim(pending: list[_PendingSection], max_words: int) -> int:
    """Drop trailing claims until the answer fits ``max_words``; claims presenting a perspective go last, and
    the first claim always stays (cut at a word boundary if it alone is too long). Returns claims dropped."""
    total = sum(_words(claim.text) for section in pending for claim in section.claims)
    dropped = 0
    for perspective_pass in (False, True):
        for section in reversed(pending):
            if (section.perspective is not None) != perspective_pass:
                continue
            while section.claims and total > max_words:
                if sum(len(s.claims) for s in pending) == 1:
                    break
                total -= _words(section.claims.pop().text)
                dropped += 1
    if total > max_words:
        only = next(claim for section in pending for claim in section.claims)
        only.text = " ".join(only.text.split()[:max_words]).rstrip(",;:") + "…"
    return dropped
