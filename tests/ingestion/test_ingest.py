"""``ingest_paths`` end to end: real files → real Milvus Lite (tmp_path) with the real embedding model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.knowledge.loaders import FieldMapError
from researchcrew.settings import Settings
from tests.helpers.event_loop import LoopWatch
from tests.ingestion.conftest import CountingEmbedder
from tests.ingestion.files import HTML_PAGE, MARKDOWN_NOTE, beir_records, write_beir, write_pdf


def _folder(root: Path) -> Path:
    """One file of each format, plus a file that is fine to ignore."""
    docs = root / "docs"
    (docs / "papers").mkdir(parents=True)
    (docs / "enzymes.md").write_text(MARKDOWN_NOTE)
    (docs / "volcano.txt").write_text("Magma rises through the crust.\n\nExplosive eruptions eject ash columns.\n")
    (docs / "coral.html").write_text(HTML_PAGE)
    write_pdf(docs / "papers" / "plants.pdf", ["Chlorophyll absorbs red and blue light.", "RuBisCO fixes carbon."])
    write_beir(docs / "corpus.jsonl", beir_records())
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    return docs


def test_folder_of_every_format_is_ingested_and_searchable(tmp_path: Path, kb: KnowledgeBase) -> None:
    docs = _folder(tmp_path)
    report = ingest_paths(kb, [docs], progress=False)
    assert report.errors == []
    assert (report.files_seen, report.files_ignored, report.files_failed) == (5, 1, 0)
    assert report.documents_added == 1 + 1 + 1 + 2 + 3  # md, txt, html, 2 PDF pages, 3 records
    assert report.chunks_added >= report.documents_added
    assert report.seconds > 0 and report.documents_per_second > 0 and report.chunks_per_second > 0
    assert report.succeeded
    stats = kb.stats()
    assert stats.documents == 8 and stats.chunks == report.chunks_added and stats.incomplete_documents == 0
    hits = kb.search("which enzyme fixes carbon dioxide", top_k=3)
    assert any("plants.pdf#page=2" in hit.source_key for hit in hits)


def test_second_ingest_of_unchanged_files_does_no_work(
    tmp_path: Path, kb: KnowledgeBase, counting: CountingEmbedder
) -> None:
    docs = _folder(tmp_path)
    first = ingest_paths(kb, [docs], progress=False)
    embedded = counting.texts_embedded
    assert embedded == first.chunks_added
    calls: list[int] = []
    original = kb.document_index

    def spy(collection: str | None = None) -> dict[str, str]:
        calls.append(1)
        return original(collection)

    kb.document_index = spy  # type: ignore[method-assign]
    second = ingest_paths(kb, [docs], progress=False)
    assert counting.texts_embedded == embedded  # zero chunks embedded
    assert (second.documents_added, second.documents_replaced, second.chunks_added) == (0, 0, 0)
    assert second.documents_unchanged == first.documents_added
    assert second.succeeded
    assert len(calls) == 1  # the index is read once per ingest, not per document
    assert kb.stats().chunks == first.chunks_added


def test_changed_file_replaces_its_chunks(tmp_path: Path, kb: KnowledgeBase) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Tides\n\nThe moon's gravity raises two tidal bulges on the oceans.\n")
    ingest_paths(kb, [note], progress=False)
    old_id = kb.document_index()[str(note.resolve())]
    note.write_text("# Tides\n\nSpring tides happen when the sun and moon align, neap tides at right angles.\n")
    report = ingest_paths(kb, [note], progress=False)
    assert (report.documents_added, report.documents_replaced, report.documents_unchanged) == (0, 1, 0)
    index = kb.document_index()
    assert index[str(note.resolve())] != old_id
    stats = kb.stats()
    assert stats.documents == 1 and stats.chunks == report.chunks_added
    (hit,) = kb.search("spring and neap tides", top_k=1)
    assert "Spring tides" in hit.text


def test_records_deleted_from_a_file_are_removed_but_not_on_a_bad_line(tmp_path: Path, kb: KnowledgeBase) -> None:
    path = write_beir(tmp_path / "corpus.jsonl", beir_records())
    ingest_paths(kb, [path], progress=False)
    records = beir_records()
    # Record 102 disappears; record 103's line becomes malformed: only 102 may be taken as deleted...
    path.write_text(json.dumps(records[0]) + "\n" + '{"_id": "103", "text": broken\n')
    report = ingest_paths(kb, [path], progress=False)
    assert report.documents_removed == 0  # ...but the file was not read completely, so nothing is removed yet
    assert [(issue.line, "not valid JSON" in issue.reason) for issue in report.errors] == [(2, True)]
    assert len(kb.document_index()) == 3
    path.write_text(json.dumps(records[0]) + "\n" + json.dumps(records[2]) + "\n")
    report = ingest_paths(kb, [path], progress=False)
    assert report.documents_removed == 1 and report.chunks_removed >= 1
    assert report.documents_unchanged == 2
    assert sorted(key.rsplit("#", 1)[1] for key in kb.document_index()) == ["101", "103"]


def test_bad_inputs_are_reported_and_the_rest_ingested(tmp_path: Path, kb: KnowledgeBase) -> None:
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nA perfectly fine note about glaciers carving valleys.\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    binary = tmp_path / "binary.md"
    binary.write_bytes(bytes(range(256)) * 4)
    unknown = tmp_path / "table.xlsx"
    unknown.write_bytes(b"PK\x03\x04 not really a spreadsheet")
    lines = tmp_path / "records.jsonl"
    lines.write_text(json.dumps({"_id": "1", "text": "Valid record on penguins."}) + "\n{oops\n")
    report = ingest_paths(kb, [good, empty, binary, unknown, lines, tmp_path / "absent.pdf"], progress=False)
    assert report.documents_added == 2
    problems = {(Path(issue.file).name, issue.line): issue.reason for issue in report.errors}
    assert problems[("empty.txt", None)] == "empty file"
    assert problems[("binary.md", None)].startswith("binary content")
    assert problems[("table.xlsx", None)].startswith("unsupported file type '.xlsx'")
    assert problems[("records.jsonl", 2)].startswith("not valid JSON")
    assert problems[("absent.pdf", None)] == "no such file or directory"
    assert report.documents_failed == 5 and report.files_failed == 3
    assert report.succeeded


def test_nothing_ingestible_is_not_a_success(tmp_path: Path, kb: KnowledgeBase) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("\n")
    report = ingest_paths(kb, [empty], progress=False)
    assert not report.succeeded and report.documents_failed == 1


def test_interrupted_ingest_is_finished_by_the_next_run(
    tmp_path: Path, kb: KnowledgeBase, counting: CountingEmbedder
) -> None:
    records = [
        {"_id": str(i), "title": f"Note {i}", "text": f"Observation number {i} about river deltas."} for i in range(12)
    ]
    path = write_beir(tmp_path / "many.jsonl", records)
    counting.fail_on_call = 2  # the model dies during the second batch
    broken = ingest_paths(kb, [path], batch_size=4, progress=False)
    assert broken.aborted is not None and "crashed" in broken.aborted
    assert broken.documents_added == 4 and not broken.succeeded
    counting.fail_on_call = None
    before = counting.texts_embedded
    finished = ingest_paths(kb, [path], batch_size=4, progress=False)
    assert finished.aborted is None
    assert (finished.documents_unchanged, finished.documents_added) == (4, 8)
    assert counting.texts_embedded - before == finished.chunks_added  # only the missing work was done
    stats = kb.stats()
    assert stats.documents == 12 and stats.incomplete_documents == 0


def test_model_failure_midway_through_one_batch_keeps_the_groups_before_it(
    tmp_path: Path, kb: KnowledgeBase, counting: CountingEmbedder
) -> None:
    # One add_documents call, embedded in groups of ~256 chunks, each group one ahead of the group being stored.
    records = [
        {"_id": str(i), "title": f"Gauge {i}", "text": f"Station {i} logged the river stage at dawn."}
        for i in range(600)
    ]
    path = write_beir(tmp_path / "gauges.jsonl", records)
    counting.fail_on_call = 3  # the third group's embedding fails
    broken = ingest_paths(kb, [path], progress=False)
    assert broken.aborted is not None and "crashed" in broken.aborted
    stats = kb.stats()
    assert stats.documents == 512 and stats.incomplete_documents == 0  # the two groups before it, whole
    counting.fail_on_call = None
    before = counting.texts_embedded
    finished = ingest_paths(kb, [path], progress=False)
    assert (finished.aborted, finished.documents_unchanged, finished.documents_added) == (None, 512, 88)
    assert counting.texts_embedded - before == 88
    assert kb.stats().documents == 600


def test_progress_callback_and_kb_ingest_wrapper(tmp_path: Path, kb: KnowledgeBase) -> None:
    path = write_beir(tmp_path / "c.jsonl", beir_records())
    seen: list[tuple[int, int, int]] = []
    report = kb.ingest([path], progress=lambda done, total, chunks: seen.append((done, total, chunks)), batch_size=2)
    assert report.documents_added == 3
    assert seen[-1] == (3, 3, report.chunks_added)
    assert [done for done, _, _ in seen] == sorted(done for done, _, _ in seen)


def test_usage_mistakes_fail_fast(kb: KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(FieldMapError):
        ingest_paths(kb, [tmp_path], field_map=["body"], progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        ingest_paths(kb, [tmp_path], batch_size=0, progress=False)


async def test_async_ingest_keeps_the_event_loop_free(tmp_path: Path, kb: KnowledgeBase) -> None:
    from researchcrew.knowledge.ingest import aingest_paths

    path = write_beir(tmp_path / "c.jsonl", beir_records())
    async with LoopWatch(interval_s=0.01) as watch:
        report = await aingest_paths(kb, [path], progress=False)
    assert report.documents_added == 3
    assert watch.ticks >= 5  # the loop kept running while embedding and Milvus worked


def test_setup_time_is_reported_apart_from_throughput(
    tmp_path: Path, settings: Settings, counting: CountingEmbedder
) -> None:
    path = write_beir(tmp_path / "c.jsonl", beir_records())
    with KnowledgeBase(settings, embedder=counting) as fresh:
        report = ingest_paths(fresh, [path], progress=False)
    assert 0 < report.setup_seconds < report.seconds
    working = report.seconds - report.setup_seconds
    assert report.documents_per_second == pytest.approx(report.documents_added / working)


_CRASHING_INGEST = """
import os, signal, sys
from pathlib import Path
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.embedding.embedder import get_embedder
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.settings import Settings

