"""KnowledgeBase against a real Milvus Lite file and the real embedding model."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, date, datetime

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.errors import KnowledgeBaseError
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.collection import _STORED_FIELDS, KnowledgeBase
from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.filters import SearchFilters
from researchcrew.settings import Settings
from tests.helpers.event_loop import LoopWatch

from .conftest import CORPUS

_ALL_FIELDS = [*_STORED_FIELDS, schema.SEARCH_TEXT]  # every field a row is written with


def _keys(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.source_key for hit in hits]


def test_empty_collection_returns_nothing(kb: KnowledgeBase) -> None:
    assert kb.search("anything at all") == []
    stats = kb.stats()
    assert (stats.documents, stats.chunks, stats.dimension) == (0, 0, 384)


def test_hybrid_search_finds_the_right_document(kb: KnowledgeBase) -> None:
    report = kb.add_documents(CORPUS)
    assert report.documents_added == len(CORPUS) and report.chunks_added >= len(CORPUS)
    hits = kb.search("How do plants turn carbon dioxide into sugar?", top_k=3)
    assert hits[0].source_key == "notes/photosynthesis.md"
    assert hits[0].heading == "Calvin cycle"  # the passage, not just the document
    assert all(0.0 <= hit.relevance <= 1.0 for hit in hits)
    assert [hit.scores.final for hit in hits] == sorted((hit.scores.final for hit in hits), reverse=True)
    assert hits[0].scores.dense is not None and hits[0].scores.bm25 is not None
    # A paraphrase with no shared keywords still works through the dense side...
    assert kb.search("neural network architecture without recurrence", top_k=1)[0].title == "Attention is all you need"
    # ...and an exact rare term through BM25.
    assert kb.search("RuBisCO", top_k=1, mode="bm25")[0].source_key == "notes/photosynthesis.md"
    assert kb.search("the of and", mode="bm25") == []  # only stop words: nothing for BM25 to match


def test_bm25_matches_a_chunk_by_the_text_around_it(kb: KnowledgeBase) -> None:
    text = (
        "# Stations\n\nPlankton nets were towed near the xylograph buoy.\n\n"
        "# Midway\n\nThe survey team logged the water temperature and the salinity.\n\n"
        "# Overflight\n\nFinally the zeppelin overflight mapped the bloom."
    )
    report = kb.add_documents([Document(source_key="cruise.md", title="A cruise", text=text)])
    assert report.chunks_added == 3  # one per section
    # "zeppelin" is in the last chunk only: BM25 also finds the chunk just before it, not the first one.
    hits = kb.search("zeppelin", top_k=10, mode="bm25")
    assert [hit.position for hit in hits] == [2, 1]  # the shorter keyword text (no third neighbour) first
    # What a reader is shown is still the chunk's own text, under its own heading.
    assert hits[1].heading == "Midway"
    assert hits[1].text == "The survey team logged the water temperature and the salinity."


def test_hyphenated_names_match_their_unhyphenated_spelling(kb: KnowledgeBase) -> None:
    kb.add_documents(
        [
            Document(
                source_key="il6.md", title="Cytokines after surgery", text="Serum IL-6 rose sharply after surgery."
            ),
            Document(source_key="il2.md", title="T-cell growth", text="IL-2 signalling drives T-cell proliferation."),
        ]
    )
    assert [hit.source_key for hit in kb.search("IL6", mode="bm25")] == ["il6.md"]
    assert kb.search("IL-6 after surgery", top_k=1)[0].source_key == "il6.md"


def test_min_relevance_drops_weak_hits(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    everything = kb.search("volcanic ash cooling the climate", top_k=10)
    assert everything[0].source_key == "notes/volcanoes.md"
    strict = kb.search("volcanic ash cooling the climate", top_k=10, min_relevance=everything[0].relevance)
    assert _keys(strict) == ["notes/volcanoes.md"]
    assert everything[0].relevance > everything[-1].relevance


def test_filters(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    query = "vaccine efficacy in adults"
    assert set(_keys(kb.search(query, top_k=10, filters=SearchFilters(years=[2015])))) == {"notes/vaccines-2015.md"}
    in_range = kb.search(query, top_k=10, filters=SearchFilters(date_from=date(2017, 1, 1), date_to=date(2020, 12, 31)))
    assert set(_keys(in_range)) == {"notes/photosynthesis.md", "notes/transformers.md"}
    by_key = kb.search(query, top_k=10, filters=SearchFilters(source_keys=["notes/volcanoes.md"]))
    assert set(_keys(by_key)) == {"notes/volcanoes.md"}  # undated documents pass non-date filters
    by_meta = kb.search(query, top_k=10, filters=SearchFilters(metadata={"category": "medicine"}))
    assert set(_keys(by_meta)) == {"notes/vaccines.md", "notes/vaccines-2015.md"}
    doc_id = CORPUS[1].doc_id
    assert {hit.doc_id for hit in kb.search(query, top_k=10, filters=SearchFilters(doc_ids=[doc_id]))} == {doc_id}


def test_date_hint_runs_two_passes_and_prefers_the_period(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    plain = kb.search("vaccine efficacy in adults", top_k=5)
    assert all(hit.date_hint_match is None for hit in plain)
    hinted = kb.search("vaccine efficacy in adults in 2015", top_k=5)
    assert hinted[0].source_key == "notes/vaccines-2015.md" and hinted[0].date_hint_match is True
    # The unfiltered pass keeps strong matches from outside the period.
    assert "notes/vaccines.md" in _keys(hinted)
    outside = next(hit for hit in hinted if hit.source_key == "notes/vaccines.md")
    assert outside.date_hint_match is False
    # An explicit date filter wins over the wording: no second pass, nothing outside the filter.
    explicit = kb.search("vaccine efficacy in 2015", top_k=5, filters=SearchFilters(years=[2021]))
    assert _keys(explicit) == ["notes/vaccines.md"]


def test_recency_boost_orders_near_ties(settings: Settings, embedder: Embedder) -> None:
    text = "Graphene sheets conduct heat extremely well at room temperature."
    old = Document(source_key="old.md", text=text, title="Graphene", source_date=datetime(1990, 1, 1))
    new = Document(source_key="new.md", text=text + " ", title="Graphene", source_date=datetime.now(UTC))
    with KnowledgeBase(settings, embedder=embedder) as kb:
        kb.add_documents([old, new])
        hits = kb.search("graphene heat conduction", top_k=2)
    assert _keys(hits) == ["new.md", "old.md"]
    assert hits[0].scores.recency > hits[1].scores.recency > 0
    assert hits[0].relevance == pytest.approx(hits[1].relevance, abs=1e-3)  # relevance itself is untouched


def test_adding_twice_is_idempotent(kb: KnowledgeBase) -> None:
    first = kb.add_documents(CORPUS)
    before = kb.stats()
    progress: list[tuple[int, int]] = []
    second = kb.add_documents(CORPUS, progress=lambda done, total: progress.append((done, total)))
    assert second.documents_skipped == len(CORPUS)
    assert (second.documents_added, second.documents_replaced, second.chunks_added) == (0, 0, 0)
    assert kb.stats() == before and before.chunks == first.chunks_added
    assert progress[-1] == (len(CORPUS), len(CORPUS))
    assert kb.document_index() == {document.source_key: document.doc_id for document in CORPUS}


def test_changed_document_replaces_its_chunks(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    changed = CORPUS[4].model_copy(update={"text": "Lava flows are slow; pyroclastic flows are fast and deadly."})
    report = kb.add_documents([changed])
    assert (report.documents_replaced, report.documents_added) == (1, 0)
    assert kb.document_index()["notes/volcanoes.md"] == changed.doc_id
    only_key = SearchFilters(source_keys=["notes/volcanoes.md"])
    texts = [hit.text for hit in kb.search("volcano", top_k=10, filters=only_key)]
    assert texts == [changed.text]
    assert kb.stats().documents == len(CORPUS)


def test_interrupted_insert_is_detected_and_finished(kb: KnowledgeBase) -> None:
    long_doc = Document(
        source_key="long.md",
        title="Long notes",
        text="\n\n".join(f"# Part {i}\n\nParagraph {i} discusses experiment {i} in detail." for i in range(4)),
    )
    kb.add_documents([long_doc])
    assert kb.stats().chunks == 4
    # Simulate a crash after the first rows of the document were written: drop two of its four rows.
    kb.store.delete(f'{schema.SOURCE_KEY} == "long.md" and {schema.POSITION} >= 2')
    assert "long.md" not in kb.document_index()
    assert kb.stats().incomplete_documents == 1
    report = kb.add_documents([long_doc])
    assert (report.documents_added, report.documents_skipped, report.chunks_added) == (1, 0, 4)
    assert kb.document_index() == {"long.md": long_doc.doc_id}
    assert kb.stats().chunks == 4  # rewritten in place (upsert), not duplicated


def test_crash_during_replacement_keeps_the_old_version(kb: KnowledgeBase) -> None:
    old = CORPUS[0]
    kb.add_documents([old])
    new = old.model_copy(update={"text": old.text + "\n\n# Notes\n\nC4 plants concentrate CO2 first."})
    kb.add_documents([new])
    # Re-create the state a crash mid-replacement leaves: the old version complete, the new one partial.
    kb.remove(doc_ids=[new.doc_id])
    kb.add_documents([old])
    kb.store.upsert([])  # no-op call keeps the store's API exercised
    partial = kb.chunker.chunk(new)[:1]
    vector = kb.embedder.embed_documents([partial[0].text])[0].tolist()
    kb.store.upsert(
        [
            {
                schema.PK: schema.primary_key(new.source_key, partial[0].chunk_id),
                schema.CHUNK_ID: partial[0].chunk_id,
                schema.DOC_ID: new.doc_id,
                schema.SOURCE_KEY: new.source_key,
                schema.SOURCE: "notes",
                schema.TITLE: "",
                schema.URL: "",
                schema.HEADING: "",
                schema.TEXT: partial[0].text,
                schema.SEARCH_TEXT: "photosynthesis",
                schema.DATE: schema.NO_DATE,
                schema.POSITION: 0,
                schema.CHUNK_COUNT: len(kb.chunker.chunk(new)),
                schema.INGESTED_AT: int(time.time()),
                schema.METADATA: {},
                schema.DENSE: vector,
                schema.COLLECTION: schema.SHARED,
            }
        ]
    )
    assert kb.document_index() == {old.source_key: old.doc_id}  # the key is never empty
    report = kb.add_documents([new])
    assert report.documents_replaced == 1
    assert kb.document_index() == {old.source_key: new.doc_id}
    assert kb.stats().incomplete_documents == 0


def test_remove_by_key_and_by_document(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    total = kb.stats().chunks
    removed = kb.remove(source_keys=["notes/volcanoes.md"], doc_ids=[CORPUS[1].doc_id])
    assert removed == 2
    assert kb.stats().chunks == total - 2
    assert kb.remove(source_keys=["missing"]) == 0
    assert kb.remove() == 0


def test_reopening_keeps_data_and_refuses_another_model(settings: Settings, embedder: Embedder) -> None:
    with KnowledgeBase(settings, embedder=embedder) as kb:
        kb.add_documents(CORPUS[:2])
    with KnowledgeBase(settings, embedder=embedder) as kb:
        assert kb.stats().documents == 2
        assert kb.search("self-attention", top_k=1)[0].source_key == "notes/transformers.md"
    other = settings.model_copy(update={"embedding": settings.embedding.model_copy(update={"model": "other-model"})})
    with KnowledgeBase(other) as kb, pytest.raises(KnowledgeBaseError, match="other-model"):
        kb.stats()  # refused from the collection's record, before any model would be loaded


def test_collection_from_an_older_analyzer_is_refused_until_reindexed(settings: Settings, embedder: Embedder) -> None:
    documents = [*CORPUS, Document(source_key="il6.md", text="Serum IL-6 rose sharply after surgery.")]
    with KnowledgeBase(settings, embedder=embedder) as kb:
        kb.add_documents(documents)
        before = {row[schema.PK]: row for row in kb.store.rows("", [schema.TEXT, schema.DENSE, schema.SEARCH_TEXT])}
        # What an older researchcrew wrote: other BM25 text, and its analyzer's name in the collection's label.
        kb.store.upsert([{**row, schema.SEARCH_TEXT: "stale"} for row in kb.store.rows("", _ALL_FIELDS)])
        old_label = json.loads(schema.description(kb.model_name, 384)) | {"analyzer": "snowball-en-1"}
        kb.store.client.alter_collection_properties(
            kb.store.collection, properties={schema.PROPERTY: json.dumps(old_label)}
        )
    with KnowledgeBase(settings, embedder=embedder) as kb, pytest.raises(KnowledgeBaseError, match="kb reindex"):
        kb.search("IL6")
    with KnowledgeBase(settings, embedder=embedder) as kb:
        progress: list[tuple[int, int]] = []
        report = kb.reindex_keywords(progress=lambda done, total: progress.append((done, total)))
        assert (report.analyzer_before, report.documents, report.chunks) == ("snowball-en-1", 6, len(before))
        assert progress[-1] == (6, 6)
        after = {row[schema.PK]: row for row in kb.store.rows("", [schema.TEXT, schema.DENSE, schema.SEARCH_TEXT])}
        assert after == before  # the BM25 text is back to what an ingest writes; texts and vectors untouched
        assert kb.search("IL6", mode="bm25")[0].source_key == "il6.md"
        assert kb.reindex_keywords().chunks == 0  # already current: nothing to do
    with KnowledgeBase(settings, embedder=embedder) as kb:
        assert kb.stats().documents == 6  # opens normally from now on


async def test_asearch_does_not_block_the_event_loop(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    async with LoopWatch(interval_s=0.005) as watch:
        started = time.perf_counter()
        hits = await kb.asearch("sunlight splits water", top_k=2)
        elapsed = time.perf_counter() - started
    assert hits[0].source_key == "notes/photosynthesis.md"
    assert watch.ticks >= max(1, int(elapsed / 0.005) // 4)  # the loop kept running while the search worked


def test_unavailable_reranker_is_skipped_with_one_notice(
    settings: Settings, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    rerank = settings.retrieval.rerank.model_copy(update={"enabled": True, "model": "/nonexistent/cross-encoder"})
    configured = settings.model_copy(update={"retrieval": settings.retrieval.model_copy(update={"rerank": rerank})})
    with KnowledgeBase(configured, embedder=embedder) as kb, caplog.at_level(logging.WARNING):
        kb.add_documents(CORPUS)
        first = kb.search("magma and ash", top_k=2)
        second = kb.search("magma and ash", top_k=2)
    assert first[0].source_key == "notes/volcanoes.md" and _keys(first) == _keys(second)
    assert first[0].scores.rerank is None
    notices = [record for record in caplog.records if "reranking is switched on but skipped" in record.getMessage()]
    assert len(notices) == 1


class _KeywordScorer:
    """A stand-in cross-encoder: a high logit when the passage mentions the magic word."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.calls = 0

    def predict(self, sentences: list[tuple[str, str]], **_: object) -> list[float]:
        self.calls += 1
        return [6.0 if self.word in passage else -6.0 for _, passage in sentences]


