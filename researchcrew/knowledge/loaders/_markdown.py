"""Markdown and plain-text files → one ``Document`` each.

The text keeps its Markdown shape, which is what the chunker splits on: ``#`` heading lines and paragraphs separated
by blank lines. Setext headings (``Title`` underlined with ``===``/``---``) are rewritten as ``#`` lines for the same
reason. YAML front matter is taken off the text and read for title, date, authors, url and other metadata.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders._base import (
    LoaderError,
    LoadResult,
    decode_text,
    file_key,
    read_bytes,
    title_from_path,
)
from researchcrew.knowledge.loaders.dates import parse_date

logger = logging.getLogger(__name__)

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SETEXT = re.compile(r"^(?P<text>[^\n#>\-*=][^\n]*)\n(?P<rule>=+|-+)[ \t]*$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")

_DATE_KEYS = ("date", "published", "publication_date", "created", "updated", "modified")
_AUTHOR_KEYS = ("authors", "author", "creators", "creator")
_URL_KEYS = ("url", "link", "canonical_url", "source_url")


def load_markdown(path: Path) -> LoadResult:
    text = decode_text(read_bytes(path), kind="Markdown")
    front, body = split_front_matter(text, path)
    body = _SETEXT.sub(lambda m: f"{'#' if m['rule'][0] == '=' else '##'} {m['text'].strip()}", body)
    body = _BLANK_RUNS.sub("\n\n", body).strip()
    if not body:
        raise LoaderError("no text besides the front matter")
    heading = _ATX_HEADING.search(body)
    title = _string(front.get("title")) or (heading.group(1).strip() if heading else None) or title_from_path(path)
    return LoadResult([document_from(path, body, title=title, fields=front, file_format="markdown")])


def load_text(path: Path) -> LoadResult:
    text = _BLANK_RUNS.sub("\n\n", decode_text(read_bytes(path), kind="plain")).strip()
    return LoadResult([document_from(path, text, title=title_from_path(path), fields={}, file_format="text")])


def document_from(path: Path, text: str, *, title: str, fields: dict[str, Any], file_format: str) -> Document:
    """A file's document, with front-matter-style fields mapped onto dates, authors, url and metadata."""
    date_value = next((fields[key] for key in _DATE_KEYS if fields.get(key)), None)
    authors = next((authors_from(fields[key]) for key in _AUTHOR_KEYS if fields.get(key)), [])
    url = next((_string(fields[key]) for key in _URL_KEYS if _string(fields.get(key))), None)
    used = {"title", *_DATE_KEYS, *_AUTHOR_KEYS, *_URL_KEYS}
    extra = {key: value for key, value in fields.items() if key not in used and _json_scalar_or_list(value)}
    return Document(
        source_key=file_key(path),
        text=text,
        title=title,
        url=url,
        source_date=parse_date(date_value),
        authors=authors,
        metadata={**extra, "format": file_format, "path": str(path)},
    )


def split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """(front matter fields, the rest). Malformed front matter stays in the text, with a logged notice."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    import yaml

    try:
        fields = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        logger.warning("%s: front matter is not valid YAML, kept as text (%s)", path, error)
        return {}, text
    if not isinstance(fields, dict):
        return {}, text
    return {str(key).lower(): value for key, value in fields.items()}, text[match.end() :]


def authors_from(value: Any) -> list[str]:
    """Authors from a list, a ``;``-separated string, a list written as a string, or ``[{"name": ...}]``."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            import ast
            import json

            for parse in (json.loads, ast.literal_eval):
                try:
                    return authors_from(parse(stripped))
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue
        separator = ";" if ";" in stripped else None
        return [part.strip() for part in stripped.split(separator)] if separator else ([stripped] if stripped else [])
    if isinstance(value, dict):
        name = value.get("name") or " ".join(str(value.get(k, "")) for k in ("given", "family")).strip()
        return [str(name)] if name else []
    if isinstance(value, list | tuple):
        return [name for item in value for name in authors_from(item)]
    return [str(value)] if value is not None else []


def _string(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _json_scalar_or_list(value: Any) -> bool:
    if isinstance(value, str | int | float | bool) or value is None:
        return True
    return isinstance(value, list) and all(isinstance(item, str | int | float | bool) for item in value)
