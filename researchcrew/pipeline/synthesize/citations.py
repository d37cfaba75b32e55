"""Citation markers and citation validation, run in code after synthesis.

An answer may only cite evidence that was given to the synthesizer. Validation:

* reads citation numbers from each claim (its ``citations`` list and any markers in its text: ``[1]``,
  ``[1, 2]``, ``[1-3]``, and common LLM variants ``【1】``, ``【1†source】``, ``[^1]``, ``[source 2]``);
* drops numbers that point to no given chunk and counts them (``CitationStats.removed``);
* removes a claim left with no valid citation (``claims_removed``), or in ``flag`` mode keeps it marked
  unsupported (``claims_flagged``) — it is never passed through as if supported;
* optionally trims the answer to a word budget at claim boundaries;
* renumbers the surviving citations densely in order of first use and builds each ``Citation`` from the chunk.

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
    Claim,
    FinalResponse,
)
from researchcrew.pipeline.synthesize.rendering import render_answer

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


def citation_for(number: int, chunk: ContextChunk) -> Citation:
    """The numbered citation of one evidence chunk, with what a reader needs to find the source."""
    snippet = " ".join(chunk.content.split())
    if len(snippet) > 300:
        snippet = snippet[:299].rstrip() + "…"
    from_memory = chunk.source_type == MEMORY_SOURCE_TYPE
    return Citation(
        number=number,
        chunk_id=chunk.chunk_id,
        source_type=chunk.source_type,
        title=chunk.title,
        url=chunk.url,
        source_id=chunk.source_id,
        source_date=chunk.source_date,
        authors=list(chunk.authors),
        snippet=snippet,
        location=memory_location(chunk.metadata) if from_memory else passage_location(chunk.metadata),
    )


def passage_location(metadata: Mapping[str, object]) -> str | None:
    """Where a knowledge-base passage sits, "§ heading, passage n of m", from its chunk's metadata; None when it
    says nothing useful.

    Only what the chunk carries is shown: a single-passage document without a heading has no location worth
    printing, and other tools' metadata (without these keys) gives None.
    """
    parts: list[str] = []
    heading = metadata.get("heading")
    if isinstance(heading, str) and heading.strip():
        parts.append("§ " + " ".join(heading.split())[:200])
    position, count = metadata.get("position"), metadata.get("chunk_count")
    if type(position) is int and type(count) is int and 0 <= position < count and count > 1:  # bool is no count
        parts.append(f"passage {position + 1} of {count}")
    return ", ".join(parts) or None


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
    numbers: list[int], lookup: dict[int, str], mode: ValidationMode, stats: CitationStats
) -> tuple[list[str], bool] | None:
    """Valid chunk ids for a claim's numbers and whether it is flagged; None when the claim must go."""
    keys: list[str] = []
    for number in _unique(numbers):
        key = lookup.get(number)
        if key is None:
            stats.removed += 1
        elif key not in keys:
            keys.append(key)
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
    lookup = {number: chunk.chunk_id for number, chunk in enumerate(chunks, start=1)}
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

    A citation is valid when its number is listed in ``response.citations`` and that citation's chunk is among
    ``given_chunks``. Counts of removed citations and claims add to those already in ``response.citation_stats``;
    ``valid`` and ``claims_flagged`` describe the returned answer. Applying it twice changes nothing the second
    time. Answers that claim nothing (uncertainty, refusal, clarification) are returned unchanged.
    """
    if response.answer_kind in NO_ANSWER_KINDS:
        return response
    chunks = as_context_chunks(given_chunks)
    given_ids = {chunk.chunk_id for chunk in chunks}
    lookup = {c.number: c.chunk_id for c in response.citations if c.chunk_id in given_ids}
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
    numbers: dict[str, int] = {}
    sections: list[AnswerSection] = []
    for section in pending:
        claims: list[Claim] = []
        for claim in section.claims:
            cited = [numbers.setdefault(key, len(numbers) + 1) for key in claim.keys]
            stats.valid += len(cited)
            stats.claims_flagged += int(claim.flagged)
            claims.append(Claim(text=claim.text, citations=cited, confidence=claim.confidence, flagged=claim.flagged))
        if claims:
            sections.append(AnswerSection(heading=section.heading, perspective=section.perspective, claims=claims))
    citations = [citation_for(number, by_id[key]) for key, number in numbers.items()]
    return ValidatedAnswer(sections, citations, stats, trimmed, list(numbers))


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
