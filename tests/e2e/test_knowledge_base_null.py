"""Issue 20: a knowledge base's null (the best cosine of off-topic probe questions) is measured on the real store,
and on demo-corpus abstracts, where the support thresholds were set, it moves nothing."""

from __future__ import annotations

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.pipeline._support import REFERENCE_NULL_COSINE, EmbeddingSupport, KnowledgeBaseNull


def test_the_demo_corpus_null_is_measured_and_shifts_nothing(demo_kb: KnowledgeBase, embedder: Embedder) -> None:
    null = KnowledgeBaseNull(demo_kb.store, embedder)

    value = null()

    assert value is not None
    assert 0.0 < value <= REFERENCE_NULL_COSINE + 0.02
    assert EmbeddingSupport(embedder, null=null).null_shift() == 0.0
