"""PDF tables (issue 22): ruled and unruled tables, a table over several pages and a malformed one, drawn with fpdf2
in the test, read by the PDF loader as pipe tables and stored as row annotations with their page."""

from __future__ import annotations

from pathlib import Path

import pytest
from fpdf import FPDF

from researchcrew.knowledge.annotations import AnnotationIndex, annotations_search, index_for, parse_question
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.knowledge.loaders._pdf import load_pdf
from tests.ingestion.files import write_pdf

PANELS = [["Model", "Width", "Power"], ["SP-100", "1.15 m", "400 W"], ["SP-200", "1.32 m", "450 W"]]
PANELS += [["SP-300", "110 cm", "380 W"]]


def _pdf(
    path: Path,
    rows: list[list[str]],
    *,
    borders: str = "ALL",
    repeat_headings: int = 1,
    font_size: int = 10,
    spans: dict[int, int] | None = None,
) -> Path:
    """A page of prose, a captioned table (``borders``: ALL ruled, NONE unruled), a sentence after it."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=font_size)
    pdf.add_page()
    pdf.multi_cell(0, 5, "Spec sheet for the SP series. The panels below were tested in 2024 at the field station.")
    pdf.ln(4)
    pdf.cell(0, 6, "Table 1: Solar panel widths", new_x="LMARGIN", new_y="NEXT")
    with pdf.table(borders_layout=borders, first_row_as_headings=True, repeat_headings=repeat_headings) as table:
        for number, row in enumerate(rows):
            cells = table.row()
            if spans and number in spans:  # a malformed row: one cell spanning several columns
                cells.cell(row[0], colspan=spans[number])
                continue
            for cell in row:
                cells.cell(cell)
    pdf.ln(4)
    pdf.multi_cell(0, 5, "Widths are measured along the short edge of the frame.")
    pdf.output(str(path))
    return path


@pytest.mark.parametrize("borders", ["ALL", "NONE"])
def test_ruled_and_unruled_tables_become_pipe_tables(tmp_path: Path, borders: str) -> None:
    documents = load_pdf(_pdf(tmp_path / "panels.pdf", PANELS, borders=borders)).documents
    assert len(documents) == 1 and documents[0].metadata["tables"] == 1
    text = documents[0].text
    assert "| Model | Width | Power |" in text
    assert "| SP-300 | 110 cm | 380 W |" in text
    assert text.index("Spec sheet") < text.index("| Model") < text.index("Widths are measured")  # in its place
    assert text.count("SP-200") == 1  # the table's words are not also left in the prose


def test_a_pdf_without_tables_keeps_its_text(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "prose.pdf", ["Width: 1.15 m\nA plain line of prose.", "Second page."])
    documents = load_pdf(path).documents
    assert [doc.text for doc in documents] == ["Width: 1.15 m\nA plain line of prose.", "Second page."]
    assert all("tables" not in doc.metadata and "table_notes" not in doc.metadata for doc in documents)


@pytest.mark.parametrize("repeat_headings", [1, 0])
def test_a_table_over_several_pages_keeps_its_header(tmp_path: Path, repeat_headings: int) -> None:
    rows = [["Model", "Width", "Power"], *([f"SP-{i}", f"{1 + i / 1000:.3f} m", f"{300 + i} W"] for i in range(1, 121))]
    documents = load_pdf(_pdf(tmp_path / "long.pdf", rows, repeat_headings=repeat_headings)).documents
    assert len(documents) >= 3
    for document in documents:
        assert document.text.count("| Model | Width | Power |") == 1, document.text[:300]
    assert "(continued)" in documents[1].text
    every = "\n".join(doc.text for doc in documents)
    assert all(f"| SP-{i} |" in every for i in range(1, 121))
    assert documents[-1].text.count("| SP-120 | 1.120 m | 420 W |") == 1


def test_malformed_table_is_capped_and_reported(tmp_path: Path) -> None:
    wide = [[f"C{i}" for i in range(45)], *([f"r{r}c{i}" for i in range(45)] for r in range(3))]
    documents = load_pdf(_pdf(tmp_path / "wide.pdf", wide, font_size=3)).documents
    notes = documents[0].metadata["table_notes"]
    assert any("kept the first 40 of 45 columns" in note for note in notes), notes
    assert "| C0 |" in documents[0].text and "C44" not in documents[0].text.split("Widths are")[0].split("|---")[0]
    merged = load_pdf(_pdf(tmp_path / "merged.pdf", PANELS, spans={2: 3})).documents[0]
    assert any("empty or merged" in note for note in merged.metadata["table_notes"]), merged.metadata


@pytest.fixture(scope="module")
def pdf_index(module_kb: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> AnnotationIndex:
    folder = tmp_path_factory.mktemp("pdfs")
    _pdf(folder / "ruled.pdf", PANELS)
    unruled = [row[:] for row in PANELS]
    for row in unruled[1:]:
        row[0] = row[0].replace("SP", "UR")
    _pdf(folder / "unruled.pdf", unruled, borders="NONE")
    rows = [["Model", "Width", "Power"], *([f"LP-{i}", f"{1 + i / 1000:.3f} m", f"{300 + i} W"] for i in range(1, 121))]
    _pdf(folder / "long.pdf", rows, repeat_headings=0)
    wide = [[f"C{i}" for i in range(45)], *([f"r{r}c{i}" for i in range(45)] for r in range(3))]
    _pdf(folder / "wide.pdf", wide, font_size=3)
    report = ingest_paths(module_kb, folder, progress=False)
    assert report.aborted is None and not report.errors, report.errors
    assert any("kept the first 40 of 45 columns" in note for note in report.annotation_notes), report.annotation_notes
    index = index_for(module_kb)
    assert index is not None
    return index


def test_pdf_rows_are_annotations_with_their_page(pdf_index: AnnotationIndex) -> None:
    rows = [item.annotation for item in pdf_index.read(["shared"]) if item.annotation.kind == "row"]
    by_model = {row.values[0].text: row for row in rows}
    assert {"SP-100", "SP-200", "SP-300", "UR-100", "UR-200", "UR-300"} <= set(by_model)
    assert all(f"LP-{i}" in by_model for i in range(1, 121))
    assert by_model["SP-300"].page == 1 and by_model["SP-300"].values[1].number == pytest.approx(1.1)
    assert by_model["LP-1"].page == 1 and by_model["LP-120"].page is not None and by_model["LP-120"].page >= 3
    assert by_model["LP-120"].values[1].label == "Width"  # the header carried over to a page without one
    passages = pdf_index.passages([row.chunk_id for row in rows], ["shared"])
    for row in rows:
        for value in row.values:
            assert value.text in passages[("shared", row.chunk_id)]["text"]


def test_width_question_over_pdf_tables(pdf_index: AnnotationIndex) -> None:
    question = parse_question("Which solar panels have a width of at most 1.12 m?")
    result = annotations_search(pdf_index, question, ["shared"])
    models = {item.annotation.values[0].text for item in result.matches}
    assert {"SP-300", "UR-300"} <= models and not {"SP-100", "SP-200", "UR-100", "UR-200"} & models
    assert {f"LP-{i}" for i in range(1, 121)} <= models
    assert all(item.annotation.page for item in result.matches)
