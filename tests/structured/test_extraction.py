"""Extraction by rules per format, typed values, caps and bad input, and the optional LLM extractor (no Milvus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from researchcrew.embedding.embedder import resolve_model_path
from researchcrew.knowledge._chunking import Chunker
from researchcrew.knowledge._tokens import token_counter_for
from researchcrew.knowledge.annotations import LLMExtractor, extract, typed_value
from researchcrew.knowledge.annotations import _extract as rules
from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders import _csv as csv_loader
from researchcrew.knowledge.loaders import load_file
from researchcrew.testing import FakeLLM
from tests.ingestion.files import write_pdf


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(token_counter_for(resolve_model_path("all-MiniLM-L6-v2")), max_tokens=256)


def _annotations(document: Document, chunker: Chunker):  # type: ignore[no-untyped-def]
    chunks = chunker.chunk(document)
    extraction = extract(document, chunks)
    texts = {chunk.chunk_id: chunk.text for chunk in chunks}
    for annotation in extraction.annotations:  # every value is in its passage
        assert all(value.text in texts[annotation.chunk_id] for value in annotation.values)
    return extraction


@pytest.mark.parametrize(
    ("label", "text", "kind", "number", "unit"),
    [
        ("Width", "1.15 m", "number", 1.15, "m"),
        ("Width", "45 in", "number", 1.143, "m"),
        ("Height", "1722 mm", "number", 1.722, "m"),
        ("Weight", "40 lb", "number", 18.1436948, "kg"),
        ("Sample size", "1,204 participants", "number", 1204.0, None),
        ("Price", "$89.50", "number", 89.5, "USD"),
        ("Price", "€12", "number", 12.0, "EUR"),
        ("Vendor", "Tire World", "text", None, None),
        ("Notes", "tested 4 models in 2 labs over 3 weeks", "text", None, None),
    ],
)
def test_typed_values(label: str, text: str, kind: str, number: float | None, unit: str | None) -> None:
    value = typed_value(label, text)
    assert (value.kind, value.unit) == (kind, unit)
    assert value.number == (pytest.approx(number) if number is not None else None)


def test_dates_are_iso_days() -> None:
    assert typed_value("Date", "March 2, 2024").date == "2024-03-02"
    assert typed_value("Date", "2024-03-02").kind == "date"
    assert typed_value("Model", "1.15 m").kind == "number"  # a date parser would call this a date; not here


def test_markdown_facts_and_table(chunker: Chunker) -> None:
    text = (
        "# Spec sheet\n\n**Width:** 1.15 m\n\n- Weight: 21 kg\n\nSee: the appendix for more details and context.\n\n"
        "Measured values:\n\n| Model | Width | Power |\n|---|:---:|---|\n"
        "| A1 | 1.1 m | 400 W |\n| A2 | 44 in | 380 W |\n"
    )
    extraction = _annotations(Document(source_key="s.md", text=text, title="Spec"), chunker)
    facts = {a.values[0].key: a.values[0].text for a in extraction.annotations if a.kind == "fact"}
    assert facts == {"width": "1.15 m", "weight": "21 kg"}
    rows = [a for a in extraction.annotations if a.kind == "row"]
    assert [[v.text for v in row.values] for row in rows] == [["A1", "1.1 m", "400 W"], ["A2", "44 in", "380 W"]]
    assert rows[0].table == "Measured values" and rows[0].section == "Spec sheet"


def test_html_table_and_sentence_facts(tmp_path: Path, chunker: Chunker) -> None:
    page = tmp_path / "r.html"
    page.write_text(
        "<html><head><title>Receipt 7</title></head><body><article><h1>Receipt 7</h1><p>Vendor: Tire World. "
        "Date: 2024-03-02. Parts for the truck.</p><table><tr><th>Item</th><th>Price</th></tr>"
        "<tr><td>Tires</td><td>$89.50</td></tr></table></article></body></html>",
        encoding="utf-8",
    )
    (document,) = load_file(page).documents
    extraction = _annotations(document, chunker)
    facts = {a.values[0].key: a.values[0] for a in extraction.annotations if a.kind == "fact"}
    assert facts["vendor"].text == "Tire World" and facts["date"].date == "2024-03-02"
    (row,) = [a for a in extraction.annotations if a.kind == "row"]
    assert [v.text for v in row.values] == ["Tires", "$89.50"] and row.file == str(page)


def test_pdf_facts_with_their_page(tmp_path: Path, chunker: Chunker) -> None:
    path = write_pdf(tmp_path / "p.pdf", ["Intro page", "Sample size: 1,204\nReagent cost per test: $2.35"])
    documents = load_file(path).documents
    found = [a for document in documents for a in _annotations(document, chunker).annotations]
    assert [(a.page, a.values[0].key, a.values[0].number) for a in found] == [
        (2, "sample size", 1204.0),
        (2, "reagent cost per test", 2.35),
    ]


def test_csv_loader_caps_and_garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunker: Chunker) -> None:
    monkeypatch.setattr(csv_loader, "MAX_ROWS", 3)
    monkeypatch.setattr(csv_loader, "MAX_COLUMNS", 2)
    big = tmp_path / "big.csv"
    big.write_text("a;b;c\n" + "".join(f"{i};{i * 2};x{'y' * 600}\n" for i in range(10)), encoding="utf-8")
    (document,) = load_file(big).documents
    assert document.metadata["table_notes"] == ["kept the first 2 of 3 columns", "kept the first 3 of 10 rows"]
    rows = [a for a in _annotations(document, chunker).annotations if a.kind == "row"]
    assert [[v.text for v in row.values] for row in rows] == [["0", "0"], ["1", "2"], ["2", "4"]]

    for name, content in [
        ("one.csv", "just a line of prose, with a comma\n"),
        ("prose.csv", "Only one column\nof prose\nlines\n"),
        ("binary.csv", "\x00\x01\x02garbage"),
    ]:
        (tmp_path / name).write_text(content, encoding="utf-8")
        result = load_file(tmp_path / name)
        assert not result.documents and result.issues, name


def test_huge_markdown_table_is_capped(monkeypatch: pytest.MonkeyPatch, chunker: Chunker) -> None:
    monkeypatch.setattr(rules, "MAX_TABLE_ROWS", 5)
    rows = "\n".join(f"| r{i} | {i} |" for i in range(50))
    document = Document(source_key="t.md", text=f"| name | n |\n|---|---|\n{rows}\n", title="T")
    extraction = _annotations(document, chunker)
    assert len(extraction.annotations) == 5
    assert extraction.notes == ["table 1: kept the first 5 of 50 rows"]


def test_llm_facts_are_kept_only_when_the_passage_holds_them(chunker: Chunker) -> None:
    document = Document(source_key="n.md", text="The SunMax panel is 1,134 mm wide and weighs 21 kg.", title="N")
    chunks = chunker.chunk(document)
    reply = {
        "facts": [
            {"label": "Width", "value": "1,134 mm"},
            {"label": "Height", "value": "1,722 mm"},  # invented: not in the passage
            {"label": "Weight", "value": "21kg"},  # reworded: not verbatim
        ]
    }
    llm = FakeLLM([json.dumps(reply)])
    extractor = LLMExtractor(llm)
    extraction = extractor.add_to(extract(document, chunks), document, chunks)
    assert [(a.values[0].key, a.values[0].number, a.extracted_by) for a in extraction.annotations] == [
        ("width", 1.134, "llm")
    ]
    assert extractor.rejected == 2
    broken = LLMExtractor(FakeLLM(["not json at all"]))
    assert broken.add_to(extract(document, chunks), document, chunks).annotations == []


def test_hostile_headings_and_headers_are_clipped_not_crashed(chunker: Chunker) -> None:
    text = f"# {'H' * 3000}\n\n| {'C' * 450} | n |\n|---|---|\n| x | 1 |\n\n{'L' * 40}: value\n"
    extraction = _annotations(Document(source_key="h.md", text=text, title="T" * 5000), chunker)
    assert extraction.annotations
    assert all(len(a.section or "") <= 500 and len(a.title or "") <= 2_000 for a in extraction.annotations)
    assert all(len(v.label) <= 200 for a in extraction.annotations for v in a.values)
