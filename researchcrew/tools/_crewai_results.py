"""What a crewAI tool returned, as passages researchcrew can score, deduplicate, cross-check and cite.

crewAI tools answer with whatever suits an LLM: a dict (Serper), a JSON string (Tavily, Brave, EXA), scraped page
text (ScrapeWebsiteTool), or the "Relevant Content:" blocks of crewai-tools' RAG search tools (PDF, TXT, CSV,
DOCX ... search). A parser turns one of those shapes into ``Passage``s; ``parse_result`` picks the parser from the
shape of the value, and a source can name its own (``from_crewai(..., parser=...)``).

* ``search_results``: a list of records (title, URL, snippet or content, date, score), top-level or under one of
  the keys search APIs use (``results``, ``organic``, ``news``, ``web.results``, ``items``, ``data`` ...).
* ``document_search``: crewai-tools' RAG tools — "Relevant Content:" followed by passages separated by blank lines.
* ``page_text``: one page or document as text, cut into paragraph-sized passages and ranked by how many of the
  query's words each holds (a scraper returns the whole page; the question is about part of it).

A value that is none of these is a ``bad_response`` (``UnreadableResult``), never a guess.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from researchcrew.knowledge.loaders.dates import parse_date
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import content_terms, term_set

# Where search APIs put their result list (the first that holds records wins), and the fields of one record.
_RESULT_KEYS = ("results", "organic", "news", "web", "items", "data", "documents", "hits", "articles", "papers")
_TITLE_KEYS = ("title", "name", "headline")
_URL_KEYS = ("url", "link", "href", "source_url", "pdf_url", "entry_id")
_TEXT_KEYS = (
    "content", "raw_content", "text", "snippet", "description", "summary", "body", "abstract", "extra_snippets"
)  # fmt: skip
_DATE_KEYS = ("published_date", "publishedDate", "date", "published", "page_age", "updated", "created_at")
_SCORE_KEYS = ("score", "relevance_score", "relevance")

PASSAGE_CHARS = 1_500  # page text is cut into passages of about this size (at paragraph, else sentence, boundaries)
MAX_PASSAGES = 50  # what one call may contribute, whatever a tool returned
_RELEVANT_CONTENT = re.compile(r"^\s*relevant content\s*:\s*", re.IGNORECASE)
# The line scrapers put before a page ("The following text is scraped website content:").
_SCRAPE_PREAMBLE = re.compile(r"^\s*the following text is [^:\n]{0,80}:\s*", re.IGNORECASE)


class UnreadableResult(ValueError):
    """The tool's output has none of the shapes a parser reads."""


@dataclass(frozen=True)
class Passage:
    """One piece of evidence from a crewAI tool, before it becomes a ``ContextChunk``."""

    text: str
    title: str | None = None
    url: str | None = None
    date: datetime | None = None
    score: float | None = None  # the tool's own relevance in [0, 1], when it gives one
    metadata: dict[str, Any] = field(default_factory=dict)


Parser = Callable[[Any, str], list[Passage]]
"""``parser(output, query) -> passages`` (best first). Raises ``UnreadableResult`` for output it cannot read."""


def decode(output: Any) -> Any:
    """A tool's output as data: JSON (or a Python literal, which some tools print with ``str(dict)``) is decoded;
    other text stays text; pydantic models and objects with ``model_dump``/``dict`` become dicts."""
    if hasattr(output, "model_dump"):
        return output.model_dump()
    if isinstance(output, bytes):
        output = output.decode("utf-8", errors="replace")
    if isinstance(output, str):
        text = output.strip()
        if text[:1] in "[{":
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                try:
                    return ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return output
    return output


def result_records(data: Any) -> list[Mapping[str, Any]] | None:
    """The list of result records in ``data`` (empty when the tool found nothing), or None when it holds none."""
    if isinstance(data, list):
        if not data:
            return []
        records = [item for item in data if isinstance(item, Mapping)]
        return records if records and any(_text_of(item) for item in records) else None
    if not isinstance(data, Mapping):
        return None
    for key in _RESULT_KEYS:
        value = data.get(key)
        if isinstance(value, Mapping | list):  # Brave nests its list: {"web": {"results": [...]}}
            nested = result_records(value)
            if nested is not None:
                return nested
    return None


