"""HTML files → one ``Document`` with the page's main text (trafilatura), not its navigation, headers or footers.

trafilatura is the extractor the web-archiving and NLP communities benchmark as the most accurate open one; it
drops boilerplate (menus, footers, cookie banners, scripts) and returns Markdown, whose ``#`` headings and blank-line
paragraphs are what the chunker splits on. Title, author, date and canonical URL come from the page's metadata
(``<title>``, ``<meta>``, JSON-LD) — only from there: guessing a date from body text ("© 2020") would be wrong more
often than right.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from researchcrew.knowledge.loaders._base import LoaderError, LoadResult, decode_text, read_bytes, title_from_path
from researchcrew.knowledge.loaders._markdown import authors_from, document_from

logger = logging.getLogger(__name__)

_BLANK_RUNS = re.compile(r"\n{3,}")
_MIN_TEXT_CHARS = 20
# Section headings: trafilatura renders <h1>..<h6> as Markdown '#' lines; keep at most three levels.
_DEEP_HEADING = re.compile(r"^#{4,}(?=\s)", re.MULTILINE)


def load_html(path: Path) -> LoadResult:
    import trafilatura
    from trafilatura.settings import use_config

    html = decode_text(read_bytes(path), kind="HTML")
    config = use_config()
    # Below this many characters the "main text" is a menu label or a button, not a document.
    config.set("DEFAULT", "MIN_OUTPUT_SIZE", str(_MIN_TEXT_CHARS))
    config.set("DEFAULT", "EXTRACTION_TIMEOUT", "0")  # its signal-based timeout only works on the main thread
    text = trafilatura.extract(
        html,
        output_format="markdown",
        include_formatting=True,
        include_comments=False,
        include_tables=True,
        include_links=False,
        include_images=False,
        with_metadata=False,
        config=config,
    )
    if not text or not text.strip():
        raise LoaderError("no main text found in the HTML page")
    body = _BLANK_RUNS.sub("\n\n", _DEEP_HEADING.sub("###", text)).strip()
    meta = trafilatura.extract_metadata(html, extensive=False)
    fields: dict[str, object] = {}
    if meta is not None:
        if meta.date:
            fields["date"] = meta.date
        if meta.author:
            fields["authors"] = authors_from(meta.author)
        if meta.url:
            fields["url"] = meta.url
        if meta.sitename:
            fields["site"] = meta.sitename
        if meta.description:
            fields["description"] = meta.description
    title = (meta.title if meta is not None and meta.title else None) or _first_heading(body) or title_from_path(path)
    return LoadResult([document_from(path, body, title=title, fields=fields, file_format="html")])


def _first_heading(body: str) -> str | None:
    match = re.search(r"^#{1,6}\s+(.+)$", body, re.MULTILINE)
    return match.group(1).strip() if match else None
