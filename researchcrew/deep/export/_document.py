"""A finished report as a document every export format renders the same way (issue 21 item 4).

``report_document`` turns a ``DeepReport`` into plain blocks — a title, what the report is, an optional table of
contents, sections of cited statements (a comparison's table, a literature review's sources per theme), caveats and
the numbered reference list. The numbers are the report's own citation numbers, so Markdown, HTML, PDF and DOCX cite
a source by the same number. Every text is cleaned once here (control characters, lone surrogates and other
characters no XML or PDF may hold are dropped); escaping for a format is that format's renderer's job.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from researchcrew.contracts.deep import DeepReport
from researchcrew.contracts.synthesizer import Citation

TOC_MIN_SECTIONS = 4  # a report with at least this many titled sections gets a table of contents
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
_LENGTH_NAMES = {"brief": "brief", "standard": "standard length", "detailed": "detailed"}
_TYPE_NAMES = {"report": "research report", "literature_review": "literature review", "comparison": "comparison"}


def clean(text: str | None) -> str:
    """``text`` with what no export format can hold removed, on one line, whitespace collapsed."""
    if not text:
        return ""
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become "?"
    return " ".join(_NOT_XML.sub("", text).split())


def slug(text: str, taken: set[str]) -> str:
    """An anchor for a heading (GitHub's way: lower case, letters, digits and hyphens), unique within ``taken``."""
    base = re.sub(r"[^\w\- ]", "", unicodedata.normalize("NFKC", text).lower()).strip().replace(" ", "-") or "section"
    anchor, n = base, 1
    while anchor in taken:
        anchor, n = f"{base}-{n}", n + 1
    taken.add(anchor)
    return anchor


@dataclass(frozen=True)
class Statement:
    """One cited statement (or table cell)."""

    text: str
    citations: tuple[int, ...] = ()


@dataclass
class Table:
    """A table of statements: the header, then rows of cells."""

    header: list[str]
    rows: list[list[Statement]]


@dataclass
class Section:
    """A titled part of the report."""

    heading: str
    anchor: str
    statements: list[Statement] = field(default_factory=list)
    sources: list[tuple[int, str]] = field(default_factory=list)  # a literature review theme's sources: number, title

    def sources_line(self) -> str:
        """``Sources on this theme: [1] Title; [3] Title`` (empty without sources)."""
        listed = "; ".join(f"[{number}] {title}" for number, title in self.sources)
        return f"Sources on this theme: {listed}" if listed else ""

    table: Table | None = None
    level: int = 2


@dataclass(frozen=True)
class Reference:
    """One entry of the reference list."""

    number: int
    title: str
    url: str | None  # a web address a reader can open
    file_name: str | None  # the knowledge-base file it came from
    other: str | None  # else the source's own id or label
    location: str  # where the cited passages sit in the source ("§ Methods, passage 2 of 5")

    def where(self) -> list[str]:
        """What a reader follows to the source: its URL, its file, or its id (each at most once)."""
        parts = [part for part in (self.url, self.file_name, self.other) if part and part != self.title]
        return list(dict.fromkeys(parts))

    def text(self) -> str:
        """The entry as plain text: ``[n] Title — URL — file (location)``."""
        entry = " — ".join([f"[{self.number}] {self.title}", *self.where()])
        return f"{entry} ({self.location})" if self.location else entry


@dataclass
class ReportDocument:
    """What every export format renders."""

    title: str
    about: list[str]
    sections: list[Section]
    caveats: list[str]
    references: list[Reference]
    toc: bool


def _reference(citation: Citation) -> Reference:
    url = clean(citation.url) if citation.url and re.match(r"https?://", citation.url) else None
    file_name = clean(citation.file_name) or None
    other = None if url or file_name else clean(citation.label or citation.source_id or citation.source_type)
    locations = [clean(passage.location) for passage in citation.passages if passage.location]
    location = clean(citation.location) or "; ".join(dict.fromkeys(locations))
    title = clean(citation.title) or url or file_name or other or f"source {citation.number}"
    return Reference(citation.number, title, url, file_name, other, location)


def _about(report: DeepReport) -> list[str]:
    response = report.response
    quality = report.quality[-1] if report.remediated else report.quality[0]
    kind = "written without a language model (extractive)" if response.answer_kind == "extractive" else "generated"
    lines = [
        f"Question: {clean(report.question)}",
        f"A {_LENGTH_NAMES[report.length]} {_TYPE_NAMES[report.report_type]}, {kind}, "
        f"{len(report.plan.items)} sub-question(s), {len(response.citations)} source(s).",
        f"Quality check: overall {quality.overall:.2f} (threshold {quality.threshold:.2f})"
        + (", after one remediation retry." if report.remediated else "."),
        f"Run {report.run_id}, {response.created_at:%Y-%m-%d %H:%M} UTC.",
    ]
    if report.partial:
        lines.append("Partial: the run's deadline or budget cut it short (see the caveats).")
    return lines


def _comparison_section(report: DeepReport, taken: set[str]) -> Section | None:
    table = report.comparison
    if table is None or not table.rows:
        return None
    rows = [
        [Statement(clean(row.aspect))]
        + [
            Statement(clean(cell) or "not found in the evidence", tuple(numbers))
            for cell, numbers in zip(row.cells, row.citations, strict=True)
        ]
        for row in table.rows
    ]
    header = ["Aspect", *(clean(subject) for subject in table.subjects)]
    return Section("Comparison table", slug("Comparison table", taken), table=Table(header, rows))


def report_document(report: DeepReport) -> ReportDocument:
    """The report as blocks (see the module docstring)."""
    taken: set[str] = set()
    sections: list[Section] = []
    titles = {
        citation.number: clean(citation.title) or f"source {citation.number}" for citation in report.response.citations
    }
    themes = {
        clean(theme.theme).lower(): [(n, titles.get(n, f"source {n}")) for n in theme.sources]
        for theme in report.themes
    }
    for answer in report.response.sections:
        statements = [
            Statement(clean(claim.text), tuple(claim.citations)) for claim in answer.claims if clean(claim.text)
        ]
        heading = clean(answer.heading)
        if answer.perspective and heading:
            heading = f"{heading} — {clean(answer.perspective)}"
        elif answer.perspective:
            statements = [Statement(f"{clean(answer.perspective)}: {s.text}", s.citations) for s in statements]
        if not heading and sections:
            sections[-1].statements += statements
            continue
        heading = heading or "Findings"
        title = re.sub(r"^\d+(?:\.\d+)*\.?\s+", "", heading).lower()
        level = 3 if re.match(r"^\d+\.\d+\s", heading) else 2
        sections.append(Section(heading, slug(heading, taken), statements, themes.get(title, []), level=level))
    comparison = _comparison_section(report, taken)
    if comparison is not None:
        sections.append(comparison)
    if not sections:
        sections.append(
            Section(
                "Findings",
                slug("Findings", taken),
                [Statement("The evidence found answers none of the sub-questions.")],
            )
        )
    references = [_reference(citation) for citation in sorted(report.response.citations, key=lambda c: c.number)]
    return ReportDocument(
        title=f"Research report: {clean(report.question)}",
        about=_about(report),
        sections=sections,
        caveats=[clean(caveat) for caveat in report.response.caveats if clean(caveat)],
        references=references,
        toc=sum(1 for section in sections if section.level == 2) >= TOC_MIN_SECTIONS,
    )


def marker(citations: tuple[int, ...] | list[int]) -> str:
    """The citation marker every format writes after a statement: ``[1][3]``."""
    return "".join(f"[{number}]" for number in citations)
