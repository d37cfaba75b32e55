"""Annotations end to end against Milvus Lite: extraction per format, storage, access, removal and reindex, search
with units, aggregates, the stage's routes and tables, and CSV export."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from researchcrew.contracts.tables import StructuredRequest
from researchcrew.knowledge.annotations import (
    AnnotationIndex,
    annotations_search,
    export_annotations_csv,
    index_for,
    parse_question,
    table_of,
)
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.pipeline._structured import AnnotationStage, annotation_stage


@pytest.fixture(scope="module")
def ingested(module_kb: KnowledgeBase, corpus_dir: Path) -> AnnotationIndex:
    report = ingest_paths(module_kb, corpus_dir, progress=False)
    assert report.aborted is None and not report.errors, report.errors
    assert report.annotations_added > 0
    index = index_for(module_kb)
    assert index is not None
    return index


def _ask(stage: AnnotationStage, question: str, **options: object):  # type: ignore[no-untyped-def]
    return asyncio.run(stage.run(StructuredRequest(question=question, **options)))  # type: ignore[arg-type]


def test_every_value_occurs_in_its_passage(ingested: AnnotationIndex) -> None:
    stored = ingested.read(["shared"])
    assert len(stored) >= 15
    passages = ingested.passages([item.annotation.chunk_id for item in stored], ["shared"])
    for item in stored:
        passage = passages[("shared", item.annotation.chunk_id)]
        for value in item.annotation.values:
            assert value.text in passage["text"], (value, passage["text"])
    kinds = {(item.annotation.title, item.annotation.kind) for item in stored}
    assert ("Receipt 1042", "row") in kinds and ("Receipt 1042", "fact") in kinds  # HTML table and facts
    assert ("Receipt 2001", "row") in kinds  # Markdown table
    assert ("panels", "row") in kinds  # CSV


def test_receipts_containing_tires(ingested: AnnotationIndex) -> None:
    result = annotations_search(ingested, parse_question("receipts containing tires"), ["shared"])
    assert [item.annotation.title for item in result.matches] == ["Receipt 1042"]
    assert result.matches[0].annotation.values[0].text == "All-season tires"


def test_width_filter_converts_units_and_names_what_it_cannot(ingested: AnnotationIndex) -> None:
    result = annotations_search(ingested, parse_question("Which solar panels have a width ≤ 1.2 m?"), ["shared"])
    models = sorted(str(item.annotation.values[0].text) for item in result.matches)
    assert models == ["Helio 350", "SunMax 400"]  # 45 in = 1.143 m passes; 1310 mm does not
    columns, _rows, _ = table_of(result)
    width = next(column for column in columns if column.name == "Width")
    assert width.unit == "m" and width.kind == "number"
    assert any("1.1 furlongs" in note or "no unit" in note for note in result.notes), result.notes


def test_sample_size_above_a_number_and_strict_bounds(ingested: AnnotationIndex) -> None:
    result = annotations_search(ingested, parse_question("Which studies report a sample size above 1,000?"), ["shared"])
    assert sorted(item.annotation.title for item in result.matches) == [
        "Mass screening by pooling",
        "Pooled testing in schools",
    ]
    exact = annotations_search(ingested, parse_question("studies with sample size over 640"), ["shared"])
    assert "Pooled testing in clinics" not in [item.annotation.title for item in exact.matches]


def test_access_follows_collections(ingested: AnnotationIndex) -> None:
    assert ingested.read(["user:someone-else"]) == []
    assert annotations_search(ingested, parse_question("receipts containing tires"), []).matches == []


def test_stage_routes_and_answers_with_a_cited_table(ingested: AnnotationIndex) -> None:
    stage = AnnotationStage(ingested)
    outcome = _ask(stage, "Average reagent cost per test across the pooled testing papers")
    assert outcome.route.route == "structured" and outcome.route.intent == "aggregate"
    assert outcome.table is not None
    mean = outcome.table.aggregates[0]
    assert (mean.operation, mean.unit, mean.rows_used) == ("mean", "USD", 3)
    assert mean.value == pytest.approx((2.35 + 3.15 + 1.10) / 3)
    evidence_ids = {chunk.chunk_id for chunk in outcome.evidence}
    assert all(row.chunk_id in evidence_ids and row.citation for row in outcome.all_rows)

    conceptual = _ask(stage, "Why does pooling reduce the cost of testing?")
    assert conceptual.route.route == "long_text" and conceptual.table is None

    paged = _ask(stage, "List every item with a price under $100", page_size=2)
    assert paged.table is not None and len(paged.table.rows) == 2 and paged.table.total_rows == 4
    assert paged.table.more_rows == 2 and len(paged.all_rows) == 4  # tires, wipers, paper, toner


def test_an_ambiguous_field_asks_which_one(ingested: AnnotationIndex) -> None:
    outcome = _ask(AnnotationStage(ingested), "Which documents list anything under 2 m?")
    assert set(outcome.clarification) == {"height", "width"}
    assert outcome.table is None


def test_count_of_documents(ingested: AnnotationIndex) -> None:
    outcome = _ask(AnnotationStage(ingested), "How many receipts contain tires?")
    assert outcome.table is not None and outcome.table.aggregates[0].value == 1


def test_export_guards_formulas(ingested: AnnotationIndex) -> None:
    result = annotations_search(ingested, parse_question("receipts containing tires"), ["shared"])
    columns, rows, _ = table_of(result)
    rows[0] = rows[0].model_copy(update={"values": ["=HYPERLINK(1)", *rows[0].values[1:]]})
    text = export_annotations_csv(columns, rows)
    assert text.splitlines()[1].startswith('"\'=HYPERLINK(1)"')


def test_removal_and_reindex(module_kb: KnowledgeBase, ingested: AnnotationIndex, corpus_dir: Path) -> None:
    stale = corpus_dir / "study-b.md"
    stale.write_text("# Pooled testing in clinics\n\nSample size: 700\n", encoding="utf-8")
    ingest_paths(module_kb, corpus_dir, progress=False)
    sizes = [
        value.text
        for item in ingested.read(["shared"])
        if item.annotation.title == "Pooled testing in clinics"
        for value in item.annotation.values
    ]
    assert sizes == ["700"]  # re-derived, the old values gone
    removed = ingested.remove(source_keys=[str(stale.resolve())], collection="shared")
    assert removed == 2  # the fact and the document's marker
    assert not [item for item in ingested.read(["shared"]) if item.annotation.title == "Pooled testing in clinics"]
    # An annotation whose chunks were removed behind its back is never returned.
    module_kb.remove(source_keys=[str((corpus_dir / "study-c.md").resolve())])
    result = annotations_search(ingested, parse_question("studies with a sample size above 1,000"), ["shared"])
    assert [item.annotation.title for item in result.matches] == ["Pooled testing in schools"]


def test_stage_from_settings(module_kb: KnowledgeBase) -> None:
    assert annotation_stage(module_kb) is not None
    off = module_kb.settings.model_copy(
        update={"structured": module_kb.settings.structured.model_copy(update={"annotate": False})}
    )
    assert index_for(KnowledgeBase(off, embedder=module_kb.embedder)) is None


def test_labels_matched_by_abbreviation_and_by_meaning(ingested: AnnotationIndex) -> None:
    quantity = annotations_search(ingested, parse_question("items with a quantity above 3"), ["shared"])
    assert quantity.labels == ["qty"]  # the column says "Qty"
    assert sorted(item.annotation.values[0].text for item in quantity.matches) == ["All-season tires", "Printer paper"]
    cost = annotations_search(ingested, parse_question("receipts listing items that cost above $60"), ["shared"])
    assert cost.labels == ["price"] and any("by meaning" in note for note in cost.notes)
    assert sorted(item.annotation.values[0].text for item in cost.matches) == ["All-season tires", "Toner"]


def test_a_field_no_document_annotates_takes_the_hybrid_route(ingested: AnnotationIndex) -> None:
    outcome = _ask(AnnotationStage(ingested), "List the warranty of each panel model")
    assert outcome.route.tried[0] == "hybrid" and "not annotated" in outcome.route.reason
    # A question whose only condition names nothing annotated gets no rows, never every annotation.
    assert annotations_search(ingested, parse_question("List the warranty terms"), ["shared"]).matches == []
