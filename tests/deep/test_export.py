"""Report exports (issue 21 item 4): each format opened the way a reader would — Markdown read, HTML parsed, PDF
text extracted, DOCX parsed — with numbered citations that agree across formats, a reference list, a table of
contents for long reports, no HTML from the evidence reaching the page, and reports with no sources or with
unicode, right-to-left text, emoji and very long URLs."""

from __future__ import annotations

import re

import lxml.html
import pytest
from docx import Document
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.deep.export import FORMATS, MEDIA_TYPES, export_report, file_name, format_for
from researchcrew.deep.export._document import TOC_MIN_SECTIONS
from researchcrew.deep.export._pdf import font_files
from researchcrew.errors import ConfigurationError
from tests.deep.export_support import (
    citation,
    comparison_table,
    docx_text,
    make_report,
    markers,
    pdf_text,
)

SECTIONS = [
    (
        "1. What is pooled testing?",
        [("Pooled testing mixes samples before testing.", [1]), ("It saves tests.", [1, 2])],
    ),
    ("2. What limits it?", [("Dilution lowers sensitivity in large pools.", [2])]),
    ("3. Who proposed it?", [("Dorfman proposed group testing in 1943.", [3])]),
    ("4. When does it fail?", [("It works poorly when prevalence is high.", [2, 3])]),
]
CITATIONS = [
    citation(1, "Pooled testing", file_name="pooling.md"),
    citation(2, "Dilution in pools", url="https://example.org/dilution"),
    citation(3, "Dorfman screening", url="https://example.org/dorfman"),
]


def _texts(report: object) -> dict[str, str]:
    exported = {fmt: export_report(report, fmt) for fmt in FORMATS}  # type: ignore[arg-type]
    return {
        "md": re.sub(r"<(https?://[^>\s]+)>", r"\1", exported["md"].content.decode("utf-8")),  # autolinks
        "html": lxml.html.document_fromstring(exported["html"].content).text_content(),
        "pdf": pdf_text(exported["pdf"].content),
        "docx": docx_text(exported["docx"].content),
    }


def test_every_format_carries_the_statements_numbered_citations_and_references() -> None:
    report = make_report("What is known about pooled testing?", SECTIONS, CITATIONS)
    texts = _texts(report)
    for fmt, text in texts.items():
        flat = " ".join(text.split())
        for _, claims in SECTIONS:
            for statement, numbers in claims:
                assert f"{statement} {''.join(f'[{n}]' for n in numbers)}" in flat, (fmt, statement)
        _, _, references = flat.rpartition("References")
        assert references, fmt
        assert "[1] Pooled testing — pooling.md (§ Methods, passage 1 of 9)" in references, fmt
        assert "[2] Dilution in pools — https://example.org/dilution" in references, fmt
        assert markers(references) == [1, 2, 3], fmt
    in_text = {fmt: markers(text.rpartition("References")[0]) for fmt, text in texts.items()}
    assert in_text["md"] == in_text["html"] == in_text["pdf"] == in_text["docx"] == [1, 1, 2, 2, 3, 2, 3]


def test_media_types_and_a_file_name_safe_anywhere() -> None:
    report = make_report('Pooled "testing"?\r\n../../etc/passwd — Ünïcödé 検査', SECTIONS, CITATIONS)
    for fmt in FORMATS:
        exported = export_report(report, fmt)
        assert exported.media_type == MEDIA_TYPES[fmt]
        assert re.fullmatch(r"[a-z0-9-]+\." + fmt, exported.file_name), exported.file_name
    assert file_name(report, "pdf") == "report-pooled-testing-etc-passwd-unicode-run01234.pdf"
    assert export_report(report, "pdf").content.startswith(b"%PDF-")
    assert export_report(report, "docx").content.startswith(b"PK")


def test_long_reports_get_a_table_of_contents_short_ones_do_not() -> None:
    long_report = make_report("Q?", SECTIONS, CITATIONS)
    page = lxml.html.document_fromstring(export_report(long_report, "html").content)
    links = [a.get("href") for a in page.iter("a") if (a.get("href") or "").startswith("#")]
    assert len(links) == TOC_MIN_SECTIONS
    ids = {element.get("id") for element in page.iter() if element.get("id")}
    assert all(link[1:] in ids for link in links), (links, ids)
    assert "## Contents" in export_report(long_report, "md").content.decode()
    assert "Contents" in pdf_text(export_report(long_report, "pdf").content)
    assert "Contents" in docx_text(export_report(long_report, "docx").content)

    short = make_report("Q?", SECTIONS[:2], CITATIONS)
    for fmt, text in _texts(short).items():
        assert "Contents" not in text, fmt


def test_evidence_text_cannot_inject_html() -> None:
    hostile = [
        (
            "1. <script>alert('q')</script>",
            [
                ("<script>alert(1)</script> and <img src=x onerror=alert(2)> **not bold**", [1]),
                ("[click](javascript:alert(3)) <a href='javascript:alert(4)'>x</a> &lt;b&gt;", [1]),
                ("# not a heading\n- not a list | not a cell", [1]),
            ],
        )
    ]
    evil = citation(1, "<iframe src=//evil.example></iframe>", url="javascript:alert(5)")
    report = make_report("<b onmouseover=alert(6)>Q</b>?", hostile, [evil])
    html = export_report(report, "html").content.decode()
    page = lxml.html.document_fromstring(html)
    tags = {element.tag for element in page.iter() if isinstance(element.tag, str)}
    assert not tags & {"script", "img", "iframe", "b", "strong"}
    for element in page.iter():
        if not isinstance(element.tag, str):
            continue
        assert not [name for name in element.attrib if name.lower().startswith("on")], element.attrib
        assert "javascript" not in (element.get("href") or "").lower()
    shown = page.text_content()
    assert "<script>alert(1)</script> and <img src=x onerror=alert(2)> **not bold**" in shown
    assert "[click](javascript:alert(3))" in shown and "&lt;b&gt;" in shown
    assert "# not a heading - not a list | not a cell" in shown
    assert len(page.findall(".//h2")) == 2  # the section and References: the statement made no heading


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_report_without_sources_renders(fmt: str) -> None:
    report = make_report("What is known about an unknown topic?", [], [])
    exported = export_report(report, fmt)
    text = {
        "md": lambda c: c.decode(),
        "html": lambda c: lxml.html.document_fromstring(c).text_content(),
        "pdf": pdf_text,
        "docx": docx_text,
    }[fmt](exported.content)
    assert "No sources were cited." in text
    assert "answers none of the sub-questions" in text
    assert markers(text) == []


