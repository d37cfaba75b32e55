"""Issue 20 item 7: the route step costs a question nothing it does not need. A conceptual question reads no
annotation (no count, no label scan: the rules route it to the long-text search whatever they hold); what the rules
read for other questions (count, labels, subject words) is read once per knowledge base and read again after a write
(an ingest, a removal)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts.tables import StructuredOutcome, StructuredRequest
from researchcrew.knowledge.annotations import AnnotationIndex, index_for
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.pipeline._structured import AnnotationStage


class _CountingAccess:
    """Collection access that counts its lookups (the stage asks it which collections a user may read)."""

    def __init__(self) -> None:
        self.calls = 0

    async def readable(self, user_id: str | None) -> list[str]:
        self.calls += 1
        return ["shared"]


@pytest.fixture
def milvus_calls(module_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every call the knowledge base's store makes to Milvus, by operation (annotation reads included)."""
    calls: Counter[str] = Counter()
    store = module_kb.store
    real = store._call

    def counted(operation: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        calls[operation] += 1
        return real(operation, function, *args, **kwargs)

    monkeypatch.setattr(store, "_call", counted)
    yield calls


@pytest.fixture(scope="module")
def annotated(module_kb: KnowledgeBase, corpus_dir: Path) -> AnnotationIndex:
    ingest_paths(module_kb, corpus_dir, progress=False)
    index = index_for(module_kb)
    assert index is not None and index.count(["shared"]) > 0
    return index


def _ask(stage: AnnotationStage, question: str) -> StructuredOutcome:
    return asyncio.run(stage.run(StructuredRequest(question=question, user_id="ada", deadline_s=30)))


def test_a_conceptual_question_makes_no_annotation_round_trip(
    annotated: AnnotationIndex, milvus_calls: Counter[str]
) -> None:
    access = _CountingAccess()
    stage = AnnotationStage(annotated, access=access)  # type: ignore[arg-type]

    outcome = _ask(stage, "Why does pooling save reagents?")

    assert outcome.route.route == "long_text" and outcome.route.intent == "conceptual"
    assert outcome.route.tried[0] == "long_text" and outcome.table is None
    assert not [operation for operation in milvus_calls if "annotations" in operation], milvus_calls


def test_what_the_rules_read_is_read_once_until_a_write(
    module_kb: KnowledgeBase, annotated: AnnotationIndex, corpus_dir: Path, milvus_calls: Counter[str]
) -> None:
    question = "Which studies report a sample size above 1,000?"
    stage = AnnotationStage(index_for(module_kb))  # type: ignore[arg-type]  # a new index: the cache is the store's
    _ask(stage, question)
    milvus_calls.clear()

    again = _ask(stage, question)

    assert again.table is not None and again.route.route == "structured"
    assert milvus_calls["count annotations"] == 0  # coverage came from the cache: no count, no label scan
    assert milvus_calls["query annotations"] < 3  # the rows themselves are still searched

    # An ingest through another index (as the CLI or an upload would) clears it: the next question reads again.
    (corpus_dir / "study-d.md").write_text("# Pooling in prisons\n\nSample size: 2,222\n", encoding="utf-8")
    ingest_paths(module_kb, corpus_dir, progress=False)
    milvus_calls.clear()
    after = _ask(stage, question)
    assert milvus_calls["count annotations"] == 1
    assert after.table is not None
    assert any("2222" in row.model_dump_json().replace(",", "") for row in after.all_rows)


def test_a_knowledge_base_without_annotations_is_known_after_one_count(
    tmp_path: Path, module_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchcrew.settings import Settings

    with KnowledgeBase(Settings(data_dir=tmp_path), embedder=module_kb.embedder) as empty:
        index = index_for(empty)
        assert index is not None
        calls: Counter[str] = Counter()
        real = empty.store._call

        def counted(operation: str, function: Any, *args: Any, **kwargs: Any) -> Any:
            calls[operation] += 1
            return real(operation, function, *args, **kwargs)

        monkeypatch.setattr(empty.store, "_call", counted)
        stage = AnnotationStage(index)
        for _ in range(3):
            outcome = _ask(stage, "Which studies report a sample size above 1,000?")
            assert outcome.route.route == "long_text" or outcome.table is None
        assert calls["count annotations"] == 1
        assert calls["query annotations"] == 0