settings = Settings()
inner = get_embedder(settings)

class DiesOnThirdCall:
    dimension = inner.dimension
    tokenizer_path = getattr(inner, "tokenizer_path", None)
    model_name = "all-MiniLM-L6-v2"
    calls = 0
    def embed_documents(self, texts):
        DiesOnThirdCall.calls += 1
        if DiesOnThirdCall.calls == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no close: a power cut as far as we are concerned
        return inner.embed_documents(texts)
    def embed_query(self, text):
        return inner.embed_query(text)

kb = KnowledgeBase(settings, embedder=DiesOnThirdCall())
ingest_paths(kb, [sys.argv[1]], batch_size=5, progress=False)
"""


@pytest.mark.slow
def test_killed_ingest_is_finished_by_the_next_run(
    tmp_path: Path, settings: Settings, counting: CountingEmbedder
) -> None:
    import os
    import signal
    import subprocess
    import sys

    records = [
        {"_id": str(i), "title": f"Note {i}", "text": f"Finding {i}: sediment load shapes river deltas."}
        for i in range(20)
    ]
    path = write_beir(tmp_path / "deltas.jsonl", records)
    environment = {
        **os.environ,
        "RESEARCHCREW_DATA_DIR": str(settings.data_dir),
        "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(settings.embedding.cache_dir),
    }
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASHING_INGEST, str(path)],
        env=environment,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]

    # Chunks only: what the annotation pass (issue 22) does is not what this test counts.
    chunks_only = settings.model_copy(update={"structured": settings.structured.model_copy(update={"annotate": False})})
    with KnowledgeBase(chunks_only, embedder=counting) as kb:
        finished = ingest_paths(kb, [path], batch_size=5, progress=False)
        stats = kb.stats()
    assert finished.aborted is None and finished.errors == []
    assert finished.documents_unchanged + finished.documents_added == 20
    assert finished.documents_unchanged == 10  # the two batches written before the kill survived it...
    assert counting.texts_embedded == finished.chunks_added == 10  # ...and only the missing ten are embedded
    assert stats.documents == 20 and stats.incomplete_documents == 0
    assert stats.chunks == 20  # one chunk per short record, none duplicated
