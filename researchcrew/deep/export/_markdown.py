"""Markdown and HTML exports. Everything the user or the evidence wrote is escaped for Markdown, so it reads as
literal text; the HTML is that Markdown rendered by markdown-it-py with raw HTML turned off (so no tag, script or
event handler from evidence text reaches the page) and only http(s) links, wrapped in a small standalone page."""

from __future__ import annotations

import html
import re

from researchcrew.deep.export._document import ReportDocument, Section, Statement, Table, marker

_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&])")
_LINE_START = re.compile(r"^(\s*)([-+=]|\d+[.)])")
_STYLE = (
    "body{font-family:system-ui,'DejaVu Sans',sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;"
    "line-height:1.5;color:#1b1b1b}table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.3rem .5rem;"
    "vertical-align:top}a{overflow-wrap:anywhere}li{overflow-wrap:anywhere}"
)


def escape(text: str, *, line: bool = True) -> str:
    """``text`` as literal Markdown: every character Markdown gives a meaning is backslash-escaped (with ``line``,
    also what would start a list, a heading underline or a block quote at the start of a line)."""
    escaped = _SPECIAL.sub(r"\\\1", text)
    return _LINE_START.sub(lambda match: f"{match.group(1)}\\{match.group(2)}", escaped) if line else escaped


def _statement(statement: Statement) -> str:
    cited = marker(statement.citations)
    return f"{escape(statement.text)} {cited}".rstrip()  # the markers are ours: "[1]" with no link definition


def _table(table: Table) -> list[str]:
    lines = ["| " + " | ".join(escape(cell) for cell in table.header) + " |"]
    lines.append("|" + "---|" * len(table.header))
    lines += ["| " + " | ".join(_statement(cell) for cell in row) + " |" for row in table.rows]
    return lines


def _section(section: Section) -> list[str]:
    lines = ["#" * section.level + " " + escape(section.heading, line=False), ""]
    lines += [_statement(statement) + "\n" for statement in section.statements]
    if section.sources:
        listed = "; ".join(f"[{number}] {escape(title, line=False)}" for number, title in section.sources)
        lines += [f"Sources on this theme: {listed}", ""]
    if section.table is not None:
        lines += [*_table(section.table), ""]
    return lines


def _link(url: str | None, text: str) -> str:
    if url and not re.search(r"[\s<>]", url):
        return f"<{url}>"  # an autolink: markdown-it keeps it literal text inside the link
    return escape(text)


def to_markdown(document: ReportDocument) -> str:
    """The report as Markdown (GitHub flavour: tables, heading anchors)."""
    lines = [f"# {escape(document.title, line=False)}", ""]
    lines += [f"*{escape(line)}*  " for line in document.about] + [""]
    if document.toc:
        lines += ["## Contents", ""]
        lines += [
            f"{'  ' * (section.level - 2)}- [{escape(section.heading, line=False)}](#{section.anchor})"
            for section in document.sections
        ]
        lines.append("")
    for section in document.sections:
        lines += _section(section)
    if document.caveats:
        lines += ["## Caveats", ""] + [f"- {escape(caveat)}" for caveat in document.caveats] + [""]
    lines += ["## References", ""]
    if not document.references:
        lines += ["No sources were cited.", ""]
    for reference in document.references:
        parts = [f"[{reference.number}] {escape(reference.title, line=False)}"]
        parts += [_link(part, part) if part == reference.url else escape(part) for part in reference.where()]
        entry = " — ".join(parts)
        if reference.location:
            entry += f" ({escape(reference.location)})"
        lines += [entry + "  ", ""]
    return "\n".join(lines).rstrip() + "\n"


def to_html(document: ReportDocument) -> str:
    """The report as one standalone HTML page (the Markdown, rendered safely; headings carry their anchors)."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    tokens = renderer.parse(to_markdown(document))
    ids = [
        "",  # the title
        *(["contents"] if document.toc else []),
        *(section.anchor for section in document.sections),
        *(["caveats"] if document.caveats else []),
        "references",
    ]
    headings = [token for token in tokens if token.type == "heading_open"]
    for token, anchor in zip(headings, ids, strict=False):  # equal counts: no statement can make a heading
        if anchor:
            token.attrSet("id", anchor)
    body = renderer.renderer.render(tokens, renderer.options, {})
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(document.title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f'<body>\n<article dir="auto">\n{body}</article>\n</body>\n</html>\n'
    )
