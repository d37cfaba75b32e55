"""The long-text route against Milvus Lite and the packaged embedder: summaries of long documents (and not of short
ones) with their sections, removed with the document and the collection, re-derived when the document changes,
scoped by collection access; summaries searched first, then the matching sections' passages; plain retrieval when
no summary matches."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from pathlib import Path

import pytest

from researchcrew.contracts.tables import StructuredRequest
from researchcrew.knowledge.annotations import index_for
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.filters import SearchFilters
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.knowledge.library import remove_chunks
from researchcrew.knowledge.summaries import SummaryIndex, summaries_for
from researchcrew.pipeline._long_text import LongTextSearch, long_text_search
from researchcrew.pipeline._structured import AnnotationStage
from researchcrew.settings import Settings
from researchcrew.text.sentences import split_sentences
from tests.ingestion.files import write_pdf
from tests.structured.long_documents import QUESTIONS, SECTIONS, SHORT_NOTE, manual_markdown


def _write(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manual.md").write_text(manual_markdown(), encoding="utf-8")
    (folder / "note.md").write_text(SHORT_NOTE, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("long") / "docs")


@pytest.fixture(scope="module")
def summaries(module_kb: KnowledgeBase, docs: Path) -> SummaryIndex:
    report = ingest_paths(module_kb, docs, progress=False)
    assert report.aborted is None and not report.errors, report.errors
    assert report.summaries_added == 1 + len(SECTIONS)  # the whole manual and each of its sections
    index = summaries_for(module_kb)
    assert index is not None
    return index


@pytest.fixture(scope="module")
def route(module_kb: KnowledgeBase, summaries: SummaryIndex) -> LongTextSearch:
    search = long_text_search(module_kb)
    assert search is not None
    return search


def _ask(stage: AnnotationStage, question: str, **options: object):  # type: ignore[no-untyped-def]
    return asyncio.run(stage.run(StructuredRequest(question=question, **options)))  # type: ignore[arg-type]


def test_the_long_document_is_summarised_and_the_short_one_is_not(summaries: SummaryIndex, docs: Path) -> None:
    found = summaries.read(["shared"])
    assert {hit.group for hit in found} == {str((docs / "manual.md").resolve())}
    assert Counter(hit.kind for hit in found) == {"document": 1, "section": len(SECTIONS)}
    assert {hit.heading for hit in found if hit.kind == "section"} == set(SECTIONS)
    for hit in found:  # extractive: every sentence is the manual's own, a section's from that section
        source = " ".join(SECTIONS[hit.heading]) if hit.kind == "section" else manual_markdown()
        flat = " ".join(source.split())
        for sentence in split_sentences(hit.text):
            assert " ".join(sentence.split()) in flat, (hit.heading, sentence)
        assert 0 < len(hit.text) <= 1_200


def test_a_thematic_question_finds_its_section_and_plain_retrieval_does_no_better(
    module_kb: KnowledgeBase, route: LongTextSearch
) -> None:
    route_hits = plain_hits = 0
    for question, section in QUESTIONS.items():
        found = route.run(question, ["shared"])
        assert found.sections and found.sections[0].heading == section, (question, found.matches[:3])
        # The drill-down searched only the matching sections: the filter is in the Milvus expression.
        assert {chunk.metadata["heading"] for chunk in found.chunks} <= {ref.heading for ref in found.sections}
        route_top = [chunk.metadata["heading"] for chunk in found.chunks[:3]]
        plain = module_kb.search(question, top_k=3, filters=SearchFilters(collections=["shared"]))
        route_hits += section in route_top
        plain_hits += section in [hit.heading for hit in plain]
    assert route_hits == len(QUESTIONS) and route_hits >= plain_hits


def test_the_stage_takes_the_long_text_route_or_falls_back_to_plain_retrieval(
    module_kb: KnowledgeBase, route: LongTextSearch
) -> None:
    annotations = index_for(module_kb)
    assert annotations is not None
    stage = AnnotationStage(annotations, long_text=route)
    outcome = _ask(stage, "Why does snow on the panel matter for the station in freezing months?")
    assert (outcome.route.route, outcome.route.tried) == ("long_text", ["long_text"])
    assert outcome.evidence and outcome.table is None
    assert "Winter operation" in outcome.route.reason
    # No summary about the question: plain retrieval answers, and the route says so.
    unrelated = _ask(stage, "Why do volcanic eruptions change the global climate?")
    assert (unrelated.route.route, unrelated.route.tried) == ("long_text", ["long_text", "retrieval"])
    assert unrelated.evidence == [] and "no summary matched" in unrelated.route.reason
    # A collection without summaries (nothing long in it): the same fallback.
    empty = _ask(stage, "What keeps the station working through freezing months?", user_id="b", collections=["user:b"])
    assert empty.route.tried == ["long_text", "retrieval"] and empty.evidence == []
    # Without a long-text search the route is plain retrieval, as before summaries existed.
    assert _ask(AnnotationStage(annotations), "Why does snow matter?").route.tried == ["long_text"]


def test_access_user_b_never_reaches_user_a_private_summaries(
    module_kb: KnowledgeBase, summaries: SummaryIndex, route: LongTextSearch, docs: Path
) -> None:
    private = docs.parent / "private"
    shutil.copytree(docs, private)
    report = ingest_paths(module_kb, private, progress=False, collection="user:a")
    assert report.summaries_added == 1 + len(SECTIONS)
    question = next(iter(QUESTIONS))
    vector = module_kb.embedder.embed_query(question).tolist()
    assert {hit.collection for hit in summaries.search(vector, ["user:a"])} == {"user:a"}
    assert "user:a" not in {hit.collection for hit in summaries.search(vector, ["shared", "user:b"], limit=100)}
    assert summaries.read(["user:b"]) == []
    annotations = index_for(module_kb)
    assert annotations is not None
    stage = AnnotationStage(annotations, long_text=route)
    for user, allowed in (("b", {"shared"}), ("a", {"shared", "user:a"})):
        outcome = _ask(stage, question, user_id=user)
        collections = {chunk.metadata["collection"] for chunk in outcome.evidence}
        assert outcome.evidence and collections <= allowed, (user, collections)
    private_only = _ask(stage, question, user_id="a", collections=["user:a"])
    assert {chunk.metadata["collection"] for chunk in private_only.evidence} == {"user:a"}
    # Removing the collection takes its summaries; the shared ones stay.
    module_kb.remove_collection("user:a")
    assert summaries.read(["user:a"]) == []
    assert len(summaries.read(["shared"])) == 1 + len(SECTIONS)


def test_summaries_follow_their_document(module_kb: KnowledgeBase, summaries: SummaryIndex, docs: Path) -> None:
    folder = _write(docs.parent / "changing")
    manual = folder / "manual.md"
    ingest_paths(module_kb, folder, progress=False, collection="user:c")
    before = {hit.heading: hit.text for hit in summaries.read(["user:c"])}
    assert "Winter operation" in before
    # Changed: its summaries are made again from the new text (the removed section's summary is gone).
    changed = manual_markdown().replace("## Winter operation", "## Cold season operation")
    manual.write_text(changed, encoding="utf-8")
    report = ingest_paths(module_kb, folder, progress=False, collection="user:c")
    assert report.summaries_added == 1 + len(SECTIONS)
    after = {hit.heading for hit in summaries.read(["user:c"])}
    assert "Cold season operation" in after and "Winter operation" not in after
    # Unchanged: nothing is summarised again.
    assert ingest_paths(module_kb, folder, progress=False, collection="user:c").summaries_added == 0
    # Deleted (an upload's delete, ``Library.delete``): its summaries go with its chunks.
    assert remove_chunks(module_kb, [str(manual.resolve())]) > 0
    assert summaries.read(["user:c"]) == []
    assert len(summaries.read(["shared"])) == 1 + len(SECTIONS)


def test_summaries_switched_off(module_kb: KnowledgeBase) -> None:
    off = module_kb.settings.model_copy(
        update={"structured": module_kb.settings.structured.model_copy(update={"summaries": False})}
    )
    kb = KnowledgeBase(off, embedder=module_kb.embedder)
    assert summaries_for(kb) is None and long_text_search(kb) is None


def test_no_long_document_no_summary_collection(tmp_path: Path, module_kb: KnowledgeBase) -> None:
    folder = tmp_path / "short"
    folder.mkdir()
    (folder / "note.md").write_text(SHORT_NOTE, encoding="utf-8")
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=module_kb.embedder) as kb:
        report = ingest_paths(kb, folder, progress=False)
        assert report.summaries_added == 0 and report.chunks_added > 0
        search = long_text_search(kb)
        assert search is not None
        found = search.run("What did the visit find?", ["shared"])
        assert found.sections == [] and found.best_score is None
        assert "no summaries" in found.describe()
        # Neither the ingest nor the question made the collection: a question costs one existence check.
        assert not kb.store.client.has_collection(search.summaries.name)


def test_a_pdf_is_summarised_as_one_document_with_a_section_per_page(
    module_kb: KnowledgeBase, summaries: SummaryIndex, route: LongTextSearch, tmp_path: Path
) -> None:
    headings = list(SECTIONS)
    path = write_pdf(tmp_path / "manual.pdf", ["\n".join(SECTIONS[heading]) for heading in headings], title="Manual")
    report = ingest_paths(module_kb, tmp_path, progress=False, collection="user:pdf")
    assert report.summaries_added == 1 + len(headings)
    found = summaries.read(["user:pdf"])
    key = str(path.resolve())
    assert {hit.group for hit in found} == {key}
    whole = next(hit for hit in found if hit.kind == "document")
    assert whole.source_key == key and whole.pages == list(range(1, len(headings) + 1))
    pages = {hit.source_key for hit in found if hit.kind == "section"}
    assert pages == {f"{key}#page={number}" for number in range(1, len(headings) + 1)}
    # A thematic question drills into the page that is about it.
    winter = f"{key}#page={headings.index('Winter operation') + 1}"
    result = route.run("What keeps the station working through freezing months?", ["user:pdf"])
    assert result.sections[0].source_key == winter and result.sections[0].heading is None
    assert result.chunks[0].metadata["source_key"] == winter
    # Deleting the file's pages takes the whole file's summaries.
    assert remove_chunks(module_kb, sorted(pages)) > 0
    assert summaries.read(["user:pdf"]) == []


def test_a_document_removed_by_its_id_takes_its_summaries_and_annotations(
    module_kb: KnowledgeBase, summaries: SummaryIndex, docs: Path
) -> None:
    """`researchcrew kb remove --doc ID` (and the service's /kb/remove) call ``KnowledgeBase.remove`` with document
    ids: what ingest derived from those documents must not outlive them (stale summaries matched and found no
    chunks; stale annotations answered table questions from removed documents)."""
    folder = _write(docs.parent / "by-id")
    (folder / "prices.md").write_text(
        "# Prices\n\n| Item | Price |\n|---|---|\n| Tires | 120 USD |\n| Brakes | 80 USD |\n", encoding="utf-8"
    )
    ingest_paths(module_kb, folder, progress=False, collection="user:d")
    annotations = index_for(module_kb)
    assert annotations is not None
    assert summaries.read(["user:d"]) and annotations.read(["user:d"])
    doc_ids = sorted(module_kb.document_index("user:d").values())
    assert module_kb.remove(doc_ids=doc_ids, collection="user:d") > 0  # ids are content hashes: shared has the same
    assert summaries.read(["user:d"]) == [] and annotations.read(["user:d"]) == []
    assert len(summaries.read(["shared"])) == 1 + len(SECTIONS)  # the shared collection's manual keeps its own