def test_reranker_reorders_candidates(kb: KnowledgeBase) -> None:
    from researchcrew.knowledge._rerank import Reranker

    kb.add_documents(CORPUS)
    scorer = _KeywordScorer("Seasonal")
    kb.searcher._reranker = Reranker("stand-in", scorer=scorer)
    plain = kb.search("mRNA vaccines against COVID-19", top_k=2, rerank=False)
    assert plain[0].source_key == "notes/vaccines.md"
    reranked = kb.search("mRNA vaccines against COVID-19", top_k=2, rerank=True)
    assert reranked[0].source_key == "notes/vaccines-2015.md"
    assert reranked[0].scores.rerank == pytest.approx(1, abs=0.01)
    assert scorer.calls == 1


def test_off_topic_query_gets_low_relevance(kb: KnowledgeBase) -> None:
    kb.add_documents(CORPUS)
    on_topic = kb.search("How do plants turn carbon dioxide into sugar?", top_k=1)
    off_topic = kb.search("best pizza recipes in Naples", top_k=5)
    assert on_topic[0].relevance > 0.8
    assert off_topic and max(hit.relevance for hit in off_topic) < 0.1  # the base has nothing on pizza
    assert kb.search("best pizza recipes in Naples", min_relevance=kb.settings.retrieval.min_relevance) == []
