"""What the extraction pass of an ingest reuses instead of doing again (issue 22's ingest slow-down): the chunks
``add_documents`` made, and for the summaries the chunk counts of the documents just written. The annotations stored
must be the ones a pass that chunks the documents itself stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge._chunking import Chunker
from researchcrew.knowledge.annotations import AnnotationIndex, index_for
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.documents import Chunk, Document
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.knowledge.loaders import load_file
from researchcrew.knowledge.summaries import SummaryIndex
from researchcrew.settings import Settings


def _stored(index: AnnotationIndex) -> tuple[list[str], list[dict[str, Any]]]:
    annotations = sorted(item.annotation.model_dump_json() for item in index.read(["shared"]))
    markers = sorted(index.summaries(["shared"]), key=lambda summary: str(sorted(summary.items())))
    return annotations, markers


def test_an_ingest_chunks_each_document_once_and_stores_what_chunking_again_stores(
    tmp_path: Path, embedder: Embedder, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunked: list[str] = []
    chunk = Chunker.chunk

    def counted(self: Chunker, document: Document) -> list[Chunk]:
        chunked.append(document.source_key)
        return chunk(self, document)

    counts_read: list[list[str]] = []
    chunk_counts = SummaryIndex._chunk_counts

    def read_counts(self: SummaryIndex, source_keys: list[str], collection: str) -> dict[tuple[str, str], int]:
        counts_read.append(list(source_keys))
        return chunk_counts(self, source_keys, collection)

    monkeypatch.setattr(Chunker, "chunk", counted)
    monkeypatch.setattr(SummaryIndex, "_chunk_counts", read_counts)
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        report = ingest_paths(kb, corpus_dir, progress=False)
        assert report.aborted is None and report.documents_added >= 6 and report.annotations_added > 0
        assert len(chunked) == len(set(chunked)) == report.documents_added
        assert counts_read and all(keys == [] for keys in counts_read)  # every count known from the ingest

        index = index_for(kb)
        assert index is not None
        from_ingest = _stored(index)
        documents = [document for path in sorted(corpus_dir.iterdir()) for document in load_file(path).documents]
        chunked.clear()
        again = index.annotate(documents)  # no chunks given: the index chunks the documents itself
        assert len(chunked) == len(documents) and again.annotations == report.annotations_added
        assert _stored(index) == from_ingest
        assert from_ingest[0] and from_ingest[1]


def test_chunks_of_another_version_are_not_reused(tmp_path: Path, embedder: Embedder) -> None:
    """A mapping that holds chunks of an older version of a document (another doc_id) is not trusted."""
    old = Document(source_key="spec.md", title="Spec", text="# Spec\n\nWidth: 1.15 m\n")
    new = Document(source_key="spec.md", title="Spec", text="# Spec\n\nWidth: 1.30 m\n")
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        kb.add_documents([new])
        index = index_for(kb)
        assert index is not None
        index.annotate([new], chunks={"spec.md": kb.chunker.chunk(old)})
        (stored,) = index.read(["shared"])
        assert stored.annotation.values[0].text == "1.30 m"
        assert stored.annotation.chunk_id.startswith(new.doc_id)