def search_results(output: Any, query: str) -> list[Passage]:
    """Records of a search API (see the module docstring), in the tool's order."""
    del query  # the search API ranked them already
    records = result_records(decode(output))
    if records is None:
        raise UnreadableResult("no list of search results in the output")
    passages = []
    for position, record in enumerate(records, start=1):
        text = _text_of(record)
        if not text:
            continue
        metadata: dict[str, Any] = {"position": position}
        for key in ("source", "author", "category"):
            if isinstance(record.get(key), str) and record[key]:
                metadata[key] = record[key]
        passages.append(
            Passage(
                text=text,
                title=_first_string(record, _TITLE_KEYS),
                url=_first_string(record, _URL_KEYS),
                date=_first_date(record),
                score=_score_of(record),
                metadata=metadata,
            )
        )
    if not passages and records:
        raise UnreadableResult("search results without any text")
    return passages[:MAX_PASSAGES]


def document_search(output: Any, query: str) -> list[Passage]:
    """crewAI RAG tools' "Relevant Content:" blocks, in their order (the tool ranked them by similarity)."""
    del query
    if not isinstance(output, str) or not _RELEVANT_CONTENT.match(output):
        raise UnreadableResult("not a 'Relevant Content:' answer of a crewAI document search tool")
    body = _RELEVANT_CONTENT.sub("", output, count=1)
    blocks = [block.strip() for block in re.split(r"\n\s*\n", body) if block.strip()]
    return [Passage(text=block, metadata={"position": n}) for n, block in enumerate(blocks, start=1)][:MAX_PASSAGES]


def page_text(output: Any, query: str) -> list[Passage]:
    """A page or document as text, cut into passages, the ones holding most of the query's words first."""
    if not isinstance(output, str) or not output.strip():
        raise UnreadableResult("no text in the output")
    passages = list(_cut(_SCRAPE_PREAMBLE.sub("", output, count=1)))
    query_terms = term_set(query)  # stemmed content words: "limitations" matches "limitation"

    def overlap(item: tuple[int, str]) -> tuple[int, int]:
        return (-len(query_terms.intersection(content_terms(item[1]))), item[0])

    ranked = sorted(enumerate(passages), key=overlap)
    return [Passage(text=text, metadata={"position": index + 1}) for index, text in ranked][:MAX_PASSAGES]


PARSERS: dict[str, Parser] = {
    "search_results": search_results,
    "document_search": document_search,
    "page_text": page_text,
}


def parse_result(output: Any, query: str, parser: Parser | str | None = None) -> list[Passage]:
    """``output`` as passages, with the named or given parser, else the one its shape calls for."""
    if callable(parser):
        return parser(output, query)
    if parser is not None:
        if parser not in PARSERS:
            raise ValueError(f"unknown parser {parser!r}; choose from {', '.join(PARSERS)} or pass a function")
        return PARSERS[parser](output, query)
    if isinstance(output, str) and _RELEVANT_CONTENT.match(output):
        return document_search(output, query)
    data = decode(output)
    if result_records(data) is not None:
        return search_results(data, query)
    if isinstance(data, str):
        return page_text(data, query)
    raise UnreadableResult(f"a {type(data).__name__} without search results or text")


# Helpers ---------------------------------------------------------------------------------------------------
def _text_of(record: Mapping[str, Any]) -> str:
    for key in _TEXT_KEYS:
        value = record.get(key)
        if isinstance(value, list):  # Brave's extra_snippets
            value = " ".join(item for item in value if isinstance(item, str))
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _first_string(record: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _first_date(record: Mapping[str, Any]) -> datetime | None:
    for key in _DATE_KEYS:
        parsed = parse_date(record.get(key))
        if parsed is not None:
            return parsed
    return None


def _score_of(record: Mapping[str, Any]) -> float | None:
    for key in _SCORE_KEYS:
        value = record.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
            return float(value)
    return None


def _cut(text: str) -> Iterable[str]:
    """Paragraphs joined up to ``PASSAGE_CHARS``; a longer paragraph is cut at sentence ends."""
    current = ""
    for paragraph in re.split(r"\n\s*\n|\n", text):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        for piece in _sentences_within(paragraph):
            if current and len(current) + 1 + len(piece) > PASSAGE_CHARS:
                yield current
                current = piece
            else:
                current = f"{current} {piece}".strip()
    if current:
        yield current


def _sentences_within(paragraph: str) -> Iterable[str]:
    if len(paragraph) <= PASSAGE_CHARS:
        yield paragraph
        return
    piece = ""
    for sentence in split_sentences(paragraph):
        while len(sentence) > PASSAGE_CHARS:  # no sentence end in sight: a hard cut
            yield sentence[:PASSAGE_CHARS]
            sentence = sentence[PASSAGE_CHARS:]
        if piece and len(piece) + 1 + len(sentence) > PASSAGE_CHARS:
            yield piece
            piece = sentence
        else:
            piece = f"{piece} {sentence}".strip()
    if piece:
        yield piece
