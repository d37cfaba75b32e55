"""Loaders: files → ``Document``s. One module per format; this module finds the files and picks the loader.

Formats are chosen by extension, and by content for files without a known one (``%PDF-``, an ``<html`` start, a
JSON object on the first line). Every problem becomes an ``IngestIssue`` (file, line, reason) instead of an
exception, so one bad file never stops an ingest.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from researchcrew.knowledge.loaders._base import IngestIssue, LoaderError, LoadResult, looks_binary
from researchcrew.knowledge.loaders._csv import load_csv
from researchcrew.knowledge.loaders._html import load_html
from researchcrew.knowledge.loaders._jsonl import FieldMapError, load_jsonl, parse_field_map
from researchcrew.knowledge.loaders._markdown import load_markdown, load_text
from researchcrew.knowledge.loaders._pdf import load_pdf
from researchcrew.text.json_input import read_json

__all__ = [
    "FORMATS",
    "Discovery",
    "FieldMapError",
    "IngestIssue",
    "LoadResult",
    "LoaderError",
    "discover",
    "expand_glob",
    "format_of",
    "load_file",
    "parse_field_map",
]

logger = logging.getLogger(__name__)

FORMATS: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
}
_GLOB_CHARS = frozenset("*?[")


@dataclass
class Discovery:
    """The files that paths, folders and globs stand for, and what could not be resolved."""

    files: list[Path] = field(default_factory=list)
    issues: list[IngestIssue] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)  # files in folders with no supported extension


def discover(paths: Iterable[str | os.PathLike[str]]) -> Discovery:
    """Expand files, folders (recursively; hidden files and folders skipped) and globs, in a stable order."""
    found = Discovery()
    seen: set[Path] = set()

    def add(path: Path) -> None:
        resolved = path.resolve()  # the same file reached twice (two arguments, a link) is read once
        if resolved not in seen:
            seen.add(resolved)
            found.files.append(path)

    for raw in paths:
        text = os.path.expanduser(os.fspath(raw))
        path = Path(text)
        if path.is_dir():
            _walk(path, add, found)
        elif path.exists() or path.is_symlink():
            add(path)
        elif _GLOB_CHARS & set(text):
            matches = expand_glob(text)
            if not matches:
                found.issues.append(IngestIssue(file=text, reason="no files match this pattern"))
            for match in matches:
                match_path = Path(match)
                if match_path.is_dir():
                    _walk(match_path, add, found)
                else:
                    add(match_path)
        else:
            found.issues.append(IngestIssue(file=text, reason="no such file or directory"))
    return found


def expand_glob(pattern: str) -> list[str]:
    """The paths a glob matches, sorted. ``**`` (any depth) is walked by ``_walk_links_once``: links into folders
    are followed, but never into a folder already being walked (a link to itself or an ancestor would make
    ``glob.glob`` recurse until the path is too long, which on a real tree looks like a hang)."""
    if "**" not in pattern:
        return sorted(glob.glob(pattern))
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if _GLOB_CHARS & set(part)), len(parts))
    base = Path(*parts[:fixed]) if fixed else Path(".")
    wanted = parts[fixed:]
    if not base.is_dir():
        return []
    matches: list[str] = [os.path.join(str(base), "")] if fixed and _matches(tuple(wanted), ()) else []
    for path in _walk_links_once(base):
        relative = path.relative_to(base).parts
        if relative and _matches(tuple(wanted), relative):
            matches.append(str(path) if fixed else str(path.relative_to(base)))
    return sorted(matches)


def _walk_links_once(base: Path) -> list[Path]:
    """Every file and folder below ``base``; links are followed, each real folder is entered once."""
    seen: set[tuple[int, int]] = set()
    found: list[Path] = []
    for root, directories, names in os.walk(base, followlinks=True):
        try:
            status = os.stat(root)
        except OSError:
            directories[:] = []
            continue
        identity = (status.st_dev, status.st_ino)
        if identity in seen:
            logger.info("not walking %s again: it links to a folder already walked", root)
            directories[:] = []
            continue
        seen.add(identity)
        directories.sort()
        found += [Path(root, name) for name in directories]
        found += [Path(root, name) for name in sorted(names)]
    return found


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Glob matching by path segments: ``**`` is any number of folders; ``*`` never matches a hidden name."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(path)
        if pattern[i] == "**":
            return match(i + 1, j) or (j < len(path) and not path[j].startswith(".") and match(i, j + 1))
        if j == len(path):
            return False
        hidden_ok = pattern[i].startswith(".") or not path[j].startswith(".")
        return hidden_ok and fnmatch.fnmatchcase(path[j], pattern[i]) and match(i + 1, j + 1)

    return match(0, 0)


def _walk(folder: Path, add: Callable[[Path], None], found: Discovery) -> None:
    for root, directories, names in os.walk(folder):
        directories[:] = sorted(name for name in directories if not name.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(root, name)
            if path.suffix.lower() in FORMATS:
                add(path)
            else:
                found.ignored.append(path)


def format_of(path: Path) -> str | None:
    """The format by extension, or by sniffing the first bytes when the extension is not a known one."""
    known = FORMATS.get(path.suffix.lower())
    if known is not None:
        return known
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    stripped = head.lstrip().lower()
    if stripped.startswith(b"%pdf-"):
        return "pdf"
    if looks_binary(head):
        return None
    if stripped.startswith((b"<!doctype html", b"<html")):
        return "html"
    if stripped.startswith(b"{") and b"\n" in head:
        try:
            return "jsonl" if isinstance(read_json(head.split(b"\n", 1)[0]), dict) else None
        except ValueError:
            return None
    return None


def load_file(path: Path, *, field_map: Mapping[str, str] | None = None) -> LoadResult:
    """Load one file; never raises for bad input (the problems are in ``LoadResult.issues``)."""
    kind = format_of(path)
    if kind is None:
        supported = ", ".join(sorted(FORMATS))
        reason = f"unsupported file type {path.suffix or '(no extension)'!r} (supported: {supported})"
        if not path.exists():
            reason = "cannot read: no such file (a broken link?)"
        return LoadResult(issues=[IngestIssue(file=str(path), reason=reason)], complete=False)
    try:
        if kind == "markdown":
            return load_markdown(path)
        if kind == "text":
            return load_text(path)
        if kind == "pdf":
            return load_pdf(path)
        if kind == "html":
            return load_html(path)
        if kind == "csv":
            return load_csv(path)
        return load_jsonl(path, field_map)
    except LoaderError as error:
        return LoadResult(issues=[IngestIssue(file=str(path), reason=str(error))], complete=False)
    except RecursionError:  # a pathologically nested document: one bad file, never the whole ingest
        reason = "nested too deeply to read (thousands of levels); skipped"
        return LoadResult(issues=[IngestIssue(file=str(path), reason=reason)], complete=False)
