"""What an OpenAI client reads of an answer: the message content (Markdown), the token usage, and the progress lines
a streamed answer sends as ``reasoning_content``.

The content is the answer with its ``[n]`` markers as researchcrew wrote them, then its sources as a list of numbered
references (``- **[1]** [title](url) — where in the source · authors · year · source``), then, when sources failed,
one line saying which and why. The markers stay plain text: they read the same in a terminal, in the structured
``researchcrew.citations`` and in any Markdown renderer (a reference-style link would print them as a bare number).
Only http(s) links are written. Text from a source (titles, locations, authors, failure reasons) is escaped, and an
image in the answer text is written as text: a retrieved web page must not make a reader's front-end load pictures.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.progress import ProgressEvent
from researchcrew.contracts.synthesizer import Citation, FinalResponse
from researchcrew.service.openai_compat._schema import Usage

_URL_ESCAPES = str.maketrans({"<": "%3C", ">": "%3E", "(": "%28", ")": "%29", " ": "%20"})
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]()<>!#|~&])")  # backslash-escaped, they render as themselves
_IMAGE = re.compile(r"!\[")
_SOURCE_NAMES = {"rag": "knowledge base", "web": "web", "arxiv": "arXiv", "memory": "memory"}


def usage_of(response: FinalResponse) -> Usage:
    """The tokens the answer's LLM stages spent, summed over the stages (zeros for an answer no model wrote)."""
    total = response.token_usage.total
    return Usage(
        prompt_tokens=int(total.prompt_tokens),
        completion_tokens=int(total.completion_tokens),
        total_tokens=int(total.total_tokens),
        cost_usd=response.cost.usd,
    )


def standalone_of(response: FinalResponse) -> str | None:
    """The question researched when a follow-up was rewritten, else None."""
    return response.rewrite.standalone if response.rewrite is not None else None


def escape(text: str) -> str:
    """Text shown literally by a Markdown renderer: one line, control characters dropped (CommonMark would show a
    NUL as U+FFFD), every character that could start markup backslash-escaped."""
    printable = "".join(char for char in text if unicodedata.category(char) != "Cc")
    return _MARKDOWN_SPECIALS.sub(r"\\\1", " ".join(printable.split()))


def safe_url(url: str | None) -> str | None:
    """An http(s) URL fit for a Markdown link, or None."""
    if not url or not re.match(r"^https?://[^\s]+$", url.strip(), re.IGNORECASE):
        return None
    return url.strip().translate(_URL_ESCAPES)


def source_name(source_type: str) -> str:
    return _SOURCE_NAMES.get(source_type, source_type)


def render_content(response: FinalResponse) -> str:
    """The message content: the answer, its numbered references, and the sources that failed."""
    blocks = [_IMAGE.sub(r"!\\[", response.answer).strip()]
    if response.citations:
        blocks.append("**Sources**\n\n" + "\n".join(_reference(citation) for citation in response.citations))
    failed = [report for report in response.source_reports if report.status == "failed"]
    if failed:
        blocks.append("_Sources that failed: " + "; ".join(_failure(report) for report in failed) + "._")
    return "\n\n".join(block for block in blocks if block)


def _reference(citation: Citation) -> str:
    title = escape(citation.title or citation.label or citation.source_id or source_name(citation.source_type))
    url = safe_url(citation.url)
    head = f"[{title}]({url})" if url else title
    details = [escape(citation.file_name)] if citation.file_name and not url else []
    details += [escape(citation.location)] if citation.location else []
    if citation.authors:
        authors = ", ".join(citation.authors[:3]) + (" et al." if len(citation.authors) > 3 else "")
        details.append(escape(authors))
    if citation.source_date:
        details.append(str(citation.source_date.year))
    details.append(source_name(citation.source_type))
    return f"- **[{citation.number}]** {head} — {' · '.join(details)}"


def _failure(report: SourceReport) -> str:
    reason = report.failure.message if report.failure else "failed"
    kind = report.failure.kind.replace("_", " ") if report.failure else "failed"
    reason = " ".join(reason.split())
    reason = reason if len(reason) <= 160 else reason[:157] + "…"
    return f"{escape(source_name(report.source_type))} ({kind}: {escape(reason)})"


# ---- progress, streamed as reasoning_content --------------------------------------------------------------------


def progress_line(event: ProgressEvent) -> str | None:
    """One line a person can follow, for the events worth a line; None for the rest."""
    detail = event.detail
    if event.status == "source" and event.source is not None:
        return _source_progress(event.source)
    if event.stage == "retrieve" and event.status == "started":
        query = " ".join(str(detail.get("query_text") or "").split())
        return f"Searching the sources for “{query[:200]}”…" if query else "Searching the sources…"
    if event.stage == "evaluate" and event.status == "finished":
        kept, removed = detail.get("kept"), detail.get("removed")
        contradictions = detail.get("contradictions") or 0
        line = f"Kept {kept} passage(s) of the evidence, set aside {removed}"
        return line + (f"; {contradictions} contradiction(s) to present." if contradictions else ".")
    if event.stage == "reformulate" and event.status == "finished" and detail.get("query_text"):
        return f"The evidence was weak; searching again as “{detail['query_text']}”."
    if event.stage == "synthesize" and event.status == "started":
        return "Writing the answer from the evidence…"
    if event.stage == "validate" and event.status == "finished" and detail.get("removed"):
        return f"Removed {detail['removed']} citation(s) that pointed at no evidence."
    stage: str = event.stage  # "rewrite" (a follow-up made stand-alone) is a stage of a later release
    if stage == "rewrite" and event.status == "finished" and detail.get("standalone"):
        return f"Read the follow-up as “{detail['standalone']}”."
    return None


def _source_progress(report: SourceReport) -> str:
    name = source_name(report.source_type)
    took = f"{report.latency_ms / 1000:.1f} s" if report.latency_ms >= 1000 else f"{report.latency_ms:.0f} ms"
    if report.status == "success":
        return f"✓ {name}: {report.chunk_count} passage(s) in {took}"
    if report.status == "empty":
        return f"· {name}: nothing found ({took})"
    if report.status == "skipped":
        return f"– {name}: not searched for this question"
    reason = report.failure.message if report.failure else "failed"
    kind = report.failure.kind.replace("_", " ") if report.failure else "failed"
    return f"✗ {name} failed ({kind}): {' '.join(reason.split())[:300]}"


def content_pieces(content: str) -> Iterable[str]:
    """The content in the pieces a streamed answer sends: a paragraph (or a whole list) at a time, which together are
    exactly ``content``."""
    return (piece for piece in re.split(r"(?<=\n\n)", content) if piece)
