"""Faster, not slower (issue 20 item 7): a question is embedded once, not by the search, the memory recall and the
support measure each; a passage the support measure embedded is not embedded again for the next question; and the
knowledge-base search asks Milvus only what it does not know. None of it changes a score."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts.chunks import ContextChunk
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge import _fusion as fusion
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.search import Searcher
from researchcrew.pipeline._support import EmbeddingSupport
from researchcrew.settings import MilvusSettings, RetrievalSettings, Settings
from tests.e2e.support import offline_settings

pytestmark = pytest.mark.slow  # the embedding model and Milvus Lite (once per session)

TODAY = datetime(2026, 1, 1, tzinfo=UTC)  # recency boosts counted from the same instant in both searches


class Recorded:
    """The shared model, with every text it really embeds recorded (a remembered query vector is not embedded)."""

    def __init__(self, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        inner = embedder.embed_documents

        def embed_documents(texts: list[str]) -> npt.NDArray[np.float32]:
            self.texts.extend(texts)
            return inner(texts)

        monkeypatch.setattr(embedder, "embed_documents", embed_documents)


class Reembedding:
    """The model as it was before: every call embeds, queries included."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner = embedder
        self.texts: list[str] = []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embed_documents([text])[0]


async def test_a_question_is_embedded_once_and_a_recalled_exchange_once_per_session(
    tmp_path: Path,
    demo_kb: KnowledgeBase,
    demo_kb_settings: Settings,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = offline_settings(
        tmp_path, milvus=MilvusSettings(uri=demo_kb_settings.milvus_uri), enabled_sources=["rag", "memory"]
    )
    questions = [
        "How is metamorphic testing used to test machine translation?",
        "What causes flaky tests in continuous integration pipelines?",
        "How does metamorphic testing help when there is no test oracle?",
        "Which mutation operators are used in mutation testing of flaky tests?",
    ]
    async with ResearchAssistant(settings, knowledge_base=demo_kb) as assistant:
        recorded = Recorded(embedder, monkeypatch)
        per_question: list[list[str]] = []
        for question in questions:
            await assistant.ask(question, user_id="ada", session_id="s1")
            per_question.append(list(recorded.texts))
            assert await assistant.flush_memory(timeout_s=60)  # memory writes embed: off the question's clock
            recorded.texts.clear()
    for question, texts in zip(questions, per_question, strict=True):
        # Before: the search, the memory recall and the support measure embedded the question three times.
        assert texts.count(question) <= 1, (question, texts)
    asked = [text for texts in per_question for text in texts]
    repeated = {text: n for text, n in Counter(asked).items() if n > 1}
    # Before: each recalled exchange's question and answer sentences were embedded again for every later question.
    assert not repeated
    assert sum(len(texts) for texts in per_question[1:]) < 3 * len(questions), per_question


def _chunks(question: str) -> list[ContextChunk]:
    """Evidence the support measure embeds: web and arXiv passages, a knowledge-base passage found for another
    wording of the question (a reformulated search), the sentences of one holding a rare name of the question, and
    what the user said."""
    return [
        ContextChunk(
            chunk_id="web:1",
            source_type="web",
            content="Flaky tests pass and fail on the same code; retries hide them but do not fix them.",
            semantic_relevance=0.9,
            title="Flaky tests explained",
            url="https://example.org/flaky",
        ),
        ContextChunk(
            chunk_id="arxiv:1",
            source_type="arxiv",
            content="Metamorphic testing checks relations between the outputs of related inputs. It addresses the "
            "test oracle problem.",
            semantic_relevance=0.9,
            title="Metamorphic testing: a review",
        ),
        ContextChunk(
            chunk_id="doc1:0",
            source_type="rag",
            content="Order dependence and asynchronous waits cause most flaky tests in Python projects.",
            semantic_relevance=0.7,
            title="Flakiness in Python",
            metadata={"query": "flaky tests causes", "scores": {"dense": 0.61}},
        ),
        ContextChunk(
            chunk_id="doc2:0",
            source_type="rag",
            content="Property-based testing became popular. QuickCheck, released in 1999 for Haskell by Koen Claessen "
            "and John Hughes, popularised the approach. Later tools copied it.",
            semantic_relevance=0.5,
            title="property.html",
            metadata={"query": question, "scores": {"dense": 0.28}, "exact_terms": ["quickcheck"]},
        ),
        ContextChunk(
            chunk_id="memory:said:r1:0",
            source_type="memory",
            content='You said: "I maintain a QuickCheck port".',
            semantic_relevance=0.5,
            metadata={"recalled_as": "user_statement", "speaker": "user", "statement": "I maintain a QuickCheck port"},
        ),
    ]


def test_support_from_reused_vectors_equals_support_from_embedding_again(embedder: Embedder) -> None:
    reusing = EmbeddingSupport(embedder)
    counted = Reembedding(embedder)  # counts what ``reusing`` embeds through the same model
    reusing.embedder = counted
    questions = ["Who wrote QuickCheck, and does it help with flaky tests?", "When was QuickCheck released?"]
    embedded: list[int] = []
    for question in questions:
        before = len(counted.texts)
        got = reusing.score(question, _chunks(question))
        embedded.append(len(counted.texts) - before)
        fresh = Reembedding(embedder)
        expected = EmbeddingSupport(fresh).score(question, _chunks(question))  # every vector computed again
        assert got.keys() == expected.keys()
        for chunk_id, support in expected.items():
            assert got[chunk_id].basis == support.basis
            assert got[chunk_id].score == pytest.approx(support.score, abs=1e-6)
            assert got[chunk_id].coverage == pytest.approx(support.coverage, abs=1e-6)
            assert (got[chunk_id].semantic is None) == (support.semantic is None)
            if support.semantic is not None:
                assert got[chunk_id].semantic == pytest.approx(support.semantic, abs=1e-6)
        assert fresh.texts.count(question) == 1  # embedding again: the question, then every passage
    # The second question finds every passage's vector already known: it embeds at most the question itself.
    assert embedded[0] >= 5
    assert embedded[1] <= 1


def test_the_search_asks_milvus_for_bm25_only_when_its_side_was_cut_short(
    demo_kb: KnowledgeBase, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    class AlwaysAsks(Searcher):
        """The search as it was: the BM25 side of every candidate it did not return is asked for again."""

        def _complete(
            self, request: fusion.Request, candidates: dict[str, fusion.Candidate], *, bm25_complete: bool = False
        ) -> None:
            super()._complete(request, candidates, bm25_complete=False)

    calls: Counter[str] = Counter()
    store = demo_kb.store
    search_bm25 = store.search_bm25

    def counted_bm25(analysed: str, limit: int, expression: str, **options: Any) -> list[dict[str, Any]]:
        calls["bm25"] += 1
        return search_bm25(analysed, limit, expression, **options)

    monkeypatch.setattr(store, "search_bm25", counted_bm25)
    queries = [
        "metamorphic testing of machine translation",
        "flaky tests",
        "mutation testing operators",
        "What causes flaky tests in Python projects?",
        "gallium on Jupiter's moons",
        "oracle",
    ]
    for pool in (100, 4):  # the whole demo collection fits in a pool of 100; a pool of 4 cuts the BM25 side short
        settings = RetrievalSettings(candidate_pool=pool)
        now = Searcher(store, lambda: embedder, settings, today=lambda: TODAY)
        before = AlwaysAsks(store, lambda: embedder, settings, today=lambda: TODAY)
        asked: Counter[str] = Counter()
        for query in queries:
            calls.clear()
            hits = now.search(query, top_k=3)
            asked["now"] += calls["bm25"]
            calls.clear()
            expected = before.search(query, top_k=3)
            asked["before"] += calls["bm25"]
            assert [hit.model_dump() for hit in hits] == [hit.model_dump() for hit in expected], (pool, query)
        if pool == 100:  # one BM25 request per query, where the rarer words made it two before
            assert asked["now"] == len(queries) < asked["before"]
        else:  # cut short, the BM25 side of the other candidates is asked for (and the hits stay the same)
            assert len(queries) < asked["now"] <= asked["before"]


def test_a_hybrid_search_takes_its_vectors_from_the_bm25_side_instead_of_fetching_them(
    demo_kb: KnowledgeBase, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks only the BM25 side returned get their cosine from the vectors that side brought along: no third call
    to fetch them, and the same hits and scores as when they were fetched."""
    store = demo_kb.store
    search_bm25, fetch = store.search_bm25, store.fetch
    calls: Counter[str] = Counter()
    without_vectors = False

    def counted_bm25(analysed: str, limit: int, expression: str, **options: Any) -> list[dict[str, Any]]:
        calls["bm25"] += 1
        if without_vectors and "fields" in options:  # the search as it was: BM25 rows without their vectors
            options["fields"] = [name for name in options["fields"] if name != schema.DENSE]
        return search_bm25(analysed, limit, expression, **options)

    def counted_fetch(pks: Any, fields: Any) -> list[dict[str, Any]]:
        calls["fetch"] += 1
        return fetch(pks, fields)

    monkeypatch.setattr(store, "search_bm25", counted_bm25)
    monkeypatch.setattr(store, "fetch", counted_fetch)
    searcher = Searcher(store, lambda: embedder, RetrievalSettings(candidate_pool=4), today=lambda: TODAY)
    fetched = 0
    for query in ("flaky tests", "mutation testing operators", "Who wrote QuickCheck?", "oracle problem"):
        without_vectors = False
        calls.clear()
        hits = searcher.search(query, top_k=5)
        assert calls["fetch"] == 0, query
        without_vectors = True
        calls.clear()
        expected = searcher.search(query, top_k=5)
        fetched += calls["fetch"]
        assert [hit.model_dump() for hit in hits] == [hit.model_dump() for hit in expected], query
    assert fetched > 0  # a pool of 4 leaves BM25-only candidates, which the search as it was fetched
