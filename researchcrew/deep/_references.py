"""References worth following, found in evidence text (seed 002 phase 3, step B).

Five kinds, each by a conservative pattern (a false reference costs a lookup, a missed one only a lead):

* **arXiv ids** with their prefix or link: ``arXiv:2104.12255``, ``arxiv.org/abs/2104.12255v1``,
  ``arXiv:astro-ph/0601001`` (kept as written, version and all; two versions of one paper are one reference).
  Bare numbers are not taken: ``2021.12345`` could be anything.
* **DOIs**: ``10.1145/3368089.3409754``, ``doi:10.…``, ``https://doi.org/10.…`` (trailing punctuation dropped).
* **Numbered citations** ``[12]``, ``[3, 5]``, ``[2–4]`` whose numbers have an entry in a reference list
  ("References" / "Bibliography" heading followed by ``[n] …`` or ``n. …`` lines). A knowledge-base passage
  without the list in it still counts: the list is looked up in its own document.
* **Named documents**: a quoted title of three or more words next to a cue ("the paper", "survey", "the handbook",
  "guide", "in", "see", a following "(Author, 2019)"). A quoted title that is the citing passage's own title (a
  workshop's proceedings quoting the workshop's name) is not a reference: following it only finds the passage again.
* **Sections** of the same document: ``Section 3.2``, ``Sec. 4``, ``§ 5``, ``Appendix B`` (knowledge-base passages
  only: a section is looked up within the passage's document).

Text after a reference-list heading is not scanned for the other kinds: only references the text *cites* are
followed, and a cited list entry is resolved by what it contains (an arXiv id, a DOI, or a title).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.deep import ReferenceKind

MAX_PER_CHUNK = 20
_SCAN_CHARS = 60_000

ARXIV_RE = re.compile(
    r"(?:\barxiv\s*:\s*|arxiv\.org/(?:abs|pdf)/)"
    r"(\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[a-z]{2})?/\d{7})(v\d+)?",
    re.IGNORECASE,
)
DOI_RE = re.compile(r"(?:\bdoi\s*:\s*|https?://(?:dx\.)?doi\.org/)?\b(10\.\d{4,9}/[^\s\"'<>]+)", re.IGNORECASE)
_MARKER_RE = re.compile(r"\[(\d{1,3}(?:\s*(?:,|-|–|—)\s*\d{1,3}){0,9})\]")
_LIST_HEADING_RE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\d+\.?[ \t]+)?(?:references|bibliography|works\s+cited|literature\s+cited|"
    r"cited\s+works)[ \t]*:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_ENTRY_RE = re.compile(r"^[ \t]*(?:\[(\d{1,3})\]|(\d{1,3})\.)[ \t]+(\S.*)$", re.MULTILINE)
_QUOTED_RE = re.compile(r"[“\"]([A-Z0-9][^“”\"\n]{10,250}?)[”\"]")
_TITLE_CUE_RE = re.compile(
    r"\b(?:paper|article|study|survey|review|report|book|handbook|guide|manual|thesis|preprint|work|titled|entitled|"
    r"in|see|cf\.?)\s*$",
    re.IGNORECASE,
)
_AUTHOR_YEAR_RE = re.compile(r"^\s*\(\s*[A-Z][\w\-’']+(?:\s+(?:et\s+al\.?|and\s+[A-Z][\w\-’']+))?,?\s*\d{4}[a-z]?\s*\)")
_SECTION_RE = re.compile(
    r"(?:\bSection|\bSec\.|§)\s*(\d{1,2}(?:\.\d{1,2}){0,3})\b|\bAppendix\s+([A-Z](?:\.\d{1,2})?)\b"
)


@dataclass(frozen=True)
class DetectedReference:
    """One reference found in one chunk."""

    kind: ReferenceKind
    target: str  # what to look up: "2104.12255", "10.1145/…", "[12]", a title, "3.2"
    text: str  # the reference as written
    found_in: str  # the chunk's id
    document: str | None = None  # the citing chunk's knowledge-base document (for lookups within it)
    entry: str | None = None  # numbered references: the list entry, when the chunk holds the list

    @property
    def key(self) -> str:
        """Identity for the visited set: the same paper cited twice is followed once."""
        if self.kind == "numbered" and self.entry:
            inner = entry_target(self.entry)
            if inner is not None:
                target = strip_version(inner[1]) if inner[0] == "arxiv" else inner[1]
                return f"{inner[0]}:{target.lower()}"
            return f"title:{normal_title(self.entry)}"
        if self.kind == "named_document":
            return f"title:{normal_title(self.target)}"
        if self.kind in ("numbered", "section"):
            return f"{self.kind}:{self.document}:{self.target}"
        if self.kind == "arxiv":
            return f"arxiv:{strip_version(self.target).lower()}"
        return f"{self.kind}:{self.target.lower()}"


def normal_title(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))[:200]


def _own_title(quoted: str, own: str | None) -> bool:
    """A quoted title is the citing passage's own title, or part of it."""
    quoted_words, own_words = normal_title(quoted), normal_title(own or "")
    return bool(quoted_words) and f" {quoted_words} " in f" {own_words} "


