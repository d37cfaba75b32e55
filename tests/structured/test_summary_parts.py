"""The long-text route's parts without Milvus: sentence centrality, section filters, PDF grouping, merging the
route's passages into a retrieval."""

from __future__ import annotations

import numpy as np

from researchcrew.contracts import ContextChunk
from researchcrew.contracts.chunks import AggregatedContext
from researchcrew.contracts.retriever import RetrieverOutput
from researchcrew.knowledge.filters import SearchFilters, SectionRef
from researchcrew.knowledge.summaries import Passage, document_summaries, group_of, summarise
from researchcrew.pipeline._long_text import with_long_text


def _passage(position: int, text: str, vector: list[float], heading: str = "", key: str = "doc.md") -> Passage:
    array = np.asarray(vector, dtype=np.float32)
    return Passage(f"d:{position}", key, "d", heading, position, text, array / np.linalg.norm(array))


def test_the_central_passage_and_sentences_are_kept_within_the_budget() -> None:
    passages = [
        _passage(
            0, "Batteries power the station through the night. Batteries are replaced every four years.", [1, 0.1]
        ),
        _passage(
            1, "Batteries power the station through the night. The charge controller protects the batteries.", [1, 0]
        ),
        _passage(2, "An unrelated remark about the colour of the enclosure paint chosen here.", [0, 1]),
    ]
    text, centrality = summarise(passages, budget=120)
    assert len(text) <= 120 and centrality > 0.5
    assert text.count("Batteries power the station through the night.") == 1  # overlap between chunks: once
    assert "colour" not in text  # the outlier passage is least central


def test_sections_and_pdf_pages() -> None:
    passages = [
        _passage(i, f"Sentence number {i} about topic {i % 2} here.", [1, i % 2], heading=f"H{i % 2}") for i in range(4)
    ]
    summaries = document_summaries(passages)
    assert [(s.kind, s.heading) for s in summaries] == [("document", ""), ("section", "H0"), ("section", "H1")]
    pages = [
        _passage(0, "Page one says a thing at length.", [1, 0], key="f.pdf#page=1"),
        _passage(0, "Page two says another thing at length.", [0, 1], key="f.pdf#page=2"),
    ]
    whole, *sections = document_summaries(pages)
    assert whole.source_key == "" and whole.pages == [1, 2]
    assert [(s.source_key, s.pages) for s in sections] == [("f.pdf#page=1", [1]), ("f.pdf#page=2", [2])]
    assert group_of("f.pdf#page=2") == "f.pdf" and group_of("notes.jsonl#page=x") == "notes.jsonl#page=x"


def test_section_filter_expression() -> None:
    filters = SearchFilters(
        collections=["shared"],
        sections=[SectionRef(source_key="a.md", heading='Say "hi"'), SectionRef(source_key="b.pdf#page=3")],
    )
    expected = (
        '((source_key == "a.md" and heading == "Say \\"hi\\"") or source_key == "b.pdf#page=3") and '
        'collection in ["shared"]'
    )
    assert filters.expression() == expected


def _chunk(chunk_id: str) -> ContextChunk:
    return ContextChunk(chunk_id=chunk_id, source_type="rag", content=f"text {chunk_id}", semantic_relevance=0.5)


def test_the_route_passages_join_the_retrieval_once() -> None:
    output = RetrieverOutput(
        aggregated_context=AggregatedContext(query_text="q", chunks=[_chunk("a")]),
        retrieval_status="success",
        sources_used=["web"],
        sources_failed=[],
        execution_time_ms=1.0,
    )
    merged = with_long_text(output, [_chunk("a"), _chunk("b")])
    assert [chunk.chunk_id for chunk in merged.aggregated_context.chunks] == ["a", "b"]
    assert merged.sources_used == ["web", "rag"]
    assert with_long_text(output, []) is output
