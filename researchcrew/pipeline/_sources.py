"""One source, one citation: which document a passage belongs to, how a reader finds it, and how many independent
sources a set of passages is.

Retrieval returns *passages*; a reader cites *sources*. Two passages of one abstract are one source with two
locations, not two papers agreeing (issue 20). So:

* ``document_key`` names the document a passage belongs to: a knowledge-base file (the pages of one PDF are one
  file; the records of a JSONL file are separate documents), a web page by its URL, an arXiv paper by its id;
* ``file_name`` and ``source_label`` say how a reader finds it: an ingested file by its file name (never the
  content hash the index uses as its id), a web page or paper by its URL;
* ``passage_location`` / ``combined_location`` say where in it: "p. 3, § Methods, passage 2 of 5", and for several
  passages of one document "§ Methods, passages 2 and 4 of 5";
* ``independent_sources`` counts what corroborates a claim: passages of one document count once, and so do
  near-duplicates across documents (the Evaluator marks a passage that repeats a better one with ``similar_to``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath, PureWindowsPath

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE, ContextChunk
from researchcrew.contracts.evaluator import ScoredChunk

RAG_SOURCE_TYPE = "rag"
_PAGE_SUFFIX = re.compile(r"#page=\d+$")


def document_key(chunk: ContextChunk) -> str:
    """The document ``chunk`` is a passage of; equal keys are one source (and one citation)."""
    if chunk.source_type == RAG_SOURCE_TYPE:
        source_key = chunk.metadata.get("source_key")
        if isinstance(source_key, str) and source_key.strip():
            return f"rag:{_PAGE_SUFFIX.sub('', source_key)}"  # every page of a PDF is the same file
    if chunk.source_type == MEMORY_SOURCE_TYPE:
        return f"memory:{chunk.source_id or chunk.chunk_id}"
    if chunk.url:
        return f"url:{chunk.url.rstrip('/')}"
    if chunk.source_id:
        return f"{chunk.source_type}:{chunk.source_id}"
    return f"chunk:{chunk.chunk_id}"


def file_name(chunk: ContextChunk) -> str | None:
    """The name of the file a knowledge-base passage was ingested from (``notes.md``, ``paper.pdf``); None for
    other sources and for documents that did not come from a file."""
    if chunk.source_type != RAG_SOURCE_TYPE:
        return None
    path = chunk.metadata.get("path")
    if not isinstance(path, str) or not path.strip():
        key = chunk.metadata.get("source_key")
        path = key.split("#", 1)[0] if isinstance(key, str) else None
    if not path or not path.strip():
        return None
    name = PureWindowsPath(path).name if "\\" in path else PurePosixPath(path).name
    return name or None


def source_label(chunk: ContextChunk) -> str | None:
    """What a reader follows to the source: a file of the knowledge base by its name (a JSONL record by its URL
    when it has one, else by file and record), a web page or paper by its URL, else the source's own id."""
    name = file_name(chunk)
    if name is not None:
        record = chunk.metadata.get("record_id")
        if chunk.metadata.get("format") == "jsonl":
            if chunk.url:
                return chunk.url
            return f"{name}, record {record}" if isinstance(record, str | int) and str(record) else name
        return name
    return chunk.url or chunk.source_id


def _heading(metadata: Mapping[str, object]) -> str | None:
    heading = metadata.get("heading")
    if isinstance(heading, str) and heading.strip():
        return "§ " + " ".join(heading.split())[:200]
    return None


def _page(metadata: Mapping[str, object]) -> str | None:
    page = metadata.get("page")
    return f"p. {page}" if type(page) is int and page > 0 else None


def _position(metadata: Mapping[str, object]) -> tuple[int, int] | None:
    position, count = metadata.get("position"), metadata.get("chunk_count")
    if type(position) is int and type(count) is int and 0 <= position < count and count > 1:  # bool is no count
        return position + 1, count
    return None


def passage_location(metadata: Mapping[str, object]) -> str | None:
    """Where a knowledge-base passage sits, "p. n, § heading, passage n of m", from its chunk's metadata; None when
    it says nothing useful (a single-passage document without a heading, or another tool's metadata)."""
    parts = [part for part in (_page(metadata), _heading(metadata)) if part]
    position = _position(metadata)
    if position is not None:
        parts.append(f"passage {position[0]} of {position[1]}")
    return ", ".join(parts) or None


def _numbers(values: Sequence[int]) -> str:
    if len(values) == 1:
        return str(values[0])
    return ", ".join(str(value) for value in values[:-1]) + f" and {values[-1]}"


def combined_location(metadatas: Iterable[Mapping[str, object]]) -> str | None:
    """One location for several passages of one document: passages under the same page and heading are listed
    together ("§ Methods, passages 2 and 4 of 5"), different places are joined with "; "."""
    groups: dict[tuple[str | None, str | None], list[tuple[int, int] | None]] = {}
    for metadata in metadatas:
        groups.setdefault((_page(metadata), _heading(metadata)), []).append(_position(metadata))
    parts: list[str] = []
    for (page, heading), positions in groups.items():
        where = [part for part in (page, heading) if part]
        known = sorted({p for p in positions if p is not None})
        if known:
            counts = {count for _, count in known}
            numbers = _numbers([number for number, _ in known])
            plural = "passages" if len(known) > 1 else "passage"
            where.append(f"{plural} {numbers}" + (f" of {known[0][1]}" if len(counts) == 1 else ""))
        if where:
            parts.append(", ".join(where))
    return "; ".join(dict.fromkeys(parts)) or None


def independent_sources(cited: Sequence[ScoredChunk]) -> list[list[ScoredChunk]]:
    """The cited passages grouped into independent sources, in order of first appearance: passages of one document
    are one source, and a passage the Evaluator found repeating another (``similar_to``) joins that one's source."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for scored in cited:
        union(f"chunk:{scored.chunk.chunk_id}", document_key(scored.chunk))
        if scored.similar_to:
            union(f"chunk:{scored.chunk.chunk_id}", f"chunk:{scored.similar_to}")
    groups: dict[str, list[ScoredChunk]] = {}
    for scored in cited:
        groups.setdefault(find(f"chunk:{scored.chunk.chunk_id}"), []).append(scored)
    return list(groups.values())


__all__ = [
    "combined_location",
    "document_key",
    "file_name",
    "independent_sources",
    "passage_location",
    "source_label",
]
