"""Document collections in the knowledge base: the limit is in the Milvus expression, keys are per collection, and a
knowledge base made before collections (schema 1) is read as it is, every chunk in ``shared``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.errors import CollectionError, KnowledgeBaseError
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.access import check_collection, private_collection
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.filters import SearchFilters
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.knowledge.upgrade import upgrade_to_collections
from researchcrew.settings import Settings
from researchcrew.tools.rag import RAGTool

from .conftest import CORPUS

SECRET = Document(
    source_key="ada/rubisco.md",
    title="Ada's unpublished RuBisCO notes",
    text="RuBisCO fixes carbon dioxide into sugars in the stroma; Ada measured a turnover of 3.3 per second.",
)


def _searched_expressions(kb: KnowledgeBase) -> list[str]:
    seen: list[str] = []
    for name in ("search_dense", "search_bm25"):
        original = getattr(kb.store, name)

        def spy(query: Any, limit: int, expression: str, _original: Any = original, **options: Any) -> Any:
            seen.append(expression)
            return _original(query, limit, expression, **options)

        setattr(kb.store, name, spy)
    return seen


def test_the_collection_limit_is_in_the_milvus_expression(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    kb.add_documents([SECRET], collection=private_collection("ada"))
    query = "Ada measured RuBisCO turnover fixing carbon dioxide into sugars"
    assert kb.search(query, top_k=1)[0].source_key == "ada/rubisco.md"  # unrestricted, it is the best match
    seen = _searched_expressions(kb)
    # top_k=1: were the limit applied after the search, Bob would get nothing; in the expression, his best readable.
    hits = kb.search(query, top_k=1, filters=SearchFilters(collections=["shared", "user:bob"]))
    assert [hit.source_key for hit in hits] == ["notes/photosynthesis.md"]
    assert seen and all('collection in ["shared", "user:bob"]' in expression for expression in seen)
    assert kb.search(query, top_k=3, filters=SearchFilters(collections=[])) == []  # may read nothing: nothing
    assert kb.search(query, top_k=1, filters=SearchFilters(collections=["user:ada"]))[0].source_key == SECRET.source_key


async def test_the_rag_tool_searches_only_what_the_user_may_read(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    kb.add_documents([SECRET], collection=private_collection("ada"))
    tool = RAGTool(kb)
    query = "Ada measured RuBisCO turnover"
    ada = await tool.search(query, num_results=1, min_relevance=0.0, user_id="ada")
    bob = await tool.search(query, num_results=5, min_relevance=0.0, user_id="bob")
    anonymous = await tool.search(query, num_results=5, min_relevance=0.0)
    assert ada.chunks[0].source_id == SECRET.doc_id and ada.chunks[0].metadata["collection"] == "user:ada"
    assert {chunk.metadata["collection"] for chunk in bob.chunks} == {"shared"}
    assert bob.ok and bob.chunks and SECRET.doc_id not in {chunk.source_id for chunk in bob.chunks}
    assert anonymous.chunks and SECRET.doc_id not in {chunk.source_id for chunk in anonymous.chunks}
    # A caller's own collections only narrow: Bob asking for Ada's collection gets nothing from it.
    asked = await tool.search(query, min_relevance=0.0, user_id="bob", filters={"collections": ["user:ada"]})
    assert asked.ok and asked.chunks == []
    only_mine = await tool.search(query, min_relevance=0.0, user_id="ada", filters={"collections": ["user:ada"]})
    assert {chunk.source_id for chunk in only_mine.chunks} == {SECRET.doc_id}


def test_the_same_key_in_two_collections_is_two_documents(kb: KnowledgeBase) -> None:
    ada, bob = private_collection("ada"), private_collection("bob")
    changed = SECRET.model_copy(update={"text": SECRET.text + " Bob's copy differs."})
    kb.add_documents([SECRET], collection=ada)
    kb.add_documents([changed], collection=bob)
    assert kb.document_index(ada) == {SECRET.source_key: SECRET.doc_id}
    assert kb.document_index(bob) == {SECRET.source_key: changed.doc_id}
    assert kb.add_documents([SECRET], collection=ada).documents_skipped == 1
    assert kb.remove(source_keys=[SECRET.source_key], collection=bob) > 0
    assert kb.document_index(bob) == {}
    assert kb.document_index(ada) == {SECRET.source_key: SECRET.doc_id}


def test_ingest_goes_to_shared_unless_told(kb: KnowledgeBase, tmp_path: Any) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.md").write_text("# Glaciers\n\nGlaciers carve U-shaped valleys as they flow downhill.")
    ingest_paths(kb, [folder], progress=False)
    ingest_paths(kb, [folder], progress=False, collection="team-x")
    rows = list(kb.store.rows("", [schema.COLLECTION]))
    assert sorted({row[schema.COLLECTION] for row in rows}) == ["shared", "team-x"]
    with pytest.raises(CollectionError):
        ingest_paths(kb, [folder], progress=False, collection="Not A Name")


@pytest.mark.parametrize("name", ["shared", "user:ada", "team-x", "lab.2026"])
def test_valid_collection_names(name: str) -> None:
    assert check_collection(name) == name


@pytest.mark.parametrize("name", ["", "Team", "user:", "user: ada", "a" * 65, "team x", "-x"])
def test_invalid_collection_names(name: str) -> None:
    with pytest.raises(CollectionError):
        check_collection(name)


_BUILD_SCHEMA = schema.build_schema


def _schema_one(dimension: int) -> Any:
    """The collection schema researchcrew wrote before collections existed: no ``collection`` field."""
    built = _BUILD_SCHEMA(dimension)
    built._fields = [field for field in built._fields if field.name != schema.COLLECTION]
    built._partition_key_field = None
    return built


@pytest.fixture
def legacy_kb(settings: Settings, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[KnowledgeBase]:
    with monkeypatch.context() as patch:
        patch.setattr(schema, "build_schema", _schema_one)
        with KnowledgeBase(settings, embedder=embedder) as old:
            old.add_documents(CORPUS)
            assert old.store.recorded["researchcrew_schema"] == 1
    with KnowledgeBase(settings, embedder=embedder) as reopened:
        yield reopened


async def test_a_schema_one_knowledge_base_is_read_as_shared(legacy_kb: KnowledgeBase) -> None:
    assert not legacy_kb.store.has_collections
    result = await RAGTool(legacy_kb).search("carbon dioxide into sugars", min_relevance=0.0, user_id="bob")
    assert result.ok and result.chunks[0].source_id == CORPUS[0].doc_id
    assert legacy_kb.search("carbon dioxide", filters=SearchFilters(collections=["user:bob"])) == []
    assert legacy_kb.document_index("shared") == legacy_kb.document_index()
    # Writing into shared works as before; another collection needs the upgrade, and says so.
    assert legacy_kb.add_documents([SECRET]).documents_added == 1
    with pytest.raises(KnowledgeBaseError, match="kb reindex"):
        legacy_kb.add_documents([SECRET], collection="user:ada")


def test_the_upgrade_copies_every_chunk_into_shared(legacy_kb: KnowledgeBase) -> None:
    query = "carbon dioxide into sugars"
    before = [(hit.chunk_id, round(hit.relevance, 4)) for hit in legacy_kb.search(query, top_k=5)]
    chunks = legacy_kb.stats().chunks
    report = upgrade_to_collections(legacy_kb)
    assert (report.upgraded, report.chunks) == (True, chunks)
    assert legacy_kb.store.has_collections and legacy_kb.store.recorded["researchcrew_schema"] == schema.SCHEMA_VERSION
    assert {row[schema.COLLECTION] for row in legacy_kb.store.rows("", [schema.COLLECTION])} == {"shared"}
    assert [(hit.chunk_id, round(hit.relevance, 4)) for hit in legacy_kb.search(query, top_k=5)] == before
    assert legacy_kb.add_documents([SECRET], collection="user:ada").documents_added == 1
    assert legacy_kb.add_documents(CORPUS).documents_skipped == len(CORPUS)  # same keys: nothing re-embedded
    assert upgrade_to_collections(legacy_kb).upgraded is False


def test_an_upgrade_cut_off_before_the_rename_is_finished_on_open(
    legacy_kb: KnowledgeBase, settings: Settings, embedder: Embedder
) -> None:
    chunks = legacy_kb.stats().chunks
    real_call = legacy_kb.store.call

    def crash_on_swap(operation: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        if operation.startswith("replace the collection"):
            real_call("drop", lambda c, **kw: c.drop_collection(legacy_kb.store.collection, **kw))
            raise KnowledgeBaseError("the process died here")
        return real_call(operation, function, *args, **kwargs)

    legacy_kb.store.call = crash_on_swap  # type: ignore[method-assign]
    with pytest.raises(KnowledgeBaseError, match="died"):
        upgrade_to_collections(legacy_kb)
    legacy_kb.close()
    with KnowledgeBase(settings, embedder=embedder) as reopened:
        assert reopened.store.has_collections and reopened.stats().chunks == chunks
