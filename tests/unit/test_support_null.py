"""Issue 20: one threshold means the same in every knowledge base. A knowledge base where an off-topic question's
best passage already sits at a high cosine (SciFact's 2,000 biomedical abstracts: 0.25, the demo corpus 0.17) has its
passages' semantic floor and full match raised by the difference, so a neighbouring passage there is not answered
from at the confidence of a real match."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.pipeline._support import (
    OFF_TOPIC_PROBES,
    REFERENCE_NULL_COSINE,
    EmbeddingSupport,
    KnowledgeBaseNull,
    knowledge_base_null,
)
from researchcrew.settings import ConfidenceSettings


class _Embedder:
    def __init__(self) -> None:
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> Any:
        self.calls += 1
        return np.eye(len(texts), 4, dtype=np.float32)

    def embed_query(self, text: str) -> Any:
        raise AssertionError("knowledge-base hits carry their search cosine; probes are embedded as documents")


class _Store:
    def __init__(self, best: float | None = 0.3, fail: bool = False) -> None:
        self.best, self.fail, self.searches = best, fail, 0

    def search_dense(self, vector: list[float], limit: int, expression: str) -> list[dict[str, Any]]:
        self.searches += 1
        if self.fail:
            raise RuntimeError("store closed")
        return [] if self.best is None else [{"distance": self.best - 0.01 * vector.index(max(vector))}]


def test_the_null_is_the_mean_best_cosine_of_the_probes_measured_once() -> None:
    store, embedder = _Store(0.3), _Embedder()
    null = KnowledgeBaseNull(store, embedder)  # type: ignore[arg-type]

    # The first four probes' vectors point at 0.30, 0.29, 0.28, 0.27; the rest (zero vectors) at 0.30.
    probes = len(OFF_TOPIC_PROBES)
    assert null() == pytest.approx((0.30 + 0.29 + 0.28 + 0.27 + 0.30 * (probes - 4)) / probes)
    assert null() == null()
    assert store.searches == len(OFF_TOPIC_PROBES)  # measured once, then remembered
    assert embedder.calls == 1


@pytest.mark.parametrize("store", [_Store(None), _Store(fail=True)], ids=["empty", "failing"])
def test_no_null_without_passages_or_when_the_store_fails(store: _Store) -> None:
    assert KnowledgeBaseNull(store, _Embedder())() is None  # type: ignore[arg-type]


def test_the_null_belongs_to_the_knowledge_base_tool() -> None:
    class Base:
        store = _Store()

    class Tool:
        knowledge_base = Base()

    assert isinstance(knowledge_base_null([object(), Tool()], _Embedder()), KnowledgeBaseNull)  # type: ignore[arg-type]
    assert knowledge_base_null([object()], _Embedder()) is None  # type: ignore[arg-type]


def _chunk(question: str, source_type: str = "rag", dense: float = 0.55) -> ContextChunk:
    return ContextChunk(
        chunk_id=f"{source_type}:0",
        source_type=source_type,
        content="Placental weight was associated with birth weight in the cohort.",
        semantic_relevance=0.8,
        title="Placental weight",
        metadata={"query": question, "scores": {"dense": dense}},
        tool_name="rag_search",
    )


@pytest.mark.parametrize(("null", "lowered"), [(REFERENCE_NULL_COSINE + 0.08, True), (0.1, False), (None, False)])
async def test_a_knowledge_base_whose_null_is_high_supports_less(null: float | None, lowered: bool) -> None:
    claim = "Placental weight is associated with birth weight."
    chunk = _chunk(claim)
    calibrated = EmbeddingSupport(_Embedder(), ConfidenceSettings(), null=lambda: null)  # type: ignore[arg-type]
    off = EmbeddingSupport(_Embedder(), ConfidenceSettings(null_calibration=False), null=lambda: null)  # type: ignore[arg-type]

    got = (await calibrated(claim, [chunk]))[chunk.chunk_id]
    plain = (await off(claim, [chunk]))[chunk.chunk_id]

    assert got.semantic == plain.semantic == 0.55  # the cosine itself is what the search measured
    if lowered:
        # semantic (0.55 - 0.35 - 0.08) / 0.3 = 0.4 instead of 0.667: × 0.7 weight, 0.187 less before the factors
        assert got.score < plain.score - 0.1
    else:
        assert got.score == plain.score  # a null at or below the demo corpus's changes nothing


# Issue 20 item 7: the null costs a question nothing after the first measurement of a knowledge base.


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_probes_are_embedded_once_per_process_and_embedder() -> None:
    embedder = _Embedder()
    first, second = KnowledgeBaseNull(_Store(0.3), embedder), KnowledgeBaseNull(_Store(0.2), embedder)  # type: ignore[arg-type]
    clock = _Clock()
    refreshed = KnowledgeBaseNull(_Store(0.25), embedder, refresh_s=10, clock=clock)  # type: ignore[arg-type]

    assert first() is not None and second() is not None and refreshed() is not None
    clock.now += 11
    refreshed()
    assert refreshed.settle(5)

    assert embedder.calls == 1  # two knowledge bases and a refresh: the probes' vectors once


def test_a_refresh_never_blocks_a_question() -> None:
    import threading
    import time

    class Held(_Store):
        def __init__(self) -> None:
            super().__init__(0.3)
            self.release, self.entered = threading.Event(), threading.Event()
            self.hold = False

        def search_dense(self, vector: list[float], limit: int, expression: str) -> list[dict[str, Any]]:
            if self.hold:
                self.entered.set()
                assert self.release.wait(10)
            return super().search_dense(vector, limit, expression)

    store, clock = Held(), _Clock()
    null = KnowledgeBaseNull(store, _Embedder(), refresh_s=60, clock=clock)  # type: ignore[arg-type]
    before = null()
    store.best, store.hold = 0.5, True
    clock.now += 61

    started = time.monotonic()
    during = [null() for _ in range(5)]  # the refresh starts and is held inside its first search
    assert store.entered.wait(5)
    during.append(null())
    assert time.monotonic() - started < 1.0  # answered at once, with the value it had
    assert during == [before] * 6

    store.release.set()
    assert null.settle(5)
    assert null() is not None and null() > before  # type: ignore[operator]


def test_the_measurement_is_kept_beside_the_knowledge_base_for_the_next_process(tmp_path: Any) -> None:
    path = tmp_path / "knowledge-null.json"
    first_store, clock = _Store(0.3), _Clock()
    value = KnowledgeBaseNull(first_store, _Embedder(), path=path, key="kb", clock=clock)()  # type: ignore[arg-type]

    # Another process: another store object, the same file; a search would give another value.
    later = _Store(0.9)
    again = KnowledgeBaseNull(later, _Embedder(), path=path, key="kb", clock=clock)  # type: ignore[arg-type]
    assert again() == value
    assert later.searches == 0
    other = KnowledgeBaseNull(_Store(0.9), _Embedder(), path=path, key="another kb", clock=clock)  # type: ignore[arg-type]
    assert other() != value  # keyed by knowledge base


def test_a_kept_measurement_of_other_content_is_measured_again(tmp_path: Any) -> None:
    path, clock = tmp_path / "knowledge-null.json", _Clock()
    rows = [100]
    first = KnowledgeBaseNull(_Store(0.3), _Embedder(), path=path, key="kb", size=lambda: rows[0], clock=clock)  # type: ignore[arg-type]
    value = first()

    same = _Store(0.9)
    assert KnowledgeBaseNull(same, _Embedder(), path=path, key="kb", size=lambda: rows[0], clock=clock)() == value  # type: ignore[arg-type]
    assert same.searches == 0

    rows[0] = 140  # another process ingested more
    grown = _Store(0.9)
    assert KnowledgeBaseNull(grown, _Embedder(), path=path, key="kb", size=lambda: rows[0], clock=clock)() != value  # type: ignore[arg-type]
    assert grown.searches == len(OFF_TOPIC_PROBES)
