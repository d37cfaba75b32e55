"""Extractive summaries by sentence centrality (offline, no model beyond the chunks' own vectors).

A long document's chunks are read back from the knowledge base *with their vectors* (already computed at ingest),
so choosing what to keep costs no embedding, and neither does a summary's vector (by default the unit mean of the
chunks it summarises: what the section is about; ``settings.structured.summary_vectors``):

* a chunk's centrality is the cosine of its vector to the centroid of the chunks summarised (the section's, or the
  whole document's): how typical it is of what they are about;
* a sentence's centrality is its chunk's, plus the cosine of its words to the words of all the other sentences
  summarised (the lexical centroid: TextRank's "similar to many others", in one pass instead of a graph);
* the most central sentences are kept up to a character budget, near-duplicates skipped (chunks overlap), and shown
  in reading order.

Sections are Markdown headings (HTML h1-h3 arrive as Markdown headings; ``loaders/_html.py``) and PDF pages (one
document per page, keyed ``file#page=N``); a document without either gets its whole-document summary only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import STOP_WORDS, stem, term_words

DOCUMENT_CHARS = 1_200  # a whole document's summary: ~8 sentences, one embedder window
SECTION_CHARS = 600  # a section's: ~4 sentences
MIN_SENTENCE_WORDS = 5  # shorter "sentences" (captions, list stubs) are kept only when nothing else is there
DUPLICATE_OVERLAP = 0.6  # word overlap (Jaccard) above which a sentence repeats one already kept


@dataclass(frozen=True)
class Passage:
    """A chunk as stored: where it sits and its vector (unit length, as the embedder returns it)."""

    chunk_id: str
    source_key: str
    doc_id: str
    heading: str
    position: int
    text: str
    vector: np.ndarray


@dataclass
class Summary:
    """One summary: of a whole document (``heading`` and ``section_key`` empty) or of one of its sections."""

    kind: Literal["document", "section"]
    source_key: str  # the document's (for a PDF page: the page's) source key; "" for a whole multi-page PDF
    heading: str  # the section heading exactly as the chunks store it ("" for a page or a whole document)
    text: str
    chunks: int
    centrality: float = 0.0
    pages: list[int] = field(default_factory=list)
    centroid: np.ndarray | None = None  # unit mean of the summarised chunks' vectors: what the summary is about


def sections(passages: Sequence[Passage]) -> list[tuple[str, str, list[Passage]]]:
    """(source key, heading, passages) per section in reading order: a heading within a document, or a PDF page."""
    grouped: dict[tuple[str, str], list[Passage]] = {}
    for passage in passages:
        grouped.setdefault((passage.source_key, passage.heading), []).append(passage)
    return [(key, heading, items) for (key, heading), items in grouped.items()]


def centroid_of(passages: Sequence[Passage]) -> np.ndarray:
    """The unit mean of the passages' vectors (zeros when they cancel out)."""
    mean: np.ndarray = np.stack([passage.vector for passage in passages]).astype(np.float32).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    unit: np.ndarray = mean / norm if norm > 0 else mean
    return unit


def summarise(passages: Sequence[Passage], *, budget: int) -> tuple[str, float]:
    """The most central sentences of ``passages`` (in reading order) within ``budget`` characters, and the mean
    centrality of the chunks they came from."""
    if not passages:
        return "", 0.0
    vectors = np.stack([passage.vector for passage in passages]).astype(np.float32)
    chunk_centrality = vectors @ centroid_of(passages)
    candidates: list[tuple[int, int, str, frozenset[str], float]] = []  # (chunk, order, text, stems, score)
    seen: set[str] = set()
    for index, passage in enumerate(passages):
        for order, sentence in enumerate(split_sentences(passage.text)):
            text = " ".join(sentence.split())
            if not text or text in seen or text.startswith("|"):  # table rows are the annotations' business
                continue
            seen.add(text)
            words = term_words(text)
            stems = frozenset(stem(word) for word in words if word.lower() not in STOP_WORDS)
            stub = 1.0 if len(words) < MIN_SENTENCE_WORDS else 0.0
            candidates.append((index, order, text, stems, float(chunk_centrality[index]) - stub))
    if not candidates:
        return "", 0.0
    lexical = _lexical_centrality([stems for _, _, _, stems, _ in candidates])
    scored = sorted(
        range(len(candidates)),
        key=lambda i: (
            -(candidates[i][4] + lexical[i]),
            candidates[i][0],
            candidates[i][1],
        ),
    )
    kept: list[int] = []
    used = 0
    for i in scored:
        text, bag = candidates[i][2], candidates[i][3]
        if kept and used + len(text) + 1 > budget:
            continue
        if any(_overlap(bag, candidates[j][3]) > DUPLICATE_OVERLAP for j in kept):
            continue
        kept.append(i)
        used += len(text) + 1
        if used >= budget:
            break
    kept.sort(key=lambda i: (passages[candidates[i][0]].position, candidates[i][1]))
    text = " ".join(candidates[i][2] for i in kept)
    if len(text) > budget:  # one sentence longer than the whole budget
        text = text[: budget - 1].rstrip() + "…"
    chosen = {candidates[i][0] for i in kept}
    return text, float(np.mean([chunk_centrality[i] for i in chosen])) if chosen else 0.0


def _lexical_centrality(bags: Sequence[frozenset[str]]) -> list[float]:
    """How much of each sentence's vocabulary the *other* sentences share: the cosine of its words to the word
    counts of all the sentences but itself (a word only it uses adds nothing)."""
    frequency: Counter[str] = Counter()
    for bag in bags:
        frequency.update(bag)
    scores: list[float] = []
    for bag in bags:
        if not bag:
            scores.append(0.0)
            continue
        shared = [frequency[word] - 1 for word in bag]
        others = math.sqrt(sum((count - (word in bag)) ** 2 for word, count in frequency.items())) or 1.0
        scores.append(sum(shared) / (math.sqrt(len(bag)) * others))
    return scores


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def document_summaries(passages: Sequence[Passage]) -> list[Summary]:
    """The whole document's summary and, when it has more than one section, one per section (reading order)."""
    ordered = sorted(passages, key=lambda p: (_page(p.source_key), p.position))
    keys = {passage.source_key for passage in ordered}
    text, centrality = summarise(ordered, budget=DOCUMENT_CHARS)
    whole = Summary(
        kind="document",
        source_key=next(iter(keys)) if len(keys) == 1 else "",
        heading="",
        text=text,
        chunks=len(ordered),
        centrality=centrality,
        pages=sorted({page for key in keys if (page := _page(key))}),
        centroid=centroid_of(ordered),
    )
    found = [whole] if text else []
    parts = sections(ordered)
    if len(parts) < 2:
        return found
    for key, heading, items in parts:
        text, centrality = summarise(items, budget=SECTION_CHARS)
        if text:
            page = _page(key)
            found.append(
                Summary(
                    kind="section",
                    source_key=key,
                    heading=heading,
                    text=text,
                    chunks=len(items),
                    centrality=centrality,
                    pages=[page] if page else [],
                    centroid=centroid_of(items),
                )
            )
    return found


def _page(source_key: str) -> int:
    """The page number of a PDF page's source key (``file#page=N``), else 0."""
    head, separator, number = source_key.rpartition("#page=")
    return int(number) if separator and head and number.isdigit() else 0


__all__ = ["Passage", "Summary", "centroid_of", "document_summaries", "sections", "summarise"]
