"""RAGTool: hits become cited ContextChunks; an empty base is no results; a dead Milvus is failure data."""

from __future__ import annotations

from pathlib import Path

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import Settings
from researchcrew.tools.rag import RAGTool
from tests.loopback.server import closed_port

from .conftest import CORPUS


async def test_hits_become_context_chunks(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    tool = RAGTool(kb)
    result = await tool.search("How is carbon dioxide fixed into sugars?", num_results=2, min_relevance=0.0)
    assert result.ok and len(result.chunks) == 2
    chunk = result.chunks[0]
    assert chunk.source_type == "rag" and chunk.tool_name == "rag_search"
    assert chunk.source_id == CORPUS[0].doc_id
    assert chunk.chunk_id.startswith(CORPUS[0].doc_id + ":")
    assert chunk.title == "Photosynthesis in plants"
    assert chunk.source_date is not None and chunk.source_date.year == 2019
    assert chunk.metadata["heading"] == "Calvin cycle"
    assert chunk.metadata["source_key"] == "notes/photosynthesis.md"
    assert chunk.metadata["category"] == "biology"
    assert isinstance(chunk.metadata["position"], int)
    assert 0.0 <= chunk.semantic_relevance <= 1.0
    assert "RuBisCO" in chunk.content
    # top_k is the seed's alias of num_results; filters may come as a plain dict (from an agent).
    aliased = await tool.search("vaccines", top_k=1, min_relevance=0.0, filters={"years": [2015]})
    assert [c.metadata["source_key"] for c in aliased.chunks] == ["notes/vaccines-2015.md"]


async def test_default_threshold_comes_from_settings(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    tool = RAGTool(kb)
    result = await tool.search("How is carbon dioxide fixed into sugars?", num_results=10)
    threshold = kb.settings.retrieval.min_relevance
    assert result.ok and result.chunks
    assert all(chunk.semantic_relevance >= threshold for chunk in result.chunks)
    assert len(result.chunks) < kb.stats().chunks  # unrelated passages fall below the threshold


async def test_empty_collection_is_no_results_not_failure(kb: KnowledgeBase) -> None:
    result = await RAGTool(kb).search("anything")
    assert result.ok and result.chunks == []


async def test_unreachable_milvus_is_reported_as_data(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings(data_dir=tmp_path, milvus={"uri": f"http://127.0.0.1:{closed_port()}", "timeout_s": 1.0})
    tool = RAGTool(KnowledgeBase(settings, embedder=embedder))
    result = await tool.search("anything", timeout=20)
    assert result.failure is not None
    assert result.failure.kind == "unreachable"
    assert "127.0.0.1" in result.failure.message
    assert result.chunks == []


async def test_bad_arguments_are_invalid_requests(kb: KnowledgeBase) -> None:
    tool = RAGTool(kb)
    for kwargs in ({"num_results": 0}, {"min_relevance": 1.5}, {"filters": {"years": ["soon"]}}, {"colour": "red"}):
        result = await tool.search("anything", **kwargs)
        assert result.failure is not None and result.failure.kind == "invalid_request", kwargs
