"""JSONL files → one ``Document`` per record, keyed ``path#record-id``.

Which field holds what is found automatically for the common layouts — BEIR ``{"_id", "title", "text"}``, arXiv
exports ``{"id", "title", "abstract", "authors", "published"}``, and ``id/title/text/date/url`` generally — and can
be set per field (``FieldMap``; dotted names reach into nested objects: ``meta.date``). A bad line is reported with
its number and skipped; the rest of the file is ingested.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders._base import IngestIssue, LoadResult, decode_text, file_key, read_bytes
from researchcrew.knowledge.loaders._markdown import authors_from
from researchcrew.knowledge.loaders.dates import parse_date
from researchcrew.text.json_input import JsonInputError, read_json_lines

logger = logging.getLogger(__name__)

FIELDS = ("id", "title", "text", "date", "url", "authors")
# Candidates tried in order when no mapping is given for a field.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "id": ("_id", "id", "doc_id", "docid", "document_id", "uuid", "key"),
    "title": ("title", "name", "headline", "subject"),
    "text": ("text", "abstract", "body", "content", "contents", "summary", "passage", "document"),
    "date": ("date", "published", "publication_date", "pub_date", "created", "created_at", "updated", "year"),
    "url": ("url", "link", "href", "uri", "source_url"),
    "authors": ("authors", "author", "creators"),
}
_MAX_METADATA_CHARS = 2_000  # a metadata value larger than this (embedded blobs) is left out
TOO_DEEP = "nested too deeply to read; skipped"


class FieldMapError(ValueError):
    """A ``--field`` mapping names an unknown field or is not ``name=source``."""


def parse_field_map(items: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """``["id=_id", "text=body"]`` (or a dict) → ``{"id": "_id", "text": "body"}``, checked."""
    if not items:
        return {}
    if isinstance(items, str):
        items = [items]
    pairs = items.items() if isinstance(items, Mapping) else [_split_pair(item) for item in items]
    mapping: dict[str, str] = {}
    for name, source in pairs:
        name = name.strip().lower()
        if name not in FIELDS:
            raise FieldMapError(f"unknown field {name!r} in the field mapping (known: {', '.join(FIELDS)})")
        if not source.strip():
            raise FieldMapError(f"field {name!r} is mapped to an empty name")
        mapping[name] = source.strip()
    return mapping


def _split_pair(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise FieldMapError(f"field mapping {item!r} is not NAME=SOURCE (e.g. id=_id)")
    name, source = item.split("=", 1)
    return name, source


def load_jsonl(path: Path, field_map: Mapping[str, str] | None = None) -> LoadResult:
    text = decode_text(read_bytes(path), kind="JSONL")
    mapping = dict(field_map or {})
    key = file_key(path)
    result = LoadResult()
    seen: dict[str, int] = {}
    for number, record in read_json_lines(text):
        if isinstance(record, JsonInputError):
            _skip(result, path, number, record.reason)
            continue
        if not isinstance(record, dict):
            _skip(result, path, number, f"a JSON {type(record).__name__}, not an object")
            continue
        try:
            document = _document(record, mapping, key=key, path=path, line=number)
        except ValueError as error:
            _skip(result, path, number, str(error))
            continue
        except RecursionError:  # a shallow-enough record whose fields nest too deeply to walk
            _skip(result, path, number, TOO_DEEP)
            continue
        record_id = document.source_key.split("#", 1)[1]
        if record_id in seen:
            _skip(result, path, number, f"duplicate id {record_id!r} (first on line {seen[record_id]}); skipped")
            continue
        seen[record_id] = number
        result.documents.append(document)
    if not result.documents and not result.issues:
        result.issues.append(IngestIssue(file=str(path), reason="no records"))
    return result


def _skip(result: LoadResult, path: Path, line: int, reason: str) -> None:
    result.issues.append(IngestIssue(file=str(path), line=line, reason=reason))
    result.complete = False


def _document(record: dict[str, Any], mapping: dict[str, str], *, key: str, path: Path, line: int) -> Document:
    used: set[str] = set()

    def pick(name: str) -> Any:
        explicit = mapping.get(name)
        for candidate in (explicit,) if explicit else CANDIDATES[name]:
            value = _lookup(record, candidate)
            if value not in (None, "", []):
                used.add(candidate.split(".", 1)[0])
                return value
        return None

    text = _text(pick("text"))
    if not text:
        looked = mapping.get("text") or ", ".join(CANDIDATES["text"])
        raise ValueError(f"no text (looked for field {looked}; map it with --field text=NAME)")
    record_id = pick("id")
    if isinstance(record_id, dict | list):
        raise ValueError("the id field holds an object, not a string or number")
    identifier = str(record_id).strip() if record_id is not None else f"line-{line}"
    title = _text(pick("title")) or None
    url = pick("url")
    if url is None and identifier.startswith(("http://", "https://")):
        url = identifier
    date_value = pick("date")
    source_date = parse_date(date_value)
    if date_value is not None and source_date is None:
        logger.debug("%s:%d: date %r not understood; left out", path, line, date_value)
    authors_value = pick("authors")
    authors = authors_from(authors_value) if authors_value is not None else []
    metadata = {name: value for name, value in record.items() if name not in used and _small_json(value)}
    return Document(
        source_key=f"{key}#{identifier}",
        text=text,
        title=title,
        url=str(url) if url is not None else None,
        source_date=source_date,
        authors=authors,
        metadata={**metadata, "format": "jsonl", "path": str(path), "record_id": identifier},
    )


def _lookup(record: dict[str, Any], dotted: str) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _text(value: Any) -> str:
    """A text field as a string: lists (of paragraphs or sentences) are joined, blank-line separated."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n\n".join(part for part in (_text(item) for item in value) if part)
    if isinstance(value, dict):
        return ""
    return str(value).strip()


def _small_json(value: Any) -> bool:
    try:
        return len(json.dumps(value, default=str)) <= _MAX_METADATA_CHARS
    except (TypeError, ValueError, RecursionError):
        return False
