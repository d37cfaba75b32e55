"""The answer as an OpenAI client reads it: numbered references, escaping of what sources wrote, safe links,
progress lines, usage read through one function."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from researchcrew.contracts import FinalResponse, ProgressEvent, Query
from researchcrew.contracts.chunks import SourceFailure, SourceReport
from researchcrew.contracts.follow_up import TokenCount, TokenUsage
from researchcrew.contracts.synthesizer import Citation
from researchcrew.service.openai_compat._content import (
    content_pieces,
    escape,
    progress_line,
    render_content,
    safe_url,
    usage_of,
)

HOSTILE_TITLE = "Click <img src=x onerror=alert(1)> ![t](https://evil.example/pixel.png?c=1) [me](javascript:alert(1))"


def answer(**fields: object) -> FinalResponse:
    values: dict[str, object] = {
        "query": Query(text="What is metamorphic testing?", user_id="ada", session_id="s1"),
        "answer": "It checks relations [1, 2]. ![x](https://evil.example/p.png) It has limits [2].",
        "citations": [
            Citation(
                number=1,
                chunk_id="rag-1",
                source_type="rag",
                title=HOSTILE_TITLE,
                url="javascript:alert(1)",
                location="§ Intro, passage 1 of 3",
                authors=["A. One", "B. Two", "C. Three", "D. Four"],
                source_date=datetime(2021, 5, 1, tzinfo=UTC),
            ),
            Citation(number=2, chunk_id="web-1", source_type="web", title="A (good) page", url="https://x.org/a(b)"),
        ],
        "source_reports": [
            SourceReport(source_type="rag", tool_name="rag_search", status="success", chunk_count=2),
            SourceReport(
                source_type="arxiv",
                tool_name="academic_search",
                status="failed",
                failure=SourceFailure(kind="unreachable", message="Connection refused by export.arxiv.org"),
            ),
        ],
    }
    values.update(fields)
    return FinalResponse.model_validate(values)


def rendered_html(markdown: str) -> str:
    return MarkdownIt("commonmark").render(markdown)


def test_references_are_numbered_and_link_only_to_web_addresses() -> None:
    content = render_content(answer())
    html = rendered_html(content)
    assert "It checks relations [1, 2]." in content
    assert "- **[2]** [A \\(good\\) page](https://x.org/a%28b%29) — web" in content
    assert "§ Intro, passage 1 of 3 · A. One, B. Two, C. Three et al. · 2021 · knowledge base" in content
    assert 'href="https://x.org/a%28b%29"' in html
    assert "javascript:" not in html.replace("javascript:alert(1))", "")  # only as escaped text, never an href
    assert 'href="javascript' not in html
    assert "_Sources that failed: arXiv (unreachable: Connection refused by export.arxiv.org)._" in content


def test_nothing_a_source_wrote_becomes_markup() -> None:
    html = rendered_html(render_content(answer()))
    assert "<img" not in html  # neither the title's tag nor the answer's Markdown image
    assert "evil.example/pixel.png" in html  # still there, as text
    assert 'href="https://evil.example' not in html


@settings(max_examples=500)
@given(st.text(max_size=200))
def test_escaped_text_renders_as_exactly_that_text(text: str) -> None:
    tokens = MarkdownIt("commonmark").parseInline(escape(text))
    children = [child for token in tokens for child in (token.children or [])]
    assert all(child.type == "text" for child in children)
    printable = "".join(char for char in text if unicodedata.category(char) != "Cc")
    assert "".join(child.content for child in children) == " ".join(printable.split())


def test_safe_url_keeps_http_and_https_only() -> None:
    assert safe_url("https://arxiv.org/abs/2101.00001") == "https://arxiv.org/abs/2101.00001"
    assert safe_url("HTTP://example.org/a(b)") == "HTTP://example.org/a%28b%29"
    for bad in ("javascript:alert(1)", "data:text/html,<b>", "//evil.example", "ftp://x", "", None, "https://a b"):
        assert safe_url(bad) is None


def test_the_streamed_pieces_are_exactly_the_content() -> None:
    content = render_content(answer())
    pieces = list(content_pieces(content))
    assert "".join(pieces) == content and len(pieces) > 2


def test_usage_reads_the_answers_token_count_or_zeros() -> None:
    response = answer()
    assert usage_of(response).model_dump() == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cost_usd": 0.0,  # no LLM call: exactly nothing spent
    }
    counted = response.model_copy(update={"token_usage": TokenUsage(synthesis=TokenCount.of(120, 30))})
    usage = usage_of(counted)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (120, 30, 150)


def event(**fields: object) -> ProgressEvent:
    return ProgressEvent.model_validate({"run_id": "r", "elapsed_ms": 1.0, **fields})


def test_progress_lines_say_what_each_source_did() -> None:
    failed = SourceReport(
        source_type="web",
        tool_name="web_search",
        status="failed",
        latency_ms=1500,
        failure=SourceFailure(kind="not_configured", message="Set FIRECRAWL_API_KEY"),
    )
    found = SourceReport(source_type="rag", tool_name="rag_search", status="success", chunk_count=3, latency_ms=42)
    assert progress_line(event(stage="retrieve", status="source", source=failed)) == (
        "✗ web failed (not configured): Set FIRECRAWL_API_KEY"
    )
    assert progress_line(event(stage="retrieve", status="source", source=found)) == (
        "✓ knowledge base: 3 passage(s) in 42 ms"
    )
    assert progress_line(event(stage="retrieve", status="started", detail={"query_text": "q?"})) == (
        "Searching the sources for “q?”…"
    )
    assert progress_line(event(stage="guard", status="started")) is None
    assert progress_line(event(stage="synthesize", status="text", text="partial")) is None