def strip_version(arxiv_id: str) -> str:
    return re.sub(r"v\d+$", "", arxiv_id)


def _clean_doi(raw: str) -> str:
    return raw.rstrip(".,;:)]}>'\"")


_ARXIV_DOI_RE = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)  # arXiv's own DOIs name the arXiv id


def entry_target(entry: str) -> tuple[ReferenceKind, str] | None:
    """What a reference-list entry points to when it carries an identifier: its arXiv id, else its DOI."""
    if match := ARXIV_RE.search(entry):
        return "arxiv", match.group(1) + (match.group(2) or "")
    if match := DOI_RE.search(entry):
        return _doi_or_arxiv(_clean_doi(match.group(1)))
    return None


def _doi_or_arxiv(doi: str) -> tuple[ReferenceKind, str]:
    arxiv = _ARXIV_DOI_RE.match(doi)
    return ("arxiv", arxiv.group(1)) if arxiv else ("doi", doi)


def split_reference_list(text: str) -> tuple[str, dict[int, str]]:
    """The body of a text and the entries of its reference list (number → entry text). Without a list heading
    the whole text is body and there are no entries."""
    heading = _LIST_HEADING_RE.search(text)
    if heading is None:
        return text, {}
    body, listing = text[: heading.start()], text[heading.end() :]
    return body, parse_entries(listing)


def parse_entries(listing: str) -> dict[int, str]:
    """Entries of a reference list: ``[n] text`` or ``n. text`` lines, continued by the lines that follow them."""
    entries: dict[int, str] = {}
    matches = list(_ENTRY_RE.finditer(listing))
    for index, match in enumerate(matches):
        number = int(match.group(1) or match.group(2))
        end = matches[index + 1].start() if index + 1 < len(matches) else len(listing)
        text = " ".join(listing[match.start(3) : end].split())
        if text and number not in entries:
            entries[number] = text[:1000]
    return entries


def _marker_numbers(marker: str) -> list[int]:
    numbers: list[int] = []
    for part in re.split(r"\s*,\s*", marker):
        bounds = re.split(r"\s*[-–—]\s*", part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            low, high = sorted((int(bounds[0]), int(bounds[1])))
            numbers.extend(range(low, min(high, low + 20) + 1))
        elif part.isdigit():
            numbers.append(int(part))
    return numbers


def detect_references(chunk: ContextChunk) -> list[DetectedReference]:
    """The references in one chunk, in order of appearance, each once."""
    text = chunk.content[:_SCAN_CHARS]
    body, entries = split_reference_list(text)
    document = chunk.source_id if chunk.source_type == "rag" and chunk.source_id else None
    own_arxiv = strip_version(chunk.source_id) if chunk.source_type == "arxiv" and chunk.source_id else None
    found: list[tuple[int, DetectedReference]] = []

    for match in ARXIV_RE.finditer(body):
        arxiv_id = match.group(1) + (match.group(2) or "")  # as written: a version asks for that version
        if strip_version(arxiv_id) != own_arxiv:
            found.append(
                (match.start(), DetectedReference("arxiv", arxiv_id, match.group(0), chunk.chunk_id, document))
            )
    for match in DOI_RE.finditer(body):
        kind, target = _doi_or_arxiv(_clean_doi(match.group(1)))
        if kind == "arxiv" and strip_version(target) == own_arxiv:
            continue
        written = match.group(0).rstrip(".,;")
        found.append((match.start(), DetectedReference(kind, target, written, chunk.chunk_id, document)))
    for match in _MARKER_RE.finditer(body):
        for number in _marker_numbers(match.group(1)):
            entry = entries.get(number)
            if entry is None and document is None:
                continue  # nowhere to find what [n] stands for
            found.append(
                (
                    match.start(),
                    DetectedReference("numbered", f"[{number}]", match.group(0), chunk.chunk_id, document, entry),
                )
            )
    for match in _QUOTED_RE.finditer(body):
        title = " ".join(match.group(1).split()).rstrip(".,;:")
        if len(title.split()) < 3 or _own_title(title, chunk.title):
            continue
        before = body[max(0, match.start() - 40) : match.start()]
        after = body[match.end() : match.end() + 60]
        if _TITLE_CUE_RE.search(before) or _AUTHOR_YEAR_RE.match(after):
            found.append(
                (match.start(), DetectedReference("named_document", title, match.group(0), chunk.chunk_id, document))
            )
    if document is not None:
        for match in _SECTION_RE.finditer(body):
            target = match.group(1) or match.group(2)
            found.append(
                (match.start(), DetectedReference("section", target, match.group(0), chunk.chunk_id, document))
            )

    found.sort(key=lambda pair: pair[0])
    unique: dict[str, DetectedReference] = {}
    for _, reference in found:
        unique.setdefault(reference.key, reference)
    return list(unique.values())[:MAX_PER_CHUNK]
