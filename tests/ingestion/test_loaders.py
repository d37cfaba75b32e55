"""Loaders on small real files of each format, and every kind of bad input the issue lists."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from researchcrew.data import demo_corpus_path
from researchcrew.knowledge.loaders import FieldMapError, discover, format_of, load_file, parse_field_map
from tests.ingestion.files import HTML_PAGE, MARKDOWN_NOTE, beir_records, write_beir, write_pdf


def test_markdown_front_matter_headings_and_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "enzymes.md"
    path.write_text(MARKDOWN_NOTE)
    result = load_file(path)
    assert result.issues == []
    (document,) = result.documents
    assert document.source_key == str(path.resolve())
    assert document.title == "Enzyme kinetics notes"
    assert document.source_date == datetime(2023, 5, 17, tzinfo=UTC)
    assert document.authors == ["Grace Hopper", "Alan Turing"]
    assert document.metadata["tags"] == ["biochemistry", "enzymes"]
    assert document.metadata["format"] == "markdown"
    assert "title:" not in document.text  # front matter is not text
    assert document.text.startswith("# Michaelis-Menten\n\nThe rate of an enzyme reaction")
    assert "\n\nKm is the substrate" in document.text  # paragraphs stay blank-line separated
    assert "## Inhibitors\n\nCompetitive inhibitors" in document.text  # setext heading became a '#' line


def test_markdown_title_from_first_heading_else_file_name(tmp_path: Path) -> None:
    with_heading = tmp_path / "a.md"
    with_heading.write_text("Intro line.\n\n## Results section\n\nIt worked.\n")
    assert load_file(with_heading).documents[0].title == "Results section"
    plain = tmp_path / "lab_notes-2024.markdown"
    plain.write_text("Just a paragraph without any heading.\n")
    assert load_file(plain).documents[0].title == "lab notes 2024"


def test_plain_text_keeps_paragraphs_and_decodes_latin1(tmp_path: Path) -> None:
    path = tmp_path / "field_notes.txt"
    path.write_bytes("Café au lait spots were noted.\r\n\r\n\r\n\r\nSecond paragraph.\r\n".encode("latin-1"))
    (document,) = load_file(path).documents
    assert document.text == "Café au lait spots were noted.\n\nSecond paragraph."
    assert document.title == "field notes"


def test_pdf_one_document_per_page_with_page_numbers(tmp_path: Path) -> None:
    path = write_pdf(
        tmp_path / "paper.pdf",
        ["Photosynthesis converts light\ninto chemical energy.", "", "The Calvin cycle fixes carbon dioxide."],
        title="Plant Notes",
        author="Jane Doe; John Roe",
        created="D:20220315101500",
    )
    result = load_file(path)
    assert result.issues == []
    assert [d.metadata["page"] for d in result.documents] == [1, 3]  # the blank page has no document
    first, third = result.documents
    assert first.source_key == f"{path.resolve()}#page=1"
    assert first.metadata["pages"] == 3
    assert first.title == "Plant Notes"
    assert first.authors == ["Jane Doe", "John Roe"]
    assert first.source_date == datetime(2022, 3, 15, 10, 15, tzinfo=UTC)
    assert "Photosynthesis converts light" in first.text and "chemical energy" in first.text
    assert "Calvin cycle" in third.text


def test_pdf_without_text_and_corrupt_pdf_are_reported(tmp_path: Path) -> None:
    blank = write_pdf(tmp_path / "scan.pdf", ["", ""])
    (issue,) = load_file(blank).issues
    assert "no extractable text" in issue.reason
    corrupt = tmp_path / "broken.pdf"
    corrupt.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage without xref")
    (issue,) = load_file(corrupt).issues
    assert "not a readable PDF" in issue.reason


def test_html_main_text_without_navigation_footer_or_scripts(tmp_path: Path) -> None:
    path = tmp_path / "coral.html"
    path.write_text(HTML_PAGE)
    result = load_file(path)
    assert result.issues == []
    (document,) = result.documents
    for boilerplate in ("NAVLINK", "FOOTERTEXT", "SCRIPTTEXT", "color: black"):
        assert boilerplate not in document.text
    assert "# Coral bleaching in warm summers" in document.text
    assert "## Methods" in document.text and "### Statistics" in document.text
    assert "forty reefs" in document.text and "mixed model" in document.text
    assert document.authors == ["Ada Lovelace"]
    assert document.source_date is not None and document.source_date.date().isoformat() == "2021-06-03"
    assert document.title and "Coral bleaching" in document.title


def test_html_with_no_main_text_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "empty.htm"
    path.write_text("<html><head><script>var a = 1;</script></head><body><nav><a href='/'>Home</a></nav></body></html>")
    (issue,) = load_file(path).issues
    assert "no main text" in issue.reason


def test_jsonl_beir_layout_detected(tmp_path: Path) -> None:
    path = write_beir(tmp_path / "corpus.jsonl", beir_records())
    result = load_file(path)
    assert result.issues == [] and result.complete
    assert [d.source_key for d in result.documents] == [f"{path.resolve()}#{i}" for i in ("101", "102", "103")]
    assert result.documents[0].title == "Aspirin and heart attacks"
    assert result.documents[0].text.startswith("Daily low-dose aspirin")


def test_jsonl_bundled_demo_layout_detected() -> None:
    result = load_file(demo_corpus_path())
    assert result.issues == []
    assert len(result.documents) == 105
    document = next(d for d in result.documents if "1707.08567" in d.source_key)
    assert document.url == "http://arxiv.org/abs/1707.08567v1"
    assert document.title is not None and document.title.startswith("Proceedings of Workshop AEW10")
    assert document.text.startswith("The 10th Asia-Europe workshop")
    assert document.authors[:2] == ["Kees A. Schouhamer Immink", "Stan Baggen"]  # a list written as a string
    assert document.source_date == datetime(2017, 7, 27, 8, 18, 33, tzinfo=UTC)
    assert document.metadata["primary_category"] == "cs.IT"
    assert "abstract" not in document.metadata  # mapped fields are not repeated in metadata


def test_jsonl_field_mapping_with_dotted_names(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    record = {
        "key": "n-1",
        "headline": "ignored by the mapping",
        "body": {"main": "Mapped body text."},
        "meta": {"when": "2020-02-03", "link": "https://example.org/n-1"},
        "heading": "The mapped title",
    }
    path.write_text(json.dumps(record) + "\n")
    mapping = parse_field_map(["id=key", "text=body.main", "title=heading", "date=meta.when", "url=meta.link"])
    (document,) = load_file(path, field_map=mapping).documents
    assert document.source_key.endswith("#n-1")
    assert document.text == "Mapped body text."
    assert document.title == "The mapped title"
    assert document.source_date == datetime(2020, 2, 3, tzinfo=UTC)
    assert document.url == "https://example.org/n-1"


def test_jsonl_bad_lines_are_reported_by_number_and_the_rest_loaded(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps({"_id": "a", "text": "First good record."}),
        '{"_id": "b", "text": "truncated',
        "",
        json.dumps(["not", "an", "object"]),
        json.dumps({"_id": "c", "title": "no text here"}),
        json.dumps({"_id": "a", "text": "Same id again."}),
        json.dumps({"text": "A record without any id."}),
    ]
    path.write_text("\n".join(lines) + "\n")
    result = load_file(path)
    assert [d.text for d in result.documents] == ["First good record.", "A record without any id."]
    assert result.documents[1].source_key.endswith("#line-7")
    assert not result.complete
    reasons = {issue.line: issue.reason for issue in result.issues}
    assert set(reasons) == {2, 4, 5, 6}
    assert "not valid JSON" in reasons[2]
    assert "not an object" in reasons[4]
    assert "no text" in reasons[5] and "--field text=" in reasons[5]
    assert "duplicate id 'a'" in reasons[6]
    assert str(result.issues[0]) == f"{path}:2: {reasons[2]}"


@pytest.mark.parametrize("bad", [["nonsense"], ["colour=text"], ["text="]])
def test_field_map_mistakes_fail_fast(bad: list[str]) -> None:
    with pytest.raises(FieldMapError):
        parse_field_map(bad)


def test_empty_binary_and_unknown_files_are_reported(tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("  \n\n")
    binary = tmp_path / "image.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    unknown = tmp_path / "data.xyz"
    unknown.write_text("some words")
    assert load_file(empty).issues[0].reason == "empty file"
    assert "binary content, not Markdown text" in load_file(binary).issues[0].reason
    reason = load_file(unknown).issues[0].reason
    assert reason.startswith("unsupported file type '.xyz'") and ".md" in reason


def test_dangling_link_is_reported_as_unreadable(tmp_path: Path) -> None:
    link = tmp_path / "gone.md"
    link.symlink_to(tmp_path / "deleted-target.md")
    (issue,) = load_file(link).issues
    assert issue.reason.startswith("cannot read")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_file_without_read_permission_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "secret.md"
    path.write_text("# Secret\n\ntext")
    path.chmod(0)
    try:
        (issue,) = load_file(path).issues
    finally:
        path.chmod(0o644)
    assert issue.reason == "cannot read: permission denied"


def test_content_sniffing_for_files_without_a_known_extension(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "download", ["Sniffed PDF text."])
    html = tmp_path / "page.php"
    html.write_text(HTML_PAGE)
    jsonl = tmp_path / "export.data"
    write_beir(jsonl, beir_records())
    assert (format_of(pdf), format_of(html), format_of(jsonl)) == ("pdf", "html", "jsonl")
    assert len(load_file(jsonl).documents) == 3


def test_discover_files_folders_and_globs(tmp_path: Path) -> None:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / ".hidden").mkdir()
    for name in (
        "docs/a.md",
        "docs/sub/b.txt",
        "docs/sub/c.HTML",
        "docs/.hidden/d.md",
        "docs/.e.md",
        "docs/picture.png",
        "top.jsonl",
    ):
        (tmp_path / name).write_text("x")
    found = discover(
        [
            tmp_path / "docs",
            str(tmp_path / "*.jsonl"),
            tmp_path / "docs" / "a.md",
            str(tmp_path / "nothing-*.pdf"),
            tmp_path / "missing.md",
        ]
    )
    assert [p.relative_to(tmp_path).as_posix() for p in found.files] == [
        "docs/a.md",
        "docs/sub/b.txt",
        "docs/sub/c.HTML",
        "top.jsonl",
    ]
    assert [p.name for p in found.ignored] == ["picture.png"]
    assert [(Path(i.file).name, i.reason) for i in found.issues] == [
        ("nothing-*.pdf", "no files match this pattern"),
        ("missing.md", "no such file or directory"),
    ]


def test_same_file_through_a_link_is_read_once(tmp_path: Path) -> None:
    real = tmp_path / "note.md"
    real.write_text("# Note\n\ntext")
    (tmp_path / "alias.md").symlink_to(real)
    found = discover([real, tmp_path / "alias.md"])
    assert found.files == [real]