def test_unicode_right_to_left_emoji_and_very_long_urls_render() -> None:
    long_url = "https://example.org/" + "very-long-path-segment/" * 150 + "?q=" + "x" * 400
    sections = [
        ("1. Ελληνικά и кириллица", [("Статистика: σ² ≈ 0.5 — ok 🔬🧪", [1])]),
        ("2. עברית ועربية", [("שלום עולם مرحبا بالعالم", [2])]),
    ]
    cites = [citation(1, "Études über Überprüfung", url=long_url), citation(2, "ملف", file_name="ملف-عربي.md")]
    report = make_report("Ünïcödé 🔬 question?", sections, cites)
    texts = _texts(report)
    for fmt in ("md", "html", "docx"):
        assert "Статистика: σ² ≈ 0.5 — ok 🔬🧪 [1]" in " ".join(texts[fmt].split()), fmt
        assert "שלום עולם مرحبا بالعالم [2]" in texts[fmt], fmt
        assert long_url in texts[fmt].replace("\n", ""), fmt
    pdf = texts["pdf"]
    if font_files() is not None:  # DejaVu Sans: Greek, Cyrillic, Hebrew, Arabic print; emoji become "?"
        flat = " ".join(pdf.split())
        assert "Статистика: σ² ≈ 0.5 — ok ?? [1]" in flat
        assert "שלום עולם" in flat and "مرحبا" in flat
    assert long_url in "".join(pdf.split())  # wrapped over many lines, every character kept
    html = lxml.html.document_fromstring(export_report(report, "html").content)
    assert long_url in [link.get("href") for link in html.iter("a")]


def test_a_comparison_table_in_every_format() -> None:
    report = make_report(
        "Adaptive pooling vs Dorfman screening?", SECTIONS[:1], CITATIONS, comparison=comparison_table()
    )
    texts = _texts(report)
    for fmt, text in texts.items():
        flat = " ".join(text.split())
        assert "Adaptive pooling" in flat and "Dorfman screening" in flat and "Saves reagents [1]" in flat, fmt
        assert "not found in the evidence" in flat, fmt
    document = Document(__import__("io").BytesIO(export_report(report, "docx").content))
    assert [cell.text for cell in document.tables[0].rows[0].cells] == [
        "Aspect",
        "Adaptive pooling",
        "Dorfman screening",
    ]
    page = lxml.html.document_fromstring(export_report(report, "html").content)
    assert [th.text_content() for th in page.iter("th")] == ["Aspect", "Adaptive pooling", "Dorfman screening"]


def test_the_format_comes_from_the_extension_or_is_named() -> None:
    assert format_for("out/report.PDF") == "pdf"
    assert format_for("report.markdown") == "md"
    assert format_for("report.htm") == "html"
    assert format_for("report.txt", "docx") == "docx"
    with pytest.raises(ConfigurationError, match=r"\.md, \.html, \.pdf or \.docx"):
        format_for("report.txt")
    with pytest.raises(ConfigurationError, match="unknown report format 'odt'"):
        format_for(None, "odt")


def test_a_literature_review_lists_each_themes_sources_by_title_in_every_format() -> None:
    from researchcrew.contracts.deep import ReviewTheme

    hostile = citation(3, "[x](javascript:alert(1)) <b>Dorfman</b>", url="https://example.org/d")
    report = make_report("Q?", SECTIONS[:2], [*CITATIONS[:2], hostile]).model_copy(
        update={
            "report_type": "literature_review",
            "themes": [
                ReviewTheme(theme="What is pooled testing?", sources=[1, 3]),
                ReviewTheme(theme="What limits it?", sources=[2]),
            ],
        }
    )
    line = "Sources on this theme: [1] Pooled testing; [3] [x](javascript:alert(1)) <b>Dorfman</b>"
    for fmt, text in _texts(report).items():
        flat = " ".join(text.split())
        assert line in flat.replace("\\", ""), fmt
        assert "Sources on this theme: [2] Dilution in pools" in flat, fmt
    page = lxml.html.document_fromstring(export_report(report, "html").content)
    assert not [a for a in page.iter("a") if "javascript" in (a.get("href") or "")]
    assert not list(page.iter("b"))


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=4))
def test_any_statement_text_reads_back_literally_from_markdown_and_html(texts: list[str]) -> None:
    from researchcrew.deep.export._document import clean

    kept = [text for text in texts if clean(text)]
    report = make_report("Q?", [("1. Q?", [(text, [1]) for text in kept])], CITATIONS[:1])
    page = lxml.html.document_fromstring(export_report(report, "html").content)
    assert len(page.findall(".//h2")) == 2 and not page.findall(".//script")  # the section and References
    shown = " ".join(page.text_content().split())
    for text in kept:
        assert f"{clean(text)} [1]" in shown
