"""Cutting documents into chunks that fit the embedder, at natural boundaries.

A document's text is Markdown-ish (headings as ``#`` lines, paragraphs separated by blank lines). The chunker

1. splits it into sections at headings; a chunk never spans two sections, so its ``heading`` is exact;
2. splits sections into sentences (``text.sentences``, the one splitter; paragraph and line breaks remembered),
   and a sentence longer than a whole chunk into word-piece windows;
3. packs sentences into windows that, *together with the context header* (document title and section heading,
   see ``indexed_text``), fit the model's input: all-MiniLM-L6-v2 reads 256 word pieces including ``[CLS]`` and
   ``[SEP]`` and silently drops the rest. Windows in a section are balanced (a 300-piece abstract becomes two
   halves, not 230 + 70), prefer to break at paragraph ends, and repeat the last sentence(s) of the previous
   window (``overlap_tokens``) so a statement cut by a boundary is still whole in one chunk.

Sizes are counted with the model's own tokenizer (``TokenCounter``), and every finished chunk that comes near the
limit is re-counted as a whole, so the limit holds even where the piece-count arithmetic would be off by one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from researchcrew.knowledge._tokens import TokenCounter
from researchcrew.knowledge.documents import Chunk, Document
from researchcrew.text.sentences import split_sentences

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
# Chunks whose estimated size is this many word pieces or more below the limit are not counted again whole.
RECOUNT_MARGIN = 16


def indexed_text(title: str | None, heading: str | None, body: str) -> str:
    """What is embedded and BM25-indexed for a chunk: a context header (title, heading) and the chunk body.

    The header makes a passage from the middle of a paper findable by what the paper is about, for the dense
    model and for BM25 alike; the body alone is what a reader is shown.
    """
    header = [part for part in (title, heading) if part]
    if len(header) == 2 and header[0].strip().lower() == header[1].strip().lower():
        header = header[:1]
    return "\n".join([*header, body]) if header else body


def keyword_text(
    title: str | None, heading: str | None, bodies: Sequence[str], position: int, *, radius: int = 1
) -> str:
    """What BM25 indexes for the chunk at ``position``: its context header, and its body between its neighbours'.

    Keywords are matched over a wider window than the dense model reads: a passage is the answer to a query
    whose terms are spread over it and the text around it (the method in one chunk, the result in the next).
    The dense vector stays the chunk's own, since all-MiniLM-L6-v2 was trained on short texts and blurs long ones.
    ``radius`` 1 (a neighbour each side) measured best on SciFact (benchmarks/retrieval_ablation.py).
    """
    window = bodies[max(0, position - radius) : position + radius + 1]
    return indexed_text(title, heading, "\n".join(window))


def keyword_texts(
    chunks: Sequence[tuple[str | None, str | None, str]], analyze: Callable[[str], str] | None = None
) -> list[str]:
    """``keyword_text`` for every chunk of one document, given as (title, heading, body) in reading order.

    With ``analyze`` (``Analyzer.analyze``), each title, heading and body is analysed once and the analysed pieces
    are joined: the same terms as analysing each keyword text whole (analysis works token by token, and pieces are
    joined at line breaks), for a third of the work, since every body is part of three keyword texts.
    """
    cache: dict[str, str] = {}

    def prepared(text: str | None) -> str | None:
        if not text or analyze is None:
            return text
        if text not in cache:
            cache[text] = analyze(text)
        return cache[text]

    bodies = [prepared(body) or "" for _, _, body in chunks]
    return [
        keyword_text(prepared(title), prepared(heading), bodies, position)
        for position, (title, heading, _) in enumerate(chunks)
    ]


@dataclass
class _Unit:
    """A sentence (or a window of an over-long one), its size, and what separates it from the unit before."""

    text: str
    tokens: int
    separator: str  # "\n\n" opens a paragraph, "\n" a line within one, " " continues a line
    carried: bool = False  # repeated from the previous window as overlap

    @property
    def opens_paragraph(self) -> bool:
        return self.separator == "\n\n"


@dataclass
class _Section:
    heading: str | None
    paragraphs: list[str] = field(default_factory=list)


class Chunker:
    """Turns a ``Document`` into ``Chunk`` objects whose ``indexed_text`` fits in ``max_tokens`` word pieces."""

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_tokens: int = 256,
        overlap_tokens: int = 32,
        header_max_tokens: int = 64,
    ) -> None:
        budget = max_tokens - counter.special_tokens
        if budget < 32:
            raise ValueError(f"max_tokens={max_tokens} leaves too little room for text")
        self.counter = counter
        self.max_tokens = max_tokens
        self.overlap_tokens = max(0, min(overlap_tokens, budget // 4))
        self.header_max_tokens = min(header_max_tokens, budget // 3)
        self._budget = budget  # pieces available for header + body

    # Public ----------------------------------------------------------------------------------------------------
    def chunk(self, document: Document) -> list[Chunk]:
        """The document's chunks in reading order (``position`` 0, 1, ...). Blank documents give none."""
        title = self._clip(document.title.strip()) if document.title and document.title.strip() else None
        sections = _sections(document.text)
        if not any(section.paragraphs for section in sections):
            # Nothing but headings: index them as the text rather than lose the document.
            headings = [section.heading for section in sections if section.heading]
            sections = [_Section(heading=None, paragraphs=["\n".join(headings)])] if headings else []
        estimated: list[tuple[str | None, str, int]] = []
        for section in sections:
            heading = self._clip(section.heading) if section.heading else None
            header_tokens = self.counter.count(indexed_text(title, heading, "x")) - 1 if (title or heading) else 0
            body_budget = max(16, self._budget - header_tokens - 1)
            for body, body_tokens in self._pack(self._units(section.paragraphs, body_budget), body_budget):
                estimated.append((heading, body, header_tokens + 1 + body_tokens))
        bodies = self._enforce_limit(title, estimated)
        doc_id = document.doc_id
        return [
            Chunk(
                chunk_id=f"{doc_id}:{position}",
                doc_id=doc_id,
                source_key=document.source_key,
                text=body,
                position=position,
                heading=heading,
                title=document.title,
                url=document.url,
                source_date=document.source_date,
                authors=list(document.authors),
                metadata=dict(document.metadata),
            )
            for position, (heading, body) in enumerate(bodies)
        ]

    def fits(self, text: str) -> bool:
        """True when ``text`` plus the special tokens fits the model's input."""
        return self.counter.count(text) + self.counter.special_tokens <= self.max_tokens

    # Steps -----------------------------------------------------------------------------------------------------
    def _clip(self, text: str) -> str:
        """Keep a title/heading to ``header_max_tokens`` pieces so that the body always has room."""
        text = " ".join(text.split())
        if self.counter.count(text) <= self.header_max_tokens:
            return text
        span = self.counter.windows(text, self.header_max_tokens)[0]
        return text[span.start : span.end]

    def _units(self, paragraphs: list[str], budget: int) -> list[_Unit]:
        sentences: list[tuple[str, str]] = []
        for paragraph in paragraphs:
            for line_index, line in enumerate(paragraph.split("\n")):
                for index, sentence in enumerate(split_sentences(line)):
                    separator = " " if index else "\n" if line_index else "\n\n"
                    sentences.append((sentence, separator))
        counts = self.counter.count_many([sentence for sentence, _ in sentences])
        units: list[_Unit] = []
        for (sentence, separator), tokens in zip(sentences, counts, strict=True):
            if tokens <= budget:
                units.append(_Unit(sentence, tokens, separator))
                continue
            for index, span in enumerate(self.counter.windows(sentence, budget)):
                piece = sentence[span.start : span.end]
                units.append(_Unit(piece, self.counter.count(piece), separator if index == 0 else " "))
        return units

    def _pack(self, units: list[_Unit], budget: int) -> list[tuple[str, int]]:
        """Greedy packing towards a balanced target size, with sentence overlap between windows.

        Returns each window's text and its size by the sum of its units' counts.
        """
        if not units:
            return []
        total = sum(unit.tokens for unit in units)
        if total <= budget:
            return [(_join(units), total)]
        step = max(1, budget - self.overlap_tokens)
        windows = math.ceil((total - self.overlap_tokens) / step)
        target = min(budget, math.ceil(total / windows) + self.overlap_tokens)
        chunks: list[list[_Unit]] = []
        current: list[_Unit] = []
        size = 0
        rest = total  # tokens not yet placed, this unit included
        for unit in units:
            fresh = size - self._carried(current)  # tokens of new material in the current window
            # Past the target, break once the window holds enough new material; at a paragraph start, a little
            # earlier (a window that ends with its paragraph reads better than one that ends mid-thought). Never
            # break when everything left fits in this window: that would leave a stub.
            enough = fresh >= (target // 3 if unit.opens_paragraph else target // 2)
            soft_break = size + unit.tokens > target and enough and size + rest > budget
            rest -= unit.tokens
            if current and (size + unit.tokens > budget or soft_break):
                chunks.append(current)
                current = self._overlap(current, unit.tokens, budget)
                size = sum(item.tokens for item in current)
            current.append(unit)
            size += unit.tokens
        if current and (not chunks or size > self._carried(current)):
            chunks.append(current)
        return [(_join(chunk), sum(unit.tokens for unit in chunk)) for chunk in chunks]

    def _overlap(self, previous: list[_Unit], next_tokens: int, budget: int) -> list[_Unit]:
        carried: list[_Unit] = []
        size = 0
        for unit in reversed(previous):
            if size + unit.tokens > self.overlap_tokens or size + unit.tokens + next_tokens > budget:
                break
            carried.insert(0, _Unit(unit.text, unit.tokens, unit.separator, carried=True))
            size += unit.tokens
        return carried

    @staticmethod
    def _carried(units: list[_Unit]) -> int:
        return sum(unit.tokens for unit in units if unit.carried)

    def _enforce_limit(
        self, title: str | None, estimated: list[tuple[str | None, str, int]]
    ) -> list[tuple[str | None, str]]:
        """Re-count the chunks whose estimated size comes near the limit; cut any that is too long.

        The estimate (header + the sum of the sentences' counts) is exact for WordPiece tokenizers, which split at
        whitespace first; other tokenizers can differ by a piece per sentence boundary. So a chunk estimated at
        ``RECOUNT_MARGIN`` or more below the limit is taken as it is, and only the others are counted again whole
        (half of all tokenizing work went to re-counting chunks nowhere near the limit).
        """
        limit = self._budget
        near = [index for index, (_, _, tokens) in enumerate(estimated) if tokens > limit - RECOUNT_MARGIN]
        recounted = self.counter.count_many([indexed_text(title, estimated[i][0], estimated[i][1]) for i in near])
        counts = [tokens for _, _, tokens in estimated]
        for index, tokens in zip(near, recounted, strict=True):
            counts[index] = tokens
        result: list[tuple[str | None, str]] = []
        for (heading, body, _), tokens in zip(estimated, counts, strict=True):
            if tokens <= limit:
                result.append((heading, body))
                continue
            overflow = tokens - limit
            room = max(1, self.counter.count(body) - overflow - 2)
            for span in self.counter.windows(body, room):
                piece = body[span.start : span.end]
                while piece and self.counter.count(indexed_text(title, heading, piece)) > limit:
                    piece = piece[: max(0, len(piece) - max(1, len(piece) // 20))].rstrip()
                if piece:
                    result.append((heading, piece))
        return result


def _join(units: list[_Unit]) -> str:
    parts: list[str] = []
    for index, unit in enumerate(units):
        if index:
            parts.append(unit.separator)
        parts.append(unit.text)
    return "".join(parts).strip()


def _sections(text: str) -> list[_Section]:
    sections = [_Section(heading=None)]
    paragraph: list[str] = []

    def close_paragraph() -> None:
        if paragraph:
            joined = "\n".join(paragraph).strip()
            if joined:
                sections[-1].paragraphs.append(joined)
            paragraph.clear()

    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            close_paragraph()
            sections.append(_Section(heading=match.group(2).strip()))
        elif line.strip():
            paragraph.append(line.rstrip())
        else:
            close_paragraph()
    close_paragraph()
    return [section for section in sections if section.paragraphs or section.heading]
